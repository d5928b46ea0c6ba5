/**
 * The retained output of one process (docs/protocol.md section 8.3): numbered chunks, the
 * oldest evicted beyond the limits, and the paging of `process/read`. Pure
 * data: no I/O, no timers, no child process.
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";

/** Most bytes of output retained per process (oldest whole chunks are evicted). */
export const RETAINED_OUTPUT_BYTES = 1024 * 1024;
/** Most output chunks retained per process. */
export const RETAINED_OUTPUT_CHUNKS = 50_000;
/**
 * How many evicted chunks a process remembers the boundaries of, so that
 * `evictedBytes` is exact for a read whose `afterSeq` is among them (older
 * cursors get a lower bound).
 */
export const EVICTION_HISTORY_CHUNKS = RETAINED_OUTPUT_CHUNKS;

/** One retained chunk, in the wire shape of `process/read`'s `chunks`. */
export type OutputChunk = ResultOf<"process/read">["chunks"][number];

/** The stream a chunk came from. */
export type OutputStream = OutputChunk["stream"];

/** Limits of an {@linkcode OutputRing}. */
export interface OutputRingOptions {
  /**
   * Lossless (`output: "block"`): chunks are evicted only once a read has
   * passed them; the ring may then hold more than its limits.
   *
   * @default {false}
   */
  block?: boolean;
  /** @default {RETAINED_OUTPUT_BYTES} */
  maxBytes?: number;
  /** @default {RETAINED_OUTPUT_CHUNKS} */
  maxChunks?: number;
  /** @default {EVICTION_HISTORY_CHUNKS} */
  historyChunks?: number;
}

/** A page of the ring for `process/read`. */
export interface OutputPage {
  /** The chunks after `afterSeq`, oldest first. */
  chunks: OutputChunk[];
  /** The seq to read after next: after the last chunk when paged, else the ring's next seq. */
  nextSeq: number;
}

/**
 * Evicted chunk boundaries: for the latest evicted chunks, their seq and the
 * number of output bytes produced up to and including them.
 */
class EvictionHistory {
  #seqs: number[] = [];
  #ends: number[] = [];
  #head = 0;
  /** Bytes produced before the oldest remembered boundary (0 while nothing was forgotten). */
  #base = 0;
  #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  add(seq: number, end: number): void {
    this.#seqs.push(seq);
    this.#ends.push(end);
    if (this.#seqs.length - this.#head > this.#limit) {
      this.#base = this.#ends[this.#head]!;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#seqs.length) {
      this.#seqs = this.#seqs.slice(this.#head);
      this.#ends = this.#ends.slice(this.#head);
      this.#head = 0;
    }
  }

  /**
   * Output bytes produced up to and including `seq` (an evicted seq), or, for
   * a seq older than the history, the most that can be (a lower bound for
   * the bytes after it).
   */
  bytesThrough(seq: number): number {
    let lo = this.#head;
    let hi = this.#seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#seqs[mid]! <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo === this.#head ? this.#base : this.#ends[lo - 1]!;
  }
}

/** One retained chunk: its seq, its stream and its bytes (off the JavaScript heap). */
interface Retained {
  seq: number;
  stream: OutputStream;
  bytes: Uint8Array;
}

/** What an evicted slot holds until the ring is compacted: nothing that keeps output alive. */
const EVICTED_BYTES = new Uint8Array(0);

/**
 * Frees an evicted chunk's memory now when the chunk spans a buffer of its
 * own (detaching it): a chunk that lived through two young-generation
 * collections was moved to the old generation, where its buffer would
 * otherwise stay allocated until the next full collection. A view of part
 * of a buffer is left alone (other views may share the buffer).
 */
function release(bytes: Uint8Array): void {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || bytes.byteOffset !== 0) return;
  if (bytes.byteLength === buffer.byteLength && bytes.byteLength > 0) buffer.transfer(0);
}

/**
 * A process's seq counter and retained output. Every event of a process
 * (output, exit, close) takes the next seq; output chunks are retained
 * until the ring is over {@linkcode RETAINED_OUTPUT_BYTES} or
 * {@linkcode RETAINED_OUTPUT_CHUNKS} (the byte limit never evicts the only
 * chunk), oldest first.
 *
 * Chunks are kept as bytes and encoded to base64 only when a page is taken:
 * a streamed chunk is sent once and usually never read back, and bytes do
 * not burden the garbage collector the way strings that outlive a
 * collection or two do.
 *
 * @example Page through retained output
 * ```ts
 * import { OutputRing } from "./output_ring.ts";
 * const ring = new OutputRing({ maxChunks: 2 });
 * for (const text of ["a", "b", "c"]) ring.push("stdout", new TextEncoder().encode(text));
 * const page = ring.page(0, undefined);
 * console.log(page.chunks.map((c) => c.seq), page.nextSeq); // [2, 3] 4
 * console.log(page.chunks.map((c) => c.chunk)); // ["Yg==", "Yw=="]
 * console.log(ring.evictedBytesAfter(0)); // 1
 * ```
 */
export class OutputRing {
  /** The seq the next event gets. */
  nextSeq = 1;
  #ring: Retained[] = [];
  #head = 0;
  #bytes = 0;
  /** Output bytes produced through each retained chunk (parallel to the ring). */
  #ends: number[] = [];
  #produced = 0;
  #evicted = 0;
  #history: EvictionHistory;
  #block: boolean;
  /** The highest `afterSeq` read (output up to it has been read). */
  #readCursor = 0;
  #maxBytes: number;
  #maxChunks: number;

