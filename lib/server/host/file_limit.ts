/**
 * Raising the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard
 * limit at start, so the server is not held to a shell's default of 1 024
 * when the system allows more. Every connection, pipe and file handle takes
 * a descriptor.
 *
 * @module
 */

import { C, libc } from "./libc.ts";

/** The descriptor limits after {@linkcode raiseFileLimit}. */
export interface FileLimit {
  /** The soft limit in force. */
  soft: number;
  /** The hard limit. */
  hard: number;
}

/**
 * Sets the soft `RLIMIT_NOFILE` to the hard limit through libc (needs
 * `--allow-ffi`).
 *
 * @returns The limits in force, or `undefined` when libc cannot be used.
 */
export function raiseFileLimit(): FileLimit | undefined {
  let lib;
  try {
    lib = libc();
  } catch {
    return undefined;
  }
  // struct rlimit { rlim_t rlim_cur; rlim_t rlim_max; } with 64-bit rlim_t.
  const limits = new BigUint64Array(2);
  if (lib.getrlimit(C.RLIMIT_NOFILE, limits) !== 0) return undefined;
  if (limits[0]! < limits[1]!) {
    const wanted = new BigUint64Array([limits[1]!, limits[1]!]);
    if (lib.setrlimit(C.RLIMIT_NOFILE, wanted) === 0) limits[0] = limits[1]!;
  }
  return { soft: Number(limits[0]), hard: Number(limits[1]) };
}
