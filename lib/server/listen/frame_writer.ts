/**
 * The outbound half of a server WebSocket: frames are encoded straight into
 * write batches (no buffer per frame, no copy to join them), one writer
 * drains the batches in order, and the large batch buffers are reused.
 *
 * @module
 */

import type { StreamedJson } from "../../protocol/streamed_json.ts";
import { type OutboundText, roomFor } from "../../rpc/transport.ts";
import { writeAll } from "./http_head.ts";

/**
 * A batch for a lone small frame on an idle connection starts this large (one
 * page: most answers fit); each connection keeps its one for reuse.
 */
const SMALL_BATCH_BYTES = 4 * 1024;

/**
 * Frames are appended to one batch (one socket write) until it holds this
 * many bytes; a larger frame gets a batch of its own size.
 */
export const BATCH_BYTES = 256 * 1024;

/** How many written batches of {@linkcode BATCH_BYTES} a connection keeps for reuse. */
const SPARE_BATCHES = 2;

/**
 * Whether this process has waited for the end of a turn yet. The first `setImmediate` loads
 * Deno's Node timers (about 10 ms of CPU); until then a frame marked `now` waits like the others,
 * so that load stays with the process's first answer rather than moving into a later request
 * that needs those timers anyway (the first `process/start`: the spawn path sets timers).
 */
let turnWaited = false;

/** Bytes of a frame's header for a payload of `length` bytes (server frames are unmasked). */
function headerBytes(length: number): number {
  return length < 126 ? 2 : length < 65536 ? 4 : 10;
}

/** Writes a frame's header at `at` (a final frame unless `fin` is false); returns the payload's offset. */
function writeHeader(
  buffer: Uint8Array,
  at: number,
  opcode: number,
  length: number,
  fin = true,
): number {
  buffer[at] = (fin ? 0x80 : 0) | opcode;
  if (length < 126) {
    buffer[at + 1] = length;
    return at + 2;
  }
  if (length < 65536) {
    buffer[at + 1] = 126;
    buffer[at + 2] = length >> 8;
    buffer[at + 3] = length & 0xff;
    return at + 4;
  }
  buffer[at + 1] = 127;
  new DataView(buffer.buffer, buffer.byteOffset).setBigUint64(at + 2, BigInt(length));
  return at + 10;
}

/**
 * Parts of a message up to this long (the `{"id":...,"result":` and `}` around a result) are
 * copied by {@linkcode copyAscii}: cheaper than `encodeInto` and the view it writes into.
 */
const SHORT_PART = 32;

/** Copies `text` to `buffer` at `at` when it is all ASCII; false (some bytes written) when not. */
function copyAscii(text: string, buffer: Uint8Array, at: number): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return false;
    buffer[at + i] = c;
  }
  return true;
}

/** Shared by every writer (it keeps no state between calls). */
const ENCODER = new TextEncoder();

/**
 * Queues frames for one connection and writes them in order.
 *
 * Backpressure: {@linkcode FrameWriter.text} and {@linkcode FrameWriter.frame}
 * resolve once what is queued (including the batch being written) is at most
 * the high-water mark, or, for a bulk frame, at most `BULK_QUEUED_BYTES`
 * ({@linkcode roomFor}): bulk output cannot fill the queue ahead of a small
 * message.
 *
 * @example Frames queued in one turn, or while a write is in flight, go out together
 * ```ts
 * import { FrameWriter } from "./frame_writer.ts";
 * const writes: number[] = [];
 * const conn = { write: (b: Uint8Array) => (writes.push(b.length), Promise.resolve(b.length)) };
 * const writer = new FrameWriter(conn as unknown as Deno.Conn, 1024, () => {});
 * void writer.text("hello");
 * void writer.text(["wor", "ld"]);
 * await writer.idle();
 * void writer.text("!");
 * await writer.idle();
 * console.log(writes); // [14, 3]
 * ```
 */
export class FrameWriter {
  #conn: Deno.Conn;
  #highWater: number;
  #onError: () => void;
  /** Sealed batches waiting for the writer, oldest first. */
  #sealed: Uint8Array[] = [];
  /** The batch frames are appended to, and how much of it is used. */
  #current: Uint8Array | undefined;
  #used = 0;
  /** Written batches of {@linkcode BATCH_BYTES}, for reuse. */
  #spare: Uint8Array[] = [];
  /** The written small batch, for reuse. */
  #small: Uint8Array | undefined;
  /** Bytes queued, including the batch being written. */
  #queued = 0;
  #writing: Promise<void> | undefined;
  #roomWaiters: { limit: number; wake: () => void }[] = [];
  #closed = false;
  /** Set once a close frame is queued: no data frame follows it. */
  #closeQueued = false;
  /** True while a streamed message is being queued: its fragments are not interleaved with other messages. */
  #streaming = false;
  /** Data frames and streamed messages sent meanwhile, in order, and their senders. */
  #held: { run: () => Promise<void>; done: () => void }[] = [];

