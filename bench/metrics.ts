/**
 * The benchmark metrics. Each metric runs once against one server and returns its measures; the
 * harness repeats it and interleaves servers.
 *
 * @module
 */

import { base64DecodedLength, decodeBase64, encodeBase64, RpcClient } from "./rpc_client.ts";
import {
  cpuMs,
  harnessCpuMs,
  liveThreadCpuMs,
  rssKib,
  type ServerHandle,
  startServer,
} from "./server_process.ts";
import { percentile } from "./stats.ts";
import type { Transport } from "./transport.ts";

/** Everything a metric needs to run against one server. */
export interface MetricContext {
  /** The long-running server for this run. */
  server: ServerHandle;
  /** Command to start fresh servers with, `null` when benchmarking a given `--url`. */
  command: string | null;
  /** Smaller sizes for a smoke run. */
  quick: boolean;
  /** Opens a new WebSocket connection to `url`. */
  connect(url: string): Promise<Transport>;
  /** Absolute time (ms since epoch) after which the metric must give up. */
  deadline: number;
  /** Whether the server is the reference (which lacks this server's extra flags). */
  reference: boolean;
}

/** Comparison target: ratio us/reference must satisfy `op ratio`. */
export interface Target {
  /** The comparison. */
  op: "<=" | ">=";
  /** The bound for us/reference. */
  ratio: number;
}

/** One number a metric reports. */
export interface MeasureDef {
  /** Key in the metric's result. */
  key: string;
  /** Human label. */
  label: string;
  /** Unit shown in tables. */
  unit: string;
  /** The target ratio, if the issue sets one. */
  target?: Target;
  /**
   * The target for us over `--floor` (`bench/floor_server.ts`), where the floor is the
   * measuring stick: a row the reference leads by more than any Deno program reaches.
   */
  floorTarget?: Target;
}

/** One benchmark metric. */
export interface MetricDef {
  /** Short name used by `--only`. */
  name: string;
  /** One-line description. */
  title: string;
  /** The measures it reports, in table order. */
  measures: MeasureDef[];
  /** Whether it needs the long-running WebSocket server (the others start their own). */
  usesSharedServer: boolean;
  /** Runs the metric once. */
  run(ctx: MetricContext): Promise<Record<string, number>>;
}

const CWD = "file:///tmp";
const ENV = { PATH: "/usr/bin:/bin" };
const MIB = 1024 * 1024;

/** Milliseconds left until the metric's deadline (0 once it has passed). */
export function remaining(ctx: MetricContext): number {
  return Math.max(0, ctx.deadline - Date.now());
}

/** Rejects with "Timed out after `ms` ms: `what`" unless `promise` settles first. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Resolves after `ms` ms. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs `fn(0..n-1)` with at most `window` calls in flight. */
export async function pool(
  n: number,
  window: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(window, n) }, worker));
}

/** Connects to `url` and initializes a session. */
export async function openClient(ctx: MetricContext, url: string | null): Promise<RpcClient> {
  if (url === null) throw new Error("Cannot connect: the server has no WebSocket URL");
  const client = new RpcClient(await withTimeout(ctx.connect(url), 10_000, "connect"));
  await withTimeout(client.initialize(), 10_000, "initialize");
  return client;
}

let processCounter = 0;

/** Unique-per-harness process id. */
export function nextProcessId(prefix: string): string {
  return `${prefix}-${++processCounter}`;
}

/** A started process: settles once its `process/closed` arrived. */
export interface Watched {
  /** Resolves on `process/closed`. */
  closed: Promise<void>;
}

/**
 * Registers a listener, then sends `process/start` (a pipe process unless `tty`); resolves after
 * the start response.
 */
export async function startProcess(
  client: RpcClient,
  processId: string,
  argv: string[],
  listener: {
    onOutput?(chunk: string, seq: number): void;
    pipeStdin?: boolean;
    tty?: boolean;
    /** The working directory (a `file:` URI; default `CWD`). */
    cwd?: string;
  } = {},
): Promise<Watched> {
  const { promise, resolve } = Promise.withResolvers<void>();
  client.watch(processId, {
    onOutput: listener.onOutput,
    onClosed: () => {
      client.unwatch(processId);
      resolve();
    },
  });
  await client.call("process/start", {
    processId,
    argv,
    cwd: listener.cwd ?? CWD,
    env: ENV,
    tty: listener.tty ?? false,
    pipeStdin: listener.pipeStdin ?? false,
  });
  return { closed: promise };
}

