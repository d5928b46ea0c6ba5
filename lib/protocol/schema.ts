/**
 * A small schema language for the protocol's params and results.
 *
 * One schema value gives three things: the TypeScript type (`Infer<S>`),
 * runtime validation with the reference server's (serde) error wording, and
 * a JSON Schema fragment. It is hand-written rather than taken from npm
 * because the wire contract fixes the error texts (`missing field `x``,
 * `invalid type: null, expected a string`, `invalid number` for negative
 * unsigned integers), the check order (present members in input order, then
 * missing members in declaration order) and the decoding of base64 byte
 * chunks, and because `mod.ts` must stay free of dependencies.
 *
 * @module
 */

import { decodeBase64 } from "./base64.ts";
import { JsonFloat } from "./json_decode.ts";

/** A JSON Schema fragment. */
export type JsonSchema = { [key: string]: unknown };

/** Thrown by {@linkcode Schema.parse}; `message` is the wire text, `path` the offending member. */
export class SchemaError extends Error {
  /** Dotted path of the member that failed, e.g. `options.maxDepth` (empty for the root). */
  path: string;

  /**
   * Creates a validation error.
   *
   * @param message The serde-style message.
   * @param path The member path.
   */
  constructor(message: string, path = "") {
    super(message);
    this.name = "SchemaError";
    this.path = path;
  }
}

/** A runtime type: validates wire values and describes itself as JSON Schema. */
export interface Schema<T> {
  /** Validates `value` and returns the typed value, or throws {@linkcode SchemaError}. */
  parse(value: unknown): T;
  /** The JSON Schema of the wire form. */
  jsonSchema(): JsonSchema;
  /** True when the member may be absent or `null`. */
  readonly optional: boolean;
  /** serde's "expected ..." phrase used in type errors. */
  readonly expecting: string;
}

/** The TypeScript type a schema validates to. */
export type Infer<S> = S extends Schema<infer T> ? T : never;

/** Describes a JSON value the way serde does in `invalid type: <this>, expected ...`. */
export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "boolean":
      return `boolean \`${value}\``;
    case "number":
    case "bigint":
      return "number";
    case "string":
      return `string ${JSON.stringify(value)}`;
  }
  if (value instanceof JsonFloat) return "number";
  if (Array.isArray(value)) return "sequence";
  return "map";
}

function typeError(value: unknown, expecting: string): SchemaError {
  return new SchemaError(`invalid type: ${describeValue(value)}, expected ${expecting}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof JsonFloat) && !(value instanceof Uint8Array);
}

function leaf<T>(
  expecting: string,
  jsonSchema: JsonSchema,
  parse: (value: unknown) => T,
): Schema<T> {
  return { parse, jsonSchema: () => jsonSchema, optional: false, expecting };
}

/**
 * A schema made of others: its JSON Schema is built by `makeJson` on first
 * use and then kept, so the method table's evaluation at start-up builds
 * validators only (the JSON Schema is asked for by `protocol/describe`).
 */
function composite<T>(
  expecting: string,
  makeJson: () => JsonSchema,
  parse: (value: unknown) => T,
): Schema<T> {
  let made: JsonSchema | undefined;
  return { parse, jsonSchema: () => (made ??= makeJson()), optional: false, expecting };
}

/** A JSON string. */
export function string(): Schema<string> {
  return leaf("a string", { type: "string" }, (value) => {
    if (typeof value !== "string") throw typeError(value, "a string");
    return value;
  });
}

/** A JSON boolean. */
export function boolean(): Schema<boolean> {
  return leaf("a boolean", { type: "boolean" }, (value) => {
    if (typeof value !== "boolean") throw typeError(value, "a boolean");
    return value;
  });
}

/** Options for {@linkcode unsigned}. */
export interface UnsignedOptions {
  /**
   * The largest accepted value.
   *
   * @default {2^64 - 1}
   */
  max?: bigint;
  /**
   * Refuse values above `Number.MAX_SAFE_INTEGER` instead of rounding them
   * (for ids that are echoed back and must stay exact).
   *
   * @default {false}
   */
  exact?: boolean;
}

const U64_MAX = 2n ** 64n - 1n;

/**
 * An unsigned integer (`u64`, `usize`, `u16`). Negative or fractional numbers
 * give `invalid number`, as the reference reports them. Values above 2^53 are
 * accepted and rounded to the nearest JavaScript number (offsets and seqs
 * that large cannot name real data), unless `exact` is set.
 *
 * @param name The Rust type name used in messages.
 * @param options Range and exactness.
 */
export function unsigned(name = "u64", options: UnsignedOptions = {}): Schema<number> {
  const max = options.max ?? U64_MAX;
  const outOfRange = (value: unknown) =>
    new SchemaError(`invalid value: integer \`${value}\`, expected ${name}`);
  const safe = BigInt(Number.MAX_SAFE_INTEGER);
  // The JSON Schema states the exact bound: 2^64 - 1 has more digits than a double holds.
  const maximum = options.exact && max > safe ? Number.MAX_SAFE_INTEGER : exactInteger(max);
  return leaf(name, { type: "integer", minimum: 0, maximum }, (value) => {
    if (typeof value === "number") {
      if (value < 0) throw new SchemaError("invalid number");
      if (BigInt(value) > max) throw outOfRange(value);
      return value;
    }
    if (typeof value === "bigint") {
      if (value < 0n) throw new SchemaError("invalid number");
      if (value > max) throw outOfRange(value);
      if (options.exact) {
        throw new SchemaError(
          `invalid value: integer \`${value}\`, expected ${name} up to ${Number.MAX_SAFE_INTEGER}`,
        );
      }
      return Number(value);
    }
    if (value instanceof JsonFloat) throw new SchemaError("invalid number");
    throw typeError(value, name);
  });
}

