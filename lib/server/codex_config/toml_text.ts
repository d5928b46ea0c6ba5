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

/** Whether a character needs an escape (the literal forms allow none). */
function isControl(char: string, multiLine: boolean): boolean {
  const code = char.codePointAt(0)!;
  if (char === "\t" || (multiLine && char === "\n")) return false;
  return code < 0x20 || code === 0x7f;
}

/**
 * A string as the reference picks its form: literal (`'…'`, `'''…'''`) when it holds a
 * backslash and can be written without escapes, else basic; multi-line when it holds a newline
 * (a key is always on one line).
 */
function stringText(text: string, oneLine: boolean): string {
  const multiLine = !oneLine && text.includes("\n");
  const chars = [...text];
  const literal = text.includes("\\") && !text.includes("'''") && !text.endsWith("'") &&
    !chars.some((char) => isControl(char, multiLine));
  if (literal) {
    if (multiLine) return `'''\n${text}'''`;
    return text.includes("'") ? `'''${text}'''` : `'${text}'`;
  }
  if (!multiLine) return `"${chars.map((char) => escapeChar(char, false)).join("")}"`;
  // In a multi-line string a quote needs escaping only as the third in a row or the last one.
  let body = "";
  let quotes = 0;
  chars.forEach((char, index) => {
    if (char !== '"') {
      quotes = 0;
      body += escapeChar(char, true);
      return;
    }
    quotes++;
    const escape = quotes === 3 || index === chars.length - 1;
    if (escape) quotes = 0;
    body += escape ? '\\"' : '"';
  });
  return `"""\n${body}"""`;
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

/** A float as Rust writes it: no exponent, `.0` on a whole number, `inf`, `nan`. */
function floatText(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (Object.is(value, -0)) return "-0.0";
  if (Number.isInteger(value)) return `${BigInt(value)}.0`;
  const text = String(value);
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (match === null) return text;
  const [, sign, lead, rest = "", exponent] = match;
  const digits = lead! + rest;
  const point = 1 + Number(exponent);
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** A date or time with the parts it has, fractions of a second without trailing zeros. */
function dateText(value: Date): string {
  const iso = value.toISOString().replace(/\.(\d+)/, (_, fraction: string) => {
    const trimmed = fraction.replace(/0+$/, "");
    return trimmed === "" ? "" : `.${trimmed}`;
  });
  return iso;
}
