/**
 * TOML text of a parsed table, written the way the reference's `toml::to_string` writes it
 * (observed on codex-cli 0.171.0, docs/protocol.md §13): a table's plain values first, in their
 * order, then its tables and arrays of tables, each under a header; a header is left out for a
 * table that holds only tables; inline tables become tables unless they sit in an array.
 *
 * @module
 */

/**
 * A TOML date or time as the parser gives it (smol-toml's `TomlDate`): a `Date` that knows
 * which parts it has.
 */
export interface TomlDateValue extends Date {
  /** Whether it has a date and a time. */
  isDateTime(): boolean;
  /** Whether it has no offset. */
  isLocal(): boolean;
  /** Whether it is a date only. */
  isDate(): boolean;
  /** Whether it is a time only. */
  isTime(): boolean;
}

/** A parsed TOML value: integers are `bigint`, floats `number`. */
export type TomlValue =
  | string
  | bigint
  | number
  | boolean
  | TomlDateValue
  | TomlValue[]
  | TomlTable;

/** A parsed TOML table (its keys in document order). */
export interface TomlTable {
  [key: string]: TomlValue;
}

/** Whether a value is a table (not a date, not an array). */
export function isTable(value: unknown): value is TomlTable {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof Date);
}

/**
 * Sets `table[key]` as an own property, so a key named `__proto__` is data, not a prototype.
 *
 * @example
 * ```ts
 * import { setEntry } from "./toml_text.ts";
 * const table = {};
 * setEntry(table, "__proto__", 1);
 * console.log(Object.keys(table)); // ["__proto__"]
 * ```
 */
