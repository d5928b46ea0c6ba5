/**
 * A client process for the "client SIGKILLed mid-stream" tests: it connects
 * with the library's real client ({@linkcode connect}), starts process trees
 * and one process that streams output without end, and once output is
 * flowing prints one line `{"pid": <own pid>}` on stdout. Then it keeps
 * consuming output until it is killed.
 *
 * Usage: `deno run -A tests/helpers/reliability_client.ts stdio|ws://127.0.0.1:PORT TREES`
 *
 * @module
 */

import { connect } from "../../lib/client/client.ts";
import { MAIN_TS } from "./server_harness.ts";

/** A shell command that leaves two background jobs and a nested shell with its own job. */
export const TREE_SCRIPT = "sleep 1000 & sleep 1000 & sh -c 'sleep 1000 & wait' & wait";

/** A shell command that streams output forever, with a background job. */
export const STREAM_SCRIPT = "sleep 1000 & while :; do echo tick-tick-tick-tick; done";

async function main(target: string, trees: number): Promise<void> {
  const client = await connect(
    target === "stdio"
      ? { command: Deno.execPath(), args: ["run", "-A", MAIN_TS, "--listen", "stdio"] }
      : target,
    { reconnect: false },
  );
  const env = { PATH: "/usr/bin:/bin" };
  for (let i = 0; i < trees; i++) {
    await client.startProcess({ argv: ["/bin/sh", "-c", TREE_SCRIPT], env });
  }
  const stream = await client.startProcess({ argv: ["/bin/sh", "-c", STREAM_SCRIPT], env });
  let bytes = 0;
  let announced = false;
  for await (const event of stream) {
    if (event.kind !== "output") continue;
    bytes += event.data.length;
    if (!announced && bytes > 64 * 1024) {
      announced = true;
      console.log(JSON.stringify({ pid: Deno.pid, bytes }));
    }
  }
}

if (import.meta.main) {
  await main(Deno.args[0] ?? "stdio", Number(Deno.args[1] ?? "2"));
}
