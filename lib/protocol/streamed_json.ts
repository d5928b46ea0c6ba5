/**
 * JSON produced in parts: a reply whose one large string member (a file's
 * base64) is made chunk by chunk while it is sent, so that memory is bounded
 * by a chunk rather than by the reply.
 *
 * @module
 */

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
