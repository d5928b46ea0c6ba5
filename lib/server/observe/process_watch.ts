/**
 * What the operator sees of one process: what was started (session, argv,
 * cwd, tty, sandbox), when, and how much output it made. Created once the
 * child was spawned (auditing `process.start`); told of each output chunk
 * (counted into `exec_server_output_bytes_total`) and of the exit
 * (auditing `process.exit`).
 *
 * @module
 */

import { audit } from "./audit.ts";
import { OUTPUT_BYTES } from "./server_metrics.ts";

/** What was started. */
export interface ProcessDescription {
  /** The owning session's id. */
  readonly session: string;
  /** The client's process id. */
  readonly processId: string;
  /** The command line the client asked for (before any sandbox wrapping). */
  readonly argv: readonly string[];
  /** The working directory, as a native path. */
  readonly cwd: string;
  /** Whether it runs on a pseudo-terminal. */
  readonly tty: boolean;
  /** The sandbox it runs in (`none`, or the platform's sandbox type). */
  readonly sandboxType: string;
  /** The names of the environment variables the client set (never their values). */
  readonly envNames: readonly string[];
}

/** The operator's record of a started process. */
export class ProcessWatch {
  /** What was started. */
  readonly description: ProcessDescription;
  /** When it started (ms since the epoch). */
  readonly startedAt: number = Date.now();
  readonly #started = performance.now();
  #outputBytes = 0;
  #durationMs: number | undefined;

  /**
   * Records a started process and audits `process.start`.
   *
   * @example
   * ```ts
   * import { ProcessWatch } from "./process_watch.ts";
   * const watch = new ProcessWatch({
   *   session: "s", processId: "p", argv: ["true"], cwd: "/", tty: false,
   *   sandboxType: "none", envNames: [],
   * });
   * watch.output(5);
   * watch.exited(0, null);
   * console.log(watch.outputBytes); // 5
   * ```
   *
   * @param description What was started.
   */
  constructor(description: ProcessDescription) {
    this.description = description;
    audit("process.start", { ...description });
  }

  /** Output bytes so far. */
  get outputBytes(): number {
    return this.#outputBytes;
  }

  /** How long it ran (ms): until its exit, or until now while it runs. */
  get durationMs(): number {
    return this.#durationMs ?? Math.round(performance.now() - this.#started);
  }

  /**
   * A chunk of output was produced.
   *
   * @param bytes Its size.
   */
  output(bytes: number): void {
    this.#outputBytes += bytes;
    OUTPUT_BYTES.inc(bytes);
  }

  /**
   * The process exited: audits `process.exit`.
   *
   * @param exitCode Its exit code.
   * @param signal The signal that ended it, if one did.
   */
  exited(exitCode: number, signal: string | null): void {
    this.#durationMs = Math.round(performance.now() - this.#started);
    audit("process.exit", {
      session: this.description.session,
      processId: this.description.processId,
      exitCode,
      signal,
      durationMs: this.#durationMs,
      outputBytes: this.#outputBytes,
    });
  }
}
