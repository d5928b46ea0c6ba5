/**
 * The outbound side of a byte-stream transport: messages batched into as few
 * writes as possible, with the buffered size bounded.
 *
 * @module
 */

import { OUTBOUND_HIGH_WATER_BYTES, outboundString, type OutboundText } from "./transport.ts";

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