  /**
   * Creates a writer.
   *
   * @param conn The connection.
   * @param highWater Queued bytes above which sends wait.
   * @param onError Called once when a write fails (the writer then drops everything).
   */
  constructor(conn: Deno.Conn, highWater: number, onError: () => void) {
    this.#conn = conn;
    this.#highWater = highWater;
    this.#onError = onError;
  }

  /**
   * Queues a text frame: `text` (or its parts, one after the other) as its
   * UTF-8 payload.
   *
   * @param text The message, whole or in parts.
   * @param now Write without waiting for the end of this event-loop turn, for a frame nothing
   *   else is expected to join (once the process has waited for one turn's end: the first
   *   wait loads Deno's Node timers).
   */
  text(text: OutboundText, now = false): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#streaming) return this.#hold(() => this.#textFrame(text, 0x1, true, now));
    return this.#textFrame(text, 0x1, true, now);
  }

  /**
   * Queues a streamed message as one text message in fragments: its head as the first
   * frame, each chunk as a continuation frame (each waits for room, {@linkcode roomFor}), its
   * tail as the final one. Resolves once the last is queued, or the stream stops
   * (the connection closes, or a chunk cannot be made: the connection is then closed, the
   * message being unfinishable).
   *
   * @param message The message.
   */
  stream(message: StreamedJson): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#streaming) return this.#hold(() => this.#streamNow(message));
    return this.#streamNow(message);
  }

  /** Runs `run` once the streamed message being queued is done (in the order of the calls). */
  #hold(run: () => Promise<void>): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#held.push({ run, done: resolve });
    return promise;
  }

  async #streamNow(message: StreamedJson): Promise<void> {
    this.#streaming = true;
    try {
      await this.#fragments(message);
    } finally {
      this.#streaming = false;
      // What was held runs in order, until it starts another streamed message; after a close
      // frame, nothing held is sent.
      while (!this.#streaming && this.#held.length > 0 && !this.#closed) {
        const { run, done } = this.#held.shift()!;
        if (this.#closeQueued) done();
        else run().then(done, done);
      }
    }
  }

  async #fragments(message: StreamedJson): Promise<void> {
    const stopped = () => this.#closed || this.#closeQueued;
    if (stopped()) return;
    await this.#textFrame(message.head, 0x1, false, false);
    try {
      for await (const chunk of message.string.take()) {
        if (stopped()) return;
        if (chunk.length === 0) continue;
        // A fragment is bulk: the next one is made once at most `BULK_QUEUED_BYTES` is queued.
        await this.#textFrame(chunk, 0x0, false, false);
      }
    } catch {
      this.close();
      this.#onError();
      return;
    }
    if (!stopped()) await this.#textFrame(message.tail, 0x0, true, false);
  }

  /** Encodes one text frame (or fragment) into the batch. */
  #textFrame(text: OutboundText, opcode: number, fin: boolean, now: boolean): Promise<void> {
    const parts = typeof text === "string" ? [text] : text;
    // Indexed loops: a `for...of` makes an iterator and a result per step in V8's interpreter,
    // where a connection's few messages run.
    let length = 0;
    for (let i = 0; i < parts.length; i++) length += parts[i]!.length;
    // Assume ASCII (JSON of base64 output is): UTF-16 length = UTF-8 length.
    const size = headerBytes(length) + length;
    const buffer = this.#reserve(size);
    const start = this.#used;
    let at = writeHeader(buffer, start, opcode, length, fin);
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      // Only into the frame's room: a non-ASCII part before may have used some of it.
      if (
        part.length <= SHORT_PART && at + part.length <= start + size &&
        copyAscii(part, buffer, at)
      ) {
        at += part.length;
        continue;
      }
      const { read, written } = ENCODER.encodeInto(part, buffer.subarray(at, start + size));
      if (read < part.length) {
        return this.#frame(
          opcode,
          ENCODER.encode(typeof text === "string" ? text : parts.join("")),
          now,
          fin,
        );
      }
      at += written;
    }
    return this.#commit(size, now);
  }

  /**
   * Queues a final frame with a binary payload (control frames, binary fallback of text).
   *
   * @param opcode The frame's opcode.
   * @param payload The payload.
   * @param now Write without waiting for the end of this event-loop turn.
   */
  frame(opcode: number, payload: Uint8Array, now = false): Promise<void> {
    if (this.#closed) return Promise.resolve();
    // Control frames may come between a message's fragments; data frames wait for its end.
    if (opcode < 0x8 && this.#streaming) {
      return this.#hold(() => this.#frame(opcode, payload, now, true));
    }
    if (opcode === 0x8) this.#closeQueued = true;
    return this.#frame(opcode, payload, now, true);
  }

  #frame(opcode: number, payload: Uint8Array, now: boolean, fin: boolean): Promise<void> {
    const size = headerBytes(payload.length) + payload.length;
    const buffer = this.#reserve(size);
    buffer.set(payload, writeHeader(buffer, this.#used, opcode, payload.length, fin));
    return this.#commit(size, now);
  }

  /** Resolves once everything queued so far is written (or dropped). */
  async idle(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /** Drops everything queued and releases the senders waiting for room. */
  close(): void {
    this.#closed = true;
    this.#sealed = [];
    this.#current = undefined;
    this.#used = 0;
    this.#spare = [];
    this.#small = undefined;
    this.#queued = 0;
    for (const { wake } of this.#roomWaiters.splice(0)) wake();
    for (const { done } of this.#held.splice(0)) done();
  }

  /** A batch with room for `size` more bytes at `#used`. */
  #reserve(size: number): Uint8Array {
    const current = this.#current;
    if (current !== undefined && this.#used + size <= current.length) return current;
    if (current !== undefined) this.#seal();
    let buffer: Uint8Array;
    if (size > BATCH_BYTES) buffer = new Uint8Array(size);
    else if (size <= SMALL_BATCH_BYTES && this.#queued === 0 && this.#spare.length === 0) {
      buffer = this.#small ?? new Uint8Array(SMALL_BATCH_BYTES);
      this.#small = undefined;
    } else buffer = this.#spare.pop() ?? new Uint8Array(BATCH_BYTES);
    this.#current = buffer;
    this.#used = 0;
    return buffer;
  }

  #seal(): void {
    if (this.#used > 0) this.#sealed.push(this.#current!.subarray(0, this.#used));
    this.#current = undefined;
    this.#used = 0;
  }

  #commit(size: number, now: boolean): Promise<void> {
    this.#used += size;
    this.#queued += size;
    this.#writing ??= this.#drain(now);
    const limit = roomFor(size, this.#highWater);
    if (this.#queued <= limit) return Promise.resolve();
    return this.#room(limit);
  }

  /** Resolves once at most `limit` bytes are queued (or the writer is closed). */
  #room(limit: number): Promise<void> {
    return new Promise((wake) => this.#roomWaiters.push({ limit, wake }));
  }

  /** Wakes the senders whose limit the queue is now within. */
  #wakeWithRoom(): void {
    const waiting = this.#roomWaiters;
    this.#roomWaiters = [];
    for (const waiter of waiting) {
      if (this.#queued <= waiter.limit) waiter.wake();
      else this.#roomWaiters.push(waiter);
    }
  }

  async #drain(now: boolean): Promise<void> {
    // Frames queued in this turn of the event loop (the answers to every request of one read,
    // say) go out in one write: wait until the turn's microtasks have run, unless the frame
    // that starts the write is known to be alone.
    if (!now || !turnWaited) {
      turnWaited = true;
      await new Promise((resolve) => setImmediate(resolve));
    }
    try {
      while (!this.#closed) {
        if (this.#sealed.length === 0) this.#seal();
        const batch = this.#sealed.shift();
        if (batch === undefined) break;
        await writeAll(this.#conn, batch);
        if (this.#closed) break;
        this.#queued -= batch.length;
        const buffer = batch.buffer as ArrayBuffer;
        if (buffer.byteLength === BATCH_BYTES && this.#spare.length < SPARE_BATCHES) {
          this.#spare.push(new Uint8Array(buffer));
        } else if (buffer.byteLength === SMALL_BATCH_BYTES) this.#small = new Uint8Array(buffer);
        if (this.#roomWaiters.length > 0) this.#wakeWithRoom();
      }
    } catch {
      this.close();
      this.#onError();
    } finally {
      this.#writing = undefined;
    }
  }
}
