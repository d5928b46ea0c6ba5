/**
 * What the rest of the machine did while a metric ran: the share of CPU time the hypervisor stole
 * (steal), the share busy outside the bench's own process tree, both from the aggregate `cpu` line
 * of Linux's `/proc/stat`, and the 1-minute load average at both ends. Linux only: where `/proc` is
 * missing, a snapshot is `null` and the fields are left out.
 *
 * @module
 */

/** The aggregate `cpu` line of `/proc/stat`, in clock ticks (all cores together). */
export interface CpuTimes {
  /** Time in user mode (includes guest time). */
  user: number;
  /** Time in user mode at low priority (includes guest_nice time). */
  nice: number;
  /** Time in kernel mode. */
  system: number;
  /** Time idle. */
  idle: number;
  /** Time idle waiting for I/O. */
  iowait: number;
  /** Time servicing hardware interrupts. */
  irq: number;
  /** Time servicing softirqs. */
  softirq: number;
  /** Time the hypervisor ran something else while this VM wanted to run. */
  steal: number;
}

/** One reading of the host, taken at one end of a window. */
export interface HostSnapshot {
  /** The aggregate CPU counters. */
  cpu: CpuTimes;
  /** CPU ticks of the bench's process tree so far (see {@linkcode treeTicks}), `null` if unknown. */
  treeTicks: number | null;
  /** 1-minute load average, `null` if unknown. */
  loadAvg1: number | null;
}

/** What the host did over one window; a field that could not be measured is absent. */
export interface HostShare {
  /** Steal, in percent of all cores' time over the window. */
  stealPct: number;
  /**
   * Busy time (user, nice, system, irq, softirq) not spent by the bench's process tree (the harness,
   * the servers and every process they started), in percent of all cores' time. The per-process
   * counters and `/proc/stat` are kept apart by the kernel, each to a clock tick, so with nothing
   * else running this comes out near 0, now and then a point or two below.
   */
  otherBusyPct?: number;
  /** 1-minute load average at the start of the window. */
  loadAvg1Start?: number;
  /** 1-minute load average at the end of the window. */
  loadAvg1End?: number;
}

/** One process's line of `/proc/<pid>/stat`, reduced to what {@linkcode treeTicks} needs. */
export interface ProcessTicks {
  /** The process id. */
  pid: number;
  /** Its parent's id. */
  ppid: number;
  /** utime + stime + cutime + cstime: its own CPU and that of its children it has waited for. */
  ticks: number;
}

const CPU_FIELDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"] as const;

/**
 * Parses the aggregate `cpu` line of `/proc/stat`; `null` when there is none.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert";
 * import { parseCpuTimes } from "./host_load.ts";
 * const cpu = parseCpuTimes("cpu  10 0 5 80 1 0 2 2 0 0\ncpu0 5 0 2 40 0 0 1 1 0 0\n");
 * strictEqual(cpu?.steal, 2);
 * ```
 *
 * @param procStat the text of `/proc/stat`
 */
export function parseCpuTimes(procStat: string): CpuTimes | null {
  const line = procStat.split("\n").find((l) => l.startsWith("cpu "));
  if (line === undefined) return null;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  if (values.length < CPU_FIELDS.length || !values.every(Number.isFinite)) return null;
  const cpu = {} as CpuTimes;
  CPU_FIELDS.forEach((name, i) => cpu[name] = values[i]!);
  return cpu;
}

/**
 * Parses `/proc/<pid>/stat` (the command name may contain spaces and parentheses); `null` when
 * malformed.
 *
 * @param text the file's text
 */
export function parseProcessTicks(text: string): ProcessTicks | null {
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  const pid = Number(text.slice(0, text.indexOf(" ")));
  // After "(comm) ": index 0 is field 3 (state), 1 is ppid (4), 11-14 are utime, stime, cutime,
  // cstime (14-17).
  const f = text.slice(close + 2).split(" ").map(Number);
  const ticks = f[11]! + f[12]! + f[13]! + f[14]!;
  if (!Number.isInteger(pid) || !Number.isFinite(f[1]) || !Number.isFinite(ticks)) return null;
  return { pid, ppid: f[1]!, ticks };
}