  /**
   * Creates an empty ring.
   *
   * @param options Lossless mode and limits.
   */
  constructor(options: OutputRingOptions = {}) {
    this.#block = options.block ?? false;
    this.#maxBytes = options.maxBytes ?? RETAINED_OUTPUT_BYTES;
    this.#maxChunks = options.maxChunks ?? RETAINED_OUTPUT_CHUNKS;
    this.#history = new EvictionHistory(options.historyChunks ?? EVICTION_HISTORY_CHUNKS);
  }

  /** Takes the next seq for an event that is not output (exit, close). */
  takeSeq(): number {
    return this.nextSeq++;
  }

  /**
   * Retains a chunk under the next seq, evicting what the limits require.
   * The ring keeps `bytes` (the caller must not change them afterwards); a
   * small view of a much larger buffer is copied so that it does not keep
   * the whole buffer alive. A chunk that spans its whole buffer is the
   * ring's from then on: its buffer is detached when the chunk is evicted
   * (its memory freed at once), so the caller must not keep another view of
   * that buffer.
   *
   * @param stream Where it came from.
   * @param bytes The output.
   * @returns The chunk's seq.
   */
  push(stream: OutputStream, bytes: Uint8Array): number {
    const seq = this.nextSeq++;
    const kept = bytes.byteLength * 2 < bytes.buffer.byteLength ? bytes.slice() : bytes;
    this.#produced += kept.length;
    this.#ring.push({ seq, stream, bytes: kept });
    this.#ends.push(this.#produced);
    this.#bytes += kept.length;
    this.#evict();
    return seq;
  }

  /** The retained output is at a limit: a further chunk evicts (or, lossless, waits). */
  get atLimit(): boolean {
    const count = this.#ring.length - this.#head;
    return count >= this.#maxChunks || this.#bytes >= this.#maxBytes;
  }

  /**
   * Whether the ring holds more than its limits: in lossless mode the
   * producer must wait for a read ({@linkcode OutputRing.readPast}) first.
   */
  get full(): boolean {
    const count = this.#ring.length - this.#head;
    return count > this.#maxChunks || (this.#bytes > this.#maxBytes && count > 1);
  }

  /**
   * A read with this `afterSeq` happened: in lossless mode output up to it may now be evicted.
   *
   * @param afterSeq The read's cursor.
   * @returns Whether the ring is within its limits afterwards.
   */
  readPast(afterSeq: number): boolean {
    if (afterSeq > this.#readCursor) {
      this.#readCursor = afterSeq;
      if (this.#block) this.#evict();
    }
    return !this.full;
  }

  /** Switches to drop-oldest (nothing will read any more). */
  unblock(): void {
    this.#block = false;
    this.#evict();
  }

  /**
   * Evicts the oldest chunks while the ring is over its limits (in block
   * mode: read ones only). An evicted slot lets go of its bytes at once;
   * the slots themselves are dropped in bulk.
   */
  #evict(): void {
    while (this.full && (!this.#block || this.#ring[this.#head]!.seq <= this.#readCursor)) {
      const oldest = this.#ring[this.#head]!;
      this.#bytes -= oldest.bytes.length;
      this.#evicted += oldest.bytes.length;
      this.#history.add(oldest.seq, this.#ends[this.#head]!);
      release(oldest.bytes);
      oldest.bytes = EVICTED_BYTES;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#ring.length) {
      this.#ring = this.#ring.slice(this.#head);
      this.#ends = this.#ends.slice(this.#head);
      this.#head = 0;
    }
  }

  /**
   * The retained chunks after `afterSeq` (their bytes in base64): all of
   * them, or with `maxBytes` whole chunks up to that many bytes (at least
   * one).
   *
   * @param afterSeq Chunks with a greater seq are returned.
   * @param maxBytes The page's byte budget.
   */
  page(afterSeq: number, maxBytes: number | undefined): OutputPage {
    const ring = this.#ring;
    let lo = this.#head;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ring[mid]!.seq <= afterSeq) lo = mid + 1;
      else hi = mid;
    }
    const chunks: OutputChunk[] = [];
    let total = 0;
    for (let i = lo; i < ring.length; i++) {
      const { seq, stream, bytes } = ring[i]!;
      if (maxBytes !== undefined && chunks.length > 0 && total + bytes.length > maxBytes) break;
      chunks.push({ seq, stream, chunk: bytes.toBase64() });
      total += bytes.length;
      if (maxBytes !== undefined && total >= maxBytes) break;
    }
    if (maxBytes === undefined) return { chunks, nextSeq: this.nextSeq };
    const last = chunks[chunks.length - 1];
    return { chunks, nextSeq: last ? last.seq + 1 : this.nextSeq };
  }

  /**
   * Output bytes evicted after `afterSeq` (the `evictedBytes` of a read
   * with that cursor): exact while the seq is among the remembered
   * boundaries, else a lower bound.
   *
   * @param afterSeq The read's cursor.
   */
  evictedBytesAfter(afterSeq: number): number {
    return Math.max(0, this.#evicted - this.#history.bytesThrough(afterSeq));
  }
}