/**
 * A signed integer within the safe range of JavaScript numbers.
 *
 * @param name The Rust type name used in messages.
 */
export function signed(name = "i64"): Schema<number> {
  const bound = name === "i32" ? 2 ** 31 : Number.MAX_SAFE_INTEGER;
  const json = { type: "integer", minimum: -bound, maximum: name === "i32" ? bound - 1 : bound };
  return leaf(name, json, (value) => {
    if (typeof value === "number") return value;
    if (typeof value === "bigint") {
      throw new SchemaError(`invalid value: integer \`${value}\`, expected ${name}`);
    }
    if (value instanceof JsonFloat) throw new SchemaError("invalid number");
    throw typeError(value, name);
  });
}

/** Any JSON value, unchecked (Codex-specific members we accept but do not interpret). */
export function any(): Schema<unknown> {
  return leaf("any value", {}, (value) => value);
}

/** Methods without parameters: `params` must be absent or `null` (serde's unit). */
export function unit(): Schema<null> {
  // An empty object is accepted too (see parseParams), as the reference does.
  const json = { anyOf: [{ type: "null" }, { type: "object", maxProperties: 0 }] };
  return leaf("unit", json, (value) => {
    if (value !== null && value !== undefined) throw typeError(value, "unit");
    return null;
  });
}

/**
 * A string enum. Unknown strings give serde's `unknown variant` message. The
 * reference also accepts the map form `{"read": null}`; so does this.
 *
 * @param variants The accepted strings, in declaration order.
 */
export function literal<const V extends string>(...variants: V[]): Schema<V> {
  const expected = variants.length === 1
    ? `\`${variants[0]}\``
    : variants.length === 2
    ? `\`${variants[0]}\` or \`${variants[1]}\``
    : `one of ${variants.map((v) => `\`${v}\``).join(", ")}`;
  return leaf("string or map", { type: "string", enum: variants }, (value) => {
    let name = value;
    if (isPlainObject(value)) {
      const keys = Object.keys(value);
      if (keys.length === 1 && value[keys[0]!] === null) name = keys[0];
    }
    if (typeof name !== "string") throw typeError(value, "string or map");
    if (!(variants as string[]).includes(name)) {
      throw new SchemaError(`unknown variant \`${name}\`, expected ${expected}`);
    }
    return name as V;
  });
}

/**
 * Marks (in a JSON Schema fragment, never serialized) a base64 member that
 * params decoding itself decodes, so its decoding errors are params errors;
 * {@linkcode base64} members stay strings for their handler.
 */
export const DECODED_BASE64: unique symbol = Symbol("decoded base64");

