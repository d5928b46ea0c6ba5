/**
 * The process RPCs (docs/protocol.md section 8): a session's table of processes and the
 * handlers of `process/start`, `read`, `write`, `signal`, `terminate` and
 * `resize`. What a start runs is worked out in `start_plan.ts`, a process's
 * life and output live in `managed_process.ts` and `output_ring.ts`, and
 * the children run on the backends of `pipe.ts` and `tty.ts`.
 *
 * @module
 */

import { LiveProcesses } from "./live_processes.ts";
import { becomeSubreaper, killTree, reapSoon, trackLeader } from "../host/proc.ts";
import { spawnMarked } from "../host/spawn_mark.ts";
import { scanSoon, startWatchdog, watchLeader } from "../host/watchdog.ts";
import {
  ErrorCode,
  internalError,
  invalidParams,
  invalidRequest,
  kindError,
  RpcError,
} from "../../protocol/errors.ts";
import type { ExtensionName, ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { OutputTail } from "../sandbox/denial.ts";
import { ManagedProcess, type NotificationSink, PROCESS_EVENTS } from "./managed_process.ts";
import { loadChildProcess, startPipe } from "./pipe.ts";
import { planStart } from "./start_plan.ts";

let ttyBackend: Promise<typeof import("./tty.ts")> | undefined;

/**
 * The tty backend, loaded with the first `tty: true` start: its pseudo-terminal code (about
 * 23 KB of source) is not loaded before a server's first answer or its first pipe process.
 */
function loadTty(): Promise<typeof import("./tty.ts")> {
  return ttyBackend ??= import("./tty.ts");
}

/** Default time a closed process stays readable, in ms (the reference's about 80 s). */
export const DEFAULT_PROCESS_RETENTION_MS = 80_000;

/**
 * Most bytes a process may have queued for its stdin (written by
 * `process/write`, not yet taken by the child's pipe or terminal). A write
 * that takes the queue past it is answered once its chunk has reached the
 * child, so a client waiting for answers cannot make the server hold more.
 */
export const MAX_QUEUED_STDIN_BYTES = 8 * 1024 * 1024;

/** Options for {@linkcode ProcessTable}. */
export interface ProcessTableOptions {
  /**
   * How long a closed process stays readable, in ms.
   *
   * @default {80000}
   */
  retentionMs?: number;
  /**
   * The id of the session the table belongs to (named in the process events it publishes).
   *
   * @default {""}
   */
  sessionId?: string;
  /**
   * The count of live processes this table's starts take a place in (shared by a server's
   * sessions).
   *
   * @default {a count of this table's own, bounded by DEFAULT_MAX_PROCESSES}
   */
  live?: LiveProcesses;
}

/**
 * SIGKILLs a process's whole tree (descendants and orphans of its group, see
 * {@linkcode killTree}) and its process group.
 */
function killProcessTree(proc: ManagedProcess): void {
  killTree(proc.backend.pid, proc.spawnMark);
  proc.backend.kill("SIGKILL");
  // Orphans of other groups live on (until the server ends): the watchdog learns of them now.
  scanSoon();
}

/** The processes of one session: `process/*` requests, their output and their end. */
export class ProcessTable {
  #processes = new Map<string, ManagedProcess>();
  #sink: NotificationSink | undefined;
  #retentionMs: number;
  #sessionId: string;
  #extensions: ReadonlySet<ExtensionName> = new Set();
  #live: LiveProcesses;

  /**
   * Creates an empty table.
   *
   * @param options Retention of closed processes, the count of live processes.
   */
  constructor(options: ProcessTableOptions = {}) {
    this.#retentionMs = options.retentionMs ?? DEFAULT_PROCESS_RETENTION_MS;
    this.#sessionId = options.sessionId ?? "";
    this.#live = options.live ?? new LiveProcesses();
  }

  /** Sets where notifications go (`undefined` while the session is detached: they are dropped). */
  set sink(sink: NotificationSink | undefined) {
    this.#sink = sink;
    if (sink !== undefined) { for (const proc of this.#processes.values()) proc.attached(); }
  }

  /**
   * The extensions the attached client opted in to (set at each `initialize`,
   * so a resume by another client applies its own). Without them every
   * reference request is answered exactly as the reference does.
   */
  set extensions(extensions: ReadonlySet<ExtensionName>) {
    this.#extensions = extensions;
  }

  /** The extensions the attached client opted in to. */
  get extensions(): ReadonlySet<ExtensionName> {
    return this.#extensions;
  }

  /** Number of processes in the table (running or retained). */
  get size(): number {
    return this.#processes.size;
  }

  /** The processes of the table (running or retained), oldest first. */
  list(): readonly ManagedProcess[] {
    return [...this.#processes.values()];
  }

  /** Pids of processes that have not exited. */
  runningPids(): number[] {
    return [...this.#processes.values()].filter((p) => !p.exited).map((p) => p.backend.pid);
  }

  #get(id: string): ManagedProcess {
    const proc = this.#processes.get(id);
    if (!proc) throw invalidRequest(`unknown process id ${id}`);
    return proc;
  }

  /** `process/start`. */
  async start(params: ParamsOf<"process/start">): Promise<ResultOf<"process/start">> {
    // Before any check: nothing below awaits, so the id check and the insert stay atomic.
    const tty = params.tty ? await loadTty() : undefined;
    if (!params.tty) await loadChildProcess();
    // Orphans of every tree come back to the server, so that killTree finds them.
    becomeSubreaper();
    let untrack = () => {};
    const plan = planStart(params, this.#extensions, () => {
      if (this.#processes.has(params.processId)) {
        throw kindError("processExists", `process ${params.processId} already exists`);
      }
    });
    let releaseLive: () => void;
    try {
      releaseLive = this.#live.claim();
    } catch (err) {
      plan.sandbox?.release();
      throw err;
    }
    const proc: ManagedProcess = new ManagedProcess(params.processId, plan.tty ? 1 : 2, {
      sink: () => this.#sink,
      extensions: () => this.#extensions,
      block: plan.block,
      tail: plan.sandbox === undefined ? undefined : new OutputTail(),
      release: () => {
        plan.sandbox?.release();
        releaseLive();
        untrack();
        reapSoon();
        scanSoon();
      },
      onClosed: () => {
        const timer = setTimeout(() => {
          if (this.#processes.get(proc.id) === proc) this.#processes.delete(proc.id);
        }, this.#retentionMs);
        Deno.unrefTimer(timer);
        proc.removalTimer = timer;
      },
    });
    // Ends the tree if the server is SIGKILLed: running before the first process does.
    startWatchdog();
    try {
      const { value: started, mark } = spawnMarked(() =>
        tty
          ? tty.startTty(proc, plan.argv, {
            cwd: plan.cwd,
            env: plan.env,
            arg0: plan.arg0,
            size: plan.size,
          })
          : startPipe(proc, plan.program, plan.argv, {
            cwd: plan.cwd,
            env: plan.env,
            arg0: plan.arg0,
            pipeStdin: plan.pipeStdin,
          })
      );
      proc.spawnMark = mark;
      // A failed pipe spawn learns its errno asynchronously and rejects.
      proc.backend = started instanceof Promise ? await started : started;
      untrack = trackLeader(proc.backend.pid);
      watchLeader(proc.backend.pid);
    } catch (err) {
      plan.sandbox?.release();
      releaseLive();
      throw err;
    }
    PROCESS_EVENTS.started.publish(proc, {
      session: this.#sessionId,
      processId: params.processId,
      argv: params.argv,
      cwd: plan.cwd,
      tty: plan.tty,
      sandboxType: plan.sandboxType,
      sandboxLayer: plan.sandbox?.layer ?? null,
      envNames: Object.keys(params.env),
    });
    this.#processes.set(params.processId, proc);
    return { processId: params.processId, sandboxType: plan.sandboxType };
  }

  /** `process/read`, including the long poll. */
  async read(params: ParamsOf<"process/read">): Promise<ResultOf<"process/read">> {
    const proc = this.#get(params.processId);
    const afterSeq = params.afterSeq ?? 0;
    proc.readPast(afterSeq);
    const waitMs = params.waitMs ?? 0;
    const deadline = Date.now() + waitMs;
    while (true) {
      const response = proc.snapshot(afterSeq, params.maxBytes);
      const ready = response.chunks.length > 0 || response.closed ||
        (response.exited && afterSeq < response.nextSeq - 1);
      const remaining = deadline - Date.now();
      if (ready || remaining <= 0) return response;
      const change = proc.changed();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        change.promise,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining))),
      ]);
      clearTimeout(timer);
      change.cancel();
    }
  }

  /**
   * `process/write`: a repeated writeId is accepted without writing again.
   * With `closeStdin` (extension `processStdinClose`) the input ends after
   * the chunk; later writes with new writeIds get `stdinClosed`. A write that
   * takes the queued stdin past {@linkcode MAX_QUEUED_STDIN_BYTES} is answered
   * once its chunk has reached the child (or the write failed).
   */
  write(
    params: ParamsOf<"process/write">,
  ): ResultOf<"process/write"> | Promise<ResultOf<"process/write">> {
    if (params.writeId === "") throw invalidParams("writeId must not be empty");
    const proc = this.#processes.get(params.processId);
    if (!proc) return { status: "unknownProcess" };
    if (!proc.backend.stdin) return { status: "stdinClosed" };
    if (proc.stdinClosed) {
      return { status: proc.knowsWrite(params.writeId) ? "accepted" : "stdinClosed" };
    }
    if (!proc.rememberWrite(params.writeId)) return { status: "accepted" };
    if (proc.closed && !proc.backend.tty) {
      throw internalError("failed to write to process stdin");
    }
    // Accepted means queued for the child, in request order; not consumed.
    let written: Promise<void> | undefined;
    const size = params.chunk.length;
    if (size > 0) {
      proc.queuedStdinBytes += size;
      const taken = () => void (proc.queuedStdinBytes -= size);
      written = proc.backend.write(params.chunk).then(taken, taken);
    }
    if (params.closeStdin === true && this.#extensions.has("processStdinClose")) {
      proc.stdinClosed = true;
      proc.backend.closeStdin().catch(() => {});
    }
    if (written !== undefined && proc.queuedStdinBytes > MAX_QUEUED_STDIN_BYTES) {
      return written.then(() => ({ status: "accepted" }));
    }
    return { status: "accepted" };
  }

  /**
   * `process/signal`: the named signal to the process group (`interrupt` on a
   * tty to its foreground group). Names other than `interrupt` need `processSignals`;
   * without it they get the reference's error.
   */
  signal(params: ParamsOf<"process/signal">): ResultOf<"process/signal"> {
    if (params.signal !== "interrupt" && !this.#extensions.has("processSignals")) {
      throw new RpcError(
        ErrorCode.InvalidParams,
        `unknown variant \`${params.signal}\`, expected \`interrupt\``,
        { data: { field: "signal" } },
      );
    }
    const proc = this.#processes.get(params.processId);
    if (proc && !proc.exited) proc.backend.signal(params.signal);
    return {};
  }

  /**
   * `process/terminate`: SIGKILL to the whole process group; with `graceMs`
   * (extension `processSignals`) SIGTERM first, and SIGKILL once the grace
   * has passed and the process has not closed.
   */
  terminate(params: ParamsOf<"process/terminate">): ResultOf<"process/terminate"> {
    const proc = this.#processes.get(params.processId);
    if (!proc) return { running: false };
    if (proc.exited) {
      // The leader is gone, but background jobs of its group may still hold its output open.
      if (!proc.closed) killProcessTree(proc);
      return { running: false };
    }
    const graceMs = this.#extensions.has("processSignals") ? params.graceMs : undefined;
    if (graceMs === undefined) {
      killProcessTree(proc);
      return { running: true };
    }
    const deadline = Date.now() + graceMs;
    if (proc.killTimer && proc.killTimer.deadline <= deadline) {
      proc.backend.kill("SIGTERM");
      return { running: true };
    }
    clearTimeout(proc.killTimer?.timer);
    const timer = setTimeout(() => {
      proc.killTimer = undefined;
      try {
        if (!proc.closed) killProcessTree(proc);
      } catch {
        // The group is beyond reach; nothing more to do.
      }
    }, graceMs);
    proc.killTimer = { timer, deadline };
    proc.backend.kill("SIGTERM");
    return { running: true };
  }

  /** `process/resize` (extension `processResize`): sets a tty process's terminal size. */
  resize(params: ParamsOf<"process/resize">): ResultOf<"process/resize"> {
    const proc = this.#get(params.processId);
    if (!proc.backend.tty) {
      throw invalidRequest(
        `process ${params.processId} is not a tty process: only tty processes can be resized`,
      );
    }
    try {
      proc.backend.resize(params.rows, params.cols);
    } catch (err) {
      // The terminal is already released once the process's output has ended.
      if (!proc.exited) throw internalError(`failed to resize process: ${(err as Error).message}`);
    }
    return {};
  }

  /** Kills every process group of the table and forgets them (session end). */
  killAll(): void {
    for (const proc of this.#processes.values()) {
      // Also after the leader exited: its background jobs may live on in the group.
      if (!proc.closed) killProcessTree(proc);
      clearTimeout(proc.removalTimer);
      clearTimeout(proc.killTimer?.timer);
      proc.unblock();
    }
    this.#processes.clear();
  }
}
