/**
 * Backpressure between a child's output reader and its consumer, merging
 * the reads that arrive while the consumer is congested, and (for pipes)
 * pacing a reader that drains its pipe faster than the child fills it.
 *
 * @module
 */

import { concatBytes } from "../../rpc/bytes.ts";

/** A read smaller than this counts toward a streak of small reads. */
export const PACE_SMALL_BYTES = 16 * 1024;
/**
 * A small read counts toward the streak when it came this soon (ms) after
 * the previous one was delivered: the writer was waiting only for the
 * reader (an echo waits for its client's round trip, longer than this).
 */
export const PACE_GAP_MS = 0.2;
/** After this many small reads in a row, each this soon after the last, the reader rests. */
export const PACE_STREAK = 4;
/** How long (ms) a paced reader rests, so that the child can fill its pipe meanwhile. */
export const PACE_REST_MS = 1;

/**
 * Pacing of a reader: the clock and the rest. A child that writes its
 * output in small pieces as fast as it can (`head -c` writes 8 KiB at a
 * time) otherwise ping-pongs with the server, one wakeup and one
 * notification per piece; after a rest the reader finds the pipe full.
 */
export interface Pacing {
  /** The time in ms. */
  now(): number;
  /** Resolves after `ms` ms. */
  rest(ms: number): Promise<void>;
}

/** Pacing on the real clock. */
export const REAL_PACING: Pacing = {
  now: () => performance.now(),
  rest: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * Delivers every read at once while the consumer keeps up (no added
 * latency). When `deliver` returns a promise (the connection's outbound
 * buffer is full, or a lossless ring is full of unread output), reads that
 * arrive before it resolves are staged and delivered as one merged chunk
 * afterwards, and the source is paused from the first of them until then.
 * A promise that is already resolved (a send that found room) thus costs
 * no pause: the next read finds the consumer free.
 *
 * With `pacing`, a streak of {@linkcode PACE_STREAK} reads under
 * {@linkcode PACE_SMALL_BYTES}, each within {@linkcode PACE_GAP_MS} of the
 * previous delivery, pauses the source for {@linkcode PACE_REST_MS}: output
 * that trickles in (an interactive echo, a line now and then) is never
 * held, a stream of small writes is read in pipe-sized chunks.
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
  #congested = false;
  #pacing: Pacing | undefined;
  /** When the last delivery returned (pacing's clock). */
  #delivered = -Infinity;
  #streak = 0;

  /**
   * Creates a coalescer.
   *
   * @param deliver Records one chunk; returns a promise to ask for a pause.
   * @param source `pause`/`resume` of the underlying reader (push-style readers).
   * @param pacing Pace a reader that drains faster than its writer fills (off by default).
   */
  constructor(
    deliver: (bytes: Uint8Array) => Promise<void> | void,
    source: { pause?: () => void; resume?: () => void },
    pacing?: Pacing,
  ) {
    this.#deliver = deliver;
    this.#pause = source.pause ?? (() => {});
    this.#resume = source.resume ?? (() => {});
    this.#pacing = pacing;
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

  /** The consumer asked the source to wait (a pacing rest does not count). */
  get congested(): boolean {
    return this.#congested;
  }

  /** Delivers whatever is staged (call at EOF, before the stream is reported ended). */
  async end(): Promise<void> {
    while (this.#blocked) await this.#blocked;
  }

  /** Whether this read completes a streak of small reads, each soon after the previous delivery. */
  #streakComplete(bytes: Uint8Array, arrived: number): boolean {
    const quick = arrived - this.#delivered < PACE_GAP_MS;
    this.#streak = quick && bytes.length < PACE_SMALL_BYTES ? this.#streak + 1 : 0;
    if (this.#streak < PACE_STREAK) return false;
    this.#streak = 0;
    return true;
  }

  #send(bytes: Uint8Array): void {
    const arrived = this.#pacing?.now() ?? 0;
    let pending = this.#deliver(bytes);
    this.#congested = pending !== undefined;
    if (this.#pacing !== undefined && this.#streakComplete(bytes, arrived)) {
      // Rest now, not from the next read: the point is to leave the pipe to the writer.
      const rest = this.#pacing.rest(PACE_REST_MS);
      pending = pending ? Promise.all([pending, rest]).then(() => {}) : rest;
      if (!this.#paused) {
        this.#paused = true;
        this.#pause();
      }
    }
    if (this.#pacing !== undefined) this.#delivered = this.#pacing.now();
    if (!pending) return;
    const blocked: Promise<void> = pending.then(() => {
      this.#blocked = undefined;
      this.#congested = false;
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
