/**
 * The server's view of its descendants, from `/proc` (read through FFI:
 * Deno reads `/proc` only with `--allow-all`), and the child subreaper that
 * keeps every orphan of a process tree among them.
 *
 * With `PR_SET_CHILD_SUBREAPER` set on the server, a process whose parent
 * dies (a double fork, a `setsid` daemon) is re-parented to the server
 * instead of `init`, so it stays a descendant the server can find and end.
 * {@linkcode killTree} stops a tree with SIGSTOP (a stopped process cannot
 * fork), collects it again until nothing new appears, then SIGKILLs all of
 * it; {@linkcode reapOrphans} collects the exit status of orphans that
 * ended, so none stays a zombie.
 *
 * @module
 */

import { fsSyscallsAvailable, listDirectoryAt, readSmallFile } from "./fs_syscalls.ts";
import { killProcess, processControl, waitChild } from "./libc.ts";

const PR_SET_CHILD_SUBREAPER = 36;
const SIGKILL = 9;
const SIGSTOP = 19;
const WNOHANG = 1;
/** Most rounds of stop-and-collect before the tree is killed as found. */
const MAX_ROUNDS = 20;

let subreaper = false;
/** Set once becoming the subreaper failed (no `--allow-ffi`, no glibc): it is not retried. */
let subreaperRefused = false;
/** Pids of process leaders the server spawned and still waits for (never reaped here). */
const leaders = new Set<number>();
/** Pids of the server's own helpers (the watchdog): never orphans, never reaped here. */
const helpers = new Set<number>();

/** What `/proc/<pid>/stat` says of a process. */
export interface ProcStat {
  /** Its parent. */
  ppid: number;
  /** Its process group. */
  pgrp: number;
  /** Its state letter (`Z` for a zombie). */
  state: string;
  /** When it started, in clock ticks after boot (field 22): with the pid, names one process. */
  starttime: number;
}

/**
 * Reads a small `/proc` file: through FFI when it is granted (Deno reads
 * `/proc` only with `--allow-all`), else with Deno.
 *
 * @param path The file, e.g. `/proc/1/stat`.
 */
export function readProcText(path: string): string {
  return fsSyscallsAvailable() ? readSmallFile(path) : Deno.readTextFileSync(path);
}

/**
 * Lists a `/proc` directory, the same way as {@linkcode readProcText}.
 *
 * @param path The directory, e.g. `/proc/1/fd`.
 */
export function listProc(path: string): string[] {
  return fsSyscallsAvailable()
    ? listDirectoryAt(path)
    : [...Deno.readDirSync(path)].map((entry) => entry.name);
}

/** A file of `/proc/<pid>/`, `undefined` when the process is gone. */
function procFile(pid: number, name: string): string | undefined {
  try {
    return readProcText(`/proc/${pid}/${name}`);
  } catch {
    return undefined;
  }
}

/** The `stat` of a process, `undefined` when it is gone. */
export function statOf(pid: number): ProcStat | undefined {
  const stat = procFile(pid, "stat");
  if (stat === undefined) return undefined;
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return {
    state: fields[0]!,
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    starttime: Number(fields[19]),
  };
}

/**
 * The soft `RLIMIT_RTTIME` of a process, as `/proc/<pid>/limits` shows it
 * (the mark of `spawn_mark.ts`); `undefined` when unlimited or gone.
 */
export function rtTimeLimitOf(pid: number): bigint | undefined {
  const line = procFile(pid, "limits")?.split("\n").find((row) =>
    row.startsWith("Max realtime timeout")
  );
  const soft = line?.slice("Max realtime timeout".length).trim().split(/\s+/)[0];
  return soft === undefined || !/^\d+$/.test(soft) ? undefined : BigInt(soft);
}

/** The direct children of a process (from `/proc/<pid>/task/<tid>/children` of every thread). */
export function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = listProc(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    let text: string;
    try {
      text = readProcText(`/proc/${pid}/task/${tid}/children`);
    } catch {
      continue;
    }
    for (const child of text.split(" ")) if (child !== "") out.push(Number(child));
  }
  return out;
}

/** Every descendant of a process (not the process itself). */
export function descendantsOf(root: number): number[] {
  const out: number[] = [];
  const queue = [root];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of childrenOf(pid)) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/**
 * Makes the server a child subreaper (once; needs `--allow-ffi` on Linux).
 *
 * @returns Whether it is one.
 */
