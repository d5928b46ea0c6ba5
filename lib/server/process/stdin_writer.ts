/**
 * Merging the writes queued for a child's stdin pipe: the chunks of every
 * `process/write` handled in one turn of the event loop (the requests of
 * one read from the client) leave in one write to the pipe, and the chunks
 * queued while that write waits for room leave together after it.
 *
 * @module
 */

/** Where the merged writes go: the child's stdin pipe. */
export interface StdinSink {
  /**
   * Writes what the pipe takes at once, without waiting: the number of bytes
   * taken (0 when it is full, or when the sink can only wait). `bytes` is
   * not kept. Throws when the pipe cannot be written at all.
   */
  tryWrite(bytes: Uint8Array): number;
  /** Resolves once the pipe has taken all of `bytes` (kept until then); rejects when it cannot. */
  write(bytes: Uint8Array): Promise<void>;
  /** Closes the pipe (after everything written); resolves once it is closed. */
  end(): Promise<void>;
}

/** Batches up to this size are joined in one buffer shared by every writer; larger ones get their own. */
const SHARED_BATCH_BYTES = 256 * 1024;
let shared = new Uint8Array(0);

/** The chunks one after the other: the only one itself, else in the shared buffer while it fits. */
function join(chunks: readonly Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  if (total > shared.length && total <= SHARED_BATCH_BYTES) {
    shared = new Uint8Array(Math.min(SHARED_BATCH_BYTES, Math.max(total, shared.length * 2)));
  }
  const joined = total <= shared.length ? shared.subarray(0, total) : new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}

/**
 * A child's stdin queue. Each {@linkcode StdinWriter.write} returns the
 * promise of its merged write (shared by every chunk in it), which settles
 * once the pipe has taken the chunk, in order with every other write.
 * One turn's wait (`setImmediate`) before the first write of a batch lets
 * the rest of the turn's requests join it: one write syscall, and one
 * wake-up of the child, for the lot instead of one per request. A batch
 * goes to {@linkcode StdinSink.tryWrite} first, joined in a buffer shared by
 * every writer; what the pipe did not take waits as it is, copied out of
 * that shared buffer first.
 *
 * @example Three writes in one turn reach the pipe in one write
 * ```ts
 * import { StdinWriter } from "./stdin_writer.ts";
 * const sizes: number[] = [];
 * const writer = new StdinWriter({
 *   tryWrite: (bytes) => (sizes.push(bytes.length), bytes.length),
 *   write: () => Promise.reject(new Error("the pipe took everything")),
 *   end: () => Promise.resolve(),
 * });
 * writer.write(new Uint8Array(1));
 * writer.write(new Uint8Array(2));
 * await writer.write(new Uint8Array(3));
 * await writer.close();
 * console.log(sizes); // [6]
 * ```
 */
export class StdinWriter {
  #sink: StdinSink;
  #chunks: Uint8Array[] = [];
  #chunkBytes = 0;
  /** Settles once the chunks queued now are taken by the pipe. */
  #next: PromiseWithResolvers<void> | undefined;
  /** A write is scheduled or under way. */
  #busy = false;
  #ending: Promise<void> | undefined;
  #ended: PromiseWithResolvers<void> | undefined;

  /** @param sink The child's stdin pipe. */
  constructor(sink: StdinSink) {
    this.#sink = sink;
  }

  /**
   * Queues `bytes` after everything queued before. The promise resolves
   * once the pipe has taken them and rejects with the sink's error when it
   * could not (or after {@linkcode StdinWriter.close}).
   */
  write(bytes: Uint8Array): Promise<void> {
    if (this.#ending !== undefined) {
      return Promise.reject(new Error("Cannot write to stdin: it is closed"));
    }
    this.#chunks.push(bytes);
    this.#chunkBytes += bytes.length;
    if (this.#next === undefined) {
      this.#next = Promise.withResolvers<void>();
      // The batch's promise is shared; a caller that ignores it leaves no unhandled rejection.
      this.#next.promise.catch(() => {});
    }
    if (!this.#busy) {
      this.#busy = true;
      setImmediate(() => void this.#pump());
    }
    return this.#next.promise;
  }

  /** Closes the pipe once everything queued is written; later writes are refused. */
  close(): Promise<void> {
    if (this.#ending === undefined) {
      if (this.#busy) {
        this.#ended = Promise.withResolvers<void>();
        this.#ending = this.#ended.promise;
      } else this.#ending = this.#sink.end();
    }
    return this.#ending;
  }

  async #pump(): Promise<void> {
    while (this.#chunks.length > 0) {
      const bytes = join(this.#chunks, this.#chunkBytes);
      const done = this.#next!;
      this.#chunks = [];
      this.#chunkBytes = 0;
      this.#next = undefined;
      try {
        const taken = this.#sink.tryWrite(bytes);
        if (taken < bytes.length) {
          // Bytes of their own can wait as they are; the shared buffer is the next batch's.
          const rest = bytes.subarray(taken);
          await this.#sink.write(bytes.buffer === shared.buffer ? rest.slice() : rest);
        }
        done.resolve();
      } catch (err) {
        done.reject(err);
      }
    }
    this.#busy = false;
    if (this.#ended !== undefined) this.#sink.end().then(this.#ended.resolve, this.#ended.reject);
  }
}