/**
 * CPU ticks of `root` and all its live descendants, each counted with the children it has reaped.
 * The difference between two such sums is the tree's CPU time over the window, including
 * processes that started, or started and ended, inside it (a reaped child's time moves into its
 * parent's cutime/cstime, and a child counted at the start is counted again, whole, in its
 * parent's at the end).
 *
 * @param processes every process's ticks
 * @param root the tree's root pid
 */
export function treeTicks(processes: readonly ProcessTicks[], root: number): number {
  const children = new Map<number, ProcessTicks[]>();
  for (const p of processes) {
    const list = children.get(p.ppid);
    if (list === undefined) children.set(p.ppid, [p]);
    else list.push(p);
  }
  let sum = 0;
  const stack = processes.filter((p) => p.pid === root);
  const seen = new Set<number>();
  while (stack.length > 0) {
    const p = stack.pop()!;
    if (seen.has(p.pid)) continue;
    seen.add(p.pid);
    sum += p.ticks;
    stack.push(...children.get(p.pid) ?? []);
  }
  return sum;
}

/**
 * What the host did between two snapshots, in percent of all cores' time; `null` when no clock
 * tick passed between them.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert";
 * import { hostShare } from "./host_load.ts";
 * const cpu = { user: 0, nice: 0, system: 0, idle: 0, iowait: 0, irq: 0, softirq: 0, steal: 0 };
 * const share = hostShare(
 *   { cpu, treeTicks: 0, loadAvg1: 0.5 },
 *   { cpu: { ...cpu, user: 60, idle: 30, steal: 10 }, treeTicks: 40, loadAvg1: 0.7 },
 * );
 * deepStrictEqual(share, { stealPct: 10, otherBusyPct: 20, loadAvg1Start: 0.5, loadAvg1End: 0.7 });
 * ```
 *
 * @param before the snapshot at the start of the window
 * @param after the snapshot at its end
 */
export function hostShare(before: HostSnapshot, after: HostSnapshot): HostShare | null {
  const d = (name: keyof CpuTimes) => after.cpu[name] - before.cpu[name];
  const total = CPU_FIELDS.reduce((sum, name) => sum + d(name), 0);
  if (!(total > 0)) return null;
  const share: HostShare = { stealPct: 100 * d("steal") / total };
  if (before.treeTicks !== null && after.treeTicks !== null) {
    const busy = d("user") + d("nice") + d("system") + d("irq") + d("softirq");
    const ours = after.treeTicks - before.treeTicks;
    share.otherBusyPct = 100 * (busy - ours) / total;
  }
  if (before.loadAvg1 !== null) share.loadAvg1Start = before.loadAvg1;
  if (after.loadAvg1 !== null) share.loadAvg1End = after.loadAvg1;
  return share;
}

function readOrNull(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return null;
  }
}

/** Every process's ticks from `/proc/<pid>/stat`; `null` when `/proc` cannot be listed. */
function allProcessTicks(): ProcessTicks[] | null {
  const out: ProcessTicks[] = [];
  try {
    for (const entry of Deno.readDirSync("/proc")) {
      if (!/^\d+$/.test(entry.name)) continue;
      const text = readOrNull(`/proc/${entry.name}/stat`); // null: the process just exited
      const p = text === null ? null : parseProcessTicks(text);
      if (p !== null) out.push(p);
    }
  } catch {
    return null;
  }
  return out;
}

/**
 * Reads the host now. At the `"start"` of a window the process tree is listed before `/proc/stat`
 * is read, at its `"end"` after, so that the listing's own cost falls outside the window. `null`
 * without `/proc/stat`.
 *
 * @param at which end of the window this snapshot is
 * @param root the pid whose process tree counts as the bench's own (by default this process)
 */
export function hostSnapshot(at: "start" | "end", root: number = Deno.pid): HostSnapshot | null {
  const listTree = () => {
    const processes = allProcessTicks();
    return processes === null ? null : treeTicks(processes, root);
  };
  const treeBefore = at === "start" ? listTree() : null;
  const cpu = parseCpuTimes(readOrNull("/proc/stat") ?? "");
  if (cpu === null) return null;
  const loadAvg1 = readLoadAvg1();
  return { cpu, treeTicks: at === "start" ? treeBefore : listTree(), loadAvg1 };
}

function readLoadAvg1(): number | null {
  const m = /^\d+(\.\d+)?/.exec(readOrNull("/proc/loadavg") ?? "");
  return m === null ? null : Number(m[0]);
}
