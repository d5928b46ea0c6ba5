/**
 * Spawn marks: what attributes an orphan the subreaper adopted (a `setsid`
 * daemon of a double fork: it left the process group and lost its parent)
 * to the process it came from, so that `process/terminate` and session
 * expiry end it too.
 *
 * The mark is the soft `RLIMIT_RTTIME` (CPU time a real-time scheduled
 * process may use without blocking, in us): resource limits are inherited
 * across `fork`, `exec`, `setsid` and any number of forks, and, unlike an
 * environment variable (the reference adds none), a program does not see
 * it unless it asks `getrlimit`. The server lowers its own soft limit from
 * unlimited to `2^62 - n` (n unique per process) just around the synchronous
 * spawn call (`node:child_process` and `posix_spawn` fork inside it) and
 * restores it right after; `2^62` us is about 146 000 years, so the limit
 * stays in effect unlimited, and it only ever applies to real-time
 * scheduled threads at all. A mark is only compared on the server's own
 * children (the subreaper's adoptees), so a value that another program
 * happened to choose cannot make the server kill a process of its own.
 *
 * Without FFI, or when the server's own soft limit is not unlimited, no
 * mark is set (such daemons then end at server shutdown).
 *
 * @module
 */

import { libcAvailable, processLimit } from "./libc.ts";

const RLIMIT_RTTIME = 15;
const UNLIMITED = 0xffff_ffff_ffff_ffffn;
/** Marks count down from here. */
const MARK_TOP = 1n << 62n;

let issued = 0n;
let usable: boolean | undefined;

/** Whether limits can be set through FFI (`prlimit` of `libc.ts`, which the spawn binds too). */
function available(): boolean {
  if (usable !== undefined) return usable;
  try {
    usable = Deno.build.os === "linux" &&
      Deno.permissions.querySync({ name: "ffi" }).state === "granted" && libcAvailable();
  } catch {
    usable = false;
  }
  return usable;
}

/**
 * Runs a synchronous spawn with a fresh mark that the child (and everything
 * it forks) inherits.
 *
 * @param spawn The call that forks the child.
 * @returns What `spawn` returned, and the mark (`undefined` when none could be set).
 * @throws What `spawn` throws (the server's limit is restored first).
 */
export function spawnMarked<T>(spawn: () => T): { value: T; mark: bigint | undefined } {
  const limit = new BigUint64Array(2);
  const ok = available() && processLimit(RLIMIT_RTTIME, null, limit) === 0 &&
    limit[0] === UNLIMITED;
  if (!ok) return { value: spawn(), mark: undefined };
  const mark = MARK_TOP - ++issued;
  const marked = new BigUint64Array([mark, limit[1]!]);
  if (processLimit(RLIMIT_RTTIME, marked, null) !== 0) return { value: spawn(), mark: undefined };
  try {
    return { value: spawn(), mark };
  } finally {
    processLimit(RLIMIT_RTTIME, limit, null);
  }
}