/** A base64 string on the wire, decoded to bytes on parse (the reference's `ByteChunk`). */
export function bytes(): Schema<Uint8Array> {
  return leaf("a string", { ...BASE64_JSON, [DECODED_BASE64]: true }, (value) => {
    if (typeof value !== "string") throw typeError(value, "a string");
    try {
      return decodeBase64(value);
    } catch (err) {
      throw new SchemaError((err as Error).message);
    }
  });
}

/**
 * A base64 string that stays a string on parse (results, and params whose
 * decoding errors the handler reports itself); its JSON Schema marks it as
 * base64 like {@linkcode bytes}.
 */
export function base64(): Schema<string> {
  return leaf("a string", BASE64_JSON, (value) => {
    if (typeof value !== "string") throw typeError(value, "a string");
    return value;
  });
}

const BASE64_JSON: JsonSchema = {
  type: "string",
  contentEncoding: "base64",
  title: "Base64",
  description: "Bytes, base64-encoded (RFC 4648, with padding).",
};

/**
 * The same schema with another JSON Schema (the parse is unchanged): for
 * members whose validation lives elsewhere but whose shape a client author
 * should see.
 *
 * @param inner The schema that parses.
 * @param json The JSON Schema to publish instead.
 */
export function withJsonSchema<T>(inner: Schema<T>, json: JsonSchema): Schema<T> {
  return { ...inner, jsonSchema: () => json };
}

/** Key under which {@linkcode described} keeps a member's description (never serialized). */
export const MEMBER_DESCRIPTION: unique symbol = Symbol("member description");

/**
 * The same schema with a description of the member it is used for; the
 * JSON Schema shows it next to the member (also when the type itself is a
 * shared definition).
 *
 * @param inner The member's schema.
 * @param description What the member means.
 */
export function described<T>(inner: Schema<T>, description: string): Schema<T> {
  return {
    ...inner,
    jsonSchema: () => ({ ...inner.jsonSchema(), [MEMBER_DESCRIPTION]: description }),
  };
}

/**
 * An integer for a JSON Schema document, written exactly by `JSON.stringify`
 * also beyond 2^53 (as a raw JSON number; read back it is the nearest double).
 *
 * @example
 * ```ts
 * import { exactInteger } from "./schema.ts";
 * console.log(JSON.stringify({ maximum: exactInteger(2n ** 64n - 1n) })); // {"maximum":18446744073709551615}
 * ```
 *
 * @param value The integer.
 */
export function exactInteger(value: bigint): number {
  const safe = BigInt(Number.MAX_SAFE_INTEGER);
  if (value <= safe && value >= -safe) return Number(value);
  // `JSON.stringify` writes the digits as given.
  return (JSON as unknown as { rawJSON(text: string): number }).rawJSON(value.toString());
}

/**
 * A JSON array.
 *
 * @param item The element schema.
 */
export function array<T>(item: Schema<T>): Schema<T[]> {
  return composite("a sequence", () => ({ type: "array", items: item.jsonSchema() }), (value) => {
    if (!Array.isArray(value)) throw typeError(value, "a sequence");
    return value.map((element, index) => withPath(item, element, String(index)));
  });
}

/**
 * A JSON object used as a map from string keys to values.
 *
 * @param valueSchema The schema of every value.
 */