/** Metric 1: sequential and pipelined `fs/getMetadata`. */
async function runRpc(ctx: MetricContext): Promise<Record<string, number>> {
  const nSeq = ctx.quick ? 200 : 2000;
  const nPipe = ctx.quick ? 500 : 5000;
  const params = { path: "file:///tmp" };
  const client = await openClient(ctx, ctx.server.url);
  try {
    for (let i = 0; i < 50; i++) await client.call("fs/getMetadata", params);
    const lat: number[] = [];
    for (let i = 0; i < nSeq && Date.now() < ctx.deadline; i++) {
      const t0 = performance.now();
      await client.call("fs/getMetadata", params);
      lat.push((performance.now() - t0) * 1000);
    }
    const serverCpu0 = cpuMs(ctx.server.pid);
    const clientCpu0 = harnessCpuMs();
    const t0 = performance.now();
    await withTimeout(
      pool(nPipe, 64, async () => void await client.call("fs/getMetadata", params)),
      remaining(ctx),
      "pipelined fs/getMetadata",
    );
    const pipeSeconds = (performance.now() - t0) / 1000;
    const clientUs = (harnessCpuMs() - clientCpu0) * 1000 / nPipe;
    const serverUs = (cpuMs(ctx.server.pid) - serverCpu0) * 1000 / nPipe;
    const result: Record<string, number> = {
      seqP50Us: percentile(lat, 50),
      seqP99Us: percentile(lat, 99),
      pipelinedCallsPerS: nPipe / pipeSeconds,
      pipelinedServerUsPerCall: serverUs,
      pipelinedClientUsPerCall: clientUs,
      stdioSeqP50Us: NaN,
    };
    if (ctx.command !== null) result.stdioSeqP50Us = await stdioRoundTrip(ctx, nSeq);
    return result;
  } finally {
    client.close();
  }
}

async function stdioRoundTrip(ctx: MetricContext, n: number): Promise<number> {
  const server = await startServer(ctx.command!, { listen: "stdio" });
  try {
    const client = new RpcClient(server.stdio!);
    await withTimeout(client.initialize(), 30_000, "stdio initialize");
    const params = { path: "file:///tmp" };
    for (let i = 0; i < 50; i++) await client.call("fs/getMetadata", params);
    const lat: number[] = [];
    for (let i = 0; i < n && Date.now() < ctx.deadline; i++) {
      const t0 = performance.now();
      await client.call("fs/getMetadata", params);
      lat.push((performance.now() - t0) * 1000);
    }
    client.close();
    return percentile(lat, 50);
  } finally {
    await server.stop();
  }
}

/** The tree `fs/walk` lists: 300 directories of 60 files, each below a subdirectory. */
const WALK_TREE = { directories: 300, filesPerDirectory: 60 };

/** Builds the walk metric's tree in a new temporary directory. */
async function walkTree(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "es-bench-walk-" });
  for (let d = 0; d < WALK_TREE.directories; d++) {
    const dir = `${root}/d${d}/sub${d % 7}`;
    await Deno.mkdir(dir, { recursive: true });
    for (let f = 0; f < WALK_TREE.filesPerDirectory; f++) {
      await Deno.writeFile(`${dir}/f${f}.txt`, new Uint8Array());
    }
  }
  return root;
}

/** Metric: `fs/walk` of a tree of 18 600 entries, sequential. */
async function runWalk(ctx: MetricContext): Promise<Record<string, number>> {
  const reps = ctx.quick ? 5 : 30;
  const root = await walkTree();
  const client = await openClient(ctx, ctx.server.url);
  try {
    const params = {
      path: `file://${root}`,
      options: {
        maxDepth: 10,
        maxDirectories: 10_000,
        maxEntries: 50_000,
        followDirectorySymlinks: false,
        pruneHiddenDirectories: false,
      },
    };
    for (let i = 0; i < 3; i++) await client.call("fs/walk", params);
    const lat: number[] = [];
    const serverCpu0 = cpuMs(ctx.server.pid);
    for (let i = 0; i < reps && Date.now() < ctx.deadline; i++) {
      const t0 = performance.now();
      const reply = await client.call("fs/walk", params) as { entries: unknown[] };
      lat.push(performance.now() - t0);
      const expected = WALK_TREE.directories * (2 + WALK_TREE.filesPerDirectory);
      if (reply.entries.length !== expected) {
        throw new Error(`fs/walk listed ${reply.entries.length} entries, not ${expected}`);
      }
    }
    return {
      p50Ms: percentile(lat, 50),
      p99Ms: percentile(lat, 99),
      serverCpuMsPerWalk: (cpuMs(ctx.server.pid) - serverCpu0) / lat.length,
    };
  } finally {
    client.close();
    await Deno.remove(root, { recursive: true });
  }
}