export function becomeSubreaper(): boolean {
  if (subreaper) return true;
  if (subreaperRefused || Deno.build.os !== "linux") return false;
  // Through the spawn's bindings of `libc.ts`: the first process start does not wait for the
  // descriptor calls of `fs_syscalls.ts` (2.1-2.7 ms to bind), which the `/proc`
  // reads bind when they first run, nor for the two symbols above.
  try {
    subreaper = Deno.permissions.querySync({ name: "ffi" }).state === "granted" &&
      processControl(PR_SET_CHILD_SUBREAPER, 1n) === 0;
  } catch {
    subreaper = false;
  }
  subreaperRefused = !subreaper;
  return subreaper;
}

/**
 * Records a process leader the server spawned (its exit is collected by
 * its spawner, never by {@linkcode reapOrphans}); call the returned
 * function once that exit was collected.
 *
 * @param pid The leader's pid.
 */
export function trackLeader(pid: number): () => void {
  leaders.add(pid);
  return () => {
    leaders.delete(pid);
  };
}

/**
 * Records a child the server runs for itself (the watchdog): never taken
 * for an orphan, never reaped by {@linkcode reapOrphans}; call the returned
 * function once its exit was collected.
 *
 * @param pid The helper's pid.
 */
export function trackHelper(pid: number): () => void {
  helpers.add(pid);
  return () => {
    helpers.delete(pid);
  };
}

/** The spawned process leaders whose exit has not been collected yet. */
export function leaderPids(): number[] {
  return [...leaders];
}

/**
 * Orphans re-parented to the server: its children that it did not spawn as
 * leaders or helpers, outside its own process group.
 *
 * @returns Each orphan's pid and stat.
 */
export function orphans(): { pid: number; stat: ProcStat }[] {
  const ownGroup = statOf(Deno.pid)?.pgrp ?? -1;
  const out: { pid: number; stat: ProcStat }[] = [];
  for (const pid of childrenOf(Deno.pid)) {
    if (leaders.has(pid) || helpers.has(pid)) continue;
    const stat = statOf(pid);
    // The server's own helpers (bubblewrap probes) stay in its process group.
    if (stat !== undefined && stat.pgrp !== ownGroup) out.push({ pid, stat });
  }
  return out;
}

/**
 * SIGKILLs the whole tree of a process leader: its descendants, and the
 * orphans (re-parented to the server) still in its process group or
 * carrying its spawn mark (a `setsid` daemon of a double fork), with their
 * descendants. Without the subreaper or `/proc` nothing is done (the caller
 * still kills the group).
 *
 * @param leader The leader's pid (its process group's id).
 * @param mark The leader's spawn mark (`spawn_mark.ts`), if it has one.
 */
export function killTree(leader: number, mark?: bigint): void {
  if (!subreaper) return;
  const stopped = new Set<number>();
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const tree = new Set([leader, ...descendantsOf(leader)]);
      for (const orphan of orphans()) {
        const own = orphan.stat.pgrp === leader ||
          (mark !== undefined && rtTimeLimitOf(orphan.pid) === mark);
        if (!own) continue;
        tree.add(orphan.pid);
        for (const pid of descendantsOf(orphan.pid)) tree.add(pid);
      }
      const fresh = [...tree].filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) break;
      for (const pid of fresh) {
        killProcess(pid, SIGSTOP);
        stopped.add(pid);
      }
    }
  } catch {
    // /proc unreadable: kill what was found.
  }
  for (const pid of stopped) killProcess(pid, SIGKILL);
  reapSoon();
}

/** SIGKILLs every orphan re-parented to the server and its descendants (server shutdown). */
export function killOrphans(): void {
  if (!subreaper) return;
  try {
    for (const orphan of orphans()) killTree(orphan.pid);
  } catch {
    // /proc unreadable: nothing more to do.
  }
}

/** Collects the exit status of orphans that ended (zombies re-parented to the server). */
export function reapOrphans(): void {
  if (!subreaper) return;
  try {
    const status = new Int32Array(1);
    for (const orphan of orphans()) {
      if (orphan.stat.state === "Z") waitChild(orphan.pid, status, WNOHANG);
    }
  } catch {
    // /proc unreadable: try again later.
  }
}

let reapPending = false;

/** {@linkcode reapOrphans} once within the next 100 ms (calls in between are merged). */
export function reapSoon(): void {
  if (!subreaper || reapPending) return;
  reapPending = true;
  const timer = setTimeout(() => {
    reapPending = false;
    reapOrphans();
  }, 100);
  Deno.unrefTimer(timer);
}
