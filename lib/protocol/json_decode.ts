/**
 * A bounded, strict JSON decoder for inbound protocol messages (spec §2.4).
 *
 * `JSON.parse` keeps the last of duplicate keys, has no value budget and
 * rounds integers above 2^53. This decoder rejects duplicate keys at every
 * level, counts every value against a budget, limits nesting, keeps large
 * integers exact as `bigint`, and keeps numbers written with a fraction or
 * exponent apart from integers ({@linkcode JsonFloat}). Error messages use
 * serde_json's wording, as the reference server reports them.
 *
 * Long strings without escapes are sliced in one step (`indexOf` for the
 * closing quote plus one regular-expression check for control characters),
 * so multi-MiB base64 payloads cost about what `JSON.parse` costs.
 *
 * @module
 */

/** Most JSON values one message may hold (every value counts, object keys do not). */
export const MAX_JSON_VALUES = 262_144;
/** Most nested containers in one message (the top-level object counts as 1). */
export const MAX_JSON_DEPTH = 127;

/** A number written with a fraction or exponent (`1.5`, `1e3`, `1.0`), kept distinct from integers. */
export class JsonFloat {
  /** The number's value. */
  readonly value: number;

  /**
   * Wraps a float.
   *
   * @param value The number's value.
   */
  constructor(value: number) {
    this.value = value;
  }

  /** Serializes as the plain number. */
  toJSON(): number {
    return this.value;
  }
}

/** A decode failure; `message` is serde-style detail with line and column. */
export class JsonDecodeError extends Error {
  /** 1-based line of the failure. */
  readonly line: number;
  /** Column of the failure (serde's convention). */
  readonly column: number;

  /**
   * Creates the error.
   *
   * @param detail What went wrong.
   * @param line 1-based line.
   * @param column Column.
   */
  constructor(detail: string, line: number, column: number) {
    super(`${detail} at line ${line} column ${column}`);
    this.name = "JsonDecodeError";
    this.line = line;
    this.column = column;
  }
}

/** Options for {@linkcode decodeJson}. */
export interface DecodeJsonOptions {
  /**
   * Value budget.
   *
   * @default {262144}
   */
  maxValues?: number;
  /**
   * Nesting limit.
   *
   * @default {127}
   */
  maxDepth?: number;
}

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f]/;
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const INTEGER_DIGITS = /^-?\d+$/;

class Parser {
  text: string;
  pos = 0;
  values = 0;
  depth = 0;
  maxValues: number;
  maxDepth: number;

  constructor(text: string, maxValues: number, maxDepth: number) {
    this.text = text;
    this.maxValues = maxValues;
    this.maxDepth = maxDepth;
  }

  fail(detail: string, at = this.pos): never {
    let line = 1;
    let lineStart = 0;
    const end = Math.min(at, this.text.length);
    for (let i = 0; i < end; i++) {
      if (this.text.charCodeAt(i) === 10) {
        line++;
        lineStart = i + 1;
      }
    }
    throw new JsonDecodeError(detail, line, at - lineStart + (at < this.text.length ? 1 : 0));
  }

