/**
 * Peak RSS growth of a server while it answers one `fs/readFile` of a large file, over
 * WebSocket and stdio: this server's (as tests/streamed_reply_test.ts measures it) or the
 * reference's, for docs/guide/limits.md.
 *
 * ```sh
 * deno run -A tools/read_file_peak.ts [--mib 400] [--reference PATH_TO_CODEX]
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { defaultServerEnv } from "../tests/helpers/server_harness.ts";
import { readOverStdio, readOverWebSocket, writeFileOf } from "../tests/helpers/streamed_reply.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { mib: { type: "string", default: "400" }, reference: { type: "string" } },
});
const mib = Number(values.mib);
const dir = await Deno.makeTempDir({ prefix: "es-peak-" });
const home = await Deno.makeTempDir({ dir: Deno.env.get("HOME"), prefix: ".es-peak-home-" });
try {
  const digest = await writeFileOf(`${dir}/big`, mib);
  const options = values.reference === undefined ? {} : {
    command: [values.reference, "exec-server"],
    env: { ...defaultServerEnv(), CODEX_HOME: home },
  };
  for (
    const [transport, read] of [["websocket", readOverWebSocket], ["stdio", readOverStdio]] as const
  ) {
    const result = await read(`${dir}/big`, options);
    console.log(JSON.stringify({
      server: values.reference === undefined ? "exec-server" : "reference",
      transport,
      mib,
      identical: result.digest === digest && result.bytes === mib << 20,
      growthKib: result.growthKib,
      seconds: Math.round(result.seconds * 100) / 100,
    }));
  }
} finally {
  await Deno.remove(dir, { recursive: true });
  await Deno.remove(home, { recursive: true });
}
