/**
 * Newline-delimited JSON from bytes: one message per line, read in pieces of
 * any size, without web streams.
 *
 * @module
 */

import { concatBytes } from "./bytes.ts";
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Inbound,
  OVERSIZED_HEAD_BYTES,
  oversizedFault,
} from "./transport.ts";

/** Options for {@linkcode LineSplitter}. */
export interface LineSplitOptions {
  /**
   * Longest accepted line in bytes; a longer line yields one fault as soon as it passes the
   * limit (naming the limit, and the id of the response it is when its first bytes show one),
   * its remaining bytes are skipped, and the stream resynchronises at the next newline.
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

/** The first {@linkcode OVERSIZED_HEAD_BYTES} of the parts, copied. */
function headOf(parts: readonly Uint8Array[]): Uint8Array {
  const head = new Uint8Array(OVERSIZED_HEAD_BYTES);
  let size = 0;
  for (const part of parts) {
    if (size === head.length) break;
    const take = part.subarray(0, head.length - size);
    head.set(take, size);
    size += take.length;
  }
  return head.subarray(0, size);
}

/**
 * Splits bytes into lines, one message per line, without web streams (the
 * server's stdio reads `Deno.stdin` with it). Blank (whitespace-only) lines
 * are skipped; invalid UTF-8 and over-long lines become faults.
 *
 * @example Split two messages fed in three pieces
 * ```ts
 * import { LineSplitter } from "./line_splitter.ts";
 * const lines: unknown[] = [];
 * const splitter = new LineSplitter((line) => lines.push(line));
 * const bytes = new TextEncoder().encode('{"a":1}\n\n{"b":2}\n{"c"');
 * splitter.push(bytes.subarray(0, 3));
 * splitter.push(bytes.subarray(3));
 * splitter.end();
 * console.log(lines); // ['{"a":1}', '{"b":2}', '{"c"']
 * ```
 */
export class LineSplitter {
  #max: number;
  #emit: (message: Inbound) => void;
  #decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  #parts: Uint8Array[] = [];
  #size = 0;
  #overflow = false;

  /**
   * Creates a splitter.
   *
   * @param emit Called with each line (or fault), in order, from {@linkcode push} and {@linkcode end}.
   * @param options The line length limit.
   */
  constructor(emit: (message: Inbound) => void, options: LineSplitOptions = {}) {
    this.#emit = emit;
    this.#max = options.maxLineBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /**
   * True while the start of an unfinished line is kept as a view of a pushed chunk: the
   * chunk's bytes must not be overwritten until the line is complete.
   */
  get holding(): boolean {
    return this.#parts.length > 0;
  }

  /**
   * Splits a chunk; complete lines are emitted before it returns.
   *
   * @param chunk The next bytes of the input.
   */
  push(chunk: Uint8Array): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) {
        this.#append(chunk.subarray(start));
        break;
      }
      this.#append(chunk.subarray(start, nl));
      this.#line();
      start = nl + 1;
    }
  }

  /** Ends the input: an unterminated last line is emitted. */
  end(): void {
    this.#line();
  }

  #append(piece: Uint8Array): void {
    if (this.#overflow || piece.length === 0) return;
    if (this.#size + piece.length > this.#max) {
      this.#overflow = true;
      const head = headOf([...this.#parts, piece]);
      this.#parts = [];
      this.#size = 0;
      // At once, not at the newline: the rest of the line may be long in coming.
      this.#emit(oversizedFault(this.#max, new TextDecoder().decode(head)));
      return;
    }
    this.#parts.push(piece);
    this.#size += piece.length;
  }

  #line(): void {
    const parts = this.#parts;
    const overflow = this.#overflow;
    const size = this.#size;
    this.#parts = [];
    this.#size = 0;
    this.#overflow = false;
    if (overflow) return; // Its fault was emitted when it passed the limit.
    if (size === 0) return;
    let text: string;
    try {
      text = this.#decoder.decode(concatBytes(parts, size));
    } catch {
      this.#emit({ fault: "invalid UTF-8 in message" });
      return;
    }
    if (!isBlank(text)) this.#emit(text);
  }
}
