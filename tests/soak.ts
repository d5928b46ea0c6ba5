/**
 * Soak test (opt-in, not part of `deno task test`): runs a steady, mixed load
 * against one WebSocket server on 127.0.0.1 for a fixed time and samples the
 * server's resident memory and open descriptors every 10 s, then reports the
 * growth.
 *
 * Load, per worker and round: connect, initialize, start processes (output on
 * stdout and stderr, exit codes), page their output with `process/read`,
 * write/read/remove a file, ask `environment/info`; every fourth round leaves
 * a process running, disconnects, resumes the session on a new connection
 * and terminates it. One extra connection keeps a process printing a line
 * every 100 ms for the whole run.
 *
 * Usage: `deno task soak` or
 * `deno run -A tests/soak.ts [--minutes 10] [--sample-seconds 10] [--workers 4] [--max-growth-percent P]`.
 * Prints progress to stderr and one JSON summary line (`soak {...}`) on
 * stdout; exits 1 if any request failed, a process was left behind, or the
 * growth exceeds `--max-growth-percent` (when given).
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  handshake,
  type Json,
  type ProtocolClient,
  ServerProcess,
} from "./helpers/server_harness.ts";
import { sh, startParams } from "./helpers/rpc.ts";
import { descendants, fdCount, rssKib, sleep, waitUntil } from "./helpers/reliability_proc.ts";
import { collectGarbage, freePort } from "./helpers/reliability_server.ts";

interface Sample {
  /** Seconds since the start of the load. */
  t: number;
  rssKib: number;
  fds: number;
  children: number;
}

let nextId = 1;
let requests = 0;
let processes = 0;
let failures = 0;
const problems: string[] = [];

function problem(text: string): void {
  failures++;
  if (problems.length < 20) problems.push(text);
  console.error(`soak: ${text}`);
}

async function call(client: ProtocolClient, method: string, params?: unknown): Promise<Json> {
  requests++;
  const response = await client.request(nextId++, method, params, 60_000);
  if (!response.result) throw new Error(`${method}: ${JSON.stringify(response).slice(0, 300)}`);
  return response.result as Json;
}

async function startProcess(client: ProtocolClient, processId: string, script: string) {
  processes++;
  await call(client, "process/start", startParams(processId, sh(script)));
}

