/**
 * The `load` and `live` metrics: whether busy or many processes slow the others down.
 *
 * - `load`: keystrokes echoed by a tty and `process/read`s of an idle process, first with nothing
 *   else running, then while eight processes of the same session write output as fast as they
 *   can.
 * - `live`: 1,000 `sleep` processes in one session: how fast they start, what the server holds
 *   for them, and `process/read` latency among them.
 *
 * Everything runs on 127.0.0.1, bounded in count and time; every process started is terminated.
 *
 * @module
 */

import {
  freshServer,
  type MetricContext,
  type MetricDef,
  nextProcessId,
  openClient,
  pool,
  remaining,
  sleep,
  startProcess,
  type Watched,
  withTimeout,
} from "./metrics.ts";
import { base64DecodedLength, decodeBase64, encodeBase64, type RpcClient } from "./rpc_client.ts";
import { cpuMs, rssKib } from "./server_process.ts";
import { percentile } from "./stats.ts";

const MIB = 1024 * 1024;
/** Output processes running while the loaded keystrokes are typed. */
const WRITERS = 8;
/** Live processes of the `live` metric. */
const LIVE_PROCESSES = 1000;
/** Pause between keystrokes (a fast typist's pace would be longer). */
const KEYSTROKE_GAP_MS = 5;
/** The tty's program: raw mode without the terminal's echo, `R` once ready, then `cat` echoes. */
const RAW_ECHO = ["/bin/sh", "-c", "stty raw -echo && printf R && exec cat"];

/** A tty that echoes every byte written to it, and the count of bytes it echoed. */
class TtyEcho {
  /** Bytes echoed after the ready mark. */
  echoed = 0;
  #ready = false;
  #waiters: { at: number; resolve(): void }[] = [];

  onOutput = (chunk: string): void => {
    let bytes = decodeBase64(chunk);
    if (!this.#ready) {
      const mark = bytes.indexOf(0x52); // "R"
      if (mark < 0) return;
      this.#ready = true;
      bytes = bytes.subarray(mark + 1);
    }
    this.echoed += bytes.length;
    this.#waiters = this.#waiters.filter((w) => {
      if (this.echoed < w.at) return true;
      w.resolve();
      return false;
    });
  };

  /** Resolves once `at` bytes were echoed (0: once the tty is ready). */
  until(at: number): Promise<void> {
    if (this.#ready && this.echoed >= at) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#waiters.push({ at, resolve });
    return promise;
  }
}

/** Keystroke-echo and idle `process/read` latencies (ms) of one phase. */
interface Phase {
  echo: number[];
  read: number[];
}

/** Types `n` keystrokes one after another, each followed by one `process/read` of `idleId`. */
async function typeAndRead(
  ctx: MetricContext,
  client: RpcClient,
  tty: { id: string; echo: TtyEcho; typed: number },
  idleId: string,
  n: number,
): Promise<Phase> {
  const phase: Phase = { echo: [], read: [] };
  for (let i = 0; i < n && Date.now() < ctx.deadline; i++) {
    const key = new Uint8Array([0x61 + (tty.typed % 26)]);
    const t0 = performance.now();
    const write = client.call("process/write", {
      processId: tty.id,
      chunk: encodeBase64(key),
      writeId: `k${tty.typed}`,
    });
    tty.typed++;
    await withTimeout(Promise.all([write, tty.echo.until(tty.typed)]), 10_000, "keystroke echo");
    phase.echo.push(performance.now() - t0);
    const t1 = performance.now();
    await withTimeout(
      client.call("process/read", { processId: idleId, afterSeq: 0, maxBytes: 65536 }),
      10_000,
      "idle process/read",
    );
    phase.read.push(performance.now() - t1);
    await sleep(KEYSTROKE_GAP_MS);
  }
  return phase;
}

