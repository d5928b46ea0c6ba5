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
  // rc < 0 (ECHILD): something else collected it; report a failure exit.
  const raw = rc === pid ? status[0]! : 1 << 8;
  const signal = raw & 0x7f;
  onExit?.(signal === 0 ? { code: (raw >> 8) & 0xff, signal: null } : { code: null, signal });
}