/** Metric 2: spawn `true` until `process/closed`, sequential and 32 in flight. */
async function runSpawn(ctx: MetricContext): Promise<Record<string, number>> {
  return await measureSpawn(ctx, ctx.server.url);
}

/** Spawns `true` in `cwd` on the server at `url`: sequential latency, then 32 in flight. */
async function measureSpawn(
  ctx: MetricContext,
  url: string | null,
  cwd?: string,
): Promise<Record<string, number>> {
  const n = ctx.quick ? 30 : 300;
  const client = await openClient(ctx, url);
  const once = async () => {
    const t0 = performance.now();
    const w = await startProcess(client, nextProcessId("spawn"), ["true"], { cwd });
    await withTimeout(w.closed, remaining(ctx), "process/closed of true");
    return performance.now() - t0;
  };
  try {
    for (let i = 0; i < 5; i++) await once();
    const lat: number[] = [];
    for (let i = 0; i < n && Date.now() < ctx.deadline; i++) lat.push(await once());
    const t0 = performance.now();
    await pool(n, 32, async () => void await once());
    return {
      seqP50Ms: percentile(lat, 50),
      seqP99Ms: percentile(lat, 99),
      concurrentProcsPerS: n / ((performance.now() - t0) / 1000),
    };
  } finally {
    client.close();
  }
}

/**
 * Metric 2b: the spawn metric on a fresh server started with
 * `--sandbox workspace-write` (every process under bubblewrap). The
 * reference has no such flag: it runs unconfined, the baseline the target
 * compares against.
 */
async function runConfinedSpawn(ctx: MetricContext): Promise<Record<string, number>> {
  if (ctx.command === null) throw new Error("Needs a server command (not --url)");
  const root = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "exec-server-bench-root-" });
  const flags = ` --sandbox workspace-write --writable-root ${root}`;
  const server = await startServer(ctx.command + (ctx.reference ? "" : flags));
  try {
    const cpu0 = cpuMs(server.pid);
    // In the writable root: the sandbox gives its processes a private /tmp, which hides /tmp.
    const result = await measureSpawn(ctx, server.url, `file://${root}`);
    return { ...result, serverCpuMs: cpuMs(server.pid) - cpu0 };
  } finally {
    await server.stop();
    await Deno.remove(root, { recursive: true });
  }
}

/** Starts `count` processes writing `bytes` each and waits for all of them to close. */
async function streamOutput(ctx: MetricContext, client: RpcClient, count: number, bytes: number) {
  let received = 0;
  let chunks = 0;
  const pid = ctx.server.pid;
  const cpu0 = cpuMs(pid);
  const clientCpu0 = harnessCpuMs();
  const t0 = performance.now();
  const watched = await Promise.all(
    Array.from(
      { length: count },
      () =>
        startProcess(client, nextProcessId("stream"), ["head", "-c", String(bytes), "/dev/zero"], {
          onOutput(chunk) {
            received += base64DecodedLength(chunk);
            chunks++;
          },
        }),
    ),
  );
  await withTimeout(Promise.all(watched.map((w) => w.closed)), remaining(ctx), "output streaming");
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMs(pid) - cpu0;
  const clientCpu = harnessCpuMs() - clientCpu0;
  if (received !== count * bytes) {
    throw new Error(`Output streaming lost data: received ${received} of ${count * bytes} bytes`);
  }
  return {
    mibS: received / MIB / seconds,
    chunkKib: received / chunks / 1024,
    cpuMsPerMib: cpu / (received / MIB),
    clientCpuMsPerMib: clientCpu / (received / MIB),
  };
}

/** Metric 3: one and eight processes streaming to `process/output`. */
async function runStream(ctx: MetricContext): Promise<Record<string, number>> {
  const bytes = (ctx.quick ? 16 : 256) * MIB;
  const client = await openClient(ctx, ctx.server.url);
  try {
    const one = await streamOutput(ctx, client, 1, bytes);
    const eight = await streamOutput(ctx, client, 8, bytes);
    return {
      singleMibPerS: one.mibS,
      avgChunkKib: one.chunkKib,
      singleCpuMsPerMib: one.cpuMsPerMib,
      singleClientCpuMsPerMib: one.clientCpuMsPerMib,
      eightMibPerS: eight.mibS,
      eightCpuMsPerMib: eight.cpuMsPerMib,
      eightClientCpuMsPerMib: eight.clientCpuMsPerMib,
    };
  } finally {
    client.close();
  }
}

