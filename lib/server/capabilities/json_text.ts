/**
 * JSON read as the reference's `serde_json` reads a plugin manifest: objects keep their keys in
 * written order (a repeated key keeps its first place and its last value), numbers keep the
 * text they were written with, and a value is written back compactly the way `serde_json`
 * writes it (for an inline `mcpServers` table, which `capabilities/discoverV2` returns as its
 * own text).
 *
 * @module
 */

/** A JSON value with its objects ordered and its numbers as written. */
export type JsonNode =
  | { kind: "object"; entries: Map<string, JsonNode>; repeated: Set<string> }
  | { kind: "array"; items: JsonNode[] }
  | { kind: "string"; value: string }
  | { kind: "number"; text: string }
  | { kind: "literal"; value: boolean | null };

/** Deepest nesting `serde_json` reads by default. */
const MAX_DEPTH = 128;
const NUMBER = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
// Control characters must be escaped inside a JSON string, so the pattern names them.
// deno-lint-ignore no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;

/** The match of a sticky pattern at `index`, or `undefined`. */
function matchAt(pattern: RegExp, text: string, index: number): string | undefined {
  pattern.lastIndex = index;
  const match = pattern.exec(text);
  return match === null || match[0] === "" ? undefined : match[0];
}

class Reader {
  index = 0;
  constructor(readonly text: string) {}

  fail(): never {
    throw new SyntaxError(`invalid JSON at ${this.index}`);
  }

  space(): void {
    while (/[ \t\n\r]/.test(this.text[this.index] ?? "")) this.index++;
  }

  expect(char: string): void {
    if (this.text[this.index] !== char) this.fail();
    this.index++;
  }

  value(depth: number): JsonNode {
    this.space();
    const char = this.text[this.index];
    if (char === "{" || char === "[") {
      if (depth >= MAX_DEPTH) this.fail();
      return char === "{" ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (char === '"') return { kind: "string", value: this.string() };
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(word, this.index)) {
        this.index += word.length;
        return { kind: "literal", value };
      }
    }
    const number = matchAt(NUMBER, this.text, this.index) ?? this.fail();
    this.index += number.length;
    return { kind: "number", text: number };
  }

  object(depth: number): JsonNode {
    this.expect("{");
    const entries = new Map<string, JsonNode>();
    const repeated = new Set<string>();
    this.space();
    if (this.text[this.index] === "}") {
      this.index++;
      return { kind: "object", entries, repeated };
    }
    for (;;) {
      this.space();
      const key = this.string();
      this.space();
      this.expect(":");
      if (entries.has(key)) repeated.add(key);
      entries.set(key, this.value(depth));
      this.space();
      if (this.text[this.index] === "}") {
        this.index++;
        return { kind: "object", entries, repeated };
      }
      this.expect(",");
    }
  }

  array(depth: number): JsonNode {
    this.expect("[");
    const items: JsonNode[] = [];
    this.space();
    if (this.text[this.index] === "]") {
      this.index++;
      return { kind: "array", items };
    }
    for (;;) {
      items.push(this.value(depth));
      this.space();
      if (this.text[this.index] === "]") {
        this.index++;
        return { kind: "array", items };
      }
      this.expect(",");
    }
  }

  string(): string {
    const literal = matchAt(STRING, this.text, this.index) ?? this.fail();
    this.index += literal.length;
    const value: string = JSON.parse(literal);
    // serde_json refuses an escaped surrogate that is not part of a pair.
    if (!value.isWellFormed()) this.fail();
    return value;
  }
}

/**
 * Reads JSON text, or throws `SyntaxError` where `serde_json` would refuse it (including
 * nesting deeper than 128 and escaped lone surrogates).
 *
 * @param text The JSON text.
 * @returns Its value.
 *
 * @example Numbers keep their text
 * ```ts
 * import { readJson, writeJson } from "./json_text.ts";
 * console.log(writeJson(readJson('{"b": 2.50, "a": [1E2]}'))); // {"b":2.50,"a":[1e+2]}
 * ```
 */
export function readJson(text: string): JsonNode {
  const reader = new Reader(text);
  const value = reader.value(0);
  reader.space();
  if (reader.index !== text.length) reader.fail();
  return value;
}

/** A number as `serde_json` writes it back: `-0` is `0`, an exponent is `e` with a sign. */
function numberText(text: string): string {
  if (text === "-0") return "0";
  return text.replace(/[eE]([+-]?)/, (_, sign: string) => `e${sign === "" ? "+" : sign}`);
}

/** A string as `serde_json` writes it: only `"`, `\` and control characters escaped. */
function stringText(value: string): string {
  // JSON.stringify escapes the same characters the same way for well-formed strings.
  return JSON.stringify(value);
}

/**
 * Writes a value compactly, as `serde_json::to_string` does.
 *
 * @param node The value.
 * @returns Its JSON text.
 */
export function writeJson(node: JsonNode): string {
  switch (node.kind) {
    case "object":
      return `{${
        [...node.entries].map(([key, value]) => `${stringText(key)}:${writeJson(value)}`).join(
          ",",
        )
      }}`;
    case "array":
      return `[${node.items.map(writeJson).join(",")}]`;
    case "string":
      return stringText(node.value);
    case "number":
      return numberText(node.text);
    case "literal":
      return String(node.value);
  }
}
