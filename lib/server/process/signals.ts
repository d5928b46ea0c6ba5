/**
 * Signals to and from a process group: sending them, and naming the signal
 * that ended a process.
 *
 * @module
 */

import { internalError } from "../../protocol/errors.ts";
import { SIGNALS } from "../host/libc.ts";

/**
 * Sends `signal` to the process group `pid` leads; a group that is already
 * gone is not an error.
 *
 * @param pid The group leader's pid.
 * @param signal The signal.
 */
export function killGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Like {@linkcode killGroup}, but an OS failure other than "no such process" is an error.
 *
 * @param pid The group leader's pid.
 * @param signal The signal.
 * @throws {RpcError} `-32603 failed to signal process: ...`.
 */
export function signalGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || (err as { code?: string }).code === "ESRCH") return;
    throw internalError(`failed to signal process: ${(err as Error).message}`);
  }
}

/**
 * The POSIX name of a signal number (`SIGTERM`), or `SIG<n>` for an unnamed one.
 *
 * @param signal The signal number.
 *
 * @example
 * ```ts
 * import { signalNameOf } from "./signals.ts";
 * console.log(signalNameOf(15)); // "SIGTERM"
 * ```
 */
export function signalNameOf(signal: number): string {
  for (const [name, number] of Object.entries(SIGNALS)) {
    if (number === signal) return name;
  }
  return `SIG${signal}`;
}

/**
 * The exit code a shell reports for a process a signal ended (128 + its
 * number); `1` without a signal.
 *
 * @param signal The POSIX name of the signal, or `null`.
 *
 * @example
 * ```ts
 * import { signalExitCode } from "./signals.ts";
 * console.log(signalExitCode("SIGKILL")); // 137
 * ```
 */
export function signalExitCode(signal: string | null): number {
  if (!signal) return 1;
  const number = SIGNALS[signal];
  return 128 + (number ?? 0);
}
