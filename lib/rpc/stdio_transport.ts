/**
 * Newline-delimited JSON over a pair of byte streams (the server's stdin and
 * stdout, or a spawned server's pipes on the client side).
 *
 * @module
 */

import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Inbound,
  OUTBOUND_HIGH_WATER_BYTES,
  outboundString,
  type OutboundText,
  type Transport,
} from "./transport.ts";

/** Options for {@linkcode LineSplitStream}. */
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
 * Splits bytes into lines, one message per line. Blank (whitespace-only)
 * lines are skipped; invalid UTF-8 and over-long lines become faults.
 *
 * @example Split two messages
 * ```ts
 * import { LineSplitStream } from "./stdio_transport.ts";
 * const input = ReadableStream.from([new TextEncoder().encode('{"a":1}\n\n{"b":2}\n')]);
 * const lines = await Array.fromAsync(input.pipeThrough(new LineSplitStream()));
 * console.log(lines); // ['{"a":1}', '{"b":2}']
 * ```
 */
export class LineSplitStream extends TransformStream<Uint8Array, Inbound> {
  /**
   * Creates a splitter.
   *
   * @param options The line length limit.
   */
  constructor(options: LineSplitOptions = {}) {
    const max = options.maxLineBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
    let parts: Uint8Array[] = [];
    let size = 0;
    let overflow = false;
    const emit = (controller: TransformStreamDefaultController<Inbound>) => {
      if (overflow) {
        controller.enqueue({ fault: `message exceeds the limit of ${max} bytes` });
      } else if (size > 0) {
        let bytes: Uint8Array;
        if (parts.length === 1) {
          bytes = parts[0]!;
        } else {
          bytes = new Uint8Array(size);
          let at = 0;
          for (const part of parts) {
            bytes.set(part, at);
            at += part.length;
          }
        }
        let text: string | undefined;
        try {
          text = decoder.decode(bytes);
        } catch {
          controller.enqueue({ fault: "invalid UTF-8 in message" });
        }
        if (text !== undefined && !isBlank(text)) controller.enqueue(text);
      }
      parts = [];
      size = 0;
      overflow = false;
    };
    const append = (piece: Uint8Array) => {
      if (overflow || piece.length === 0) return;
      if (size + piece.length > max) {
        overflow = true;
        parts = [];
        size = 0;
        return;
      }
      parts.push(piece);
      size += piece.length;
    };
    super({
      transform(chunk, controller) {
        let start = 0;
        while (start < chunk.length) {
          const nl = chunk.indexOf(10, start);
          if (nl === -1) {
            append(chunk.subarray(start));
            break;
          }
          append(chunk.subarray(start, nl));
          emit(controller);
          start = nl + 1;
        }
      },
      flush(controller) {
        emit(controller);
      },
    });
  }
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
 * Builds a newline-delimited JSON transport over byte streams.
 *
 * @param input Bytes from the peer.
 * @param output Bytes to the peer.
 * @param options Limits and labels.
 */
export function stdioTransport(
  input: ReadableStream<Uint8Array>,
  output: WritableStream<Uint8Array>,
  options: StdioTransportOptions = {},
): Transport {
  const writer = output.getWriter();
  const encoder = new TextEncoder();
  let closed = false;
  const abort = new AbortController();
  const queue = new OutboundQueue(
    (text) => writer.write(encoder.encode(text)),
    () => close(),
  );
  const readable = input.pipeThrough(new LineSplitStream(options), { signal: abort.signal });
  function close(): void {
    if (closed) return;
    closed = true;
    queue.close();
    abort.abort();
    writer.close().catch(() => {});
  }
  return {
    readable,
    send: (text) => queue.push(text),
    close,
    parseErrorPrefix: options.parseErrorPrefix ??
      "failed to parse JSON-RPC message from exec-server stdio",
    label: options.label ?? "exec-server stdio",
  };
}
