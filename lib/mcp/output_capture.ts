/**
 * The output of `run_command`: each stream is captured with bounded memory
 * (everything up to {@linkcode KEPT_STREAM_BYTES}; beyond it the first and
 * the last half of that bound), shown in the result up to
 * {@linkcode INLINE_OUTPUT_BYTES} (its first and last half when longer), and
 * kept after the command for `read_output` under an `outputId`, for the
 * {@linkcode MAX_KEPT_OUTPUTS} most recent truncated commands.
 *
 * @module
 */

import { ToolError } from "./tool_errors.ts";

/** Bytes of one stream shown in a `run_command` result: 16 KiB (the first and last 8 KiB when longer). */
export const INLINE_OUTPUT_BYTES = 16 * 1024;
/** Bytes of one stream kept for `read_output`: 2 MiB (the first and last 1 MiB when longer). */
export const KEPT_STREAM_BYTES = 2 * 1024 * 1024;
/** Truncated `run_command` outputs kept for `read_output`: the 16 most recent. */
export const MAX_KEPT_OUTPUTS = 16;

const HALF_KEPT = KEPT_STREAM_BYTES / 2;

/** Whether `byte` continues a UTF-8 sequence (so a cut before it splits a character). */
function continues(byte: number | undefined): boolean {
  return byte !== undefined && (byte & 0xc0) === 0x80;
}

/** One stream's output, captured with bounded memory. */
export class StreamCapture {
  #head = new Uint8Array(0);
  #headLength = 0;
  #tail: Uint8Array[] = [];
  #tailLength = 0;
  #total = 0;

  /** Bytes the stream has written in all. */
  get total(): number {
    return this.#total;
  }

  /** Bytes written but not kept (the middle of a stream over {@linkcode KEPT_STREAM_BYTES}). */
  get dropped(): number {
    return this.#total - this.#headLength - this.#tailLength;
  }

  /**
   * Adds output.
   *
   * @param chunk The bytes (kept by reference).
   */
  add(chunk: Uint8Array): void {
    this.#total += chunk.length;
    if (this.#headLength < HALF_KEPT) {
      const take = Math.min(chunk.length, HALF_KEPT - this.#headLength);
      if (this.#head.length < this.#headLength + take) {
        const grown = new Uint8Array(
          Math.min(HALF_KEPT, Math.max(4096, 2 * (this.#headLength + take))),
        );
        grown.set(this.#head.subarray(0, this.#headLength));
        this.#head = grown;
      }
      this.#head.set(chunk.subarray(0, take), this.#headLength);
      this.#headLength += take;
      chunk = chunk.subarray(take);
      if (chunk.length === 0) return;
    }
    this.#tail.push(chunk);
    this.#tailLength += chunk.length;
    while (this.#tailLength - this.#tail[0]!.length >= HALF_KEPT) {
      this.#tailLength -= this.#tail.shift()!.length;
    }
    if (this.#tailLength > HALF_KEPT) {
      const excess = this.#tailLength - HALF_KEPT;
      this.#tail[0] = this.#tail[0]!.subarray(excess);
      this.#tailLength = HALF_KEPT;
    }
  }

  /**
   * Kept bytes from `offset` (of the whole stream), at most `length`: short
   * where the kept head ends before a dropped middle.
   *
   * @param offset The first byte.
   * @param length The most bytes.
   * @throws {ToolError} `outputDropped` when `offset` lies in the dropped middle.
   */
  range(offset: number, length: number): Uint8Array {
    if (offset >= this.#total || length === 0) return new Uint8Array(0);
    if (offset < this.#headLength) {
      return this.#head.slice(offset, Math.min(this.#headLength, offset + length));
    }
    const tailStart = this.#total - this.#tailLength;
    if (offset < tailStart) {
      throw new ToolError(
        "outputDropped",
        `bytes ${this.#headLength} to ${
          tailStart - 1
        } of this stream were not kept (${KEPT_STREAM_BYTES} bytes are: the first and the last half); read from offset ${tailStart} on`,
      );
    }
    const out = new Uint8Array(Math.min(length, this.#total - offset));
    let at = tailStart;
    let filled = 0;
    for (const chunk of this.#tail) {
      const end = at + chunk.length;
      if (end > offset && filled < out.length) {
        const from = Math.max(0, offset + filled - at);
        const piece = chunk.subarray(from, from + out.length - filled);
        out.set(piece, filled);
        filled += piece.length;
      }
      at = end;
    }
    return out;
  }

  /**
   * The stream as a result shows it: all of it up to `limit` bytes, else its
   * first and last `limit / 2` bytes (cut between characters) around a note
   * saying how to read the rest.
   *
   * @param limit Bytes shown at most.
   * @param rest The note for the omitted bytes: gets their offset and count.
   */
  preview(
    limit: number,
    rest: (offset: number, count: number) => string,
  ): { text: string; truncated: boolean } {
    const decoder = new TextDecoder();
    if (this.#total <= limit) {
      return { text: decoder.decode(this.range(0, this.#total)), truncated: false };
    }
    let headEnd = limit / 2;
    const head = this.range(0, headEnd + 3);
    while (headEnd > 0 && continues(head[headEnd])) headEnd--;
    let tailStart = this.#total - limit / 2;
    const tail = this.range(tailStart, limit / 2);
    let skip = 0;
    while (skip < 3 && continues(tail[skip])) skip++;
    tailStart += skip;
    return {
      text: decoder.decode(head.subarray(0, headEnd)) +
        rest(headEnd, tailStart - headEnd) +
        decoder.decode(tail.subarray(skip)),
      truncated: true,
    };
  }
}

/** A finished command's output, kept for `read_output`. */
export interface KeptOutput {
  /** Its stdout (with a terminal: the terminal's output). */
  readonly stdout: StreamCapture;
  /** Its stderr. */
  readonly stderr: StreamCapture;
}

/** The kept outputs of one MCP connection, the most recent {@linkcode MAX_KEPT_OUTPUTS}. */
export class OutputStore {
  #outputs = new Map<string, KeptOutput>();

  /**
   * Keeps an output; the oldest one goes when there are too many.
   *
   * @param output The streams.
   * @returns Its `outputId`.
   */
  keep(output: KeptOutput): string {
    const id = crypto.randomUUID();
    this.#outputs.set(id, output);
    while (this.#outputs.size > MAX_KEPT_OUTPUTS) {
      this.#outputs.delete(this.#outputs.keys().next().value!);
    }
    return id;
  }

  /**
   * A kept output.
   *
   * @param id The `outputId`.
   * @throws {ToolError} `unknownOutput` when none is kept under `id`.
   */
  get(id: string): KeptOutput {
    const output = this.#outputs.get(id);
    if (output === undefined) {
      throw new ToolError(
        "unknownOutput",
        `no output is kept under outputId ${
          JSON.stringify(id)
        } (the ${MAX_KEPT_OUTPUTS} most recent truncated outputs are)`,
      );
    }
    return output;
  }
}