interface ReadResponse {
  chunks: { seq: number; chunk: string }[];
  nextSeq: number;
  closed: boolean;
}

/** Metric 4: consume output only through `process/read` long polls. */
async function runRead(ctx: MetricContext): Promise<Record<string, number>> {
  const bytes = (ctx.quick ? 8 : 64) * MIB;
  const client = await openClient(ctx, ctx.server.url);
  try {
    const processId = nextProcessId("read");
    const t0 = performance.now();
    // No onOutput: the client drops this process's notifications without parsing them.
    const w = await startProcess(client, processId, ["head", "-c", String(bytes), "/dev/zero"]);
    let afterSeq = 0;
    let delivered = 0;
    let polls = 0;
    for (; polls < 1_000_000 && Date.now() < ctx.deadline; polls++) {
      const res = await client.call<ReadResponse>("process/read", {
        processId,
        afterSeq,
        maxBytes: MIB,
        waitMs: 1000,
      });
      for (const c of res.chunks) delivered += base64DecodedLength(c.chunk);
      const last = res.chunks.at(-1);
      afterSeq = last !== undefined ? last.seq : Math.max(afterSeq, res.nextSeq - 1);
      if (res.closed && res.chunks.length === 0) break;
    }
    const seconds = (performance.now() - t0) / 1000;
    await withTimeout(w.closed, 5000, "process/closed after reads").catch(() => {});
    return { mibPerS: delivered / MIB / seconds, deliveredShare: delivered / bytes, polls };
  } finally {
    client.close();
  }
}

const WRITE_BYTES = 4096;

/** Deterministic pseudo-random payloads: write `i` is a 4 KiB window of a 1 MiB random pool. */
function makePayloads(): (i: number) => Uint8Array {
  const pool = new Uint8Array(MIB);
  for (let o = 0; o < pool.length; o += 65536) crypto.getRandomValues(pool.subarray(o, o + 65536));
  return (i) => {
    const offset = (i * 4099 * 7) % (pool.length - WRITE_BYTES);
    return pool.subarray(offset, offset + WRITE_BYTES);
  };
}

/** An echo checker: compares received bytes to the expected stream and wakes waiters. */
class EchoChecker {
  received = 0;
  mismatches = 0;
  #payload: (i: number) => Uint8Array;
  #base: number;
  #waiters: { at: number; resolve(): void }[] = [];

  constructor(payload: (i: number) => Uint8Array, firstWrite: number) {
    this.#payload = payload;
    this.#base = firstWrite;
  }

  onOutput = (chunk: string): void => {
    const bytes = decodeBase64(chunk);
    let pos = this.received;
    let i = 0;
    while (i < bytes.length) {
      const w = this.#payload(this.#base + Math.floor(pos / WRITE_BYTES));
      const off = pos % WRITE_BYTES;
      const n = Math.min(WRITE_BYTES - off, bytes.length - i);
      for (let k = 0; k < n; k++) if (bytes[i + k] !== w[off + k]) this.mismatches++;
      i += n;
      pos += n;
    }
    this.received = pos;
    this.#waiters = this.#waiters.filter((w) => {
      if (this.received < w.at) return true;
      w.resolve();
      return false;
    });
  };

  until(at: number): Promise<void> {
    if (this.received >= at) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#waiters.push({ at, resolve });
    return promise;
  }
}

async function writeStdin(
  client: RpcClient,
  processId: string,
  bytes: Uint8Array,
  writeId: string,
): Promise<void> {
  const res = await client.call<{ status: string }>("process/write", {
    processId,
    chunk: encodeBase64(bytes),
    writeId,
  });
  if (res.status !== "accepted") throw new Error(`process/write answered "${res.status}"`);
}

async function echoLatencies(
  ctx: MetricContext,
  client: RpcClient,
  n: number,
  payload: (i: number) => Uint8Array,
): Promise<{ lat: number[]; checker: EchoChecker; processId: string; watched: Watched }> {
  const checker = new EchoChecker(payload, 0);
  const processId = nextProcessId("cat");
  const watched = await startProcess(client, processId, ["cat"], {
    pipeStdin: true,
    onOutput: checker.onOutput,
  });
  const lat: number[] = [];
  for (let i = 0; i < n && Date.now() < ctx.deadline; i++) {
    const t0 = performance.now();
    const write = writeStdin(client, processId, payload(i), `e${i}`);
    await withTimeout(
      Promise.all([write, checker.until((i + 1) * WRITE_BYTES)]),
      10_000,
      "stdin echo",
    );
    lat.push(performance.now() - t0);
  }
  return { lat, checker, processId, watched };
}