export function record<T>(valueSchema: Schema<T>): Schema<Record<string, T>> {
  return composite(
    "a map",
    () => ({ type: "object", additionalProperties: valueSchema.jsonSchema() }),
    (value) => {
      if (!isPlainObject(value)) throw typeError(value, "a map");
      const out: Record<string, T> = {};
      for (const key of Object.keys(value)) {
        Object.defineProperty(out, key, {
          value: withPath(valueSchema, value[key], key),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    },
  );
}

/**
 * A member with a default (serde's `#[serde(default)]` on a non-`Option`
 * field): absent parses to `undefined`, but an explicit `null` is a type
 * error, as the reference reports it.
 *
 * @param inner The member's schema.
 */
export function defaulted<T>(inner: Schema<T>): Schema<T | undefined> {
  return {
    parse: (value) => (value === undefined ? undefined : inner.parse(value)),
    jsonSchema: () => inner.jsonSchema(),
    optional: true,
    expecting: inner.expecting,
  };
}

/** Marks a member as optional: absent and `null` both parse to `undefined`. */
export function optional<T>(inner: Schema<T>): Schema<T | undefined> {
  return {
    parse: (value) => (value === null || value === undefined ? undefined : inner.parse(value)),
    jsonSchema: () => ({ anyOf: [inner.jsonSchema(), { type: "null" }] }),
    optional: true,
    expecting: inner.expecting,
  };
}

/** A value that may be `null` on the wire (results only; params use {@linkcode optional}). */
export function nullable<T>(inner: Schema<T>): Schema<T | null> {
  return {
    parse: (value) => (value === null || value === undefined ? null : inner.parse(value)),
    jsonSchema: () => ({ anyOf: [inner.jsonSchema(), { type: "null" }] }),
    optional: false,
    expecting: inner.expecting,
  };
}

/** Member schemas of an {@linkcode object}. */
export type Shape = { [key: string]: Schema<unknown> };

type OptionalKeys<S extends Shape> = {
  [K in keyof S]: undefined extends Infer<S[K]> ? K : never;
}[keyof S];

/** The TypeScript object type of a {@linkcode Shape}: optional members become `?:`. */
export type InferShape<S extends Shape> =
  & { [K in Exclude<keyof S, OptionalKeys<S>>]: Infer<S[K]> }
  & { [K in OptionalKeys<S>]?: Infer<S[K]> };

function withPath<T>(schema: Schema<T>, value: unknown, key: string): T {
  try {
    return schema.parse(value);
  } catch (err) {
    if (err instanceof SchemaError) err.path = err.path ? `${key}.${err.path}` : key;
    throw err;
  }
}

/** Options for {@linkcode object}. */
export interface ObjectOptions {
  /** The struct name used in `expected struct <name>` messages. */
  name?: string;
  /** A description for the JSON Schema. */
  description?: string;
}

/**
 * A struct: members are checked in input order, then the first missing
 * required member (in declaration order) is reported; unknown members are
 * ignored.
 *
 * @param shape The members in declaration order.
 * @param options The struct name for messages.
 */
export function object<S extends Shape>(
  shape: S,
  options: ObjectOptions = {},
): Schema<{ [K in keyof InferShape<S>]: InferShape<S>[K] }> {
  const expecting = options.name ? `struct ${options.name}` : "a map";
  const keys = Object.keys(shape);
  const required = keys.filter((key) => !shape[key]!.optional);
  const json = (): JsonSchema => {
    const properties: Record<string, JsonSchema> = {};
    for (const key of keys) properties[key] = shape[key]!.jsonSchema();
    return {
      type: "object",
      properties,
      required,
      ...(options.name ? { title: options.name } : {}),
      ...(options.description ? { description: options.description } : {}),
    };
  };
  return composite(expecting, json, (value) => {
    if (!isPlainObject(value)) throw typeError(value, expecting);
    const out: Record<string, unknown> = {};
    // Indexed loops: every request's params pass here, mostly in V8's interpreter, where a
    // `for...of` makes an iterator and a result object per step.
    const present = Object.keys(value);
    for (let i = 0; i < present.length; i++) {
      const key = present[i]!;
      const member = Object.hasOwn(shape, key) ? shape[key] : undefined;
      if (member) out[key] = withPath(member, value[key], key);
    }
    for (let i = 0; i < required.length; i++) {
      const key = required[i]!;
      if (!(key in out)) throw new SchemaError(`missing field \`${key}\``, key);
    }
    // deno-lint-ignore no-explicit-any
    return out as any;
  });
}

/**
 * Decodes a request's `params` the way the reference does: absent means
 * `null`; an empty object that fails is retried as `null`; the first error
 * wins.
 *
 * @param schema The params schema.
 * @param params The raw `params` member.
 */
export function parseParams<T>(schema: Schema<T>, params: unknown): T {
  const value = params === undefined ? null : params;
  try {
    return schema.parse(value);
  } catch (err) {
    if (isPlainObject(value) && Object.keys(value).length === 0) {
      try {
        return schema.parse(null);
      } catch {
        // Report the first error.
      }
    }
    throw err;
  }
}
