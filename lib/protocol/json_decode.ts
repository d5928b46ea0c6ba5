/**
 * Bounded, strict JSON decoder for inbound JSON-RPC messages (docs/protocol.md sections 2.3-2.5).
 *
 * `JSON.parse` cannot be used on untrusted JSON-RPC input because it silently
 * keeps the last of two duplicate keys, has no value budget or depth limit, and
 * loses precision on 64-bit request ids. {@linkcode decodeJson} is a single-pass
 * decoder that enforces the limits of section 2.4 and reports failures with
 * serde_json's wording and `line`/`column` positions, so messages built from
 * them match the reference server.
 *
 * Value mapping:
 *
 * | JSON | JavaScript |
 * | --- | --- |
 * | object | plain object (`Object.prototype`); a `"__proto__"` key is an ordinary own property |
 * | array | `Array` |
 * | string | `string` |
 * | `true` / `false` / `null` | `boolean` / `null` |
 * | integer lexeme (no `.`, `e`, `E`) in the safe range | `number` (`-0` becomes `0`) |
 * | integer lexeme outside the safe range, within -2^127..2^128-1 | `bigint` with the exact digits |
 * | integer lexeme beyond the 128-bit range (as serde_json, treated as a float) | {@linkcode JsonFloat}, or `null` if it overflows f64 |
 * | number with a fraction or exponent | {@linkcode JsonFloat} |
 * | number with a fraction or exponent that overflows f64 (`1e400`) | `null` |
 *
 * Design notes (measured with `bench/json_decode_bench.ts`):
 *
 * * Single pass, recursive descent; recursion depth is bounded by `maxDepth`.
 * * Strings: `indexOf('"')` finds the end; short spans are checked with a
 *   `charCodeAt` loop and sliced; spans of 64+ code units are handed to
 *   `JSON.parse` on the quoted slice, which validates control characters and
 *   decodes escapes natively in one pass (a 4 MiB base64 chunk costs about
 *   what `JSON.parse` of the whole message costs). A regular expression scan
 *   for control characters was about 3x slower than that.
 * * Objects are ordinary `{}` objects; only a `"__proto__"` member is added
 *   with `Object.defineProperty`. Null-prototype objects were measured about
 *   15% slower (V8 keeps them in dictionary mode) and would not compare equal
 *   to `JSON.parse` results with `assert.deepStrictEqual`.
 * * Error positions (line, UTF-8 column) are computed only when failing.
 * * A short compact text of plain strings and small integers (most requests)
 *   is decoded by `JSON.parse`, which runs native code in every V8 tier, where
 *   the decoder's loops stay slow until the optimizing compiler has compiled
 *   them (the benchmark notes, `git show fbec4dc:docs/benchmarks.md`: "The JSON
 *   decoder before the optimizing tier").
 *
 * @example Decode a request with a 64-bit id
 * ```ts
 * import assert from "node:assert/strict";
 * import { decodeJson } from "./json_decode.ts";
 *
 * const message = decodeJson('{"id":9223372036854775807,"method":"m"}');
 * assert.deepEqual(message, { id: 9223372036854775807n, method: "m" });
 * ```
 *
 * @module
 */

/** Default value budget per message: 256 x 1024 JSON values (docs/protocol.md section 2.4). */
export const MAX_JSON_VALUES = 262_144;

/** Default nesting limit; the top-level container counts as depth 1 (docs/protocol.md section 2.4). */
export const MAX_JSON_DEPTH = 127;

/**
 * A number written with a fraction or an exponent (`1.5`, `1e3`, `1.0`), kept
 * distinct from integers so that callers can reject it where the protocol wants
 * an integer (a request id of `1.0` is invalid, docs/protocol.md section 2.3).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { decodeJson, JsonFloat } from "./json_decode.ts";
 *
 * assert.deepEqual(decodeJson("1.0"), new JsonFloat(1));
 * assert.equal(decodeJson("1"), 1);
 * ```
 */
export class JsonFloat {
  /**
   * Wraps the decoded value.
   *
   * @param value The IEEE 754 double the lexeme denotes (always finite).
   */
  constructor(readonly value: number) {}

