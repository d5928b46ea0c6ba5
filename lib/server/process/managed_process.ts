/**
 * One process of a session and its life: `running` -> `exited` (the exit
 * status was collected) -> `closed` (and every output stream ended). Each
 * step is reported once, as a notification with the next seq, and wakes
 * the `process/read`s waiting for it.
 *
 * @module
 */

import type { ExtensionName, ResultOf } from "../../protocol/methods.ts";
import type { OutboundText } from "../../rpc/transport.ts";
import { Hook } from "../host/hook.ts";
import { looksSandboxDenied, type OutputTail } from "../sandbox/denial.ts";
import type { Backend, BackendEvents } from "./backend.ts";
import { OutputRing, type OutputStream } from "./output_ring.ts";

/** How many accepted writeIds are remembered per process. */
export const REMEMBERED_WRITE_IDS = 4096;

/**
 * Where a process's notifications go. Returns a promise only when the
 * connection's outbound buffer is full: the process then stops reading its
 * child's output until it resolves (backpressure reaches the child's pipe).
 */
export type NotificationSink = (text: OutboundText) => Promise<void> | void;

/** The life of a process. */
export type ProcessState = "running" | "exited" | "closed";

/** What was started, as {@linkcode PROCESS_EVENTS}' `started` tells it. */
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
  /**
   * The sandbox layer that enforces it (`bubblewrap`, `bubblewrap-no-proc`,
   * `landlock`), `null` when nothing wraps it.
   */
  readonly sandboxLayer: string | null;
  /** The names of the environment variables the client set (never their values). */
  readonly envNames: readonly string[];
}

/**
 * What the processes of every session publish, for whoever watches them (the
 * operator's view, `observe/process_watch.ts`, subscribes; nothing here knows
 * it): `started` once the child was spawned, `output` with the size of each
 * chunk, `exited` once its exit status is reported.
 */
export const PROCESS_EVENTS = {
  started: new Hook<[process: ManagedProcess, description: ProcessDescription]>(),
  output: new Hook<[process: ManagedProcess, bytes: number]>(),
  exited: new Hook<[process: ManagedProcess, exitCode: number, signal: string | null]>(),
} as const;

/** What a {@linkcode ManagedProcess} is given at its start. */
export interface ManagedProcessOptions {
  /** Where notifications go right now (`undefined` while the session is detached). */
  sink: () => NotificationSink | undefined;
  /** The extensions the attached client opted in to (read when a message is built). */
  extensions: () => ReadonlySet<ExtensionName>;
  /** Lossless output: nothing is evicted before it was read. */
  block: boolean;
  /** For a sandboxed process: the end of its output, judged for `sandboxDenied` at exit. */
  tail?: OutputTail;
  /** Removes what a sandbox left on the host; runs once the process has exited. */
  release?: () => void;
  /** Called once the process is closed. */
  onClosed: () => void;
}

/**
 * A process of the table: its state, its output ring and the waiters of
 * `process/read`. The backend reports to it through {@linkcode BackendEvents}.
 */
export class ManagedProcess implements BackendEvents {
  /** The client's id. */
  readonly id: string;
  readonly #idJson: string;
  readonly ring: OutputRing;
  #state: ProcessState = "running";
  /** Output streams not yet ended (2 for pipes, 1 for a tty). */
  #openStreams: number;
  /** The exit code once exited. */
  exitCode: number | null = null;
  /** The POSIX name of the signal that ended the process (`null`: it exited, or is running). */
  exitSignal: string | null = null;
  /** The sandbox probably refused something (judged at exit). */
  sandboxDenied = false;
  /** The client closed stdin (`closeStdin`): later writes get `stdinClosed`. */
  stdinClosed = false;
  /** Bytes written by `process/write` that the child's pipe or terminal has not taken yet. */
  queuedStdinBytes = 0;
  /** The spawned child; set right after the spawn. */
  backend!: Backend;
  /** What its orphans are recognised by (`host/spawn_mark.ts`); set with {@linkcode backend}. */
  spawnMark: bigint | undefined;
  removalTimer: ReturnType<typeof setTimeout> | undefined;
  killTimer: { timer: ReturnType<typeof setTimeout>; deadline: number } | undefined;
  #waiters = new Set<() => void>();
  #roomWaiters: (() => void)[] = [];
  #writeIds = new Set<string>();
  /** The remembered writeIds in the order they came, a ring once full (the oldest at `#oldestWriteId`). */
  #writeIdOrder: string[] = [];
  #oldestWriteId = 0;
  #options: ManagedProcessOptions;
  /** A sandboxed exit waiting for the output to end (the pipes close with the sandbox). */
  #pendingExit: [number, string | null] | undefined;

  /**
   * Creates a running process.
   *
   * @param id The client's id.
   * @param streams How many output streams the backend reports the end of.
   * @param options Notifications, extensions, output mode, sandbox.
   */
  constructor(id: string, streams: number, options: ManagedProcessOptions) {
    this.id = id;
    this.#idJson = JSON.stringify(id);
    this.#openStreams = streams;
    this.#options = options;
    this.ring = new OutputRing({ block: options.block });
  }

  /** Where the process is in its life. */
  get state(): ProcessState {
    return this.#state;
  }

  /** The exit status was collected. */
  get exited(): boolean {
    return this.#state !== "running";
  }

  /** Exited, and every output stream ended. */
  get closed(): boolean {
    return this.#state === "closed";
  }

