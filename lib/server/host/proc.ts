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

const SYMBOLS = {
  prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
  kill: { parameters: ["i32", "i32"], result: "i32" },
  waitpid: { parameters: ["i32", "buffer", "i32"], result: "i32" },
} as const;

const PR_SET_CHILD_SUBREAPER = 36;
const SIGKILL = 9;
const SIGSTOP = 19;
const WNOHANG = 1;
/** Most rounds of stop-and-collect before the tree is killed as found. */
const MAX_ROUNDS = 20;

let library: Deno.DynamicLibrary<typeof SYMBOLS> | null = null;
let subreaper = false;
/** Set once becoming the subreaper failed (no `--allow-ffi`, no glibc): it is not retried. */
let subreaperRefused = false;
/** Pids of process leaders the server spawned and still waits for (never reaped here). */
const leaders = new Set<number>();

function lib(): Deno.DynamicLibrary<typeof SYMBOLS>["symbols"] {
  library ??= Deno.dlopen("libc.so.6", SYMBOLS);
  return library.symbols;
}

/** What `/proc/<pid>/stat` says of a process. */
export interface ProcStat {
  /** Its parent. */
  ppid: number;
  /** Its process group. */
  pgrp: number;
  /** Its state letter (`Z` for a zombie). */
  state: string;
}

function readText(path: string): string {
  return fsSyscallsAvailable() ? readSmallFile(path) : Deno.readTextFileSync(path);
}

/** The `stat` of a process, `undefined` when it is gone. */
export function statOf(pid: number): ProcStat | undefined {
  let stat: string;
  try {
    stat = readText(`/proc/${pid}/stat`);
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]) };
}

/** The direct children of a process (from `/proc/<pid>/task/<tid>/children` of every thread). */
export function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = fsSyscallsAvailable()
      ? listDirectoryAt(`/proc/${pid}/task`)
      : [...Deno.readDirSync(`/proc/${pid}/task`)].map((entry) => entry.name);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    let text: string;
    try {
      text = readText(`/proc/${pid}/task/${tid}/children`);
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
  // Only the three symbols above are bound here: the first process start does not wait for the
  // descriptor calls of `fs_syscalls.ts` (about 0.3 ms of binding per symbol, 30 of them), which
  // the `/proc` reads bind when they first run.
  try {
    subreaper = Deno.permissions.querySync({ name: "ffi" }).state === "granted" &&
      lib().prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n) === 0;
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

/** Orphans re-parented to the server: its children that it did not spawn as leaders. */
function orphans(): { pid: number; stat: ProcStat }[] {
  const ownGroup = statOf(Deno.pid)?.pgrp ?? -1;
  const out: { pid: number; stat: ProcStat }[] = [];
  for (const pid of childrenOf(Deno.pid)) {
    if (leaders.has(pid)) continue;
    const stat = statOf(pid);
    // The server's own helpers (bubblewrap probes) stay in its process group.
    if (stat !== undefined && stat.pgrp !== ownGroup) out.push({ pid, stat });
  }
  return out;
}

/**
 * SIGKILLs the whole tree of a process leader: its descendants, and the
 * orphans (re-parented to the server) still in its process group, with
 * their descendants. Without the subreaper or `/proc` nothing is done (the
 * caller still kills the group).
 *
 * @param leader The leader's pid (its process group's id).
 */
export function killTree(leader: number): void {
  if (!subreaper) return;
  const stopped = new Set<number>();
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const tree = new Set([leader, ...descendantsOf(leader)]);
      for (const orphan of orphans()) {
        if (orphan.stat.pgrp !== leader) continue;
        tree.add(orphan.pid);
        for (const pid of descendantsOf(orphan.pid)) tree.add(pid);
      }
      const fresh = [...tree].filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) break;
      for (const pid of fresh) {
        lib().kill(pid, SIGSTOP);
        stopped.add(pid);
      }
    }
  } catch {
    // /proc unreadable: kill what was found.
  }
  for (const pid of stopped) lib().kill(pid, SIGKILL);
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
    const status = new Uint8Array(4);
    for (const orphan of orphans()) {
      if (orphan.stat.state === "Z") lib().waitpid(orphan.pid, status, WNOHANG);
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
