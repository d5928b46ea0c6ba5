/**
 * The bound on processes alive at once in one server (`--max-processes`), across its sessions.
 *
 * @module
 */

import { ErrorCode, kindError } from "../../protocol/errors.ts";

/** The default of `--max-processes`. */
export const DEFAULT_MAX_PROCESSES = 4096;

/**
 * Counts the processes alive across a server's sessions, each from just before its spawn until
 * it has exited and its output has ended (a background child holding its output keeps it
 * counted), and refuses a spawn beyond the bound.
 *
 * @example
 * ```ts
 * import { LiveProcesses } from "./live_processes.ts";
 * const live = new LiveProcesses(1);
 * const release = live.claim();
 * try {
 *   live.claim();
 * } catch (err) {
 *   console.log((err as Error).message);
 *   // Cannot spawn a process: the limit of 1 live processes (--max-processes) is reached
 * }
 * release();
 * console.log(live.count); // 0
 * ```
 */
export class LiveProcesses {
  #count = 0;

  /**
   * Creates an empty count.
   *
   * @param max The most processes alive at once.
   */
  constructor(readonly max: number = DEFAULT_MAX_PROCESSES) {}

  /** Processes alive now. */
  get count(): number {
    return this.#count;
  }

  /**
   * Takes a place for a process about to be spawned.
   *
   * @returns The function that gives the place back; calls after the first do nothing.
   * @throws {RpcError} `-32603` with `data.kind: "limitReached"` when {@linkcode max} are alive.
   */
  claim(): () => void {
    if (this.#count >= this.max) {
      throw kindError(
        "limitReached",
        `Cannot spawn a process: the limit of ${this.max} live processes (--max-processes) is reached`,
        ErrorCode.InternalError,
      );
    }
    this.#count++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#count--;
    };
  }
}
