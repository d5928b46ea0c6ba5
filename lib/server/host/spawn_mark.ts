/**
 * Spawn marks: what tells the server's descendants from every other process,
 * whatever they did to leave its tree. The subreaper attributes an orphan it
 * adopted (a `setsid` daemon of a double fork: it left the process group and
 * lost its parent) to the process it came from, so that `process/terminate`
 * and session expiry end it too; and the watchdog (`watchdog.ts`) finds, after
 * a server SIGKILL, every descendant the kernel has meanwhile handed to `init`.
 *
 * The mark is the soft `RLIMIT_RTTIME` (CPU time a real-time scheduled
 * process may use without blocking, in us): resource limits are inherited
 * across `fork`, `exec`, `setsid` and any number of forks, and, unlike an
 * environment variable (the reference adds none), a program does not see
 * it unless it asks `getrlimit`. The server lowers its own soft limit from
 * unlimited to a mark just around the synchronous spawn call
 * (`node:child_process` and `posix_spawn` fork inside it) and restores it
 * right after. A mark is `2^62 - instance * 2^32 - n`: `instance` is drawn at
 * random once per server ({@linkcode markInstance}, 1 to 2^28), `n` counts the
 * server's spawns, so two servers on one host never share a mark and the
 * watchdog recognises its own server's by `(2^62 - mark) >> 32`. `2^62` us
 * is about 146 000 years: the limit stays in effect unlimited, and it only
 * ever applies to real-time scheduled threads at all.
 *
 * A process can change its own soft limit (`ulimit -S -r`, `setrlimit`),
 * and so drop its mark, deliberately; its descendants then carry what it set.
 *
 * Without FFI, or when the server's own soft limit is not unlimited, no
 * mark is set (such daemons then end at server shutdown).
 *
 * @module
 */

import { libcAvailable, processLimit } from "./libc.ts";
import { grantedEverywhere } from "./permissions.ts";

const RLIMIT_RTTIME = 15;
const UNLIMITED = 0xffff_ffff_ffff_ffffn;
/** Marks count down from here. */
const MARK_TOP = 1n << 62n;
/** Marks of one server differ in their low 32 bits. */
const SPAWN_BITS = 32n;

let issued = 0n;
let usable: boolean | undefined;
/** This server's instance: 1 to 2^28, so that every mark stays above 2^61. */
let instance: bigint | undefined;

/** Whether limits can be set through FFI (`prlimit` of `libc.ts`, which the spawn binds too). */
function available(): boolean {
  if (usable !== undefined) return usable;
  try {
    usable = Deno.build.os === "linux" && grantedEverywhere("ffi") && libcAvailable();
  } catch {
    usable = false;
  }
  return usable;
}

/** This server's soft and hard `RLIMIT_RTTIME` when marks can be set (the soft one unlimited). */
function ownLimit(): BigUint64Array<ArrayBuffer> | undefined {
  const limit = new BigUint64Array(2);
  return available() && processLimit(RLIMIT_RTTIME, null, limit) === 0 && limit[0] === UNLIMITED
    ? limit
    : undefined;
}

/**
 * The instance number in this server's marks, or `undefined` when it sets none: what the
 * watchdog is told to look for.
 */
export function markInstance(): bigint | undefined {
  return ownLimit() === undefined ? undefined : drawn();
}

/** The instance, drawn on first use (`Math.random`: it need be unique, not secret). */
function drawn(): bigint {
  return instance ??= BigInt(Math.floor(Math.random() * 2 ** 28)) + 1n;
}

/**
 * Whether a soft `RLIMIT_RTTIME` is a mark of the given instance.
 *
 * @example
 * ```ts
 * import { isMarkOf } from "./spawn_mark.ts";
 * const mark = (1n << 62n) - (7n << 32n) - 3n;
 * console.log(isMarkOf(mark, 7n), isMarkOf(mark, 8n), isMarkOf(1n << 62n, 0n)); // true false false
 * ```
 *
 * @param limit The soft limit.
 * @param of The instance.
 */
export function isMarkOf(limit: bigint, of: bigint): boolean {
  return limit < MARK_TOP && (MARK_TOP - limit) >> SPAWN_BITS === of && of > 0n;
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
  const limit = ownLimit();
  if (limit === undefined) return { value: spawn(), mark: undefined };
  issued = issued % ((1n << SPAWN_BITS) - 1n) + 1n;
  const mark = MARK_TOP - (drawn() << SPAWN_BITS) - issued;
  const marked = new BigUint64Array([mark, limit[1]!]);
  if (processLimit(RLIMIT_RTTIME, marked, null) !== 0) return { value: spawn(), mark: undefined };
  try {
    return { value: spawn(), mark };
  } finally {
    processLimit(RLIMIT_RTTIME, limit, null);
  }
}