/** Metric 5: `cat` echo latency and bulk stdin throughput, checked byte for byte. */
async function runStdin(ctx: MetricContext): Promise<Record<string, number>> {
  const nEcho = ctx.quick ? 50 : 200;
  const nBulk = ctx.quick ? 1000 : 10_000;
  const payload = makePayloads();
  const client = await openClient(ctx, ctx.server.url);
  try {
    const cpu0 = cpuMs(ctx.server.pid);
    const { lat, checker, processId, watched } = await echoLatencies(ctx, client, nEcho, payload);
    const t0 = performance.now();
    await pool(nBulk, 16, async (i) => {
      const k = nEcho + i;
      await writeStdin(client, processId, payload(k), `e${k}`);
    });
    const total = (nEcho + nBulk) * WRITE_BYTES;
    await withTimeout(checker.until(total), remaining(ctx), "bulk stdin echo");
    const seconds = (performance.now() - t0) / 1000;
    const echoBulkServerCpuMs = cpuMs(ctx.server.pid) - cpu0;
    await client.call("process/terminate", { processId });
    await withTimeout(watched.closed, 5000, "cat closed").catch(() => {});
    if (checker.mismatches > 0 || checker.received !== total) {
      throw new Error(
        `Stdin echo mismatch: ${checker.mismatches} bytes differ, ${checker.received} of ${total}`,
      );
    }
    const result: Record<string, number> = {
      echoP50Ms: percentile(lat, 50),
      echoP99Ms: percentile(lat, 99),
      bulkMibPerS: (nBulk * WRITE_BYTES) / MIB / seconds,
      echoBulkServerCpuMs,
      stdioEchoP50Ms: NaN,
    };
    if (ctx.command !== null) {
      const server = await startServer(ctx.command, { listen: "stdio" });
      try {
        const stdioClient = new RpcClient(server.stdio!);
        await withTimeout(stdioClient.initialize(), 30_000, "stdio initialize");
        const stdio = await echoLatencies(ctx, stdioClient, Math.min(nEcho, 50), payload);
        result.stdioEchoP50Ms = percentile(stdio.lat, 50);
        stdioClient.close();
      } finally {
        await server.stop();
      }
    }
    return result;
  } finally {
    client.close();
  }
}

/** Starts a fresh WebSocket server unless benchmarking a given `--url`. */
export async function freshServer(ctx: MetricContext): Promise<ServerHandle> {
  return ctx.command === null ? ctx.server : await startServer(ctx.command);
}

/**
 * Metric 6: RSS idle; the one-time growth of the first `sleep 30` child (what a server loads
 * for its first spawn); per additional sleeping child, over 200 more; after terminating all.
 */
async function runMemory(ctx: MetricContext): Promise<Record<string, number>> {
  const n = ctx.quick ? 50 : 200;
  const server = await freshServer(ctx);
  const cpu0 = cpuMs(server.pid);
  try {
    const client = await openClient(ctx, server.url);
    await sleep(300);
    const idle = rssKib(server.pid);
    const ids = Array.from({ length: n + 1 }, () => nextProcessId("sleep"));
    const watched: Watched[] = [await startProcess(client, ids[0]!, ["sleep", "30"])];
    await sleep(500);
    const first = rssKib(server.pid);
    await pool(
      n,
      16,
      async (i) => void watched.push(await startProcess(client, ids[i + 1]!, ["sleep", "30"])),
    );
    await sleep(500);
    const busy = rssKib(server.pid);
    await pool(
      n + 1,
      16,
      async (i) => void await client.call("process/terminate", { processId: ids[i]! }),
    );
    await withTimeout(Promise.all(watched.map((w) => w.closed)), remaining(ctx), "sleep closed");
    await sleep(500);
    const after = rssKib(server.pid);
    client.close();
    return {
      idleRssKib: idle,
      firstProcessKib: first - idle,
      perProcessKib: (busy - first) / n,
      afterTerminateRssKib: after,
      serverCpuMs: cpuMs(server.pid) - cpu0,
    };
  } finally {
    if (server !== ctx.server) await server.stop();
  }
}

