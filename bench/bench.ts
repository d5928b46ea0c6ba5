/**
 * `deno task bench`: benchmarks an exec-server over WebSocket (and stdio where it makes sense),
 * optionally against a reference server in the same, interleaved run.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { dirname, relative } from "node:path";
import { fileURLToPath as fromFileUrl } from "node:url";
import {
  type MeasureDef,
  type MetricContext,
  type MetricDef,
  METRICS as CORE_METRICS,
} from "./metrics.ts";
import { LOAD_METRICS } from "./load.ts";
import { RpcClient } from "./rpc_client.ts";
import {
  cpuMs,
  existingServer,
  harnessCpuMs,
  type ServerHandle,
  startServer,
  stopAllServers,
} from "./server_process.ts";
import { formatNumber, markdownTable, summarize, type Summary } from "./stats.ts";
import { type HostShare, hostShare, hostSnapshot } from "./host_load.ts";
import { connectBuiltinWebSocket, connectWebSocket, type Transport } from "./transport.ts";

/** Every metric, in run order. */
const METRICS: readonly MetricDef[] = [...CORE_METRICS, ...LOAD_METRICS];

const HELP = `Usage: deno task bench [options]

Options:
  --server "<command>"     server under test (default: deno run --allow-all <repo>/main.ts);
                           "--listen ws://127.0.0.1:0" (or "--listen stdio") is appended and the
                           server must print its ws:// URL as the first stdout line
  --reference "<command>"  second server, run in the same session with alternating order
  --floor "<command>"      a third, e.g. "deno run --allow-all bench/floor_server.ts": the order
                           rotates over the three, and a second table sets us against it
  --url ws://...           benchmark an already running server instead of starting one
                           (its pid is looked up from the port for RSS/CPU; no cold start)
  --reps N                 repetitions per metric and server (default 3)
  --only a,b               run only these metrics: ${METRICS.map((m) => m.name).join(", ")}
  --quick                  smaller sizes, for a smoke run
  --client raw|builtin     WebSocket client: raw (own, TCP_NODELAY, default) or Deno's WebSocket
  --out PATH               where to write the JSON results (default bench/results/latest.json)
  --timeout SECONDS        per metric run (default 300, quick 60)
  -h, --help               show this help
`;

/** One server under test. */
interface Subject {
  label: string;
  command: string | null;
  url: string | null;
  handle: ServerHandle | null;
}

/** Measurements of one metric run. */
interface RunRecord {
  values: Record<string, number>;
  wallMs: number;
  serverCpuMs: number;
  clientCpuMs: number;
  /** The host over the same window as `wallMs`; absent without Linux's `/proc/stat`. */
  host?: HostShare;
  error?: string;
}

const DEFAULT_OUT = fromFileUrl(new URL("./results/latest.json", import.meta.url));
const DEFAULT_SERVER = `deno run --allow-all ${
  fromFileUrl(new URL("../main.ts", import.meta.url))
}`;

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function fail(message: string): never {
  console.error(`error: ${message}`);
  Deno.exit(2);
}

/** Measures what the client itself spends per response and per MiB of process/output. */
function calibrateClient(): { usPerResponse: number; msPerOutputMib: number } {
  const client = new RpcClient({
    send() {},
    onMessage() {},
    closed: new Promise(() => {}),
    close() {},
  });
  const n = 50_000;
  for (let i = 0; i < 5000; i++) client.handle(`{"id":${i},"result":{}}`); // warm-up
  let t0 = harnessCpuMs();
  for (let i = 0; i < n; i++) {
    const p = client.call("fs/getMetadata", { path: "file:///tmp" });
    client.handle(
      `{"id":${i + 1},"result":{"isDirectory":true,"isFile":false,"isSymlink":false,` +
        `"size":4096,"createdAtMs":0,"modifiedAtMs":1764474000000}}`,
    );
    p.catch(() => {});
  }
  const usPerResponse = (harnessCpuMs() - t0) * 1000 / n;
  let bytes = 0;
  client.watch("p", { onOutput: (chunk) => void (bytes += chunk.length) });
  // One 8 KiB chunk (10,924 base64 characters), as the frame payload arrives from the socket.
  const frame = new TextEncoder().encode(
    `{"method":"process/output","params":{"processId":"p","seq":12345,"stream":"stdout",` +
      `"chunk":"${"A".repeat(10924)}"}}`,
  );
  const decoder = new TextDecoder();
  const messages = 64 * 1024 * 1024 / 8192;
  for (let i = 0; i < messages / 4; i++) client.handle(decoder.decode(frame)); // warm-up
  t0 = harnessCpuMs();
  // Includes the UTF-8 decode the transport performs per frame.
  for (let i = 0; i < messages; i++) client.handle(decoder.decode(frame));
  const msPerOutputMib = (harnessCpuMs() - t0) / 64;
  return { usPerResponse, msPerOutputMib };
}