  skipWhitespace(): void {
    const text = this.text;
    let pos = this.pos;
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c !== 32 && c !== 10 && c !== 13 && c !== 9) break;
      pos++;
    }
    this.pos = pos;
  }

  count(): void {
    if (++this.values > this.maxValues) {
      this.fail(`JSON-RPC message exceeds the limit of ${this.maxValues} JSON values`);
    }
  }

  value(): unknown {
    this.skipWhitespace();
    if (this.pos >= this.text.length) this.fail("EOF while parsing a value");
    this.count();
    const c = this.text.charCodeAt(this.pos);
    switch (c) {
      case 123: // {
        return this.object();
      case 91: // [
        return this.array();
      case 34: // "
        return this.string();
      case 116: // t
        return this.literal("true", true);
      case 102: // f
        return this.literal("false", false);
      case 110: // n
        return this.literal("null", null);
      default:
        if (c === 45 || (c >= 48 && c <= 57)) return this.number();
        this.fail("expected value", this.pos);
    }
  }

  literal<T>(word: string, value: T): T {
    for (let i = 1; i < word.length; i++) {
      if (this.pos + i >= this.text.length) this.fail("EOF while parsing a value", this.pos + i);
      if (this.text[this.pos + i] !== word[i]) this.fail("expected ident", this.pos + i);
    }
    this.pos += word.length;
    return value;
  }

  number(): number | bigint | JsonFloat | null {
    NUMBER.lastIndex = this.pos;
    const match = NUMBER.exec(this.text);
    if (!match || match[0] === "-") this.fail("invalid number", this.pos + 1);
    const lexeme = match[0];
    const next = this.text.charCodeAt(this.pos + lexeme.length);
    if (next >= 48 && next <= 57) this.fail("invalid number", this.pos + lexeme.length);
    if ((next === 46 || next === 101 || next === 69) && !match[1] && !match[2]) {
      this.fail("invalid number", this.pos + lexeme.length + 1);
    }
    this.pos += lexeme.length;
    if (match[1] === undefined && match[2] === undefined && INTEGER_DIGITS.test(lexeme)) {
      const value = Number(lexeme);
      if (Number.isSafeInteger(value)) return value === 0 ? 0 : value;
      return BigInt(lexeme);
    }
    const value = Number(lexeme);
    return Number.isFinite(value) ? new JsonFloat(value) : null;
  }

  string(): string {
    const text = this.text;
    const start = this.pos + 1;
    const end = text.indexOf('"', start);
    if (end === -1) this.fail("EOF while parsing a string", text.length);
    const slice = text.slice(start, end);
    if (slice.indexOf("\\") === -1) {
      if (CONTROL.test(slice)) {
        this.fail(
          "control character (\\u0000-\\u001F) found while parsing a string",
          start + slice.search(CONTROL) + 1,
        );
      }
      this.pos = end + 1;
      return slice;
    }
    return this.escapedString(start);
  }

  escapedString(start: number): string {
    const text = this.text;
    let out = "";
    let pos = start;
    let runStart = pos;
    while (true) {
      if (pos >= text.length) this.fail("EOF while parsing a string", text.length);
      const c = text.charCodeAt(pos);
      if (c === 34) {
        out += text.slice(runStart, pos);
        this.pos = pos + 1;
        return out;
      }
      if (c < 32) this.fail("control character (\\u0000-\\u001F) found while parsing a string", pos + 1);
      if (c !== 92) {
        pos++;
        continue;
      }
      out += text.slice(runStart, pos);
      pos++;
      if (pos >= text.length) this.fail("EOF while parsing a string", text.length);
      const e = text[pos]!;
      pos++;
      switch (e) {
        case '"':
          out += '"';
          break;
        case "\\":
          out += "\\";
          break;
        case "/":
          out += "/";
          break;
        case "b":
          out += "\b";
          break;
        case "f":
          out += "\f";
          break;
        case "n":
          out += "\n";
          break;
        case "r":
          out += "\r";
          break;
        case "t":
          out += "\t";
          break;
        case "u": {
          const unit = this.hex4(pos);
          pos += 4;
          if (unit >= 0xd800 && unit <= 0xdbff) {
            if (text[pos] !== "\\" || text[pos + 1] !== "u") {
              this.fail("unexpected end of hex escape", pos);
            }
            const low = this.hex4(pos + 2);
            if (low < 0xdc00 || low > 0xdfff) this.fail("lone leading surrogate in hex escape", pos + 6);
            pos += 6;
            out += String.fromCharCode(unit, low);
          } else if (unit >= 0xdc00 && unit <= 0xdfff) {
            this.fail("lone leading surrogate in hex escape", pos);
          } else {
            out += String.fromCharCode(unit);
          }
          break;
        }
        default:
          this.fail("invalid escape", pos);
      }
      runStart = pos;
    }
  }

  hex4(at: number): number {
    if (at + 4 > this.text.length) this.fail("EOF while parsing a string", this.text.length);
    const digits = this.text.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(digits)) this.fail("invalid escape", at + 1);
    return parseInt(digits, 16);
  }

  enter(): void {
    if (++this.depth > this.maxDepth) this.fail("recursion limit exceeded", this.pos + 1);
  }

  object(): Record<string, unknown> {
    this.enter();
    this.pos++;
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === 125) {
      this.pos++;
      this.depth--;
      return out;
    }
    while (true) {
      this.skipWhitespace();
      if (this.pos >= this.text.length) this.fail("EOF while parsing an object");
      if (this.text.charCodeAt(this.pos) !== 34) this.fail("key must be a string", this.pos + 1);
      const keyStart = this.pos;
      const key = this.string();
      if (seen.has(key)) this.fail(`duplicate JSON object key \`${key}\``, keyStart + 1);
      seen.add(key);
      this.skipWhitespace();
      if (this.pos >= this.text.length) this.fail("EOF while parsing an object");
      if (this.text.charCodeAt(this.pos) !== 58) this.fail("expected `:`", this.pos + 1);
      this.pos++;
      const value = this.value();
      if (key === "__proto__") {
        Object.defineProperty(out, key, {
          value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else {
        out[key] = value;
      }
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.pos);
      if (c === 44) {
        this.pos++;
        continue;
      }
      if (c === 125) {
        this.pos++;
        this.depth--;
        return out;
      }
      if (this.pos >= this.text.length) this.fail("EOF while parsing an object");
      this.fail("expected `,` or `}`", this.pos + 1);
    }
  }

  array(): unknown[] {
    this.enter();
    this.pos++;
    const out: unknown[] = [];
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === 93) {
      this.pos++;
      this.depth--;
      return out;
    }
    while (true) {
      out.push(this.value());
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.pos);
      if (c === 44) {
        this.pos++;
        continue;
      }
      if (c === 93) {
        this.pos++;
        this.depth--;
        return out;
      }
      if (this.pos >= this.text.length) this.fail("EOF while parsing a list");
      this.fail("expected `,` or `]`", this.pos + 1);
    }
  }
}

/**
 * Decodes one JSON document within the value budget and nesting limit,
 * rejecting duplicate keys and trailing characters.
 *
 * @example Duplicate keys are an error
 * ```ts
 * import { decodeJson } from "./json_decode.ts";
 * try {
 *   decodeJson('{"id":1,"id":2}');
 * } catch (err) {
 *   console.log((err as Error).message); // duplicate JSON object key `id` at line 1 column 9
 * }
 * ```
 *
 * @param text The document.
 * @param options Budget and depth limits.
 */
export function decodeJson(text: string, options: DecodeJsonOptions = {}): unknown {
  const parser = new Parser(
    text,
    options.maxValues ?? MAX_JSON_VALUES,
    options.maxDepth ?? MAX_JSON_DEPTH,
  );
  const value = parser.value();
  parser.skipWhitespace();
  if (parser.pos < text.length) parser.fail("trailing characters", parser.pos + 1);
  return value;
}