/** Terminates `ids` and waits (bounded) for their `process/closed`. */
async function terminateAll(client: RpcClient, ids: string[], watched: Watched[]): Promise<void> {
  await pool(ids.length, 32, async (i) => {
    await client.call("process/terminate", { processId: ids[i]! }).catch(() => {});
  });
  await withTimeout(Promise.all(watched.map((w) => w.closed)), 20_000, "processes closed")
    .catch(() => {});
}

/** Metric `load`: tty echo and idle reads, unloaded, then beside eight busy writers. */
async function runLoad(ctx: MetricContext): Promise<Record<string, number>> {
  const n = ctx.quick ? 40 : 200;
  const client = await openClient(ctx, ctx.server.url);
  const ids: string[] = [];
  const watched: Watched[] = [];
  const start = async (
    argv: string[],
    options: { onOutput?(chunk: string): void; pipeStdin?: boolean; tty?: boolean },
  ) => {
    const id = nextProcessId("load");
    ids.push(id);
    watched.push(await startProcess(client, id, argv, options));
    return id;
  };
  try {
    const idleId = await start(["sleep", "120"], {});
    const echo = new TtyEcho();
    const ttyId = await start(RAW_ECHO, { tty: true, onOutput: echo.onOutput });
    await withTimeout(echo.until(0), 10_000, "tty ready");
    const tty = { id: ttyId, echo, typed: 0 };
    await typeAndRead(ctx, client, tty, idleId, 30); // warm-up
    const unloaded = await typeAndRead(ctx, client, tty, idleId, n);

    let received = 0;
    const count = (chunk: string) => void (received += base64DecodedLength(chunk));
    for (let i = 0; i < WRITERS; i++) await start(["cat", "/dev/zero"], { onOutput: count });
    await sleep(300); // the writers reach their pace
    const cpu0 = cpuMs(ctx.server.pid);
    const received0 = received;
    const t0 = performance.now();
    const loaded = await typeAndRead(ctx, client, tty, idleId, n);
    const seconds = (performance.now() - t0) / 1000;
    const loadServerCpuMs = cpuMs(ctx.server.pid) - cpu0;
    const unloadedEchoP99 = percentile(unloaded.echo, 99);
    const loadedEchoP99 = percentile(loaded.echo, 99);
    return {
      echoP50Ms: percentile(unloaded.echo, 50),
      echoP99Ms: unloadedEchoP99,
      loadedEchoP50Ms: percentile(loaded.echo, 50),
      loadedEchoP99Ms: loadedEchoP99,
      loadedEchoP99OverUnloaded: loadedEchoP99 / unloadedEchoP99,
      readP50Ms: percentile(unloaded.read, 50),
      readP99Ms: percentile(unloaded.read, 99),
      loadedReadP50Ms: percentile(loaded.read, 50),
      loadedReadP99Ms: percentile(loaded.read, 99),
      writersMibPerS: (received - received0) / MIB / seconds,
      loadServerCpuMs,
    };
  } finally {
    await terminateAll(client, ids, watched);
    client.close();
  }
}

/** `n` `process/read`s one after the other, of `ids` in a scattered order: their latencies (ms). */
async function readLatencies(
  ctx: MetricContext,
  client: RpcClient,
  ids: string[],
  n: number,
): Promise<number[]> {
  const lat: number[] = [];
  for (let i = 0; i < n && Date.now() < ctx.deadline; i++) {
    const t0 = performance.now();
    await client.call("process/read", { processId: ids[(i * 7919) % ids.length]!, afterSeq: 0 });
    lat.push(performance.now() - t0);
  }
  return lat;
}

/**
 * Metric `live`: on a fresh server, `process/read` latency with one live `sleep` process (after
 * a warm-up of the read path), then 1,000 more started 32 at a time: their start rate, the RSS
 * they add, and `process/read` latency among them.
 */
