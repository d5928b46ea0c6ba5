/**
 * Newline-delimited JSON over a pair of byte channels: the server's stdin and
 * stdout, read and written directly, or a spawned server's pipes (web
 * streams) on the client side.
 *
 * @module
 */

import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Inbound,
  OUTBOUND_HIGH_WATER_BYTES,
  outboundString,
  type OutboundText,
  receiveStream,
  type Transport,
} from "./transport.ts";

/** Options for {@linkcode LineSplitter}. */
export interface LineSplitOptions {
  /**
   * Longest accepted line in bytes; a longer line yields one fault and the
   * stream resynchronises at the next newline.
   *
   * @default {64 MiB}
   */
  maxLineBytes?: number;
}

function isBlank(line: string): boolean {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 13) return false;
  }
  return true;
}

/**
 * Splits bytes into lines, one message per line, without web streams (the
 * server's stdio reads `Deno.stdin` with it). Blank (whitespace-only) lines
 * are skipped; invalid UTF-8 and over-long lines become faults.
 *
 * @example Split two messages fed in three pieces
 * ```ts
 * import { LineSplitter } from "./stdio_transport.ts";
 * const lines: unknown[] = [];
 * const splitter = new LineSplitter((line) => lines.push(line));
 * const bytes = new TextEncoder().encode('{"a":1}\n\n{"b":2}\n{"c"');
 * splitter.push(bytes.subarray(0, 3));
 * splitter.push(bytes.subarray(3));
 * splitter.end();
 * console.log(lines); // ['{"a":1}', '{"b":2}', '{"c"']
 * ```
 */
export class LineSplitter {
  #max: number;
  #emit: (message: Inbound) => void;
  #decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  #parts: Uint8Array[] = [];
  #size = 0;
  #overflow = false;

  /**
   * Creates a splitter.
   *
   * @param emit Called with each line (or fault), in order, from {@linkcode push} and {@linkcode end}.
   * @param options The line length limit.
   */
  constructor(emit: (message: Inbound) => void, options: LineSplitOptions = {}) {
    this.#emit = emit;
    this.#max = options.maxLineBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /**
   * True while the start of an unfinished line is kept as a view of a pushed chunk: the
   * chunk's bytes must not be overwritten until the line is complete.
   */
  get holding(): boolean {
    return this.#parts.length > 0;
  }

  /**
   * Splits a chunk; complete lines are emitted before it returns.
   *
   * @param chunk The next bytes of the input.
   */
  push(chunk: Uint8Array): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) {
        this.#append(chunk.subarray(start));
        break;
      }
      this.#append(chunk.subarray(start, nl));
      this.#line();
      start = nl + 1;
    }
  }

  /** Ends the input: an unterminated last line is emitted. */
  end(): void {
    this.#line();
  }

  #append(piece: Uint8Array): void {
    if (this.#overflow || piece.length === 0) return;
    if (this.#size + piece.length > this.#max) {
      this.#overflow = true;
      this.#parts = [];
      this.#size = 0;
      return;
    }
    this.#parts.push(piece);
    this.#size += piece.length;
  }

  #line(): void {
    const parts = this.#parts;
    const overflow = this.#overflow;
    const size = this.#size;
    this.#parts = [];
    this.#size = 0;
    this.#overflow = false;
    if (overflow) {
      this.#emit({ fault: `message exceeds the limit of ${this.#max} bytes` });
      return;
    }
    if (size === 0) return;
    let text: string;
    try {
      text = this.#decoder.decode(parts.length === 1 ? parts[0]! : concat(parts, size));
    } catch {
      this.#emit({ fault: "invalid UTF-8 in message" });
      return;
    }
    if (!isBlank(text)) this.#emit(text);
  }
}

function concat(parts: Uint8Array[], size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.length;
  }
  return bytes;
}

/**
 * Batches outbound messages into as few writes as possible and tracks the
 * buffered size, so senders can wait while the peer is not reading.
 */
export class OutboundQueue {
  #pending: string[] = [];
  #bytes = 0;
  #flushing = false;
  #closed = false;
  #waiters: (() => void)[] = [];
  #write: (text: string) => Promise<void>;
  #highWater: number;
  #onError: (err: unknown) => void;

  /**
   * Creates a queue.
   *
   * @param write Writes a batch (already newline-joined text).
   * @param onError Called once when a write fails.
   * @param highWater High-water mark in bytes.
   */
  constructor(
    write: (text: string) => Promise<void>,
    onError: (err: unknown) => void,
    highWater: number = OUTBOUND_HIGH_WATER_BYTES,
  ) {
    this.#write = write;
    this.#onError = onError;
    this.#highWater = highWater;
  }

  /** Bytes (UTF-16 units) waiting to be written. */
  get bufferedAmount(): number {
    return this.#bytes;
  }

  /** Queues a message; resolves when the buffer is below the high-water mark. */
  push(message: OutboundText): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const text = outboundString(message);
    this.#pending.push(text);
    this.#bytes += text.length;
    if (!this.#flushing) this.#flush();
    if (this.#bytes <= this.#highWater) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Drops everything queued and releases waiters. */
  close(): void {
    this.#closed = true;
    this.#pending = [];
    this.#bytes = 0;
    this.#release();
  }

  #release(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#pending.length > 0 && !this.#closed) {
        const batch = this.#pending;
        this.#pending = [];
        let size = 0;
        for (const text of batch) size += text.length;
        await this.#write(batch.join("\n") + "\n");
        this.#bytes -= size;
        if (this.#bytes <= this.#highWater) this.#release();
      }
    } catch (err) {
      this.close();
      this.#onError(err);
    } finally {
      this.#flushing = false;
    }
  }
}