  #emit(text: string): Promise<void> | void {
    return this.#options.sink()?.(text);
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  /**
   * Records a chunk of output. Returns a promise when the reader of the
   * child's output must wait before reading more: the connection is
   * congested, (`output: "block"`) the ring is full of unread output, or the
   * session is detached and the ring is at its limit (nobody can read what
   * would be evicted, so the child waits as it does for a slow client; it
   * resumes when a connection attaches or the session ends).
   */
  output(stream: OutputStream, bytes: Uint8Array): Promise<void> | void {
    this.#options.tail?.push(bytes);
    PROCESS_EVENTS.output.publish(this, bytes.length);
    const sink = this.#options.sink();
    // Encoded before the ring takes the bytes (it frees them once they are evicted).
    const chunk = sink === undefined ? "" : bytes.toBase64();
    const seq = this.ring.push(stream, bytes);
    this.#wake();
    // In parts: joining them would copy the base64 text once more.
    const sent = sink?.([
      `{"method":"process/output","params":{"processId":${this.#idJson},"seq":${seq},"stream":"${stream}","chunk":"`,
      chunk,
      '"}}',
    ]);
    const detachedAtLimit = sink === undefined && this.ring.atLimit;
    if (!this.ring.full && !detachedAtLimit) return sent;
    const room = new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    return sent ? Promise.all([sent, room]).then(() => {}) : room;
  }

  /** A `process/read` with this `afterSeq` happened: output up to it may be evicted. */
  readPast(afterSeq: number): void {
    if (this.ring.readPast(afterSeq)) this.#releaseRoom();
  }

  /** A connection attached to the session: a reader paused while detached resumes. */
  attached(): void {
    this.#releaseRoom();
  }

  /** Switches to drop-oldest (the session ends): a blocked reader resumes. */
  unblock(): void {
    this.ring.unblock();
    this.#releaseRoom();
  }

  #releaseRoom(): void {
    for (const resume of this.#roomWaiters.splice(0)) resume();
  }

  /** The child exited: `running` -> `exited` (for a sandbox, once its output has ended). */
  exit(code: number, signal: string | null): void {
    if (this.exited) return;
    this.#options.release?.();
    const tail = this.#options.tail;
    if (tail !== undefined && this.#openStreams > 0) {
      // Sandboxed: judge sandboxDenied on the whole output (the pipes close with the sandbox).
      this.#pendingExit = [code, signal];
      return;
    }
    this.sandboxDenied = tail !== undefined && looksSandboxDenied(code, tail.text());
    this.exitCode = code;
    this.exitSignal = signal;
    this.#state = "exited";
    PROCESS_EVENTS.exited.publish(this, code, signal);
    clearTimeout(this.killTimer?.timer);
    const seq = this.ring.takeSeq();
    const extra = this.#options.extensions().has("processSignals")
      ? `,"signal":${signal === null ? "null" : JSON.stringify(signal)}`
      : "";
    this.#emit(
      `{"method":"process/exited","params":{"processId":${this.#idJson},"seq":${seq},"exitCode":${code},"sandboxDenied":${this.sandboxDenied}${extra}}}`,
    );
    this.#wake();
    this.#maybeClose();
  }

  /** One output stream ended. */
  streamEnded(): void {
    this.#openStreams--;
    if (this.#pendingExit !== undefined && this.#openStreams === 0) {
      const [code, signal] = this.#pendingExit;
      this.#pendingExit = undefined;
      this.exit(code, signal);
      return;
    }
    this.#maybeClose();
  }

  /** `exited` -> `closed` once no output stream is open. */
  #maybeClose(): void {
    if (this.#state !== "exited" || this.#openStreams > 0) return;
    this.#state = "closed";
    clearTimeout(this.killTimer?.timer);
    const seq = this.ring.takeSeq();
    this.#emit(`{"method":"process/closed","params":{"processId":${this.#idJson},"seq":${seq}}}`);
    this.#wake();
    this.#options.onClosed();
  }

  /** Resolves on the next output, exit or close (or never, if none comes). */
  changed(): { promise: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const promise = new Promise<void>((resolve) => (wake = resolve));
    this.#waiters.add(wake);
    return { promise, cancel: () => this.#waiters.delete(wake) };
  }

  /** The `process/read` answer for a cursor, right now. */
  snapshot(afterSeq: number, maxBytes: number | undefined): ResultOf<"process/read"> {
    const page = this.ring.page(afterSeq, maxBytes);
    const response: ResultOf<"process/read"> = {
      chunks: page.chunks,
      nextSeq: page.nextSeq,
      exited: this.exited,
      exitCode: this.exitCode,
      closed: this.closed,
      failure: null,
      sandboxDenied: this.sandboxDenied,
    };
    const extensions = this.#options.extensions();
    if (extensions.has("processLosslessOutput")) {
      response.evictedBytes = this.ring.evictedBytesAfter(afterSeq);
    }
    if (extensions.has("processSignals")) response.signal = this.exitSignal;
    return response;
  }

  /** Returns true when the writeId was accepted before (and is still remembered). */
  knowsWrite(writeId: string): boolean {
    return this.#writeIds.has(writeId);
  }

  /** Returns true when the writeId is new (and remembers it). */
  rememberWrite(writeId: string): boolean {
    if (this.#writeIds.has(writeId)) return false;
    this.#writeIds.add(writeId);
    if (this.#writeIdOrder.length < REMEMBERED_WRITE_IDS) {
      this.#writeIdOrder.push(writeId);
      return true;
    }
    // Forget the oldest in O(1): the set's first entry sits behind every id deleted before it.
    this.#writeIds.delete(this.#writeIdOrder[this.#oldestWriteId]!);
    this.#writeIdOrder[this.#oldestWriteId] = writeId;
    this.#oldestWriteId = (this.#oldestWriteId + 1) % REMEMBERED_WRITE_IDS;
    return true;
  }
}
