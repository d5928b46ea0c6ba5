/**
 * Backpressure between a child's output reader and its consumer, merging
 * the reads that arrive while the consumer is congested.
 *
 * @module
 */

import { concatBytes } from "../host/bytes.ts";

/**
 * Delivers every read at once while the consumer keeps up (no added
 * latency). When `deliver` returns a promise (the connection's outbound
 * buffer is full, or a lossless ring is full of unread output), reads that
 * arrive before it resolves are staged and delivered as one merged chunk
 * afterwards, and the source is paused from the first of them until then.
 * A promise that is already resolved (a send that found room) thus costs
 * no pause: the next read finds the consumer free.
 *
 * @example Merge reads that arrive while the consumer is busy
 * ```ts
 * import { OutputCoalescer } from "./output_coalescer.ts";
 * const sizes: number[] = [];
 * const { promise: busy, resolve: release } = Promise.withResolvers<void>();
 * const merge = new OutputCoalescer((bytes) => {
 *   sizes.push(bytes.length);
 *   return sizes.length === 1 ? busy : undefined;
 * }, {});
 * merge.push(new Uint8Array(10));
 * merge.push(new Uint8Array(20));
 * merge.push(new Uint8Array(30));
 * release();
 * await merge.end();
 * console.log(sizes); // [10, 50]
 * ```
 */
export class OutputCoalescer {
  #deliver: (bytes: Uint8Array) => Promise<void> | void;
  #pause: () => void;
  #resume: () => void;
  #staged: Uint8Array[] = [];
  #stagedBytes = 0;
  #blocked: Promise<void> | undefined;
  #paused = false;

  /**
   * Creates a coalescer.
   *
   * @param deliver Records one chunk; returns a promise to ask for a pause.
   * @param source `pause`/`resume` of the underlying reader (push-style readers).
   */
  constructor(
    deliver: (bytes: Uint8Array) => Promise<void> | void,
    source: { pause?: () => void; resume?: () => void },
  ) {
    this.#deliver = deliver;
    this.#pause = source.pause ?? (() => {});
    this.#resume = source.resume ?? (() => {});
  }

  /** Takes one read. Returns a promise while the reader should wait (for pull-style readers). */
  push(bytes: Uint8Array): Promise<void> | undefined {
    if (bytes.length === 0) return this.#blocked;
    if (this.#blocked) {
      if (!this.#paused) {
        this.#paused = true;
        this.#pause();
      }
      this.#staged.push(bytes);
      this.#stagedBytes += bytes.length;
    } else {
      this.#send(bytes);
    }
    return this.#blocked;
  }

  /** Delivers whatever is staged (call at EOF, before the stream is reported ended). */
  async end(): Promise<void> {
    while (this.#blocked) await this.#blocked;
  }

  #send(bytes: Uint8Array): void {
    const pending = this.#deliver(bytes);
    if (!pending) return;
    const blocked: Promise<void> = pending.then(() => {
      this.#blocked = undefined;
      if (this.#staged.length > 0) this.#send(this.#takeStaged());
      if (!this.#blocked && this.#paused) {
        this.#paused = false;
        this.#resume();
      }
    });
    this.#blocked = blocked;
  }

  #takeStaged(): Uint8Array {
    const parts = this.#staged;
    const size = this.#stagedBytes;
    this.#staged = [];
    this.#stagedBytes = 0;
    return concatBytes(parts, size);
  }
}