  /**
   * Serializes as the plain number, so `JSON.stringify` writes `1` for a
   * decoded `1.0` (serde_json writes `1.0`; both denote the same value).
   *
   * @returns The wrapped value.
   */
  toJSON(): number {
    return this.value;
  }
}

/**
 * Thrown by {@linkcode decodeJson} for any decode failure.
 *
 * `message` uses serde_json's wording followed by the position, e.g.
 * ``duplicate JSON object key `id` at line 1 column 43``. Positions follow
 * serde_json too: `line` is 1-based and `column` counts UTF-8 bytes from the
 * start of the line up to and including the character the error was detected
 * at (0 when the error is detected right after a line break or before any
 * input).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { decodeJson, JsonDecodeError } from "./json_decode.ts";
 *
 * assert.throws(() => decodeJson("not json"), {
 *   name: "JsonDecodeError",
 *   message: "expected ident at line 1 column 2",
 *   line: 1,
 *   column: 2,
 * });
 * assert.throws(() => decodeJson("[1,]"), JsonDecodeError);
 * ```
 */
export class JsonDecodeError extends Error {
  /** 1-based line of the error position. */
  readonly line: number;
  /** Column of the error position, in UTF-8 bytes (serde_json convention). */
  readonly column: number;

  /**
   * Creates the error; the message becomes `<detail> at line <line> column <column>`.
   *
   * @param detail serde_json-style description, without position.
   * @param line 1-based line.
   * @param column Column in UTF-8 bytes.
   */
  constructor(detail: string, line: number, column: number) {
    super(`${detail} at line ${line} column ${column}`);
    this.name = "JsonDecodeError";
    this.line = line;
    this.column = column;
  }
}

/** Limits for {@linkcode decodeJson}. */
export interface DecodeJsonOptions {
  /**
   * Maximum number of JSON values (containers and scalars; object keys are not
   * counted) in the document.
   *
   * @default {262144}
   */
  maxValues?: number;
  /**
   * Maximum nesting of objects/arrays; the top-level container is depth 1.
   *
   * @default {127}
   */
  maxDepth?: number;
}

/**
 * Decodes one strict JSON document with the value budget, depth limit and
 * duplicate-key rejection of docs/protocol.md section 2.4.
 *
 * Objects are plain objects whose members are own data properties, including a
 * member named `"__proto__"` (it never changes the prototype). See the module
 * documentation for the full value mapping.
 *
 * @param text The whole message text (one JSON document, surrounding JSON
 *   whitespace allowed).
 * @param options Limits; defaults are {@linkcode MAX_JSON_VALUES} and
 *   {@linkcode MAX_JSON_DEPTH}.
 * @returns The decoded value.
 * @throws {JsonDecodeError} For malformed JSON, limit violations, duplicate keys
 *   and trailing characters.
 * @throws {RangeError} When a limit option is not a non-negative integer.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { decodeJson } from "./json_decode.ts";
 *
 * assert.throws(() => decodeJson('{"id":1,"id":2}'), {
 *   message: "duplicate JSON object key `id` at line 1 column 12",
 * });
 * assert.throws(() => decodeJson("[[0]]", { maxDepth: 1 }), {
 *   message: "recursion limit exceeded at line 1 column 2",
 * });
 * ```
 */
export function decodeJson(text: string, options?: DecodeJsonOptions): unknown {
  const maxValues = options?.maxValues ?? MAX_JSON_VALUES;
  const maxDepth = options?.maxDepth ?? MAX_JSON_DEPTH;
  if (!Number.isSafeInteger(maxValues) || maxValues < 0) {
    throw new RangeError(
      `Cannot decode JSON: maxValues must be a non-negative integer: ${maxValues}`,
    );
  }
  if (!Number.isSafeInteger(maxDepth) || maxDepth < 0) {
    throw new RangeError(
      `Cannot decode JSON: maxDepth must be a non-negative integer: ${maxDepth}`,
    );
  }
  return simpleDocument(text, maxValues, maxDepth) ??
    new Decoder(text, maxValues, maxDepth).document();
}

/**
 * A compact document (no whitespace) of plain strings (no escape, no control character, no
 * surrogate), integers of at most 15 digits other than `-0`, `true`, `false`, `null` and
 * punctuation. The alternatives start with different characters: one pass, no backtracking.
 */
