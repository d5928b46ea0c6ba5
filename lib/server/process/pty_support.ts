/**
 * Whether pseudo-terminal processes can run here, asked by every `initialize` answer: its own
 * module, so that the pseudo-terminal code (`pty.ts`) loads only with the first tty process.
 *
 * @module
 */

import { grantedEverywhere } from "../host/permissions.ts";
import { libcAvailable, libcLoadFailed } from "../host/libc.ts";

/**
 * Returns whether pty processes can be spawned here: Linux, FFI permission granted and
 * `libc.so.6` loadable. Never prompts and never throws.
 *
 * With `{ probe: false }` libc is not opened (binding it costs several milliseconds, too
 * much for the `initialize` answer of a freshly started server): the answer is then "yes"
 * on Linux with the FFI permission unless an earlier attempt to open libc failed.
 *
 * @example
 * ```ts
 * import { ptySupported } from "./pty_support.ts";
 * console.log(typeof ptySupported({ probe: false })); // "boolean"
 * ```
 *
 * @param options `probe: false` skips opening libc.
 */
export function ptySupported(options: { probe?: boolean } = {}): boolean {
  if (Deno.build.os !== "linux") return false;
  if (!grantedEverywhere("ffi")) return false;
  return options.probe === false ? !libcLoadFailed() : libcAvailable();
}