async function ensureServer(subject: Subject, connectOk: boolean): Promise<ServerHandle> {
  if (subject.handle !== null && connectOk) return subject.handle;
  if (subject.handle !== null) await subject.handle.stop();
  subject.handle = subject.url !== null
    ? existingServer(subject.url)
    : await startServer(subject.command!);
  return subject.handle;
}

async function runOnce(
  metric: MetricDef,
  subject: Subject,
  options: { quick: boolean; timeoutMs: number; connect: (url: string) => Promise<Transport> },
): Promise<RunRecord> {
  const server = metric.usesSharedServer
    ? await ensureServer(subject, true)
    : subject.handle ?? existingServer(subject.url ?? "ws://127.0.0.1:1");
  const ctx: MetricContext = {
    server,
    command: subject.command,
    quick: options.quick,
    connect: options.connect,
    deadline: Date.now() + options.timeoutMs,
    reference: subject.label === "reference",
  };
  const serverCpu0 = cpuMs(server.pid);
  const host0 = hostSnapshot("start");
  const clientCpu0 = harnessCpuMs();
  const t0 = performance.now();
  let values: Record<string, number> = {};
  let error: string | undefined;
  try {
    values = await metric.run(ctx);
  } catch (err) {
    error = errorMessage(err);
  }
  // The window ends here, for the wall time, the harness's CPU and the host alike.
  const wallMs = performance.now() - t0;
  const clientCpuMs = harnessCpuMs() - clientCpu0;
  const host1 = host0 === null ? null : hostSnapshot("end");
  const host = host0 === null || host1 === null ? null : hostShare(host0, host1);
  const measured = { wallMs, clientCpuMs, ...(host === null ? {} : { host }) };
  if (error === undefined) {
    const serverCpuMs = "serverCpuMs" in values
      ? values.serverCpuMs!
      : cpuMs(server.pid) - serverCpu0;
    return { values, serverCpuMs, ...measured };
  }
  console.error(`  ${subject.label} ${metric.name} failed: ${error}`);
  if (metric.usesSharedServer && subject.command !== null) {
    // The server may be wedged or dead: restart it for the next run.
    await ensureServer(subject, false).catch(() => {});
  }
  return { values: {}, serverCpuMs: NaN, ...measured, error };
}

/** Whether a ratio meets a target. */
export function meets(ratio: number, target: { op: "<=" | ">="; ratio: number }): boolean {
  return target.op === "<=" ? ratio <= target.ratio : ratio >= target.ratio;
}

/**
 * The worst of the repetitions' ratios (us and the other server paired in run order) for the
 * target's direction: a target is met only when every repetition meets it. NaN when a
 * repetition has no value.
 */
export function worstRepetitionRatio(
  ours: readonly Pick<RunRecord, "values">[],
  theirs: readonly Pick<RunRecord, "values">[],
  key: string,
  target: { op: "<=" | ">="; ratio: number },
): number {
  const ratios: number[] = [];
  for (let i = 0; i < Math.min(ours.length, theirs.length); i++) {
    const ratio = (ours[i]!.values[key] ?? NaN) / (theirs[i]!.values[key] ?? NaN);
    if (!Number.isFinite(ratio)) return NaN;
    ratios.push(ratio);
  }
  if (ratios.length === 0) return NaN;
  return target.op === "<=" ? Math.max(...ratios) : Math.min(...ratios);
}

