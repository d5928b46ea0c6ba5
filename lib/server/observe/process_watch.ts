/**
 * What the operator sees of one process: what was started (session, argv,
 * cwd, tty, sandbox), when, and how much output it made. Made from the
 * events processes publish ({@linkcode watchProcesses}): once the child was
 * spawned (auditing `process.start`); told of each output chunk (counted
 * into `exec_server_output_bytes_total`) and of the exit (auditing
 * `process.exit`).
 *
 * @module
 */

import {
  type ManagedProcess,
  PROCESS_EVENTS,
  type ProcessDescription,
} from "../process/managed_process.ts";
import { audit } from "./audit.ts";
import { OUTPUT_BYTES } from "./server_metrics.ts";

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
   *   sandboxType: "none", sandboxLayer: null, envNames: [],
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

/** The record of each process that started since {@linkcode watchProcesses}. */
const WATCHES = new WeakMap<ManagedProcess, ProcessWatch>();
let watching = false;

/**
 * Subscribes to the events processes publish, once per server process (the
 * audit log and the metrics are the process's own): each started process
 * gets a {@linkcode ProcessWatch}, told of its output and its exit. The
 * listeners call it before they serve; calling it again does nothing.
 */
export function watchProcesses(): void {
  if (watching) return;
  watching = true;
  PROCESS_EVENTS.started.subscribe((process, description) => {
    WATCHES.set(process, new ProcessWatch(description));
  });
  PROCESS_EVENTS.output.subscribe((process, bytes) => WATCHES.get(process)?.output(bytes));
  PROCESS_EVENTS.exited.subscribe((process, exitCode, signal) =>
    WATCHES.get(process)?.exited(exitCode, signal)
  );
}

/**
 * The operator's record of a process, once it started.
 *
 * @param process A process of a session's table.
 */
export function watchOf(process: ManagedProcess): ProcessWatch | undefined {
  return WATCHES.get(process);
}
