/**
 * The client's view of one remote process: its output in `seq` order (with
 * explicit markers for output the server evicted before it could be read),
 * or as text; stdin writes with idempotent `writeId`s and end of input;
 * signals, terminal size and the exit status.
 *
 * @module
 */

import type { ParamsOf, ResultOf } from "../protocol/methods.ts";

/** The stream an output chunk came from (`pty` for processes started with `tty: true`). */
export type OutputStreamName = "stdout" | "stderr" | "pty";

/** Output bytes the process wrote, in `seq` order. */
export interface OutputChunk {
  /** Discriminator. */
  readonly kind: "output";
  /** The chunk's sequence number (shared with the `exited` and `closed` events). */
  readonly seq: number;
  /** The stream the bytes came from. */
  readonly stream: OutputStreamName;
  /** The raw bytes. */
  readonly data: Uint8Array;
}

/**
 * Output that is lost: the server evicted it from its retained output
 * (1 MiB / 50,000 chunks per process) before this handle could read it. All
 * output with a seq in `fromSeq..toSeq` (inclusive) is missing; the range may
 * also cover the seq of the `exited` event.
 */
export interface OutputGap {
  /** Discriminator. */
  readonly kind: "gap";
  /** First missing seq. */
  readonly fromSeq: number;
  /** Last missing seq. */
  readonly toSeq: number;
}

/** What iterating a {@linkcode ProcessHandle} yields. */
export type ProcessEvent = OutputChunk | OutputGap;

/**
 * A process started with `ExecClient.startProcess` (or attached with
 * `ExecClient.attachProcess`).
 *
 * Iterate it (once) for its output: chunks arrive in `seq` order, exactly
 * once, across reconnects; iteration ends after the process's `closed`
 * event. A consumer that falls behind or starts iterating late catches up
 * from the server's retained output; output the server has already evicted
 * is reported as an {@linkcode OutputGap}, never skipped silently.
 *
 * @example Run a command and collect its output
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * import { serveWebSocket } from "@exec-server/exec-server/server";
 * const server = await serveWebSocket();
 * try {
 *   await using client = await connect(server.url);
 *   const proc = await client.startProcess({ argv: ["/bin/echo", "hi"] });
 *   for await (const event of proc) {
 *     if (event.kind === "output") await Deno.stdout.write(event.data);
 *   }
 *   console.log("exit code", await proc.exited); // 0
 * } finally {
 *   await server.shutdown();
 * }
 * ```
 */
