/**
 * Reliability test helpers that read `/proc` (Linux): process trees, liveness
 * that survives pid reuse, open file descriptors and resident memory.
 *
 * A process is identified by its pid *and* its start time (field 22 of
 * `/proc/<pid>/stat`), so a pid reused by an unrelated process is not
 * mistaken for a survivor. Zombies (`Z`) and dead entries (`X`) count as dead.
 *
 * @module
 */

import { WATCHDOG_ARG0 } from "../../lib/server/host/watchdog.ts";

/** One process, identified so that pid reuse is detected. */
export interface ProcId {
  /** The pid. */
  pid: number;
  /** Start time in clock ticks since boot (`/proc/<pid>/stat` field 22). */
  start: number;
  /** The command name (`comm`), for messages. */
  comm: string;
}

/** The fields of `/proc/<pid>/stat` these tests use. */
export interface ProcStat extends ProcId {
  /** One-letter state: R, S, D, Z, T, X, ... */
  state: string;
  /** Parent pid. */
  ppid: number;
  /** Process group id. */
  pgid: number;
  /** Session id. */
  sid: number;
}

/** Reads `/proc/<pid>/stat`; `undefined` when the process does not exist. */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return undefined;
  }
  // comm is in parentheses and may itself contain spaces or parentheses.
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  const comm = text.slice(open + 1, close);
  const rest = text.slice(close + 2).split(" ");
  // rest[0] is field 3 (state); field n is rest[n - 3].
  return {
    pid,
    comm,
    state: rest[0]!,
    ppid: Number(rest[1]),
    pgid: Number(rest[2]),
    sid: Number(rest[3]),
    start: Number(rest[19]),
  };
}

/** Every process on the machine (a snapshot of `/proc`). */
export function allProcesses(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const stat = procStat(Number(entry.name));
    if (stat) out.push(stat);
  }
  return out;
}

/** Whether a process is a server's watchdog (`lib/server/host/watchdog.ts`), by its `argv[0]`. */
export function isWatchdog(proc: ProcStat): boolean {
  if (proc.comm !== "sh") return false;
  try {
    return Deno.readTextFileSync(`/proc/${proc.pid}/cmdline`).split("\0")[0] === WATCHDOG_ARG0;
  } catch {
    return false;
  }
}

/**
 * Every live descendant of `pid` (children, grandchildren, ...), found by
 * following parent links in one `/proc` snapshot. Zombies are left out, and
 * so is the server's watchdog (its own helper, not one of its processes).
 */
export function descendants(pid: number): ProcStat[] {
  const all = allProcesses();
  const byParent = new Map<number, ProcStat[]>();
  for (const p of all) {
    const list = byParent.get(p.ppid) ?? [];
    list.push(p);
    byParent.set(p.ppid, list);
  }
  const out: ProcStat[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of byParent.get(queue.shift()!) ?? []) {
      if (child.state === "Z" || child.state === "X" || isWatchdog(child)) continue;
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/** True when this exact process (same pid and start time) exists and is not a zombie. */
export function isAlive(proc: ProcId): boolean {
  const now = procStat(proc.pid);
  return now !== undefined && now.start === proc.start && now.state !== "Z" && now.state !== "X";
}

/** The subset of `procs` still alive. */
export function survivors<T extends ProcId>(procs: readonly T[]): T[] {
  return procs.filter(isAlive);
}

/** Number of open file descriptors of `pid` (entries of `/proc/<pid>/fd`). */
export function fdCount(pid: number): number {
  let n = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
  return n;
}

/** The targets of `pid`'s open descriptors (`socket:[…]`, `pipe:[…]`, paths), for messages. */
export function fdTargets(pid: number): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(`/proc/${pid}/fd`)) {
    try {
      out.push(`${entry.name} -> ${Deno.readLinkSync(`/proc/${pid}/fd/${entry.name}`)}`);
    } catch {
      // Closed while listing.
    }
  }
  return out;
}

/** Resident set size of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`). */
export function rssKib(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]);
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `condition` every `intervalMs` until it returns true or `timeoutMs`
 * passes (a bounded wait that avoids hangs, never a timing assertion);
 * returns whether it held.
 */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  intervalMs = 25,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await sleep(intervalMs);
  }
  return await condition();
}

/** Formats processes for assertion messages. */
export function describeProcs(procs: readonly ProcStat[] | readonly ProcId[]): string {
  return procs.map((p) => `${p.pid}(${p.comm}${"state" in p ? ` ${p.state}` : ""})`).join(", ");
}