/** Metric 7: 100 simultaneous connections, each initialize + one call. */
async function runConnections(ctx: MetricContext): Promise<Record<string, number>> {
  const n = ctx.quick ? 20 : 100;
  const server = await freshServer(ctx);
  const cpu0 = cpuMs(server.pid);
  const clients: RpcClient[] = [];
  try {
    // One throwaway connection first, making the same call as each connection below, so one-time
    // lazy initialization (such as the modules loaded with the first fs request) is not counted
    // per connection.
    const warm = await openClient(ctx, server.url);
    await warm.call("fs/getMetadata", { path: "file:///tmp" });
    warm.close();
    await sleep(300);
    const rss0 = rssKib(server.pid);
    const setup: number[] = [];
    const t0 = performance.now();
    await withTimeout(
      Promise.all(Array.from({ length: n }, async () => {
        const client = await openClient(ctx, server.url);
        setup.push(performance.now() - t0);
        clients.push(client);
        await client.call("fs/getMetadata", { path: "file:///tmp" });
      })),
      remaining(ctx),
      "connections",
    );
    const totalMs = performance.now() - t0;
    await sleep(300);
    const rss1 = rssKib(server.pid);
    return {
      setupP50Ms: percentile(setup, 50),
      totalMs: totalMs,
      perConnectionKib: (rss1 - rss0) / n,
      serverCpuMs: cpuMs(server.pid) - cpu0,
    };
  } finally {
    for (const c of clients) c.close();
    if (server !== ctx.server) await server.stop();
  }
}

/** Metric 8: process spawn to the first `initialize` response, WebSocket and stdio. */
async function runColdStart(ctx: MetricContext): Promise<Record<string, number>> {
  if (ctx.command === null) {
    return { wsMs: NaN, stdioMs: NaN, firstStartMs: NaN, wsServerCpuMs: NaN, serverCpuMs: NaN };
  }
  const samples = ctx.quick ? 1 : 3;
  const ws: number[] = [];
  const stdio: number[] = [];
  const cpu: number[] = [];
  const firstStart: number[] = [];
  for (let i = 0; i < samples; i++) {
    let t0 = performance.now();
    let server = await startServer(ctx.command);
    try {
      const client = await openClient(ctx, server.url);
      ws.push(performance.now() - t0);
      cpu.push(liveThreadCpuMs(server.pid));
      const t1 = performance.now();
      const w = await startProcess(client, nextProcessId("first"), ["true"]);
      firstStart.push(performance.now() - t1);
      await withTimeout(w.closed, 10_000, "first process/closed");
      client.close();
    } finally {
      await server.stop();
    }
    t0 = performance.now();
    server = await startServer(ctx.command, { listen: "stdio" });
    try {
      const client = new RpcClient(server.stdio!);
      await withTimeout(client.call("initialize", { clientName: "bench" }), 30_000, "initialize");
      stdio.push(performance.now() - t0);
      client.close();
    } finally {
      await server.stop();
    }
  }
  return {
    wsMs: percentile(ws, 50),
    stdioMs: percentile(stdio, 50),
    firstStartMs: percentile(firstStart, 50),
    wsServerCpuMs: percentile(cpu, 50),
    serverCpuMs: percentile(cpu, 50),
  };
}

/**
 * A loopback HTTP/1.1 origin for the `http` metric: answers every request with a small body,
 * keeps connections alive, and counts the TCP connections it accepted.
 */
function keepAliveOrigin(): { url: string; connections(): number; close(): void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let accepted = 0;
  const response = new TextEncoder().encode(
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n" +
      'connection: keep-alive\r\n\r\n{"ok":true}',
  );
  const serve = async (conn: Deno.Conn) => {
    const buffer = new Uint8Array(65536);
    let pending = "";
    try {
      while (true) {
        const n = await conn.read(buffer);
        if (n === null) break;
        pending += new TextDecoder().decode(buffer.subarray(0, n));
        let end;
        while ((end = pending.indexOf("\r\n\r\n")) !== -1) {
          pending = pending.slice(end + 4);
          await conn.write(response);
        }
      }
    } catch { /* the peer went away */ }
    open.delete(conn);
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  (async () => {
    try {
      for await (const conn of listener) {
        accepted++;
        open.add(conn);
        serve(conn);
      }
    } catch { /* listener closed */ }
  })();
  const { port } = listener.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    connections: () => accepted,
    close() {
      listener.close();
      for (const conn of open) {
        try {
          conn.close();
        } catch { /* already closed */ }
      }
    },
  };
}

/** Runs `call` `n` times one after the other (until the deadline): calls per second and p50. */
async function sequentially(
  ctx: MetricContext,
  n: number,
  call: (i: number) => Promise<unknown>,
): Promise<{ perS: number; p50Ms: number }> {
  const lat: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n && Date.now() < ctx.deadline; i++) {
    const t1 = performance.now();
    await call(i);
    lat.push(performance.now() - t1);
  }
  return { perS: lat.length / ((performance.now() - t0) / 1000), p50Ms: percentile(lat, 50) };
}