export interface ProcessHandle extends AsyncIterable<ProcessEvent> {
  /** The session-scoped process id. */
  readonly processId: string;
  /** Resolves with the exit code once the server reports it; rejects if the process is lost. */
  readonly exited: Promise<number>;
  /** The exit code once known. */
  readonly exitCode: number | undefined;
  /**
   * The POSIX name of the signal that ended the process (e.g. `SIGTERM`),
   * `null` if it exited normally, `undefined` while unknown or when the
   * server does not report it (extension `processSignals`). Set before
   * {@linkcode ProcessHandle.exited} resolves.
   */
  readonly exitSignal: string | null | undefined;
  /**
   * Writes bytes (a string is UTF-8 encoded) to the process's stdin. Writes
   * are sent one after another in call order; each gets a fresh `writeId`, and
   * a write retried after a reconnect reuses it, so it is delivered once.
   * Rejects if the server does not accept it (e.g. the process was started
   * without `pipeStdin`, or its stdin was closed).
   *
   * @param data The bytes.
   */
  write(data: Uint8Array | string): Promise<void>;
  /**
   * Ends the process's input after the writes before it (extension
   * `processStdinClose`): the pipe is closed, or on a tty an end-of-file
   * character (Ctrl-D) is typed. Closing an already closed stdin succeeds.
   */
  closeStdin(): Promise<void>;
  /** Sends SIGINT to the process group (`process/signal`; Ctrl-C on a tty). */
  interrupt(): Promise<void>;
  /**
   * Sends a signal to the process group. Names other than `interrupt` need
   * the `processSignals` extension.
   *
   * @param name The signal, e.g. `terminate` (SIGTERM) or `hangup` (SIGHUP).
   */
  signal(name: ParamsOf<"process/signal">["signal"]): Promise<void>;
  /**
   * Kills the process group (`process/terminate`); resolves with whether it
   * was running. With `graceMs` (extension `processSignals`) the group gets
   * SIGTERM first and SIGKILL only if it is still there after the grace.
   *
   * @param options The grace period.
   */
  terminate(options?: { graceMs?: number }): Promise<boolean>;
  /**
   * Sets the terminal size of a process started with `tty: true` (extension
   * `processResize`); the process gets SIGWINCH.
   *
   * @param rows Terminal rows.
   * @param cols Terminal columns.
   */
  resize(rows: number, cols: number): Promise<void>;
  /**
   * The output as text: iterates the handle (instead of iterating it
   * directly) and decodes each stream as UTF-8 with its own streaming
   * decoder, so a character split across chunks is yielded whole. Invalid
   * bytes become U+FFFD. Gaps (output the server evicted) are skipped;
   * iterate the handle itself to see them, or start the process with
   * `output: "block"` to have none.
   *
   * @param options `stream` keeps only that stream's text.
   */
  text(options?: { stream?: OutputStreamName }): AsyncIterable<string>;
  /**
   * The process's stdin as a web stream: each chunk is a {@linkcode ProcessHandle.write},
   * `close()` is {@linkcode ProcessHandle.closeStdin}.
   */
  readonly stdin: WritableStream<Uint8Array>;
  /**
   * The process's stdout (with `tty: true`: the terminal's output) as a byte
   * stream. `stdout` and `stderr` share one reader of the handle: the first
   * access to either iterates the handle (so do not also iterate it or use
   * `text()`). Each buffers up to 1 MiB for its reader; a stream left unread
   * beyond that holds back the other, so read both, or `cancel()` the one you
   * do not need (its output is then dropped). Gaps are skipped, as by `text()`.
   */
  readonly stdout: ReadableStream<Uint8Array>;
  /** The process's stderr as a byte stream (empty with `tty: true`); see `stdout`. */
  readonly stderr: ReadableStream<Uint8Array>;
}

/** What a {@linkcode TrackedProcess} needs from its client. Calls survive reconnects. */
export interface ProcessHost {
  /** `process/read` without a wait. */
  read(
    processId: string,
    afterSeq: number,
    maxBytes?: number,
  ): Promise<ResultOf<"process/read">>;
  /** `process/write` with a fixed `writeId`. */
  write(processId: string, chunk: Uint8Array, writeId: string): Promise<ResultOf<"process/write">>;
  /** `process/write` with `closeStdin` and an empty chunk, with a fixed `writeId`. */
  closeStdin(processId: string, writeId: string): Promise<ResultOf<"process/write">>;
  /** `process/signal`. */
  signal(processId: string, signal: ParamsOf<"process/signal">["signal"]): Promise<void>;
  /** `process/terminate`, with a grace period if given. */
  terminate(processId: string, graceMs?: number): Promise<boolean>;
  /** `process/resize`. */
  resize(processId: string, rows: number, cols: number): Promise<void>;
  /** The handle needs no more notifications. */
  release(handle: TrackedProcess): void;
}

/** Options for {@linkcode TrackedProcess}. */
export interface TrackedProcessOptions {
  /**
   * Events with a seq up to this one are not wanted (0 = from the start).
   *
   * @default {0}
   */
  afterSeq?: number;
  /**
   * Output bytes buffered for a slow consumer before the handle stops
   * buffering and reads from the server's retained output instead.
   *
   * @default {4 MiB}
   */
  maxBufferedBytes?: number;
  /** Read retained output right away (for a process that may already have output). */
  catchUp?: boolean;
  /**
   * Tell the server how far output was taken, with a small `process/read`
   * every 256 KiB or 10,000 chunks, for processes started with
   * `output: "block"` (the server keeps unread output and stops the process
   * when its buffer is full of it).
   *
   * @default {false}
   */
  acknowledge?: boolean;
}

type ProcessNotification =
  | { method: "process/output"; params: ParamsOf<"process/output"> }
  | { method: "process/exited"; params: ParamsOf<"process/exited"> }
  | { method: "process/closed"; params: ParamsOf<"process/closed"> };

