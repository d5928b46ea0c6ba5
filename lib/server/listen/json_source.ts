/**
 * What `JSON.parse` does not keep of a JSON text, read from the text itself:
 * an object's members in order with duplicates (and each value's source
 * text), how deep it nests, and whether every string in it is well-formed
 * UTF-16 (`JSON.parse` accepts a lone surrogate escape such as `"\ud800"`).
 * The signed bearer token's checks need them to answer as the reference's
 * `serde_json` does, which refuses duplicate fields, strings it cannot hold
 * and nesting past its recursion limit where it decodes a value.
 *
 * Every function takes a text that `JSON.parse` has accepted.
 *
 * @module
 */

/** One member of an object text: its name (unescaped) and its value's source text. */
export interface MemberSource {
  /** The member's name, unescaped. */
  name: string;
  /** The source text of its value, without surrounding whitespace. */
  value: string;
}

/** The index of the quote that ends the string starting at `start`. */
function stringEnd(json: string, start: number): number {
  let end = start + 1;
  while (json[end] !== '"') end += json[end] === "\\" ? 2 : 1;
  return end;
}

/**
 * The members of an object text, in order, duplicates included (empty for any
 * other value).
 *
 * @example
 * ```ts
 * import { objectMembers } from "./json_source.ts";
 * console.log(objectMembers(`{"a": 1.0, "b": [2], "\\u0061": "x"}`));
 * // [ { name: "a", value: "1.0" }, { name: "b", value: "[2]" }, { name: "a", value: '"x"' } ]
 * ```
 *
 * @param json An object's text.
 */
export function objectMembers(json: string): MemberSource[] {
  const members: MemberSource[] = [];
  let depth = 0;
  let expectingName = false;
  let name: string | undefined;
  let valueStart = -1;
  const close = (at: number) => {
    if (name !== undefined && valueStart >= 0) {
      members.push({ name, value: json.slice(valueStart, at).trim() });
    }
    name = undefined;
    valueStart = -1;
  };
  for (let i = 0; i < json.length; i++) {
    const c = json[i]!;
    // The first character of a top-level member's value.
    const valueBegins = depth === 1 && name !== undefined && valueStart < 0;
    if (c === '"') {
      const end = stringEnd(json, i);
      if (depth === 1 && expectingName) name = JSON.parse(json.slice(i, end + 1));
      else if (valueBegins) valueStart = i;
      expectingName = false;
      i = end;
    } else if (c === "{" || c === "[") {
      if (valueBegins) valueStart = i;
      depth++;
      if (depth === 1) expectingName = c === "{";
    } else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) close(i);
    } else if (c === "," && depth === 1) {
      close(i);
      expectingName = true;
    } else if (valueBegins && c !== ":" && c.trim() !== "") {
      valueStart = i;
    }
  }
  return members;
}

/**
 * How deep a text nests arrays and objects (0 for a string, number or literal).
 *
 * @example
 * ```ts
 * import { nestingDepth } from "./json_source.ts";
 * console.log(nestingDepth(`{"a": [[1], "]]]"]}`)); // 3
 * ```
 *
 * @param json A JSON text.
 */
export function nestingDepth(json: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') i = stringEnd(json, i);
    else if (c === "{" || c === "[") deepest = Math.max(deepest, ++depth);
    else if (c === "}" || c === "]") depth--;
  }
  return deepest;
}

/**
 * Whether every string of a text, member names included, is well-formed UTF-16 (no lone
 * surrogate).
 *
 * @example
 * ```ts
 * import { stringsWellFormed } from "./json_source.ts";
 * console.log(stringsWellFormed(`{"a": ["\\ud83d\\ude00"]}`)); // true
 * console.log(stringsWellFormed(`{"\\ud800": 1}`)); // false
 * ```
 *
 * @param json A JSON text.
 */
export function stringsWellFormed(json: string): boolean {
  for (let i = 0; i < json.length; i++) {
    if (json[i] !== '"') continue;
    const end = stringEnd(json, i);
    if (!(JSON.parse(json.slice(i, end + 1)) as string).isWellFormed()) return false;
    i = end;
  }
  return true;
}