export function setEntry(table: TomlTable, key: string, value: TomlValue): void {
  Object.defineProperty(table, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

function isArrayOfTables(value: TomlValue): value is TomlTable[] {
  return Array.isArray(value) && value.length > 0 && value.every(isTable);
}

/**
 * The document text of `table`, as the reference writes it.
 *
 * @example
 * ```ts
 * import { tomlText } from "./toml_text.ts";
 * console.log(tomlText({ model: "m", features: { a: true } }));
 * // model = "m"
 * //
 * // [features]
 * // a = true
 * ```
 */
export function tomlText(table: TomlTable): string {
  const out: string[] = [];
  writeTable(out, [], table, undefined);
  return out.join("");
}

function writeTable(
  out: string[],
  path: string[],
  table: TomlTable,
  header: "table" | "arrayElement" | undefined,
): void {
  const entries = Object.entries(table);
  const values = entries.filter(([, value]) => !isTable(value) && !isArrayOfTables(value));
  if (
    header === "arrayElement" ||
    (header === "table" && (values.length > 0 || entries.length === 0))
  ) {
    if (out.length > 0) out.push("\n");
    const name = path.map(keyText).join(".");
    out.push(header === "arrayElement" ? `[[${name}]]\n` : `[${name}]\n`);
  }
  for (const [key, value] of values) out.push(`${keyText(key)} = ${valueText(value)}\n`);
  for (const [key, value] of entries) {
    if (isTable(value)) writeTable(out, [...path, key], value, "table");
    else if (isArrayOfTables(value)) {
      for (const element of value) writeTable(out, [...path, key], element, "arrayElement");
    }
  }
}

function keyText(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : stringText(key, true);
}

function valueText(value: TomlValue): string {
  switch (typeof value) {
    case "string":
      return stringText(value, false);
    case "bigint":
      return value.toString();
    case "number":
      return floatText(value);
    case "boolean":
      return String(value);
  }
  if (value instanceof Date) return dateText(value);
  if (Array.isArray(value)) return `[${value.map(valueText).join(", ")}]`;
  const pairs = Object.entries(value).map(([key, item]) => `${keyText(key)} = ${valueText(item)}`);
  return pairs.length === 0 ? "{}" : `{ ${pairs.join(", ")} }`;
}

/** What a string holds that decides how it can be written. */
interface StringTraits {
  /** A control character other than tab and newline: only basic forms can write it. */
  controls: boolean;
  backslash: boolean;
  newline: boolean;
  /** The longest run of `'`, and of `"`. */
  singleQuotes: number;
  doubleQuotes: number;
}

function traits(text: string): StringTraits {
  const found = {
    controls: false,
    backslash: false,
    newline: false,
    singleQuotes: 0,
    doubleQuotes: 0,
  };
  let single = 0;
  let double = 0;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    single = char === "'" ? single + 1 : 0;
    double = char === '"' ? double + 1 : 0;
    found.singleQuotes = Math.max(found.singleQuotes, single);
    found.doubleQuotes = Math.max(found.doubleQuotes, double);
    if (char === "\\") found.backslash = true;
    else if (char === "\n") found.newline = true;
    else if ((code < 0x20 && char !== "\t") || code === 0x7f) found.controls = true;
  }
  return found;
}

/** Basic-string text: escapes where needed; in a multi-line string newlines stay, quotes mostly. */
function basicBody(text: string, multiLine: boolean): string {
  let body = "";
  let quotes = 0;
  for (const char of text) {
    if (multiLine && char === '"') {
      // A third quote in a row would close the string.
      quotes = quotes === 2 ? 0 : quotes + 1;
      body += quotes === 0 ? '\\"' : '"';
      continue;
    }
    quotes = 0;
    body += escapeChar(char, multiLine);
  }
  return body;
}

/**
 * A string in the first form of the reference's writer (`toml_write`) that needs no escapes:
 * basic, literal, then (not for a key) multi-line basic and multi-line literal; else basic with
 * escapes (multi-line when it holds a newline). A multi-line form starts on a new line when the
 * string holds one.
 */
function stringText(text: string, isKey: boolean): string {
  const t = traits(text);
  const lead = t.newline ? "\n" : "";
  if (!t.controls && !t.backslash && t.doubleQuotes === 0 && !t.newline) {
    return `"${basicBody(text, false)}"`;
  }
  if (!t.controls && t.singleQuotes === 0 && !t.newline) return `'${text}'`;
  if (!isKey) {
    if (!t.controls && !t.backslash && t.doubleQuotes <= 2) {
      return `"""${lead}${basicBody(text, true)}"""`;
    }
    if (!t.controls && t.singleQuotes <= 2) return `'''${lead}${text}'''`;
    if (t.newline) return `"""${lead}${basicBody(text, true)}"""`;
  }
  return `"${basicBody(text, false)}"`;
}

function escapeChar(char: string, multiLine: boolean): string {
  switch (char) {
    case "\b":
      return "\\b";
    case "\t":
      return "\\t";
    case "\n":
      return multiLine ? "\n" : "\\n";
    case "\f":
      return "\\f";
    case "\r":
      return "\\r";
    case '"':
      return '\\"';
    case "\\":
      return "\\\\";
  }
  const code = char.codePointAt(0)!;
  return code < 0x20 || code === 0x7f
    ? `\\u${code.toString(16).toUpperCase().padStart(4, "0")}`
    : char;
}

/**
 * A float as Rust writes it: its shortest digits without an exponent (`1e300` is a 1 and 300
 * zeros), `.0` on a whole number, `inf`, `nan`.
 */
function floatText(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (Object.is(value, -0)) return "-0.0";
  let text = String(value);
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (match !== null) {
    const [, sign, lead, rest = "", exponent] = match;
    const digits = lead! + rest;
    const point = 1 + Number(exponent);
    text = point <= 0
      ? `${sign}0.${"0".repeat(-point)}${digits}`
      : `${sign}${digits.padEnd(point, "0").slice(0, point)}.${digits.slice(point)}`;
    if (text.endsWith(".")) text = text.slice(0, -1);
  }
  return text.includes(".") ? text : `${text}.0`;
}

/** A date or time with the parts it has, fractions of a second without trailing zeros. */
function dateText(value: Date): string {
  const iso = value.toISOString().replace(/\.(\d+)/, (_, fraction: string) => {
    const trimmed = fraction.replace(/0+$/, "");
    return trimmed === "" ? "" : `.${trimmed}`;
  });
  return iso;
}