/** Options for {@linkcode stdioTransport}. */
export interface StdioTransportOptions extends LineSplitOptions {
  /**
   * Prefix of malformed-message replies.
   *
   * @default {"failed to parse JSON-RPC message from exec-server stdio"}
   */
  parseErrorPrefix?: string;
  /**
   * Label for logs.
   *
   * @default {"exec-server stdio"}
   */
  label?: string;
}

/**
 * Bytes read into the caller's buffer, as `Deno.stdin` gives them: no web stream in between
 * (a server answering its first request over byte streams ran about 25 M more instructions
 * than one reading `Deno.stdin` directly).
 */
export interface ByteReader {
  /** Reads into `buffer`: the count of bytes read, or `null` at the end. */
  read(buffer: Uint8Array): Promise<number | null>;
}

/** A sink that may take part of each write, as `Deno.stdout`. */
export interface ByteWriter {
  /** Writes a prefix of `bytes`: the count written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes the sink (the peer sees the end of the output). */
  close(): void;
}

/** Bytes from the peer: a byte stream or a {@linkcode ByteReader}. */
export type ByteSource = ReadableStream<Uint8Array> | ByteReader;

/** Bytes to the peer: a byte stream or a {@linkcode ByteWriter}. */
export type ByteSink = WritableStream<Uint8Array> | ByteWriter;

/** Size of each read of a {@linkcode ByteReader}. */
const READ_BYTES = 64 * 1024;

/** Reads chunks of `input`: the next one, `null` at the end; and how to stop reading it. */
function chunksOf(
  input: ByteSource,
  splitter: LineSplitter,
): { next(): Promise<Uint8Array | null>; cancel(): void } {
  if ("getReader" in input) {
    const reader = input.getReader();
    return {
      next: () => reader.read().then(({ done, value }) => done ? null : value),
      cancel: () => void reader.cancel().catch(() => {}),
    };
  }
  let buffer = new Uint8Array(READ_BYTES);
  // A read under way cannot be taken back: cancelling settles it with the end instead.
  const cancelled = Promise.withResolvers<null>();
  let reading = true;
  return {
    async next() {
      if (!reading) return null;
      // An unfinished line is kept as a view of the last buffer: read into a new one.
      if (splitter.holding) buffer = new Uint8Array(READ_BYTES);
      const n = await Promise.race([input.read(buffer), cancelled.promise]);
      return n === null || !reading ? null : buffer.subarray(0, n);
    },
    // The abandoned read may still fill the buffer; nothing reads it again.
    cancel() {
      reading = false;
      cancelled.resolve(null);
    },
  };
}

/** Writes whole texts to `output` one after the other, and closes it after the last write. */
function writerOf(output: ByteSink): { write(bytes: Uint8Array): Promise<void>; close(): void } {
  if ("getWriter" in output) {
    const writer = output.getWriter();
    return {
      write: (bytes) => writer.write(bytes),
      close: () => void writer.close().catch(() => {}),
    };
  }
  let last: Promise<void> = Promise.resolve();
  return {
    write(bytes) {
      last = (async () => {
        for (let at = 0; at < bytes.length;) at += await output.write(bytes.subarray(at));
      })();
      return last;
    },
    close() {
      last.catch(() => {}).finally(() => {
        try {
          output.close();
        } catch { /* already closed */ }
      });
    },
  };
}

/**
 * Builds a newline-delimited JSON transport over a pair of byte channels: web streams
 * (a spawned server's pipes), or a reader and a writer such as `Deno.stdin` and
 * `Deno.stdout`.
 *
 * @param input Bytes from the peer.
 * @param output Bytes to the peer.
 * @param options Limits and labels.
 */
export function stdioTransport(
  input: ByteSource,
  output: ByteSink,
  options: StdioTransportOptions = {},
): Transport {
  const writer = writerOf(output);
  const encoder = new TextEncoder();
  let closed = false;
  const queue = new OutboundQueue(
    (text) => writer.write(encoder.encode(text)),
    () => close(),
  );
  const messages: Inbound[] = [];
  let taken = 0;
  const splitter = new LineSplitter((message) => messages.push(message), options);
  const source = chunksOf(input, splitter);
  let ended = false;
  /** The next message already split off, if any. */
  function split(): Inbound | undefined {
    if (taken === messages.length) return undefined;
    const message = messages[taken++]!;
    if (taken === messages.length) messages.length = taken = 0;
    return message;
  }
  async function read(): Promise<Inbound | null> {
    while (!closed && !ended) {
      const chunk = await source.next();
      if (closed) break;
      if (chunk === null) {
        ended = true;
        splitter.end();
      } else splitter.push(chunk);
      const message = split();
      if (message !== undefined) return message;
    }
    return null;
  }
  function receive(): Inbound | null | Promise<Inbound | null> {
    if (closed) return null;
    return split() ?? (ended ? null : read());
  }
  let stream: ReadableStream<Inbound> | undefined;
  /** `receive` as a stream, made for a reader that asks for one. */
  function readable(): ReadableStream<Inbound> {
    return stream ??= receiveStream(receive, close);
  }
  function close(): void {
    if (closed) return;
    closed = true;
    queue.close();
    source.cancel();
    writer.close();
  }
  return {
    get readable() {
      return readable();
    },
    receive,
    send: (text) => queue.push(text),
    close,
    parseErrorPrefix: options.parseErrorPrefix ??
      "failed to parse JSON-RPC message from exec-server stdio",
    label: options.label ?? "exec-server stdio",
  };
}
