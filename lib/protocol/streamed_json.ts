/**
 * JSON produced in parts: a reply whose one large string member (a file's
 * base64) is made chunk by chunk while it is sent, so that memory is bounded
 * by a chunk rather than by the reply.
 *
 * @module
 */

/**
 * Bytes encoded per chunk of a streamed base64 member: 93 KiB. A multiple of 3 (each chunk's
 * base64 has no padding, so the chunks concatenate), and small enough that a chunk's base64
 * (124 KiB) is a young V8 object, collected at once rather than piling up in the large-object
 * space (768 KiB chunks raised a 400 MiB read's peak RSS by 74 to 83 MiB, 93 KiB ones by 26 to 34).
 */
export const STREAMED_CHUNK_BYTES = 93 * 1024;

/**
 * A string member produced in chunks, each already valid inside a JSON
 * string without escaping (base64, say): the chunks are written between the
 * quotes as they are.
 *
 * @example
 * ```ts
 * import { StreamedString } from "./streamed_json.ts";
 * async function* chunks() {
 *   yield "aGk=";
 * }
 * const value = new StreamedString(chunks());
 * console.log(value instanceof StreamedString); // true
 * ```
 */
export class StreamedString {
  #chunks: AsyncIterable<string>;
  #release: () => void;
  #taken = false;

  /**
   * Wraps the chunks.
   *
   * @param chunks The string's chunks (no character needs JSON escaping); once iterated,
   *   they release what they hold themselves (an async generator's `finally`).
   * @param release Releases what the chunks hold (an open file) when they are never iterated.
   */
  constructor(chunks: AsyncIterable<string>, release: () => void = () => {}) {
    this.#chunks = chunks;
    this.#release = release;
  }

  /**
   * The base64 of bytes held in parts, made a piece of at most `pieceBytes` at a time (each
   * part is let go of once encoded).
   *
   * @example
   * ```ts
   * import { StreamedString } from "./streamed_json.ts";
   * const text = StreamedString.ofBytes([new Uint8Array([104]), new Uint8Array([105])], 3);
   * let joined = "";
   * for await (const chunk of text.take()) joined += chunk;
   * console.log(joined); // "aGk="
   * ```
   *
   * @param parts The bytes, in order (the array is emptied as they are encoded).
   * @param pieceBytes Most bytes per chunk, a multiple of 3.
   */
  static ofBytes(parts: Uint8Array[], pieceBytes: number): StreamedString {
    async function* chunks(): AsyncGenerator<string> {
      let carry = new Uint8Array(0);
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i]!;
        parts[i] = carry;
        let bytes = part;
        if (carry.length > 0) {
          bytes = new Uint8Array(carry.length + part.length);
          bytes.set(carry);
          bytes.set(part, carry.length);
        }
        const whole = bytes.length - (bytes.length % 3);
        for (let at = 0; at < whole; at += pieceBytes) {
          yield bytes.subarray(at, Math.min(whole, at + pieceBytes)).toBase64();
        }
        carry = bytes.slice(whole);
      }
      parts.length = 0;
      if (carry.length > 0) yield carry.toBase64();
    }
    return new StreamedString(chunks(), () => (parts.length = 0));
  }

  /** The chunks, for the one consumer that iterates them. */
  take(): AsyncIterable<string> {
    this.#taken = true;
    return this.#chunks;
  }

  /** Releases the chunks when nothing took them (a reply dropped unsent); else nothing. */
  discard(): void {
    if (this.#taken) return;
    this.#taken = true;
    this.#release();
  }
}

/**
 * A JSON text in three parts: `head`, the chunks of a streamed string, `tail`.
 *
 * @example
 * ```ts
 * import { StreamedJson, StreamedString } from "./streamed_json.ts";
 * async function* chunks() {
 *   yield "aG";
 *   yield "k=";
 * }
 * const json = StreamedJson.of({ dataBase64: new StreamedString(chunks()) }, "dataBase64")!;
 * let text = json.head;
 * for await (const chunk of json.string.take()) text += chunk;
 * console.log(text + json.tail); // {"dataBase64":"aGk="}
 * ```
 */
export class StreamedJson {
  /** Text before the chunks. */
  readonly head: string;
  /** The streamed string (its chunks go between `head` and `tail`). */
  readonly string: StreamedString;
  /** Text after the chunks. */
  readonly tail: string;

  /**
   * Creates the parts.
   *
   * @param head Text before the chunks.
   * @param string The streamed string.
   * @param tail Text after the chunks.
   */
  constructor(head: string, string: StreamedString, tail: string) {
    this.head = head;
    this.string = string;
    this.tail = tail;
  }

  /**
   * An object whose member `field` may be a {@linkcode StreamedString}: its JSON in parts
   * (members in the object's order), or `undefined` when that member is an ordinary value.
   *
   * @param value The object.
   * @param field The member that may be streamed.
   */
  static of(value: object, field: string): StreamedJson | undefined {
    const member = (value as Record<string, unknown>)[field];
    if (!(member instanceof StreamedString)) return undefined;
    const text = JSON.stringify({ ...value, [field]: PLACEHOLDER });
    const at = text.indexOf(`"${PLACEHOLDER}"`);
    return new StreamedJson(text.slice(0, at + 1), member, text.slice(at + PLACEHOLDER.length + 1));
  }

  /**
   * The same parts inside more text (a reply's envelope around its result).
   *
   * @param before Text before the head.
   * @param after Text after the tail.
   */
  within(before: string, after: string): StreamedJson {
    return new StreamedJson(before + this.head, this.string, this.tail + after);
  }
}

/** Stands for the streamed member while the rest is encoded (no JSON escaping in it). */
const PLACEHOLDER = "streamed-member-6b1f0c9e";
