/**
 * Merges a child's output reads into fewer, larger chunks while output is
 * flowing fast, so the per-message costs (seq, ring entry, base64, JSON,
 * WebSocket frame) are paid per ~256 KiB instead of per pipe read.
 *
 * @module
 */

/** Largest merged chunk, in bytes. */
export const MAX_MERGED_CHUNK = 256 * 1024;

/**
 * Delivers the first read of a burst at once (no added latency for
 * interactive output), then collects the reads that arrive until the next
 * timer tick and delivers them as one chunk. When `deliver` returns a
 * promise (the connection is congested, or a lossless ring is full), the
 * source is paused until it resolves, and reads still in flight are merged.
 *
 * @example Merge a burst
 * ```ts
 * import { OutputCoalescer } from "./output_coalescer.ts";
 * const sizes: number[] = [];
 * const merge = new OutputCoalescer((bytes) => void sizes.push(bytes.length), {});
 * merge.push(new Uint8Array(10));
 * merge.push(new Uint8Array(20));
 * merge.push(new Uint8Array(30));
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
  #timer: ReturnType<typeof setTimeout> | undefined;
  #blocked: Promise<void> | undefined;

  /**
   * Creates a coalescer.
   *
   * @param deliver Records one chunk; returns a promise to ask for a pause.
   * @param source `pause`/`resume` of the underlying reader.
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
    if (this.#timer === undefined && this.#blocked === undefined && this.#staged.length === 0) {
      this.#send(bytes);
      if (this.#blocked === undefined) this.#timer = setTimeout(() => this.#tick(), 0);
      return this.#blocked;
    }
    this.#staged.push(bytes);
    this.#stagedBytes += bytes.length;
    if (this.#stagedBytes >= MAX_MERGED_CHUNK && this.#blocked === undefined) this.#flush();
    return this.#blocked;
  }

  /** Delivers whatever is staged (call at EOF, before the stream is reported ended). */
  async end(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#blocked) await this.#blocked;
    this.#flush();
    while (this.#blocked) await this.#blocked;
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.#staged.length === 0 || this.#blocked) return;
    this.#flush();
    if (this.#blocked === undefined) this.#timer = setTimeout(() => this.#tick(), 0);
  }

  #flush(): void {
    if (this.#staged.length === 0) return;
    const parts = this.#staged;
    const size = this.#stagedBytes;
    this.#staged = [];
    this.#stagedBytes = 0;
    if (parts.length === 1) {
      this.#send(parts[0]!);
      return;
    }
    const merged = new Uint8Array(size);
    let at = 0;
    for (const part of parts) {
      merged.set(part, at);
      at += part.length;
    }
    this.#send(merged);
  }

  #send(bytes: Uint8Array): void {
    const pending = this.#deliver(bytes);
    if (!pending) return;
    this.#pause();
    const blocked = pending.then(() => {
      if (this.#blocked !== blocked) return;
      this.#blocked = undefined;
      if (this.#staged.length > 0) this.#flush();
      if (this.#blocked === undefined) {
        this.#resume();
        if (this.#timer === undefined) this.#timer = setTimeout(() => this.#tick(), 0);
      }
    });
    this.#blocked = blocked;
  }
}