/** Output bytes each of `stdout` and `stderr` buffers for its reader. */
const STREAM_BUFFER_BYTES = 1024 * 1024;
/** Stashed out-of-order notifications kept while a read is pending. */
const MAX_STASHED = 4096;
const DEFAULT_MAX_BUFFERED = 4 * 1024 * 1024;
/** With `acknowledge`: output taken between two acknowledgements (a quarter of the server's ring). */
const ACK_EVERY_BYTES = 256 * 1024;
const ACK_EVERY_CHUNKS = 10_000;

/**
 * The implementation of {@linkcode ProcessHandle}: it orders notifications
 * by seq, fills gaps with `process/read {afterSeq}`, and buffers output for a
 * single consumer up to a limit.
 *
 * Invariant: every event with `seq <= #cursor` is accounted for (queued for
 * the consumer, delivered, reported in a gap, or an exit/close event).
 */
export class TrackedProcess implements ProcessHandle {
  /** The session-scoped process id. */
  readonly processId: string;
  /** Resolves with the exit code. */
  readonly exited: Promise<number>;
  #host: ProcessHost;
  #stdin: WritableStream<Uint8Array> | undefined;
  #streams: { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> } | undefined;
  #cursor: number;
  #latest: number;
  #resync: boolean;
  #probed = false;
  #queue: ProcessEvent[] = [];
  #head = 0;
  #queuedBytes = 0;
  #maxBuffered: number;
  #stash = new Map<number, ProcessNotification>();
  #exitSeq: number | undefined;
  #closedSeq: number | undefined;
  #exitCode: number | undefined;
  #exitSignal: string | null | undefined;
  #acknowledge: boolean;
  #unackedBytes = 0;
  #unackedChunks = 0;
  #acking = false;
  #resolveExited!: (code: number) => void;
  #rejectExited!: (err: unknown) => void;
  #failure: { error: unknown } | undefined;
  #done = false;
  #filling = false;
  #changed = Promise.withResolvers<void>();
  #writeSeq = 0;
  #writePrefix = crypto.randomUUID();
  #writeChain: Promise<unknown> = Promise.resolve();