const SIMPLE_DOCUMENT =
  // deno-lint-ignore no-control-regex
  /^(?:[,:[\]{}]|"[^"\\\u0000-\u001f\ud800-\udfff]*"|(?:0|-?[1-9][0-9]{0,14})(?![0-9])|true|false|null)*$/;

/**
 * The value of a short {@linkcode SIMPLE_DOCUMENT}, decoded by `JSON.parse`; `undefined` for
 * any other text, which the decoder decodes (or reports the error of). `JSON.parse` gives such
 * a text the decoder's value except when a key repeats (it keeps the last member), and
 * `JSON.stringify` writes that value back in the text's own length exactly when no member was
 * dropped. A regular expression and both of these run native code in every tier of V8, where
 * the decoder's loops are slow until the optimizing compiler has compiled them (a fresh
 * server's first thousands of requests). At most `2 x maxDepth + 1` characters long, the text
 * cannot nest deeper than `maxDepth` (a level takes two) nor hold more than `maxValues` values.
 */
function simpleDocument(text: string, maxValues: number, maxDepth: number): unknown {
  if (text.length > maxValues || text.length > 2 * maxDepth + 1) return undefined;
  if (!SIMPLE_DOCUMENT.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return JSON.stringify(value).length === text.length ? value : undefined;
}

// Character codes.
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const COLON = 0x3a;
const UPPER_E = 0x45;
const OPEN_BRACKET = 0x5b;
const BACKSLASH = 0x5c;
const CLOSE_BRACKET = 0x5d;
const LOWER_B = 0x62;
const LOWER_E = 0x65;
const LOWER_F = 0x66;
const LOWER_N = 0x6e;
const LOWER_R = 0x72;
const LOWER_T = 0x74;
const LOWER_U = 0x75;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Strings at least this long (in UTF-16 code units, between the quotes) are
 * validated and copied by `JSON.parse` on the quoted span, which scans for
 * control characters and decodes escapes natively; shorter ones are checked
 * with a `charCodeAt` loop. Measured with bench/json_decode_bench.ts.
 */
const LONG_STRING = 64;

/** Integer lexemes with at most this many digits are exact when accumulated in a double. */
const SAFE_DIGITS = 15;

/**
 * Integer lexemes outside `I128_MIN..U128_MAX` are decoded as floats, as the
 * reference does (serde_json keeps integers up to 128 bits exact and falls back
 * to f64 beyond). This also bounds the cost of `BigInt()`, which is quadratic
 * in the number of digits.
 */
const U128_MAX = 2n ** 128n - 1n;
const I128_MIN = -(2n ** 127n);
/** Digits of `U128_MAX`; longer lexemes are beyond the 128-bit range without parsing them. */
const MAX_BIGINT_DIGITS = 39;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const MIN_SAFE = Number.MIN_SAFE_INTEGER;

/** Adds `key` as an own enumerable data property without invoking setters (used for `"__proto__"`). */
function defineMember(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** Value of one hex digit, or -1. */
function hexDigit(c: number): number {
  if (c >= DIGIT_0 && c <= DIGIT_9) return c - DIGIT_0;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

const NON_ASCII = /[\u0080-\uffff]/g;

/**
 * Number of UTF-8 bytes encoding `text[start, end)`; a lone surrogate counts 3
 * bytes (as U+FFFD). Only used to position errors, but fast on long ASCII
 * lines because a regular expression skips to each non-ASCII character.
 */
function utf8Length(text: string, start: number, end: number): number {
  let bytes = end - start;
  NON_ASCII.lastIndex = start;
  for (let match = NON_ASCII.exec(text); match !== null; match = NON_ASCII.exec(text)) {
    const i = match.index;
    if (i >= end) break;
    const c = text.charCodeAt(i);
    if (c < 0x800) {
      bytes += 1;
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < end) {
      const next = text.charCodeAt(i + 1);
      // A surrogate pair is 2 code units and 4 bytes.
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2;
        NON_ASCII.lastIndex = i + 2;
      } else {
        bytes += 2;
      }
    } else {
      bytes += 2;
    }
  }
  return bytes;
}

/** Single-use decoder state for one document. */
class Decoder {
  /**
   * A decoder kept as long as the class, never used. V8's optimized code for these methods
   * checks `this` against the instances' hidden class, which lives only while some instance
   * does (a class reaches it from its first map through weak transitions); between messages
   * no decoder is alive, so an idle process's full collection would take that map and throw
   * the decoder's compiled code away. This one keeps it (the benchmark notes,
   * `git show fbec4dc:docs/benchmarks.md`: "Keeping the last closed connection").
   */
  static readonly #shape = new Decoder("", 0, 0);

  #text: string;
  #len: number;
  #pos = 0;
  #budget: number;
  #maxValues: number;
  #maxDepth: number;

  constructor(text: string, maxValues: number, maxDepth: number) {
    this.#text = text;
    this.#len = text.length;
    this.#budget = maxValues;
    this.#maxValues = maxValues;
    this.#maxDepth = maxDepth;
  }

  /** Index of the first character at or after `pos` that is not JSON whitespace. */
  #skipWhitespace(pos: number): number {
    const text = this.#text;
    let c = text.charCodeAt(pos);
    while (c === SPACE || c === LF || c === CR || c === TAB) c = text.charCodeAt(++pos);
    return pos;
  }

  /** Decodes the whole text: one value, then only whitespace. */
  document(): unknown {
    const value = this.#value(0);
    const pos = this.#skipWhitespace(this.#pos);
    if (pos < this.#len) throw this.#error("trailing characters", pos + 1);
    return value;
  }

  /**
   * Builds an error at the character `text[end - 1]`, positioned like
   * serde_json: it reads bytes, so the column counts the UTF-8 bytes before
   * that character plus its first byte (a line break gives column 0 of the
   * next line). For an ASCII character this equals the byte length of the
   * consumed input `text[0, end)`, which is how positions "after" a token
   * (duplicate key, value budget) are expressed.
   */
  #error(detail: string, end: number): JsonDecodeError {
    if (end > this.#len) return this.#eof(detail);
    const text = this.#text;
    let line = 1;
    let lineStart = 0;
    let nl = text.indexOf("\n");
    while (nl !== -1 && nl < end) {
      line++;
      lineStart = nl + 1;
      nl = text.indexOf("\n", lineStart);
    }
    const column = end > lineStart ? utf8Length(text, lineStart, end - 1) + 1 : 0;
    return new JsonDecodeError(detail, line, column);
  }

  /** Builds an error positioned at the end of the input (all of it consumed). */
  #eof(detail: string): JsonDecodeError {
    const text = this.#text;
    const lineStart = text.lastIndexOf("\n") + 1;
    let line = 1;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", nl + 1)) line++;
    return new JsonDecodeError(detail, line, utf8Length(text, lineStart, this.#len));
  }

  /** Parses a value starting at `#pos` (after optional whitespace); `depth` is that of its container. */
  #value(depth: number): unknown {
    const text = this.#text;
    let pos = this.#pos;
    let c = text.charCodeAt(pos);
    if (c <= SPACE) {
      pos = this.#skipWhitespace(pos);
      c = text.charCodeAt(pos);
    }
    if (--this.#budget < 0) {
      throw this.#error(
        `JSON-RPC message exceeds the limit of ${this.#maxValues} JSON values`,
        pos,
      );
    }
    this.#pos = pos;
    switch (c) {
      case QUOTE:
        return this.#string(pos + 1);
      case OPEN_BRACE:
        return this.#object(depth + 1);
      case OPEN_BRACKET:
        return this.#array(depth + 1);
      case LOWER_T:
        this.#ident("true");
        return true;
      case LOWER_F:
        this.#ident("false");
        return false;
      case LOWER_N:
        this.#ident("null");
        return null;
      default:
        if ((c >= DIGIT_0 && c <= DIGIT_9) || c === MINUS) return this.#number(pos);
        if (pos >= this.#len) throw this.#eof("EOF while parsing a value");
        throw this.#error("expected value", pos + 1);
    }
  }

  /** Consumes the literal `word` whose first character is at `#pos`. */
  #ident(word: string): void {
    const text = this.#text;
    const pos = this.#pos;
    if (text.startsWith(word, pos)) {
      this.#pos = pos + word.length;
      return;
    }
    for (let i = 1; i < word.length; i++) {
      if (pos + i >= this.#len) throw this.#eof("EOF while parsing a value");
      if (text.charCodeAt(pos + i) !== word.charCodeAt(i)) {
        throw this.#error("expected ident", pos + i + 1);
      }
    }
  }

  /** Parses a number whose first character (`-` or a digit) is at `start`. */
  #number(start: number): unknown {
    const text = this.#text;
    let i = start;
    let c = text.charCodeAt(i);
    if (c === MINUS) c = text.charCodeAt(++i);
    const digitsStart = i;
    let n = 0;
    if (c === DIGIT_0) {
      c = text.charCodeAt(++i);
      if (c >= DIGIT_0 && c <= DIGIT_9) throw this.#error("invalid number", i + 1);
    } else if (c > DIGIT_0 && c <= DIGIT_9) {
      do {
        n = n * 10 + (c - DIGIT_0);
        c = text.charCodeAt(++i);
      } while (c >= DIGIT_0 && c <= DIGIT_9);
    } else {
      if (i >= this.#len) throw this.#eof("EOF while parsing a value");
      throw this.#error("invalid number", i + 1);
    }
    if (c === DOT || c === LOWER_E || c === UPPER_E) return this.#float(start, i, c);
    this.#pos = i;
    if (i - digitsStart <= SAFE_DIGITS) return digitsStart === start || n === 0 ? n : -n;
    const lexeme = text.slice(start, i);
    const value = Number(lexeme);
    if (value <= MAX_SAFE && value >= MIN_SAFE) return value;
    if (i - digitsStart <= MAX_BIGINT_DIGITS) {
      const big = BigInt(lexeme);
      if (big <= U128_MAX && big >= I128_MIN) return big;
    }
    // Like serde_json, an integer beyond the 128-bit range is a float.
    return Number.isFinite(value) ? new JsonFloat(value) : null;
  }

  /** Continues a number at its fraction or exponent (`i` is the index of `c`). */
  #float(start: number, i: number, c: number): JsonFloat | null {
    const text = this.#text;
    if (c === DOT) {
      c = text.charCodeAt(++i);
      if (!(c >= DIGIT_0 && c <= DIGIT_9)) throw this.#numberError(i);
      do c = text.charCodeAt(++i); while (c >= DIGIT_0 && c <= DIGIT_9);
    }
    if (c === LOWER_E || c === UPPER_E) {
      c = text.charCodeAt(++i);
      if (c === PLUS || c === MINUS) c = text.charCodeAt(++i);
      if (!(c >= DIGIT_0 && c <= DIGIT_9)) throw this.#numberError(i);
      do c = text.charCodeAt(++i); while (c >= DIGIT_0 && c <= DIGIT_9);
    }
    this.#pos = i;
    const value = Number(text.slice(start, i));
    return Number.isFinite(value) ? new JsonFloat(value) : null;
  }

  /** The error for a missing digit at index `i` of a number. */
  #numberError(i: number): JsonDecodeError {
    return i >= this.#len
      ? this.#eof("EOF while parsing a value")
      : this.#error("invalid number", i + 1);
  }

  /** Parses a string whose opening quote is at `start - 1`; leaves `#pos` after the closing quote. */
  #string(start: number): string {
    const text = this.#text;
    const end = text.indexOf('"', start);
    if (end !== -1) {
      if (end - start < LONG_STRING) {
        let i = start;
        while (i < end) {
          const c = text.charCodeAt(i);
          if (c < SPACE || c === BACKSLASH) return this.#slowString(start, true);
          i++;
        }
        this.#pos = end + 1;
        return text.slice(start, end);
      }
      // A quote not preceded by a backslash cannot be escaped, so it closes
      // the string; JSON.parse then validates and decodes the span natively.
      if (text.charCodeAt(end - 1) !== BACKSLASH) return this.#parsedString(start, end);
      return this.#longEscapedString(start, start);
    }
    return this.#slowString(start, true);
  }

  /**
   * Decodes a string character by character; used for short strings with
   * escapes and for every string with an error (to report it precisely).
   * With `handoff`, a string found to be long after an escape is passed to
   * {@linkcode #longEscapedString} so that `JSON.parse` decodes it.
   */
  #slowString(start: number, handoff: boolean): string {
    const text = this.#text;
    const len = this.#len;
    let out = "";
    let chunk = start;
    let i = start;
    for (;;) {
      if (i >= len) throw this.#eof("EOF while parsing a string");
      const c = text.charCodeAt(i);
      if (c === QUOTE) {
        this.#pos = i + 1;
        return chunk === start ? text.slice(start, i) : out + text.slice(chunk, i);
      }
      if (c === BACKSLASH) {
        out += text.slice(chunk, i);
        i++;
        if (i >= len) throw this.#eof("EOF while parsing a string");
        switch (text.charCodeAt(i)) {
          case QUOTE:
            out += '"';
            break;
          case BACKSLASH:
            out += "\\";
            break;
          case SLASH:
            out += "/";
            break;
          case LOWER_B:
            out += "\b";
            break;
          case LOWER_F:
            out += "\f";
            break;
          case LOWER_N:
            out += "\n";
            break;
          case LOWER_R:
            out += "\r";
            break;
          case LOWER_T:
            out += "\t";
            break;
          case LOWER_U: {
            const unit = this.#hexEscape(i + 1);
            i += 4;
            if (unit >= 0xdc00 && unit <= 0xdfff) {
              throw this.#error("lone leading surrogate in hex escape", i + 1);
            }
            if (unit >= 0xd800 && unit <= 0xdbff) {
              // A leading surrogate must be followed by an escaped trailing one.
              for (const expected of [BACKSLASH, LOWER_U]) {
                i++;
                if (i >= len) throw this.#eof("EOF while parsing a string");
                if (text.charCodeAt(i) !== expected) {
                  throw this.#error("unexpected end of hex escape", i + 1);
                }
              }
              const trail = this.#hexEscape(i + 1);
              i += 4;
              if (!(trail >= 0xdc00 && trail <= 0xdfff)) {
                throw this.#error("lone leading surrogate in hex escape", i + 1);
              }
              out += String.fromCharCode(unit, trail);
            } else {
              out += String.fromCharCode(unit);
            }
            break;
          }
          default:
            throw this.#error("invalid escape", i + 1);
        }
        i++;
        chunk = i;
        if (handoff && i - start >= LONG_STRING) return this.#longEscapedString(start, i);
        continue;
      }
      if (c < SPACE) {
        throw this.#error(
          "control character (\\u0000-\\u001F) found while parsing a string",
          i + 1,
        );
      }
      i++;
    }
  }

  /**
   * Decodes the four hex digits at `i..i+3` of a `\u` escape. serde_json reads
   * all four before validating, so an invalid digit is reported after the fourth.
   */
  #hexEscape(i: number): number {
    if (i + 4 > this.#len) throw this.#eof("EOF while parsing a string");
    const text = this.#text;
    const a = hexDigit(text.charCodeAt(i));
    const b = hexDigit(text.charCodeAt(i + 1));
    const c = hexDigit(text.charCodeAt(i + 2));
    const d = hexDigit(text.charCodeAt(i + 3));
    if ((a | b | c | d) < 0) throw this.#error("invalid escape", i + 4);
    return (a << 12) | (b << 8) | (c << 4) | d;
  }

  /**
   * Handles a long string containing escapes: finds the closing quote (a quote
   * preceded by an even number of backslashes), decodes the span with
   * `JSON.parse` and accepts the result only if it is free of lone surrogates;
   * anything else goes back to the exact decoder for the error report.
   * `resume` is an index inside the string known not to be inside an escape.
   */
  #longEscapedString(start: number, resume: number): string {
    const text = this.#text;
    let end = text.indexOf('"', resume);
    while (end !== -1) {
      let backslashes = 0;
      while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++;
      if ((backslashes & 1) === 0) break;
      end = text.indexOf('"', end + 1);
    }
    return end === -1 ? this.#slowString(start, false) : this.#parsedString(start, end);
  }

  /**
   * Decodes the string `text[start, end)` (`end` is its closing quote) with
   * `JSON.parse`. The result is accepted only if it has no lone surrogates
   * (a cheap check, and free for one-byte strings); otherwise, and for any
   * invalid content, the exact decoder reports the error (or accepts raw lone
   * surrogates that were already in the text, which serde_json never sees).
   */
  #parsedString(start: number, end: number): string {
    let value: string | undefined;
    try {
      value = JSON.parse(this.#text.slice(start - 1, end + 1)) as string;
    } catch {
      value = undefined;
    }
    if (value === undefined || !value.isWellFormed()) return this.#slowString(start, false);
    this.#pos = end + 1;
    return value;
  }

  /** Parses an object whose `{` is at `#pos`; `depth` is the object's own depth. */
  #object(depth: number): Record<string, unknown> {
    const text = this.#text;
    let pos = this.#pos;
    if (depth > this.#maxDepth) throw this.#error("recursion limit exceeded", pos + 1);
    const object: Record<string, unknown> = {};
    let c = text.charCodeAt(++pos);
    if (c <= SPACE) {
      pos = this.#skipWhitespace(pos);
      c = text.charCodeAt(pos);
    }
    if (c === CLOSE_BRACE) {
      this.#pos = pos + 1;
      return object;
    }
    for (;;) {
      if (c !== QUOTE) {
        if (pos >= this.#len) throw this.#eof("EOF while parsing an object");
        throw this.#error("key must be a string", pos + 1);
      }
      const key = this.#string(pos + 1);
      pos = this.#pos;
      if (Object.hasOwn(object, key)) {
        throw this.#error(`duplicate JSON object key \`${key}\``, pos);
      }
      c = text.charCodeAt(pos);
      if (c <= SPACE) {
        pos = this.#skipWhitespace(pos);
        c = text.charCodeAt(pos);
      }
      if (c !== COLON) {
        if (pos >= this.#len) throw this.#eof("EOF while parsing an object");
        throw this.#error("expected `:`", pos + 1);
      }
      this.#pos = pos + 1;
      const value = this.#value(depth);
      if (key === "__proto__") defineMember(object, key, value);
      else object[key] = value;
      pos = this.#pos;
      c = text.charCodeAt(pos);
      if (c <= SPACE) {
        pos = this.#skipWhitespace(pos);
        c = text.charCodeAt(pos);
      }
      if (c === COMMA) {
        c = text.charCodeAt(++pos);
        if (c <= SPACE) {
          pos = this.#skipWhitespace(pos);
          c = text.charCodeAt(pos);
        }
        if (c === CLOSE_BRACE) throw this.#error("trailing comma", pos + 1);
        if (pos >= this.#len) throw this.#eof("EOF while parsing a value");
        continue;
      }
      if (c === CLOSE_BRACE) {
        this.#pos = pos + 1;
        return object;
      }
      if (pos >= this.#len) throw this.#eof("EOF while parsing an object");
      throw this.#error("expected `,` or `}`", pos + 1);
    }
  }

  /** Parses an array whose `[` is at `#pos`; `depth` is the array's own depth. */
  #array(depth: number): unknown[] {
    const text = this.#text;
    let pos = this.#pos;
    if (depth > this.#maxDepth) throw this.#error("recursion limit exceeded", pos + 1);
    const array: unknown[] = [];
    let c = text.charCodeAt(++pos);
    if (c <= SPACE) {
      pos = this.#skipWhitespace(pos);
      c = text.charCodeAt(pos);
    }
    if (c === CLOSE_BRACKET) {
      this.#pos = pos + 1;
      return array;
    }
    if (pos >= this.#len) throw this.#eof("EOF while parsing a list");
    for (;;) {
      this.#pos = pos;
      array.push(this.#value(depth));
      pos = this.#pos;
      c = text.charCodeAt(pos);
      if (c <= SPACE) {
        pos = this.#skipWhitespace(pos);
        c = text.charCodeAt(pos);
      }
      if (c === COMMA) {
        c = text.charCodeAt(++pos);
        if (c <= SPACE) {
          pos = this.#skipWhitespace(pos);
          c = text.charCodeAt(pos);
        }
        if (c === CLOSE_BRACKET) throw this.#error("trailing comma", pos + 1);
        if (pos >= this.#len) throw this.#eof("EOF while parsing a value");
        continue;
      }
      if (c === CLOSE_BRACKET) {
        this.#pos = pos + 1;
        return array;
      }
      if (pos >= this.#len) throw this.#eof("EOF while parsing a list");
      throw this.#error("expected `,` or `]`", pos + 1);
    }
  }
}