/** One round of one worker. */
async function round(server: ServerProcess, worker: number, n: number, dir: string): Promise<void> {
  const client = await server.connect();
  try {
    const sessionId = await handshake(client);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const processId = `w${worker}-r${n}-${i}`;
      ids.push(processId);
      await startProcess(
        client,
        processId,
        `head -c ${2000 * (i + 1)} /dev/zero | tr '\\0' x; echo; echo err >&2; exit ${i}`,
      );
    }
    for (const [i, processId] of ids.entries()) {
      const events = await client.log.processClosed(processId, 60_000);
      const exited = events.find((m) => m.method === "process/exited");
      if ((exited?.params as Json | undefined)?.exitCode !== i) {
        problem(`${processId}: wrong exit ${JSON.stringify(exited)}`);
      }
      let afterSeq = 0;
      let bytes = 0;
      for (let page = 0; page < 100; page++) {
        const read = await call(client, "process/read", { processId, afterSeq, maxBytes: 1000 });
        const chunks = read.chunks as { chunk: string; stream: string }[];
        for (const c of chunks) {
          if (c.stream === "stdout") bytes += Uint8Array.fromBase64(c.chunk).length;
        }
        if (chunks.length === 0) break;
        afterSeq = (read.nextSeq as number) - 1;
      }
      if (bytes !== 2000 * (i + 1) + 1) problem(`${processId}: read ${bytes} bytes`);
    }
    const file = `file://${dir}/w${worker}.txt`;
    const data = crypto.getRandomValues(new Uint8Array(4096)).toBase64();
    await call(client, "fs/writeFile", { path: file, dataBase64: data });
    const read = await call(client, "fs/readFile", { path: file });
    if (read.dataBase64 !== data) problem(`fs round trip of ${file} differs`);
    await call(client, "fs/remove", { path: file });
    await call(client, "environment/info");
    if (n % 4 === 3) {
      // Leave a process running, drop the connection, resume, terminate.
      const processId = `w${worker}-r${n}-left`;
      await startProcess(client, processId, "sleep 1000");
      await client.close();
      const again = await server.connect();
      try {
        for (let attempt = 0; attempt < 100; attempt++) {
          requests++;
          const response = await again.request(nextId++, "initialize", {
            clientName: "soak",
            resumeSessionId: sessionId,
          });
          if (response.result) break;
          await sleep(20);
        }
        await again.send({ method: "initialized", params: {} });
        const result = await call(again, "process/terminate", { processId });
        if (result.running !== true) problem(`${processId} was not running on resume`);
        await again.log.processClosed(processId, 60_000);
      } finally {
        await again.close();
      }
    }
  } finally {
    await client.close();
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      minutes: { type: "string", default: "10" },
      "sample-seconds": { type: "string", default: "10" },
      workers: { type: "string", default: "4" },
      "max-growth-percent": { type: "string" },
    },
  });
  const durationMs = Number(values.minutes) * 60_000;
  const sampleMs = Number(values["sample-seconds"]) * 1000;
  const workers = Number(values.workers);
  const dir = await Deno.makeTempDir({ prefix: "es-soak-" });
  const inspectPort = freePort();
  const server = await ServerProcess.start({
    listen: "ws",
    args: ["--process-retention", "5", "--session-ttl", "5"],
    denoFlags: [`--inspect=127.0.0.1:${inspectPort}`],
  });
  const samples: Sample[] = [];
  let rounds = 0;
  try {
    // Warm up, then take the baseline after a full collection.
    await round(server, 0, 0, dir);
    await sleep(6_000);
    const baselineHeap = await collectGarbage(inspectPort);
    const baselineRss = rssKib(server.pid);
    const baselineFds = fdCount(server.pid);

    const ticker = await server.connect();
    await handshake(ticker);
    await startProcess(ticker, "ticker", "while :; do date +%s.%N; sleep 0.1; done");

    const started = Date.now();
    const deadline = started + durationMs;
    const sample = () => {
      const s = {
        t: Math.round((Date.now() - started) / 1000),
        rssKib: rssKib(server.pid),
        fds: fdCount(server.pid),
        children: descendants(server.pid).length,
      };
      samples.push(s);
      console.error(`soak: ${JSON.stringify({ ...s, rounds, processes, requests, failures })}`);
    };
    sample();
    const sampler = setInterval(sample, sampleMs);
    await Promise.all(Array.from({ length: workers }, async (_, worker) => {
      for (let n = 1; Date.now() < deadline; n++) {
        try {
          await round(server, worker + 1, n, dir);
          rounds++;
        } catch (err) {
          problem(`worker ${worker + 1} round ${n}: ${(err as Error).message}`);
          await sleep(1000);
        }
      }
    }));
    clearInterval(sampler);
    sample();
    await call(ticker, "process/terminate", { processId: "ticker" });
    await ticker.log.processClosed("ticker", 60_000);
    const tickerLines = ticker.log.outputText("ticker").split("\n").length - 1;
    await ticker.close();

    // Drain: retention and TTL (5 s), then a full collection, as for the baseline.
    await sleep(6_000);
    await waitUntil(() => descendants(server.pid).length === 0, 30_000);
    const left = descendants(server.pid).length;
    if (left > 0) problem(`${left} processes left behind`);
    const finalHeap = await collectGarbage(inspectPort);
    const finalRss = rssKib(server.pid);
    const finalFds = fdCount(server.pid);
    if (finalFds > baselineFds) {
      problem(`${finalFds} descriptors open, ${baselineFds} at the start`);
    }

    const first = samples[0]!;
    const last = samples[samples.length - 1]!;
    // Under load V8 first grows its heap to a working size; the trend that matters is the one
    // after that ramp (the first minute, or the first tenth of a longer run).
    const rampSeconds = Math.max(60, (last.t - first.t) / 10);
    const steady = samples.filter((s) => s.t >= rampSeconds);
    const slopeOf = (points: Sample[]) => {
      const n = points.length;
      if (n < 2) return 0;
      const meanT = points.reduce((a, s) => a + s.t, 0) / n;
      const meanR = points.reduce((a, s) => a + s.rssKib, 0) / n;
      return points.reduce((a, s) => a + (s.t - meanT) * (s.rssKib - meanR), 0) /
        (points.reduce((a, s) => a + (s.t - meanT) ** 2, 0) || 1);
    };
    const summary = {
      minutes: Number(((Date.now() - started) / 60_000).toFixed(1)),
      workers,
      rounds,
      processes,
      requests,
      tickerLines,
      failures,
      samples: samples.length,
      rssKib: {
        first: first.rssKib,
        last: last.rssKib,
        max: Math.max(...samples.map((s) => s.rssKib)),
        growthPercent: Number((((last.rssKib - first.rssKib) / first.rssKib) * 100).toFixed(1)),
        slopeKibPerMinute: Math.round(slopeOf(samples) * 60),
      },
      steady: steady.length < 2 ? null : {
        fromSecond: steady[0]!.t,
        firstKib: steady[0]!.rssKib,
        lastKib: steady[steady.length - 1]!.rssKib,
        minKib: Math.min(...steady.map((s) => s.rssKib)),
        maxKib: Math.max(...steady.map((s) => s.rssKib)),
        slopeKibPerMinute: Math.round(slopeOf(steady) * 60),
      },
      afterGc: {
        baselineRssKib: baselineRss,
        finalRssKib: finalRss,
        growthPercent: Number((((finalRss - baselineRss) / baselineRss) * 100).toFixed(1)),
        baselineHeapKib: Math.round(baselineHeap.usedSize / 1024),
        finalHeapKib: Math.round(finalHeap.usedSize / 1024),
        baselineFds,
        finalFds,
      },
      problems,
      sampleSeconds: sampleMs / 1000,
      series: samples.map((s) => [s.t, s.rssKib]),
    };
    console.log(`soak ${JSON.stringify(summary)}`);
    const limit = values["max-growth-percent"];
    if (limit !== undefined && summary.afterGc.growthPercent > Number(limit)) {
      console.error(`soak: memory grew ${summary.afterGc.growthPercent} % (limit ${limit} %)`);
      return 1;
    }
    return failures === 0 ? 0 : 1;
  } finally {
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  Deno.exit(await main());
}