  /**
   * Creates a tracker; the client routes the process's notifications to
   * {@linkcode TrackedProcess.notify}.
   *
   * @param processId The process id.
   * @param host The client.
   * @param options Starting seq and buffer limit.
   */
  constructor(processId: string, host: ProcessHost, options: TrackedProcessOptions = {}) {
    this.processId = processId;
    this.#host = host;
    this.#cursor = options.afterSeq ?? 0;
    this.#latest = this.#cursor;
    this.#resync = options.catchUp ?? false;
    this.#maxBuffered = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED;
    this.#acknowledge = options.acknowledge ?? false;
    this.exited = new Promise<number>((resolve, reject) => {
      this.#resolveExited = resolve;
      this.#rejectExited = reject;
    });
    this.exited.catch(() => {});
    if (this.#resync) void this.#fill();
  }

  /** The exit code once known. */
  get exitCode(): number | undefined {
    return this.#exitCode;
  }

  /** The signal that ended the process, `null` after a normal exit, `undefined` while unknown. */
  get exitSignal(): string | null | undefined {
    return this.#exitSignal;
  }

  /** True once every event up to `closed` is accounted for, or the handle failed. */
  get finished(): boolean {
    return this.#done || this.#failure !== undefined;
  }

  /**
   * Takes one notification of this process (in any order, duplicates allowed).
   *
   * @param event The notification.
   */
  notify(event: ProcessNotification): void {
    if (this.finished) return;
    const seq = event.params.seq;
    this.#noteTerminal(event);
    if (seq > this.#latest) this.#latest = seq;
    if (seq <= this.#cursor) return;
    if (seq === this.#cursor + 1 && !this.#filling && !this.#resync && this.#stash.size === 0) {
      if (event.method !== "process/output" || this.#queuedBytes < this.#maxBuffered) {
        this.#apply(event);
        this.#wake();
      }
      // Otherwise the consumer is behind: the output stays on the server until it catches up.
      return;
    }
    if (event.method !== "process/output" || this.#queuedBytes < this.#maxBuffered) {
      if (this.#stash.size < MAX_STASHED) this.#stash.set(seq, event);
    }
    void this.#fill();
  }

  /** The connection was re-established: read whatever was missed while it was down. */
  resync(): void {
    if (this.finished) return;
    this.#resync = true;
    this.#probed = false;
    void this.#fill();
  }

  /**
   * Fails the handle: queued output is still delivered, then iteration throws.
   *
   * @param error The reason.
   */
  fail(error: unknown): void {
    if (this.finished) return;
    this.#failure = { error };
    this.#rejectExited(error);
    this.#host.release(this);
    this.#wake();
  }

  write(data: Uint8Array | string): Promise<void> {
    const writeId = `${this.#writePrefix}:${++this.#writeSeq}`;
    const chunk = typeof data === "string" ? new TextEncoder().encode(data) : data.slice();
    const run = async (): Promise<void> => {
      const { status } = await this.#host.write(this.processId, chunk, writeId);
      if (status !== "accepted") {
        throw new Error(`Cannot write to process "${this.processId}": ${WRITE_STATUS[status]}`);
      }
    };
    const result = this.#writeChain.then(run);
    this.#writeChain = result.catch(() => {});
    return result;
  }

  closeStdin(): Promise<void> {
    const writeId = `${this.#writePrefix}:${++this.#writeSeq}`;
    const run = async (): Promise<void> => {
      const { status } = await this.#host.closeStdin(this.processId, writeId);
      if (status !== "accepted" && status !== "stdinClosed") {
        throw new Error(
          `Cannot close the stdin of process "${this.processId}": ${WRITE_STATUS[status]}`,
        );
      }
    };
    const result = this.#writeChain.then(run);
    this.#writeChain = result.catch(() => {});
    return result;
  }

  interrupt(): Promise<void> {
    return this.#host.signal(this.processId, "interrupt");
  }

  signal(name: ParamsOf<"process/signal">["signal"]): Promise<void> {
    return this.#host.signal(this.processId, name);
  }

  terminate(options: { graceMs?: number } = {}): Promise<boolean> {
    return this.#host.terminate(this.processId, options.graceMs);
  }

  resize(rows: number, cols: number): Promise<void> {
    return this.#host.resize(this.processId, rows, cols);
  }

  async *text(options: { stream?: OutputStreamName } = {}): AsyncIterable<string> {
    const decoders = new Map<OutputStreamName, TextDecoder>();
    for await (const event of this) {
      if (event.kind !== "output") continue;
      if (options.stream !== undefined && event.stream !== options.stream) continue;
      let decoder = decoders.get(event.stream);
      if (!decoder) {
        decoders.set(event.stream, decoder = new TextDecoder("utf-8", { ignoreBOM: true }));
      }
      const text = decoder.decode(event.data, { stream: true });
      if (text !== "") yield text;
    }
    for (const decoder of decoders.values()) {
      const rest = decoder.decode();
      if (rest !== "") yield rest;
    }
  }

  get stdin(): WritableStream<Uint8Array> {
    return this.#stdin ??= new WritableStream<Uint8Array>({
      write: (chunk) => this.write(chunk),
      close: () => this.closeStdin(),
    });
  }

  get stdout(): ReadableStream<Uint8Array> {
    return this.#outputStreams().stdout;
  }

  get stderr(): ReadableStream<Uint8Array> {
    return this.#outputStreams().stderr;
  }

  /** Splits the one iteration of the handle into a stdout and a stderr stream. */
  #outputStreams(): { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> } {
    if (this.#streams) return this.#streams;
    type Sink = { controller?: ReadableStreamDefaultController<Uint8Array>; cancelled: boolean };
    const sinks = { stdout: {} as Sink, stderr: {} as Sink };
    sinks.stdout.cancelled = sinks.stderr.cancelled = false;
    let pulled = Promise.withResolvers<void>();
    const make = (sink: Sink) =>
      new ReadableStream<Uint8Array>({
        start: (controller) => {
          sink.controller = controller;
        },
        pull: () => pulled.resolve(),
        cancel: () => {
          sink.cancelled = true;
          pulled.resolve();
        },
      }, new ByteLengthQueuingStrategy({ highWaterMark: STREAM_BUFFER_BYTES }));
    this.#streams = { stdout: make(sinks.stdout), stderr: make(sinks.stderr) };
    const pump = async (): Promise<void> => {
      try {
        for await (const event of this) {
          if (event.kind !== "output") continue;
          const sink = event.stream === "stderr" ? sinks.stderr : sinks.stdout;
          if (sink.cancelled) continue;
          sink.controller!.enqueue(event.data);
          while (!sink.cancelled && sink.controller!.desiredSize! <= 0) {
            await pulled.promise;
            pulled = Promise.withResolvers<void>();
          }
        }
        for (const sink of Object.values(sinks)) if (!sink.cancelled) sink.controller!.close();
      } catch (err) {
        for (const sink of Object.values(sinks)) if (!sink.cancelled) sink.controller!.error(err);
      }
    };
    void pump();
    return this.#streams;
  }

  /** Yields output in seq order until the `closed` event; throws if the handle failed. */
  async *[Symbol.asyncIterator](): AsyncIterator<ProcessEvent> {
    while (true) {
      if (this.#head < this.#queue.length) {
        const event = this.#queue[this.#head]!;
        this.#queue[this.#head++] = undefined as unknown as ProcessEvent;
        if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
          this.#queue = this.#queue.slice(this.#head);
          this.#head = 0;
        }
        if (event.kind === "output") this.#queuedBytes -= event.data.length;
        if (this.#behind() && this.#queuedBytes < this.#maxBuffered) void this.#fill();
        yield event;
        continue;
      }
      if (this.#failure) throw this.#failure.error;
      if (this.#done) return;
      if (this.#behind()) void this.#fill();
      await this.#changed.promise;
    }
  }

  #behind(): boolean {
    return this.#resync || this.#cursor < this.#latest || this.#stash.size > 0;
  }

  #wake(): void {
    this.#changed.resolve();
    this.#changed = Promise.withResolvers<void>();
  }

  #noteTerminal(event: ProcessNotification): void {
    if (event.method === "process/exited") {
      this.#exitSeq = event.params.seq;
      this.#setExitSignal(event.params.signal);
      this.#setExitCode(event.params.exitCode);
    } else if (event.method === "process/closed") {
      this.#closedSeq = event.params.seq;
    }
  }

  #setExitSignal(signal: string | null | undefined): void {
    if (signal !== undefined && this.#exitSignal === undefined) this.#exitSignal = signal;
  }

  #setExitCode(code: number): void {
    if (this.#exitCode !== undefined) return;
    this.#exitCode = code;
    this.#resolveExited(code);
  }

  #apply(event: ProcessNotification): void {
    this.#cursor = event.params.seq;
    if (event.method === "process/output") {
      const data = Uint8Array.fromBase64(event.params.chunk);
      this.#push({ kind: "output", seq: event.params.seq, stream: event.params.stream, data });
    }
    this.#checkDone();
    this.#maybeAcknowledge();
  }

  #push(event: ProcessEvent): void {
    this.#queue.push(event);
    if (event.kind === "output") {
      this.#queuedBytes += event.data.length;
      this.#unackedBytes += event.data.length;
      this.#unackedChunks++;
    }
  }

