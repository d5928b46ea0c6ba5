/**
 * Streams `head -c MIB MiB /dev/zero` as `process/output` from one process, `--reps` times in a
 * row on ONE server, each over a fresh connection, and prints what each repetition cost the
 * server: its CPU per MiB (user and system), minor page faults and voluntary context switches
 * per MiB, the average chunk and the server's RSS afterwards. The `stream` metric's first
 * repetition is the first bulk stream of its server; this shows how the cost of the same stream
 * changes over the life of one server process.
 *
 * ```sh
 * deno run --allow-all bench/stream_reps.ts --reps 6   # this checkout's main.ts
 * deno run --allow-all bench/stream_reps.ts --server "deno run --allow-all $PWD/main.ts" --reps 6
 * # a server started by hand (e.g. with --v8-flags=--trace-gc), found by its port:
 * deno run --allow-all bench/stream_reps.ts --url ws://127.0.0.1:PORT --reps 6
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { base64DecodedLength, RpcClient } from "./rpc_client.ts";
import { existingServer, type ServerHandle, startServer } from "./server_process.ts";
import { connectWebSocket } from "./transport.ts";

const MIB = 1024 * 1024;
/** This checkout's server (the harness starts servers with `/tmp` as their cwd). */
const MAIN = new URL("../main.ts", import.meta.url).pathname;

/** The `/proc/<pid>/stat` and `/proc/<pid>/status` counters a repetition is measured by. */
interface Usage {
  userMs: number;
  systemMs: number;
  minorFaults: number;
  voluntarySwitches: number;
  rssMb: number;
}

function usage(pid: number): Usage {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after "(comm)": index 0 is field 3 (state); minflt is field 10, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = 1000 / 100;
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)![1]);
  return {
    userMs: Number(fields[11]) * ticks,
    systemMs: Number(fields[12]) * ticks,
    minorFaults: Number(fields[7]),
    voluntarySwitches: field("voluntary_ctxt_switches"),
    rssMb: field("VmRSS") / 1024,
  };
}

async function streamOnce(url: string, pid: number, processId: string, mib: number) {
  const client = new RpcClient(await connectWebSocket(url));
  try {
    await client.initialize();
    let received = 0;
    let chunks = 0;
    const { promise: closed, resolve } = Promise.withResolvers<void>();
    client.watch(processId, {
      onOutput(chunk) {
        received += base64DecodedLength(chunk);
        chunks++;
      },
      onClosed: () => resolve(),
    });
    const before = usage(pid);
    const t0 = performance.now();
    await client.call("process/start", {
      processId,
      argv: ["head", "-c", String(mib * MIB), "/dev/zero"],
      cwd: "file:///tmp",
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      pipeStdin: false,
    });
    await closed;
    const seconds = (performance.now() - t0) / 1000;
    const after = usage(pid);
    const got = received / MIB;
    const per = (a: number, b: number) => ((a - b) / got).toFixed(2);
    return `${(got / seconds).toFixed(0)} MiB/s, server CPU ` +
      `${per(after.userMs + after.systemMs, before.userMs + before.systemMs)} ms/MiB ` +
      `(user ${per(after.userMs, before.userMs)}, system ${
        per(after.systemMs, before.systemMs)
      }), ` +
      `minor faults ${per(after.minorFaults, before.minorFaults)}/MiB, ` +
      `voluntary switches ${per(after.voluntarySwitches, before.voluntarySwitches)}/MiB, ` +
      `chunk ${(received / chunks / 1024).toFixed(1)} KiB, RSS ${after.rssMb.toFixed(0)} MB`;
  } finally {
    client.close();
  }
}

if (import.meta.main) {
  const args = parseArgs({
    options: {
      server: { type: "string", default: `deno run --allow-all ${MAIN}` },
      url: { type: "string" },
      reps: { type: "string", default: "6" },
      mib: { type: "string", default: "256" },
    },
  }).values;
  const server: ServerHandle = args.url !== undefined
    ? existingServer(args.url)
    : await startServer(args.server);
  try {
    if (server.pid === null || server.url === null) throw new Error("server pid or url unknown");
    for (let rep = 1; rep <= Number(args.reps); rep++) {
      const line = await streamOnce(server.url, server.pid, `reps${rep}`, Number(args.mib));
      console.log(`rep ${rep}: ${line}`);
      // A pause between repetitions, as between the bench's subjects.
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  } finally {
    await server.stop();
  }
}
