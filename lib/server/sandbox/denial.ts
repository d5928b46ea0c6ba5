/**
 * The `sandboxDenied` heuristic of a sandboxed process's exit: the words
 * its output ends with, and the signal that ended it.
 *
 * @module
 */

/** How much of the end of a process's output {@linkcode looksSandboxDenied} reads (1 MiB). */
export const SANDBOX_DENIED_WINDOW_BYTES = 1024 * 1024;

/**
 * Words in the output that suggest the sandbox refused something (the
 * reference's list, plus `bwrap:` for bubblewrap's own failures).
 */
export const SANDBOX_DENIED_KEYWORDS: readonly string[] = [
  "operation not permitted",
  "permission denied",
  "read-only file system",
  "seccomp",
  "sandbox",
  "landlock",
  "failed to write file",
  "bwrap:",
];

/** Exit codes that never count as a denial without a keyword (usage error, not executable, not found). */
const QUICK_REJECT_EXIT_CODES = new Set([2, 126, 127]);
/** 128 + SIGSYS: killed by the seccomp filter. */
const SIGSYS_EXIT_CODE = 128 + 31;

/**
 * The heuristic behind `sandboxDenied` (the reference's): a sandboxed
 * command that failed (non-zero exit) was probably stopped by the sandbox
 * when the last {@linkcode SANDBOX_DENIED_WINDOW_BYTES} of its combined
 * output mention one of {@linkcode SANDBOX_DENIED_KEYWORDS}
 * (case-insensitive), or when it was killed by `SIGSYS` (exit code 159).
 * Exit codes 2, 126 and 127 without a keyword are not denials.
 *
 * @param exitCode The exit code reported on the wire.
 * @param output The end of stdout and stderr (or the pty stream), in order.
 *
 * @example Classify a failed write
 * ```ts
 * import { looksSandboxDenied } from "./denial.ts";
 * console.log(looksSandboxDenied(1, "bash: /etc/x: Read-only file system\n")); // true
 * console.log(looksSandboxDenied(3, "hello\n")); // false
 * ```
 */
export function looksSandboxDenied(exitCode: number, output: string): boolean {
  if (exitCode === 0) return false;
  const text = output.toLowerCase();
  if (SANDBOX_DENIED_KEYWORDS.some((keyword) => text.includes(keyword))) return true;
  if (QUICK_REJECT_EXIT_CODES.has(exitCode)) return false;
  return exitCode === SIGSYS_EXIT_CODE;
}

/**
 * The last bytes of a process's output, for {@linkcode looksSandboxDenied}.
 *
 * @example Keep the end of the output
 * ```ts
 * import { OutputTail } from "./denial.ts";
 * const tail = new OutputTail(4);
 * tail.push(new TextEncoder().encode("abcdef"));
 * console.log(tail.text()); // "cdef"
 * ```
 */
export class OutputTail {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #limit: number;

  /**
   * Creates an empty tail.
   *
   * @param limit Bytes kept; defaults to {@linkcode SANDBOX_DENIED_WINDOW_BYTES}.
   */
  constructor(limit: number = SANDBOX_DENIED_WINDOW_BYTES) {
    this.#limit = limit;
  }

  /**
   * Appends output.
   *
   * @param bytes A chunk of output.
   */
  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#chunks.push(bytes.slice());
    this.#size += bytes.length;
    while (this.#chunks.length > 1 && this.#size - this.#chunks[0]!.length >= this.#limit) {
      this.#size -= this.#chunks.shift()!.length;
    }
  }

  /** The kept bytes (at most the limit), decoded as UTF-8. */
  text(): string {
    const all = new Uint8Array(this.#size);
    let offset = 0;
    for (const chunk of this.#chunks) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
    return new TextDecoder().decode(all.subarray(Math.max(0, all.length - this.#limit)));
  }
}