  /** Lets the server drop output up to the cursor (it keeps unread output with `output: "block"`). */
  #maybeAcknowledge(): void {
    if (!this.#acknowledge || this.#acking || this.finished) return;
    if (this.#unackedBytes < ACK_EVERY_BYTES && this.#unackedChunks < ACK_EVERY_CHUNKS) return;
    this.#unackedBytes = 0;
    this.#unackedChunks = 0;
    this.#acking = true;
    // A read after the cursor is the acknowledgement; its one chunk also arrives by notification.
    this.#host.read(this.processId, this.#cursor, 0)
      .catch(() => {}) // A lost connection is followed by a resync, which reads anyway.
      .finally(() => {
        this.#acking = false;
        this.#maybeAcknowledge();
      });
  }

  #checkDone(): void {
    if (this.#done || this.#closedSeq === undefined || this.#cursor < this.#closedSeq) return;
    this.#done = true;
    this.#stash.clear();
    this.#host.release(this);
  }

  #drainStash(): void {
    for (const seq of this.#stash.keys()) {
      if (seq <= this.#cursor) this.#stash.delete(seq);
    }
    while (true) {
      const next = this.#stash.get(this.#cursor + 1);
      if (!next) break;
      if (next.method === "process/output" && this.#queuedBytes >= this.#maxBuffered) break;
      this.#stash.delete(next.params.seq);
      this.#apply(next);
    }
  }

  async #fill(): Promise<void> {
    if (this.#filling || this.finished) return;
    this.#filling = true;
    try {
      while (!this.finished) {
        this.#drainStash();
        if (this.#done || !(this.#resync || this.#cursor < this.#latest)) break;
        if (this.#queuedBytes >= this.#maxBuffered) {
          // The consumer is behind; it resumes the fill. Learn the exit code meanwhile.
          if (this.#resync && this.#exitCode === undefined && !this.#probed) {
            this.#probed = true;
            const status = await this.#host.read(this.processId, this.#cursor, 0);
            if (status.exited) this.#setExitSignal(status.signal);
            if (status.exited && status.exitCode !== null) this.#setExitCode(status.exitCode);
            continue;
          }
          break;
        }
        const afterSeq = this.#cursor;
        this.#resync = false;
        const result = await this.#host.read(this.processId, afterSeq);
        if (this.finished) break;
        this.#applyRead(afterSeq, result);
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.#filling = false;
      this.#wake();
    }
  }

  /** Accounts for every event in `(afterSeq, nextSeq)` from a `process/read` result. */
  #applyRead(afterSeq: number, result: ResultOf<"process/read">): void {
    if (result.exited) this.#setExitSignal(result.signal);
    if (result.exited && result.exitCode !== null) this.#setExitCode(result.exitCode);
    if (afterSeq !== this.#cursor) return;
    const end = result.nextSeq - 1;
    if (end <= this.#cursor) return;
    if (result.closed && this.#closedSeq === undefined) this.#closedSeq = end;
    const chunks = result.chunks.filter((c) => c.seq > afterSeq && c.seq <= end);
    // Holes are seqs without a retained chunk: the exited/closed events, or
    // evicted chunks. Eviction drops the oldest chunks, so only the hole right
    // after `afterSeq` can hold evicted output.
    const known = new Set<number>();
    if (this.#exitSeq !== undefined) known.add(this.#exitSeq);
    if (this.#closedSeq !== undefined) known.add(this.#closedSeq);
    let prefixEnd = (chunks[0]?.seq ?? end + 1) - 1;
    if (result.exited && this.#exitSeq === undefined) {
      let later: number | undefined;
      let previous = chunks[0]?.seq ?? end + 1;
      for (const chunk of [...chunks.slice(1), { seq: end + 1 }]) {
        for (let seq = previous + 1; seq < chunk.seq && later === undefined; seq++) {
          if (!known.has(seq)) later = seq;
        }
        previous = chunk.seq;
      }
      if (later !== undefined) {
        this.#exitSeq = later;
        known.add(later);
      } else if (prefixEnd > afterSeq) {
        let size = 0;
        for (let seq = afterSeq + 1; seq <= prefixEnd; seq++) if (!known.has(seq)) size++;
        if (size === 1) {
          for (let seq = afterSeq + 1; seq <= prefixEnd; seq++) {
            if (!known.has(seq)) this.#exitSeq = seq;
          }
          known.add(this.#exitSeq!);
        }
      }
    }
    let prefixStart = afterSeq + 1;
    while (prefixStart <= prefixEnd && known.has(prefixStart)) prefixStart++;
    while (prefixEnd >= prefixStart && known.has(prefixEnd)) prefixEnd--;
    if (prefixStart <= prefixEnd) {
      this.#push({ kind: "gap", fromSeq: prefixStart, toSeq: prefixEnd });
    }
    for (const chunk of chunks) {
      const data = Uint8Array.fromBase64(chunk.chunk);
      this.#push({ kind: "output", seq: chunk.seq, stream: chunk.stream, data });
    }
    this.#cursor = end;
    if (end > this.#latest) this.#latest = end;
    this.#checkDone();
    this.#maybeAcknowledge();
  }
}

const WRITE_STATUS: Record<ResultOf<"process/write">["status"], string> = {
  accepted: "accepted",
  unknownProcess: "the server does not know the process",
  stdinClosed: "its stdin is closed (start it with pipeStdin: true)",
  starting: "it is still starting",
};
