/**
 * Where a cold start's milliseconds go: `deno run` programs that stop at each phase of the
 * server's start, run in turn (interleaved, `--runs` times each), each timed from spawn to the
 * first line it writes (the answer to `initialize` over stdio, for the servers):
 *
 * - `empty`: Deno starting and ending an empty program;
 * - `loaded`: Deno loading `main.ts`'s module graph (every file read, its cached emit found, the
 *   targets of literal `import()` calls included) without running a line of it;
 * - `evaluated`: the same graph compiled and evaluated by V8 (`main()` not called);
 * - `answered`: `main.ts --listen stdio` answering `initialize`;
 * - `bundled`: the same, from `deno bundle --code-splitting` of `main.ts` (one file per chunk);
 * - `floor`: `bench/floor_server.ts --listen stdio` answering `initialize`.
 *
 * ```sh
 * deno run --allow-all bench/startup_phases.ts --runs 21
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { percentile } from "./stats.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const FLOOR = new URL("./floor_server.ts", import.meta.url).pathname;
const INITIALIZE = JSON.stringify({ id: 1, method: "initialize", params: { clientName: "bench" } });

/** One phase: a program that writes one line when it gets there. */
interface Phase {
  name: string;
  args: string[];
}

/** Milliseconds from spawn to the phase's first line on stdout. */
async function timeOnce(phase: Phase): Promise<number> {
  const t0 = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", ...phase.args],
    cwd: "/tmp",
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(INITIALIZE + "\n"));
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${phase.name}: ended without writing a line`);
    text += value;
  }
  const elapsed = performance.now() - t0;
  child.kill("SIGKILL");
  await child.status;
  await reader.cancel().catch(() => {});
  return elapsed;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: { runs: { type: "string", default: "21" } },
    strict: true,
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1 || runs > 1000) throw new Error("--runs: 1 to 1000");
  const dir = await Deno.makeTempDir({ prefix: "exec-server-startup-" });
  try {
    const done = `console.log("done");\n`;
    await Deno.writeTextFile(`${dir}/empty.ts`, done);
    await Deno.writeTextFile(
      `${dir}/loaded.ts`,
      `if (Deno.args[0] === "run it") await import(${JSON.stringify(MAIN)});\n${done}`,
    );
    await Deno.writeTextFile(`${dir}/evaluated.ts`, `import ${JSON.stringify(MAIN)};\n${done}`);
    const bundle = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "--code-splitting", "--outdir", dir, MAIN],
      stdout: "null",
      stderr: "inherit",
    }).output();
    const phases: Phase[] = [
      { name: "empty", args: [`${dir}/empty.ts`] },
      { name: "loaded", args: [`${dir}/loaded.ts`] },
      { name: "evaluated", args: [`${dir}/evaluated.ts`] },
      { name: "answered", args: [MAIN, "--listen", "stdio"] },
      ...(bundle.success
        ? [{ name: "bundled", args: [`${dir}/main.js`, "--listen", "stdio"] }]
        : []),
      { name: "floor", args: [FLOOR, "--listen", "stdio"] },
    ];
    // One untimed round fills Deno's caches (emit, code cache) for every program.
    for (const phase of phases) await timeOnce(phase);
    const samples = new Map(phases.map((phase) => [phase.name, [] as number[]]));
    for (let run = 0; run < runs; run++) {
      for (const phase of phases) samples.get(phase.name)!.push(await timeOnce(phase));
    }
    console.log("| phase | p50 ms | min ms |\n| --- | --- | --- |");
    for (const [name, times] of samples) {
      console.log(
        `| ${name} | ${percentile(times, 50).toFixed(1)} | ${Math.min(...times).toFixed(1)} |`,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  await main();
}
