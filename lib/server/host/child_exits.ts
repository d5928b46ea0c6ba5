/**
 * Exit statuses of children spawned through FFI (`posix_spawn.ts`), collected
 * on `SIGCHLD`: Deno reaps only the children it spawned itself.
 *
 * One `SIGCHLD` listener is installed while any child is watched; each
 * signal (the kernel merges signals that arrive together) polls every watched
 * child with `waitpid(pid, WNOHANG)`, so a status is collected once and no
 * child stays a zombie. A timer keeps the event loop alive meanwhile and
 * polls once a second as well. Only watched pids are waited for: other children
 * (Deno's own, orphans handed to the subreaper) are left to their owners.
 *
 * @module
 */

import { C, errno, waitChild } from "./libc.ts";

/** How a watched child ended: its exit code, or the number of the signal that ended it. */
export interface ChildExit {
  /** The exit code (`null` when a signal ended it). */
  code: number | null;
  /** The signal number (`null` when it exited). */
  signal: number | null;
}

/** How often the watched children are also polled without a signal, in ms. */
const POLL_INTERVAL_MS = 1000;

const watched = new Map<number, (exit: ChildExit) => void>();
const status = new Int32Array(1);
let listening = false;
let poller: ReturnType<typeof setInterval> | undefined;

/**
 * Calls `onExit` once `pid` (a child of this process) has ended and its
 * status was collected; never before the current task has finished, so the
 * caller can finish setting the child up first. Call it right after the
 * spawn.
 *
 * @param pid The child's pid.
 * @param onExit Receives how it ended.
 */
export function watchChildExit(pid: number, onExit: (exit: ChildExit) => void): void {
  watched.set(pid, onExit);
  if (!listening) {
    listening = true;
    Deno.addSignalListener("SIGCHLD", collect);
    // A signal listener does not keep the event loop alive, a running child does (as in Node);
    // the timer also catches an exit whose signal went to another listener's turn.
    poller = setInterval(collect, POLL_INTERVAL_MS);
  }
  // A child that ended before the listener existed sent its SIGCHLD to no one.
  queueMicrotask(() => collectOne(pid));
}

function collect(): void {
  for (const pid of [...watched.keys()]) collectOne(pid);
}

function collectOne(pid: number): void {
  if (!watched.has(pid)) return;
  let rc = waitChild(pid, status, C.WNOHANG);
  while (rc < 0 && errno() === C.EINTR) rc = waitChild(pid, status, C.WNOHANG);
  if (rc === 0) return;
  const onExit = watched.get(pid);
  watched.delete(pid);
  if (watched.size === 0 && listening) {
    listening = false;
    Deno.removeSignalListener("SIGCHLD", collect);
    clearInterval(poller);
  }
  onExit?.(waitedExit(rc, pid, status[0]!));
}

/**
 * Decodes what `waitpid(pid, status, ...)` returned for an ended child: its exit code, or the
 * signal that ended it. A `result` other than `pid` (`-1`, `ECHILD`: something else collected
 * the child) is reported as exit code 1.
 *
 * @example
 * ```ts
 * import { waitedExit } from "./child_exits.ts";
 * console.log(waitedExit(42, 42, 3 << 8)); // { code: 3, signal: null }
 * console.log(waitedExit(42, 42, 9)); // { code: null, signal: 9 }
 * console.log(waitedExit(-1, 42, 0)); // { code: 1, signal: null }
 * ```
 *
 * @param result What `waitpid` returned.
 * @param pid The pid waited for.
 * @param status The status it wrote.
 */
export function waitedExit(result: number, pid: number, status: number): ChildExit {
  const raw = result === pid ? status : 1 << 8;
  const signal = raw & 0x7f;
  return signal === 0 ? { code: (raw >> 8) & 0xff, signal: null } : { code: null, signal };
}