type Results = Record<string, Record<string, RunRecord[]>>;

function summaryOf(runs: RunRecord[], key: string): Summary {
  return summarize(runs.map((r) => r.values[key] ?? NaN));
}

function serverTable(label: string, metrics: readonly MetricDef[], results: Results): string {
  const rows: string[][] = [];
  for (const metric of metrics) {
    const runs = results[label]![metric.name]!;
    for (const m of metric.measures) {
      const s = summaryOf(runs, m.key);
      rows.push([metric.name, m.label, m.unit, ...[s.min, s.median, s.max].map(formatNumber)]);
    }
    const cpu = summarize(runs.map((r) => r.serverCpuMs));
    const client = summarize(runs.map((r) => r.clientCpuMs));
    const wall = summarize(runs.map((r) => r.wallMs));
    rows.push([metric.name, "server CPU (whole metric)", "ms", ...fmt3(cpu)]);
    rows.push([metric.name, "client CPU (whole metric)", "ms", ...fmt3(client)]);
    rows.push([metric.name, "wall time (whole metric)", "ms", ...fmt3(wall)]);
    const share = summarize(runs.map((r) => 100 * r.clientCpuMs / r.wallMs));
    rows.push([metric.name, "client CPU / wall time", "%", ...fmt3(share)]);
    const errors = runs.filter((r) => r.error).length;
    if (errors > 0) rows.push([metric.name, "failed repetitions", "", String(errors), "", ""]);
  }
  return markdownTable(["metric", "measure", "unit", "min", "median", "max"], rows);
}

/** A repetition's host figures, e.g. `steal 0.4 %, other busy 3.1 %, load 0.52→0.61`. */
function hostLine(host: HostShare | undefined): string {
  if (host === undefined) return "host: not measured (no /proc/stat)";
  const parts = [`steal ${host.stealPct.toFixed(1)} %`];
  if (host.otherBusyPct !== undefined) parts.push(`other busy ${host.otherBusyPct.toFixed(1)} %`);
  parts.push(`load ${loadCell(host)}`);
  return `host: ${parts.join(", ")}`;
}

function loadCell(host: HostShare | undefined): string {
  const f = (x: number | undefined) => x === undefined ? "—" : x.toFixed(2);
  return `${f(host?.loadAvg1Start)}→${f(host?.loadAvg1End)}`;
}

/**
 * One row per metric and server: steal, other busy share and load average of each repetition in
 * run order, so a repetition that stands out can be checked against what the host did.
 */
function hostTable(subjects: readonly Subject[], metrics: readonly MetricDef[], results: Results) {
  const pct = (x: number | undefined) => x === undefined ? "—" : x.toFixed(1);
  const rows: string[][] = [];
  for (const metric of metrics) {
    for (const s of subjects) {
      const runs = results[s.label]![metric.name]!;
      rows.push([
        metric.name,
        s.label,
        runs.map((r) => pct(r.host?.stealPct)).join(" / "),
        runs.map((r) => pct(r.host?.otherBusyPct)).join(" / "),
        runs.map((r) => loadCell(r.host)).join(" / "),
      ]);
    }
  }
  return markdownTable(
    ["metric", "server", "steal % per rep", "other busy % per rep", "load average (1 min) per rep"],
    rows,
  );
}

function fmt3(s: Summary): string[] {
  return [s.min, s.median, s.max].map(formatNumber);
}

/**
 * Our medians against another server's, per measure; the targets (set against the reference)
 * are judged only in the table against the reference.
 */
