/**
 * Starting a server under test and reading its resource usage from `/proc`.
 *
 * @module
 */

import process from "node:process";
import { stdioTransport, type Transport } from "./transport.ts";

/** A server process started by the harness (or found by its port). */
export interface ServerHandle {
  /** The OS pid of the server, or `null` when it could not be determined. */
  readonly pid: number | null;
  /** The `ws://` URL, for WebSocket servers. */
  readonly url: string | null;
  /** The stdio transport, for servers started with `--listen stdio`. */
  readonly stdio: Transport | null;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period); no-op for found servers. */
  stop(): Promise<void>;
}

/** Options for {@linkcode startServer}. */
export interface StartServerOptions {
  /**
   * Which transport the server should listen on.
   * @default {"ws"}
   */
  listen?: "ws" | "stdio";
  /**
   * Give up when the WebSocket URL has not been printed after this many milliseconds.
   * @default {30000}
   */
  timeoutMs?: number;
}

const STDERR_TAIL_CHARS = 4000;
const LIVE = new Set<ServerHandle>();

/** Stops every server this module started that is still running (for Ctrl-C cleanup). */
export async function stopAllServers(): Promise<void> {
  await Promise.all([...LIVE].map((h) => h.stop()));
}

/**
 * Starts `command --listen <ws://127.0.0.1:0 | stdio>` through `/bin/sh -c exec …` (so the pid
 * is the server's own) with cwd `/tmp`, and waits for the URL on the first stdout line.
 *
 * @param command a shell command line, e.g. `deno run --allow-all main.ts`
 * @param options see {@linkcode StartServerOptions}
 */
export async function startServer(
  command: string,
  options: StartServerOptions = {},
): Promise<ServerHandle> {
  const listen = options.listen ?? "ws";
  const env: Record<string, string> = {};
  // The reference sends `http/request` through another client (its route-aware one, the one
  // Codex gets) only when its CODEX_HOME exists, so the directory is made either way.
  const given = Deno.env.get("CODEX_HOME");
  const home = given ?? `${Deno.env.get("TMPDIR") ?? "/tmp"}/exec-server-bench-home`;
  await Deno.mkdir(home, { recursive: true });
  if (given === undefined) env.CODEX_HOME = home;
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", `exec ${command} --listen ${listen === "ws" ? "ws://127.0.0.1:0" : "stdio"}`],
    cwd: "/tmp",
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderrTail = "";
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      write(text) {
        stderrTail = (stderrTail + text).slice(-STDERR_TAIL_CHARS);
      },
    }),
  ).catch(() => {});
  let handle: ServerHandle | null = null;
  const stop = async () => {
    if (handle !== null) LIVE.delete(handle);
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, 2000);
    await child.status;
    clearTimeout(timer);
    await stderrDone;
  };
  if (listen === "stdio") {
    handle = { pid: child.pid, url: null, stdio: stdioTransport(child), stop };
    LIVE.add(handle);
    return handle;
  }
  const timeoutMs = options.timeoutMs ?? 30_000;
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let firstLine = "";
  const deadline = Date.now() + timeoutMs;
  const timer = setTimeout(() => reader.cancel().catch(() => {}), timeoutMs);
  try {
    while (!firstLine.includes("\n") && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      firstLine += value;
    }
  } finally {
    clearTimeout(timer);
  }
  const url = firstLine.split("\n")[0]!.trim();
  if (!url.startsWith("ws://")) {
    await stop();
    throw new Error(
      `Cannot start server "${command}": expected a ws:// URL on stdout, got "${url}"` +
        (stderrTail ? `: stderr: ${stderrTail.trim()}` : ""),
    );
  }
  // Keep draining stdout so the server can never block on it.
  (async () => {
    try {
      for (let i = 0; i < 1e9; i++) if ((await reader.read()).done) break;
    } catch { /* server gone */ }
  })();
  handle = { pid: child.pid, url, stdio: null, stop };
  LIVE.add(handle);
  return handle;
}

/**
 * Describes an already running server at `url`; its pid is looked up from the listening port
 * (only works for servers on this machine that this user can inspect).
 *
 * @param url the server's `ws://` URL
 */
export function existingServer(url: string): ServerHandle {
  return {
    pid: findListeningPid(Number(new URL(url).port)),
    url,
    stdio: null,
    stop: async () => {},
  };
}

/**
 * Finds the pid that owns a listening TCP socket on `port` via `/proc/net/tcp{,6}` and
 * `/proc/<pid>/fd`; `null` when not found.
 *
 * @param port the TCP port
 */
export function findListeningPid(port: number): number | null {
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = Deno.readTextFileSync(file);
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || cols[3] !== "0A") continue; // 0A = LISTEN
      const localPort = parseInt(cols[1]!.split(":")[1]!, 16);
      if (localPort === port) inodes.add(cols[9]!);
    }
  }
  if (inodes.size === 0) return null;
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      for (const fd of Deno.readDirSync(`/proc/${entry.name}/fd`)) {
        const target = Deno.readLinkSync(`/proc/${entry.name}/fd/${fd.name}`);
        const m = /^socket:\[(\d+)\]$/.exec(target);
        if (m && inodes.has(m[1]!)) return Number(entry.name);
      }
    } catch { /* process gone or not ours */ }
  }
  return null;
}

/**
 * Resident set size of `pid` in KiB (`VmRSS` in `/proc/<pid>/status`), `NaN` if unknown.
 * @param pid the process id
 */
export function rssKib(pid: number | null): number {
  if (pid === null) return NaN;
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU time (user + system, all threads) consumed by `pid` itself in milliseconds, from
 * `/proc/<pid>/stat` (10 ms resolution); excludes its children. `NaN` if unknown.
 *
 * @param pid the process id
 */
export function cpuMs(pid: number | null): number {
  if (pid === null) return NaN;
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // Fields after "(comm)": index 0 is field 3 (state), so utime (14) is 11 and stime (15) is 12.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 1000 / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/**
 * CPU time of the live threads of `pid` in milliseconds with nanosecond resolution (sum of
 * `/proc/<pid>/task/<tid>/schedstat`). Threads that already exited are missing, so use it only
 * for short-lived measurements such as cold start. `NaN` if unknown.
 *
 * @param pid the process id
 */
export function liveThreadCpuMs(pid: number | null): number {
  if (pid === null) return NaN;
  try {
    let ns = 0;
    for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(
          Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/schedstat`).split(" ")[0],
        );
      } catch { /* thread exited meanwhile */ }
    }
    return ns / 1e6;
  } catch {
    return NaN;
  }
}

/** CPU time (user + system, all threads) the harness process itself has used, in milliseconds. */
export function harnessCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
