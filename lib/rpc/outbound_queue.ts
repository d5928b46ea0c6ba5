/**
 * The outbound side of a byte-stream transport: messages batched into as few
 * writes as possible, with the buffered size bounded.
 *
 * @module
 */

import { StreamedJson } from "../protocol/streamed_json.ts";
import { type Outbound, OUTBOUND_HIGH_WATER_BYTES, outboundString, roomFor } from "./transport.ts";

/** A streamed message waiting its turn, and the sender waiting for its end. */
interface QueuedStream {
  readonly message: StreamedJson;
  readonly sent: () => void;
}

/**
 * Batches outbound messages into as few writes as possible and tracks the
 * buffered size, so senders can wait while the peer is not reading. A
 * streamed message is written chunk by chunk, each write awaited (the pipe's
 * own back-pressure), and messages queued meanwhile follow its line.
 */
export class OutboundQueue {
  #pending: (string | QueuedStream)[] = [];
  #bytes = 0;
  #flushing = false;
  #closed = false;
  #waiters: { limit: number; wake: () => void }[] = [];
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

  /**
   * Queues a message; resolves when the buffer is below the high-water mark, or for a bulk
   * message below `BULK_QUEUED_BYTES` ({@linkcode roomFor}); a streamed message: once it is
   * written, or dropped.
   */
  push(message: Outbound): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (message instanceof StreamedJson) {
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#pending.push({ message, sent: resolve });
      if (!this.#flushing) this.#flush();
      return promise;
    }
    const text = outboundString(message);
    this.#pending.push(text);
    this.#bytes += text.length;
    if (!this.#flushing) this.#flush();
    const limit = roomFor(text.length, this.#highWater);
    if (this.#bytes <= limit) return Promise.resolve();
    return new Promise((wake) => this.#waiters.push({ limit, wake }));
  }

  /** Drops everything queued and releases waiters. */
  close(): void {
    this.#closed = true;
    for (const item of this.#pending) if (typeof item !== "string") item.sent();
    this.#pending = [];
    this.#bytes = 0;
    this.#release();
  }

  /** Wakes the senders whose limit the queue is now within (all of them once closed). */
  #release(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) {
      if (this.#closed || this.#bytes <= waiter.limit) waiter.wake();
      else this.#waiters.push(waiter);
    }
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#pending.length > 0 && !this.#closed) {
        const first = this.#pending[0]!;
        if (typeof first !== "string") {
          this.#pending.shift();
          await this.#stream(first);
          continue;
        }
        // The texts before the next streamed message, if any, in one write.
        let end = 1;
        while (end < this.#pending.length && typeof this.#pending[end] === "string") end++;
        const batch = this.#pending.splice(0, end) as string[];
        let size = 0;
        for (const text of batch) size += text.length;
        await this.#write(batch.join("\n") + "\n");
        this.#bytes -= size;
        this.#release();
      }
    } catch (err) {
      this.close();
      this.#onError(err);
    } finally {
      this.#flushing = false;
    }
  }

  /** Writes a streamed message as one line, a chunk at a time. */
  async #stream({ message, sent }: QueuedStream): Promise<void> {
    try {
      await this.#write(message.head);
      for await (const chunk of message.string.take()) {
        if (this.#closed) return;
        await this.#write(chunk);
      }
      await this.#write(message.tail + "\n");
    } finally {
      sent();
    }
  }
}