/** Metric 9: sequential buffered `http/request` GETs, then POSTs, to one loopback origin. */
async function runHttp(ctx: MetricContext): Promise<Record<string, number>> {
  const n = ctx.quick ? 50 : 300;
  const origin = keepAliveOrigin();
  const client = await openClient(ctx, ctx.server.url);
  try {
    const get = (i: number) =>
      client.call<{ status: number }>("http/request", {
        method: "GET",
        url: origin.url,
        headers: [],
        requestId: `bench-http-${i}`,
      });
    const warm = await get(-1);
    if (warm.status !== 200) throw new Error(`http/request answered status ${warm.status}`);
    const before = origin.connections();
    const gets = await sequentially(ctx, n, get);
    const tcpConnections = origin.connections() - before;
    // What an MCP client sends (Streamable HTTP): a POST with a small JSON-RPC body.
    const body = new TextEncoder().encode('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    const posts = await sequentially(
      ctx,
      n,
      (i) =>
        client.call<{ status: number }>("http/request", {
          method: "POST",
          url: origin.url,
          headers: [{ name: "content-type", value: "application/json" }],
          bodyBase64: body.toBase64(),
          requestId: `bench-http-post-${i}`,
        }),
    );
    return {
      reqPerS: gets.perS,
      p50Ms: gets.p50Ms,
      tcpConnections,
      postReqPerS: posts.perS,
      postP50Ms: posts.p50Ms,
    };
  } finally {
    client.close();
    origin.close();
  }
}