async function runLive(ctx: MetricContext): Promise<Record<string, number>> {
  const n = ctx.quick ? 100 : LIVE_PROCESSES;
  const nReads = ctx.quick ? 200 : 1000;
  const server = await freshServer(ctx);
  const cpu0 = cpuMs(server.pid);
  const ids = Array.from({ length: n }, () => nextProcessId("live"));
  const watched: Watched[] = [];
  const client = await openClient(ctx, server.url);
  const firstId = nextProcessId("live");
  try {
    // One process first, so that what the first spawn loads is not counted per process.
    watched.push(await startProcess(client, firstId, ["sleep", "120"]));
    await readLatencies(ctx, client, [firstId], 300); // warm-up of the read path
    const one = await readLatencies(ctx, client, [firstId], nReads);
    await sleep(300);
    const rss0 = rssKib(server.pid);
    const t0 = performance.now();
    await withTimeout(
      pool(n, 32, async (i) => {
        watched.push(await startProcess(client, ids[i]!, ["sleep", "120"]));
      }),
      remaining(ctx),
      "live processes started",
    );
    const spawnPerS = n / ((performance.now() - t0) / 1000);
    await sleep(500);
    const rss1 = rssKib(server.pid);
    const many = await readLatencies(ctx, client, ids, nReads);
    return {
      oneReadP50Ms: percentile(one, 50),
      oneReadP99Ms: percentile(one, 99),
      spawnPerS,
      rssKib: rss1,
      perProcessKib: (rss1 - rss0) / n,
      readP50Ms: percentile(many, 50),
      readP99Ms: percentile(many, 99),
      serverCpuMs: cpuMs(server.pid) - cpu0,
    };
  } finally {
    await terminateAll(client, [firstId, ...ids], watched);
    client.close();
    if (server !== ctx.server) await server.stop();
  }
}

/** The metrics of this module, in run order (after {@linkcode METRICS}'s). */
export const LOAD_METRICS: readonly MetricDef[] = [
  {
    name: "load",
    title: "tty keystroke echo and idle process/read, unloaded and beside 8 busy writers",
    usesSharedServer: true,
    measures: [
      { key: "echoP50Ms", label: "keystroke echo p50, unloaded", unit: "ms" },
      { key: "echoP99Ms", label: "keystroke echo p99, unloaded", unit: "ms" },
      { key: "loadedEchoP50Ms", label: "keystroke echo p50, 8 writers", unit: "ms" },
      {
        key: "loadedEchoP99Ms",
        label: "keystroke echo p99, 8 writers",
        unit: "ms",
        target: { op: "<=", ratio: 1.0 },
      },
      { key: "loadedEchoP99OverUnloaded", label: "echo p99, 8 writers / unloaded", unit: "x" },
      { key: "readP50Ms", label: "idle process/read p50, unloaded", unit: "ms" },
      { key: "readP99Ms", label: "idle process/read p99, unloaded", unit: "ms" },
      { key: "loadedReadP50Ms", label: "idle process/read p50, 8 writers", unit: "ms" },
      { key: "loadedReadP99Ms", label: "idle process/read p99, 8 writers", unit: "ms" },
      { key: "writersMibPerS", label: "the 8 writers' output delivered", unit: "MiB/s" },
      { key: "loadServerCpuMs", label: "server CPU, loaded phase", unit: "ms" },
    ],
    run: runLoad,
  },
  {
    name: "live",
    title: "1,000 live sleep processes in one session (fresh server)",
    usesSharedServer: false,
    measures: [
      { key: "oneReadP50Ms", label: "process/read p50, one live process", unit: "ms" },
      { key: "oneReadP99Ms", label: "process/read p99, one live process", unit: "ms" },
      { key: "spawnPerS", label: "started, 32 in flight", unit: "procs/s" },
      { key: "rssKib", label: "RSS with 1,000 live", unit: "KiB" },
      { key: "perProcessKib", label: "RSS per live process", unit: "KiB" },
      { key: "readP50Ms", label: "process/read p50, 1,000 live", unit: "ms" },
      {
        key: "readP99Ms",
        label: "process/read p99, 1,000 live",
        unit: "ms",
        target: { op: "<=", ratio: 1.0 },
      },
    ],
    run: runLive,
  },
];