function comparisonTable(
  us: string,
  ref: string,
  metrics: readonly MetricDef[],
  results: Results,
): { table: string; rows: Record<string, unknown>[] } {
  const targetOf = (measure: MeasureDef) =>
    ref === "reference" ? measure.target : ref === "floor" ? measure.floorTarget : undefined;
  const rows: string[][] = [];
  const json: Record<string, unknown>[] = [];
  for (const metric of metrics) {
    const measures = [
      ...metric.measures,
      { key: "__server_cpu", label: "server CPU (whole metric)", unit: "ms", target: undefined },
    ];
    for (const measure of measures) {
      const m = { ...measure, target: targetOf(measure) };
      const pick = (label: string) =>
        m.key === "__server_cpu"
          ? summarize(results[label]![metric.name]!.map((r) => r.serverCpuMs)).median
          : summaryOf(results[label]![metric.name]!, m.key).median;
      const a = pick(us);
      const b = pick(ref);
      const ratio = a / b;
      const target = m.target ? `${m.target.op} ${m.target.ratio}` : "";
      const worst = m.target
        ? worstRepetitionRatio(
          results[us]![metric.name]!,
          results[ref]![metric.name]!,
          m.key,
          m.target,
        )
        : NaN;
      const met = !m.target
        ? ""
        : !Number.isFinite(worst)
        ? "—"
        : meets(worst, m.target)
        ? "yes"
        : "**no**";
      rows.push([
        metric.name,
        m.label,
        m.unit,
        formatNumber(a),
        formatNumber(b),
        Number.isFinite(ratio) ? ratio.toFixed(3) : "—",
        Number.isFinite(worst) ? worst.toFixed(3) : "",
        target,
        met,
      ]);
      json.push({
        metric: metric.name,
        measure: m.key === "__server_cpu" ? "serverCpuMs" : m.key,
        unit: m.unit,
        [us]: a,
        [ref]: b,
        ratio,
        worstRepetitionRatio: Number.isFinite(worst) ? worst : null,
        target: m.target ?? null,
        met: m.target && Number.isFinite(worst) ? met === "yes" : null,
      });
    }
  }
  return {
    table: markdownTable(
      [
        "metric",
        "measure",
        "unit",
        `${us} median`,
        `${ref} median`,
        "ratio",
        "worst repetition",
        "target",
        "met (every repetition)",
      ],
      rows,
    ),
    rows: json,
  };
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      options: {
        server: { type: "string" },
        reference: { type: "string" },
        floor: { type: "string" },
        url: { type: "string" },
        reps: { type: "string", default: "3" },
        only: { type: "string" },
        quick: { type: "boolean", default: false },
        client: { type: "string", default: "raw" },
        out: { type: "string", default: DEFAULT_OUT },
        timeout: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    fail(errorMessage(err));
  }
  const args = parsed.values;
  if (args.help) {
    console.log(HELP);
    return;
  }
  const reps = Number(args.reps);
  if (!Number.isInteger(reps) || reps < 1 || reps > 100) fail(`Invalid --reps "${args.reps}"`);
  const only = args.only?.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = only?.filter((n) => !METRICS.some((m) => m.name === n)) ?? [];
  if (unknown.length > 0) fail(`Unknown metric "${unknown[0]}"`);
  const metrics = METRICS.filter((m) => only === undefined || only.includes(m.name));
  if (args.client !== "raw" && args.client !== "builtin") fail(`Invalid --client "${args.client}"`);
  const connect = args.client === "raw"
    ? (url: string) => connectWebSocket(url)
    : (url: string) => connectBuiltinWebSocket(url);
  const timeoutMs = Number(args.timeout ?? (args.quick ? 60 : 300)) * 1000;
  if (!(timeoutMs > 0)) fail(`Invalid --timeout "${args.timeout}"`);
  if (args.url !== undefined && args.server !== undefined) {
    fail("Cannot use --url together with --server");
  }
  if (args.url !== undefined && !args.url.startsWith("ws://127.0.0.1:")) {
    fail(`Refusing --url "${args.url}": only ws://127.0.0.1:<port> is allowed`);
  }

  const subjects: Subject[] = [{
    label: "us",
    command: args.url !== undefined ? null : args.server ?? DEFAULT_SERVER,
    url: args.url ?? null,
    handle: null,
  }];
  if (args.reference !== undefined) {
    subjects.push({ label: "reference", command: args.reference, url: null, handle: null });
  }
  if (args.floor !== undefined) {
    subjects.push({ label: "floor", command: args.floor, url: null, handle: null });
  }

  const calibration = calibrateClient();
  console.log(
    `client cost (offline): ${calibration.usPerResponse.toFixed(2)} µs CPU per response, ` +
      `${calibration.msPerOutputMib.toFixed(2)} ms CPU per MiB of process/output`,
  );

  Deno.addSignalListener("SIGINT", () => {
    console.error("interrupted: stopping servers");
    stopAllServers().finally(() => Deno.exit(130));
  });
  const results: Results = {};
  for (const s of subjects) results[s.label] = Object.fromEntries(metrics.map((m) => [m.name, []]));
  try {
    if (metrics.some((m) => m.usesSharedServer)) {
      for (const s of subjects) {
        const h = await ensureServer(s, true).catch((err) => fail(errorMessage(err)));
        console.log(`${s.label}: ${s.command ?? s.url} -> ${h.url} (pid ${h.pid ?? "unknown"})`);
      }
    }
    for (const metric of metrics) {
      for (let rep = 0; rep < reps; rep++) {
        // Two servers alternate which goes first; three rotate.
        const order = subjects.length === 2 && rep % 2 === 1
          ? [...subjects].reverse()
          : subjects.map((_, i) => subjects[(i + rep) % subjects.length]!);
        for (const s of order) {
          console.log(`[${metric.name}] rep ${rep + 1}/${reps} ${s.label}`);
          const run = await runOnce(metric, s, { quick: args.quick, timeoutMs, connect });
          results[s.label]![metric.name]!.push(run);
          console.log(`  ${hostLine(run.host)}`);
        }
      }
    }
  } finally {
    for (const s of subjects) await s.handle?.stop();
  }

  const report: string[] = [];
  for (const s of subjects) {
    report.push(`\n### ${s.label}: \`${s.command ?? s.url}\`\n`);
    report.push(serverTable(s.label, metrics, results));
  }
  const measured = subjects.some((s) =>
    metrics.some((m) => results[s.label]![m.name]!.some((r) => r.host))
  );
  if (measured) {
    report.push(
      "\n### Host during each repetition (share of all cores' time, /proc/stat; same window as the " +
        "wall time)\n",
    );
    report.push(hostTable(subjects, metrics, results));
  }
  const comparisons: Record<string, Record<string, unknown>[]> = {};
  for (const other of subjects.slice(1)) {
    const c = comparisonTable("us", other.label, metrics, results);
    comparisons[other.label] = c.rows;
    report.push(`\n### us / ${other.label} (medians over ${reps} interleaved repetitions)\n`);
    report.push(c.table);
  }
  console.log(report.join("\n"));

  const out = {
    date: new Date().toISOString(),
    host: { cpus: navigator.hardwareConcurrency, os: Deno.build.os, deno: Deno.version.deno },
    options: { reps, quick: args.quick, client: args.client, only: only ?? null },
    client: calibration,
    servers: subjects.map((s) => ({
      label: s.label,
      command: s.command,
      url: s.url,
      metrics: Object.fromEntries(metrics.map((m) => {
        const runs = results[s.label]![m.name]!;
        const measures = Object.fromEntries(
          m.measures.map((d) => [d.key, { unit: d.unit, ...summaryOf(runs, d.key) }]),
        );
        return [m.name, { measures, runs }];
      })),
    })),
    comparison: comparisons.reference ?? comparisons.floor ?? null,
    ...(comparisons.floor && comparisons.reference ? { floorComparison: comparisons.floor } : {}),
  };
  await Deno.mkdir(dirname(args.out!), { recursive: true });
  await Deno.writeTextFile(args.out!, JSON.stringify(out, null, 2) + "\n");
  console.log(`\nresults written to ${relative(Deno.cwd(), args.out!)}`);
}

if (import.meta.main) {
  await main();
}