/** All metrics, in run order. */
export const METRICS: readonly MetricDef[] = [
  {
    name: "rpc",
    title: "RPC round trip (fs/getMetadata)",
    usesSharedServer: true,
    measures: [
      { key: "seqP50Us", label: "sequential p50", unit: "µs", target: { op: "<=", ratio: 1.0 } },
      { key: "seqP99Us", label: "sequential p99", unit: "µs" },
      {
        key: "pipelinedCallsPerS",
        label: "64 in flight",
        unit: "calls/s",
        target: { op: ">=", ratio: 1.5 },
      },
      { key: "pipelinedServerUsPerCall", label: "server CPU per call, 64 in flight", unit: "µs" },
      { key: "pipelinedClientUsPerCall", label: "client CPU per call, 64 in flight", unit: "µs" },
      { key: "stdioSeqP50Us", label: "stdio sequential p50", unit: "µs" },
    ],
    run: runRpc,
  },
  {
    name: "spawn",
    title: "Spawn `true` until process/closed",
    usesSharedServer: true,
    measures: [
      { key: "seqP50Ms", label: "sequential p50", unit: "ms", target: { op: "<=", ratio: 0.6 } },
      { key: "seqP99Ms", label: "sequential p99", unit: "ms" },
      {
        key: "concurrentProcsPerS",
        label: "32 in flight",
        unit: "procs/s",
        target: { op: ">=", ratio: 2.0 },
      },
    ],
    run: runSpawn,
  },
  {
    name: "confinedSpawn",
    title: "Spawn `true` under --sandbox workspace-write (reference: unconfined)",
    usesSharedServer: false,
    measures: [
      { key: "seqP50Ms", label: "sequential p50", unit: "ms", target: { op: "<=", ratio: 0.6 } },
      { key: "seqP99Ms", label: "sequential p99", unit: "ms" },
      { key: "concurrentProcsPerS", label: "32 in flight", unit: "procs/s" },
    ],
    run: runConfinedSpawn,
  },
  {
    name: "stream",
    title: "Output streaming via process/output",
    usesSharedServer: true,
    measures: [
      {
        key: "singleMibPerS",
        label: "one process",
        unit: "MiB/s",
        target: { op: ">=", ratio: 2.0 },
      },
      { key: "avgChunkKib", label: "average chunk", unit: "KiB" },
      {
        key: "singleCpuMsPerMib",
        label: "server CPU, one process",
        unit: "ms/MiB",
        target: { op: "<=", ratio: 0.5 },
      },
      { key: "singleClientCpuMsPerMib", label: "client CPU, one process", unit: "ms/MiB" },
      {
        key: "eightMibPerS",
        label: "eight at once",
        unit: "MiB/s",
        target: { op: ">=", ratio: 2.0 },
      },
      {
        key: "eightCpuMsPerMib",
        label: "server CPU, eight",
        unit: "ms/MiB",
        target: { op: "<=", ratio: 0.5 },
      },
      { key: "eightClientCpuMsPerMib", label: "client CPU, eight", unit: "ms/MiB" },
    ],
    run: runStream,
  },
  {
    name: "read",
    title: "Read polling (process/read, maxBytes 1 MiB)",
    usesSharedServer: true,
    measures: [
      { key: "mibPerS", label: "delivered rate", unit: "MiB/s" },
      { key: "deliveredShare", label: "share of bytes delivered", unit: "fraction" },
      { key: "polls", label: "read calls", unit: "calls" },
    ],
    run: runRead,
  },
  {
    name: "stdin",
    title: "Stdin echo through cat",
    usesSharedServer: true,
    measures: [
      {
        key: "echoP50Ms",
        label: "4 KiB echo p50",
        unit: "ms",
        target: { op: "<=", ratio: 0.05 },
      },
      { key: "echoP99Ms", label: "4 KiB echo p99", unit: "ms" },
      {
        key: "bulkMibPerS",
        label: "bulk, 16 in flight",
        unit: "MiB/s",
        target: { op: ">=", ratio: 2.0 },
        floorTarget: { op: ">=", ratio: 0.9 },
      },
      {
        key: "echoBulkServerCpuMs",
        label: "server CPU, echo and bulk",
        unit: "ms",
        target: { op: "<=", ratio: 1.0 },
      },
      { key: "stdioEchoP50Ms", label: "stdio 4 KiB echo p50", unit: "ms" },
    ],
    run: runStdin,
  },
  {
    name: "memory",
    title: "Server RSS (fresh server)",
    usesSharedServer: false,
    measures: [
      { key: "idleRssKib", label: "idle", unit: "KiB", target: { op: "<=", ratio: 1.0 } },
      { key: "firstProcessKib", label: "first sleeping process (one-time)", unit: "KiB" },
      {
        key: "perProcessKib",
        label: "per additional sleeping process",
        unit: "KiB",
        target: { op: "<=", ratio: 1.0 },
      },
      { key: "afterTerminateRssKib", label: "after terminating them", unit: "KiB" },
    ],
    run: runMemory,
  },
  {
    name: "connections",
    title: "Simultaneous WebSocket connections (fresh server)",
    usesSharedServer: false,
    measures: [
      {
        key: "setupP50Ms",
        label: "set-up p50 (dial to initialize answered)",
        unit: "ms",
        target: { op: "<=", ratio: 1.0 },
        floorTarget: { op: "<=", ratio: 1.1 },
      },
      { key: "totalMs", label: "all connected and answered", unit: "ms" },
      {
        key: "perConnectionKib",
        label: "RSS per connection",
        unit: "KiB",
        target: { op: "<=", ratio: 1.0 },
      },
    ],
    run: runConnections,
  },
  {
    name: "cold",
    title: "Cold start to first initialize response",
    usesSharedServer: false,
    measures: [
      {
        key: "wsMs",
        label: "WebSocket",
        unit: "ms",
        target: { op: "<=", ratio: 1.5 },
        floorTarget: { op: "<=", ratio: 1.2 },
      },
      {
        key: "stdioMs",
        label: "stdio",
        unit: "ms",
        target: { op: "<=", ratio: 1.5 },
        floorTarget: { op: "<=", ratio: 1.2 },
      },
      {
        key: "firstStartMs",
        label: "first process/start response",
        unit: "ms",
        target: { op: "<=", ratio: 1.0 },
      },
      { key: "wsServerCpuMs", label: "server CPU until ws response", unit: "ms" },
    ],
    run: runColdStart,
  },
  {
    name: "walk",
    title: "fs/walk of a tree of 18 600 entries (300 directories of 60 files)",
    usesSharedServer: true,
    measures: [
      { key: "p50Ms", label: "sequential p50", unit: "ms", target: { op: "<=", ratio: 1.0 } },
      { key: "p99Ms", label: "sequential p99", unit: "ms" },
      { key: "serverCpuMsPerWalk", label: "server CPU per walk", unit: "ms" },
    ],
    run: runWalk,
  },
  {
    name: "http",
    title: "http/request: sequential GETs, then POSTs, to one loopback origin",
    usesSharedServer: true,
    measures: [
      { key: "reqPerS", label: "sequential GETs", unit: "req/s", target: { op: ">=", ratio: 1.5 } },
      { key: "p50Ms", label: "GET p50", unit: "ms" },
      { key: "tcpConnections", label: "TCP connections opened", unit: "conns" },
      { key: "postReqPerS", label: "sequential POSTs, JSON body", unit: "req/s" },
      { key: "postP50Ms", label: "POST p50", unit: "ms" },
    ],
    run: runHttp,
  },
];
