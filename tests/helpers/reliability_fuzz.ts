/**
 * A seeded message generator for fuzzing the server's decoder and router,
 * with the outcome the spec prescribes for every generated message.
 *
 * Every case says what the server must do with it (docs/protocol.md §2, §4.5):
 *
 * - `reply`: answer with exactly this id, with a result and/or one of the
 *   allowed error codes;
 * - `malformed`: answer `-32600` with id `-1` and keep serving (§2.5);
 * - `silent`: answer nothing (a blank stdio line, a repeated `initialized`);
 * - `fatal`: close the connection without a reply (§4.5).
 *
 * The generator never needs to run what it sends: wrong-typed params fail
 * validation before any handler runs, and the typed-random requests go to a
 * server whose Deno permissions confine it to one temporary directory, no
 * programs and loopback network only.
 *
 * @module
 */

import { METHODS } from "../../lib/protocol/methods.ts";
import { DECODED_BASE64, type JsonSchema } from "../../lib/protocol/schema.ts";
import { toJson } from "./server_harness.ts";

// ---------------------------------------------------------------------------
// Seeded randomness

/** A small, fast, seeded PRNG (sfc32), so a failing run reproduces from its seed. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** Creates a generator from a 32-bit seed. */
  constructor(seed: number) {
    this.#a = 0x9e3779b9;
    this.#b = 0x243f6a88;
    this.#c = 0xb7e15162;
    this.#d = seed >>> 0;
    for (let i = 0; i < 16; i++) this.next();
  }

  /** The next unsigned 32-bit integer. */
  next(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** A random element. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.next() & 0xff;
    return out;
  }
}

// ---------------------------------------------------------------------------
// Expectations

/** Every error code the spec allows (§3). */
export const SPEC_ERROR_CODES: ReadonlySet<number> = new Set([
  -32600,
  -32601,
  -32602,
  -32603,
  -32004,
  -32010,
]);

/** What the server must do with one generated message. */
export type Expect =
  | {
    kind: "reply";
    /** Canonical key of the id ({@linkcode idKeyOf}). */
    id: string;
    /** Allowed error codes; `undefined` means any spec'd code. */
    codes?: readonly number[];
    /** Whether a success result is allowed. */
    result: boolean;
    /** For params type errors: the member path the error must name (`data.field`). */
    field?: string;
  }
  | { kind: "malformed" }
  | { kind: "silent" }
  | { kind: "fatal" };

/** One generated message. */
export interface FuzzCase {
  /** The generator that made it (for statistics and failure messages). */
  category: string;
  /** The message: text, or raw bytes (which may be invalid UTF-8). */
  payload: string | Uint8Array;
  /** The outcome on stdio. */
  stdio: Expect;
  /** The outcome on WebSocket (text frame for strings, binary frame for bytes). */
  ws: Expect;
}

/** The key under which a decoded id is compared: `s:<string>` or `n:<digits>`. */
export function idKeyOf(id: unknown): string {
  return typeof id === "string" ? `s:${id}` : `n:${String(id)}`;
}

// ---------------------------------------------------------------------------
// Wrong-typed params for every field of every method

/** A client request of the method table with its params schema. */
interface RequestMethod {
  name: string;
  schema: JsonSchema;
}

/** The client → server requests of the method table. */
export function clientRequests(): RequestMethod[] {
  const out: RequestMethod[] = [];
  for (const [name, spec] of Object.entries(METHODS)) {
    if (spec.kind !== "request" || spec.direction !== "clientToServer") continue;
    out.push({ name, schema: decodingView(spec.params.jsonSchema()) });
  }
  return out;
}

/**
 * The published JSON Schema as params decoding sees it: no params is
 * `{type: "null"}`, a UUID is `format: "uuid"`, and `sandbox` is opaque (its
 * handler validates it, with its own errors, not the params decoder).
 */
function decodingView(schema: JsonSchema): JsonSchema {
  if (schema.title === "FileSystemSandboxContext") return {};
  const anyOf = schema.anyOf as JsonSchema[] | undefined;
  if (anyOf?.[0]?.type === "null" && anyOf[1]?.maxProperties === 0) return { type: "null" };
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (Array.isArray(value)) out[key] = value.map((v) => isSchema(v) ? decodingView(v) : v);
    else if (isSchema(value)) out[key] = decodingView(value);
    else out[key] = value;
  }
  if (String(out.pattern).startsWith("^(urn:uuid:)?")) out.format = "uuid";
  // A base64 string its handler decodes (fs/writeFile's dataBase64) is a plain string here.
  if (out.contentEncoding === "base64" && !(schema as Record<symbol, unknown>)[DECODED_BASE64]) {
    delete out.contentEncoding;
  }
  return out;
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Unwraps `optional(X)` (`anyOf: [X, null]`); tells whether null is accepted. */
function unwrap(schema: JsonSchema): { inner: JsonSchema; nullable: boolean } {
  const anyOf = schema.anyOf as JsonSchema[] | undefined;
  if (anyOf && anyOf.length === 2 && (anyOf[1] as JsonSchema).type === "null") {
    return { inner: anyOf[0]!, nullable: true };
  }
  return { inner: schema, nullable: false };
}

/** A type-valid value for a schema (semantics do not matter: validation fails elsewhere). */
export function validValue(schema: JsonSchema): unknown {
  const { inner } = unwrap(schema);
  switch (inner.type) {
    case "string":
      if (inner.enum) return (inner.enum as string[])[0];
      if (inner.format === "uuid") return "6f1e0d1c-2b3a-4c5d-8e9f-a0b1c2d3e4f5";
      if (inner.contentEncoding === "base64") return "";
      return "x";
    case "boolean":
      return false;
    case "integer":
      return 0;
    case "null":
      return null;
    case "array":
      return [];
    case "object":
      if (inner.properties) return validObject(inner);
      return {};
    default:
      return null;
  }
}

function validObject(schema: JsonSchema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const properties = schema.properties as Record<string, JsonSchema>;
  for (const key of (schema.required as string[]) ?? []) out[key] = validValue(properties[key]!);
  return out;
}

/** Values of the wrong type (or out of range) for a schema, each a params error. */
function wrongValues(schema: JsonSchema): unknown[] {
  const { inner, nullable } = unwrap(schema);
  const out: unknown[] = nullable ? [] : [null];
  switch (inner.type) {
    case "string":
      out.push(7, true, [], { a: 1 });
      if (inner.enum) out.push("bogus", {});
      if (inner.format === "uuid") out.push("not-a-uuid");
      if (inner.contentEncoding === "base64") out.push("!!!!", "a", "ab=c", "YQ");
      return out;
    case "boolean":
      return [...out, 0, "true", [true], {}];
    case "integer":
      return [...out, "1", false, [1], {}, -1, 1.5, { $raw: "18446744073709551616" }];
    case "array":
      return [...out, "x", 1, false, { a: 1 }];
    case "object":
      return [...out, "x", 1, true, [1]];
    case "null":
      return [1, "x", true, [], { a: 1 }];
    default:
      return [];
  }
}

/** One wrong-typed params value: a valid base with one member replaced. */
export interface Mutation {
  method: string;
  /** Dotted member path, e.g. `options.maxDepth` or `argv.0`. */
  path: string;
  params: unknown;
}

function setPath(base: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  if (Array.isArray(base)) {
    const copy = [...base];
    copy[Number(head)] = setPath(copy[Number(head)], rest, value);
    return copy;
  }
  const obj = { ...(base as Record<string, unknown>) };
  obj[head!] = setPath(obj[head!], rest, value);
  return obj;
}

/**
 * Every wrong-typed value for every params member of every client request,
 * recursing into nested objects, array elements and map values.
 */
export function allMutations(): Mutation[] {
  const out: Mutation[] = [];
  for (const { name, schema } of clientRequests()) {
    if (schema.type === "null") {
      // Methods without params: anything but absent, null or {} is an error.
      for (const value of wrongValues(schema)) out.push({ method: name, path: "", params: value });
      continue;
    }
    const base = validValue(schema);
    const visit = (member: JsonSchema, path: string[]) => {
      for (const value of wrongValues(member)) {
        out.push({ method: name, path: path.join("."), params: setPath(base, path, value) });
      }
      const { inner } = unwrap(member);
      if (inner.type === "object" && inner.properties) {
        // Nested struct: make it present (valid) and mutate each member.
        const nestedBase = setPath(base, path, validObject(inner));
        for (const [key, child] of Object.entries(inner.properties as Record<string, JsonSchema>)) {
          for (const value of wrongValues(child)) {
            out.push({
              method: name,
              path: [...path, key].join("."),
              params: setPath(nestedBase, [...path, key], value),
            });
          }
        }
      } else if (inner.type === "array" && inner.items) {
        const items = inner.items as JsonSchema;
        for (const value of wrongValues(items)) {
          out.push({
            method: name,
            path: [...path, "0"].join("."),
            params: setPath(base, path, [value]),
          });
        }
        const itemInner = unwrap(items).inner;
        if (itemInner.type === "object" && itemInner.properties) {
          for (
            const [key, child] of Object.entries(itemInner.properties as Record<string, JsonSchema>)
          ) {
            for (const value of wrongValues(child)) {
              const element = { ...validObject(itemInner), [key]: value };
              out.push({
                method: name,
                path: [...path, "0", key].join("."),
                params: setPath(base, path, [element]),
              });
            }
          }
        } else if (itemInner.type === "array") {
          for (const value of wrongValues(itemInner.items as JsonSchema)) {
            out.push({
              method: name,
              path: [...path, "0", "0"].join("."),
              params: setPath(base, path, [[value]]),
            });
          }
        }
      } else if (inner.type === "object" && inner.additionalProperties) {
        for (const value of wrongValues(inner.additionalProperties as JsonSchema)) {
          out.push({
            method: name,
            path: [...path, "k"].join("."),
            params: setPath(base, path, { k: value }),
          });
        }
      }
    };
    for (const [key, member] of Object.entries(schema.properties as Record<string, JsonSchema>)) {
      visit(member, [key]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Serialisation (allows raw number lexemes and duplicate keys)

/** A raw JSON fragment inserted verbatim (e.g. a number beyond 2^64). */
interface Raw {
  $raw: string;
}

function isRaw(value: unknown): value is Raw {
  return typeof value === "object" && value !== null && "$raw" in value &&
    Object.keys(value).length === 1;
}

/** Compact JSON text of a value; `{$raw}` objects are inserted verbatim, bigints keep digits. */
export function serialize(value: unknown): string {
  return toJson(value, (v) => isRaw(v) ? v.$raw : undefined);
}

// ---------------------------------------------------------------------------
// The generator

/** Options for {@linkcode FuzzGenerator}. */
export interface FuzzGeneratorOptions {
  /** The seed. */
  seed: number;
  /** A directory the server may read and write (typed-random fs paths point into it). */
  dir: string;
  /** The server's `--max-message-bytes` (oversized messages are made just above it). */
  maxMessageBytes: number;
  /** A loopback port that refuses or answers HTTP (for typed-random `http/request`). */
  httpPort?: number;
}

const STRING_POOL = [
  "",
  "x",
  "é€😀",
  "\u0000",
  "a\nb",
  "\u2028",
  " ",
  "../..",
  "__proto__",
  "constructor",
  "%00",
  "\\",
  '"',
  "x".repeat(300),
];

const METHOD_NOISE = [
  "",
  "ENVIRONMENT/STATUS",
  "environment/status ",
  "process/",
  "/",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "initialized",
  "process/output",
  "fs/missingChanged",
  "$/cancelRequest",
  "rpc.discover",
  "é",
];

const BAD_IDS = [
  "null",
  "true",
  "false",
  "1.5",
  "1.0",
  "1e3",
  "1E2",
  "-1.5e-3",
  "{}",
  "[]",
  "[1]",
  '{"a":1}',
  "9223372036854775808",
  "-9223372036854775809",
  "18446744073709551616",
  "340282366920938463463374607431768211456",
];

const INVALID_UTF8: Uint8Array[] = [
  Uint8Array.of(0xc3, 0x28),
  Uint8Array.of(0xff),
  Uint8Array.of(0xfe, 0xfe),
  Uint8Array.of(0xc0, 0xaf),
  Uint8Array.of(0xe0, 0x80, 0xaf),
  Uint8Array.of(0xed, 0xa0, 0x80),
  Uint8Array.of(0xf4, 0x90, 0x80, 0x80),
  Uint8Array.of(0xf0, 0x9f, 0x98),
  Uint8Array.of(0x80),
];

const JSON_EDGE = [
  '\ufeff{"id":1,"method":"environment/status"}',
  '{"id":1,"method":"environment/status"} x',
  '{"id":1,"method":"environment/status"}{"id":2,"method":"environment/status"}',
  '{"id":1,"method":"environment/status",}',
  '{"id":1,"method":"environment/status","params":NaN}',
  '{"id":1,"method":"environment/status","params":Infinity}',
  '{"id":1,"method":"environment/status"/*c*/}',
  "{'id':1,'method':'environment/status'}",
  '{"id":1,"method":"environment\\/status","params":"\\ud800"}',
  '{"id":1,"method":"environment/status","params":"\\udc00x"}',
  '{"id":1,"method":"environment/status","params":"\\u12"}',
  '{"id":1,"method":"environment/status","params":"\\x41"}',
  '{"id":1,"method":"environment/status","params":"a\tb"}',
  '{"id":01,"method":"environment/status"}',
  '{"id":-,"method":"environment/status"}',
  '{"id":1,"method":"environment/status","params":tru}',
  '{"id" 1,"method":"environment/status"}',
  "{id:1}",
  '[{"id":1,"method":"environment/status"}]',
  '"{\\"id\\":1}"',
  "{}",
  '{"id":1}',
  '{"foo":1}',
  '{"error":1,"id":1}',
  '{"error":{"code":"x","message":"m"},"id":1}',
  '{"error":{"code":1},"id":1}',
  '{"error":{"code":1,"message":"m"}}',
  '{"result":1}',
  '{"result":1,"id":null}',
  '{"method":1}',
  '{"method":null,"id":5}',
  '{"method":"environment/status","id":5,"trace":"garbage"}',
  '{"method":"environment/status","id":5,"trace":{"traceparent":1}}',
];

/** Generates fuzz cases from a seed. */
export class FuzzGenerator {
  readonly rng: Rng;
  #dir: string;
  #maxBytes: number;
  #httpPort: number | undefined;
  #nextId = 1;
  #mutations = allMutations();
  #mutationAt = 0;
  #methods = clientRequests();
  /** How many cases of each category were generated. */
  readonly counts = new Map<string, number>();
  /** Indices of the mutations ({@linkcode allMutations}) sent at least once. */
  readonly mutationsCovered = new Set<number>();

  /** Creates a generator. */
  constructor(options: FuzzGeneratorOptions) {
    this.rng = new Rng(options.seed);
    this.#dir = options.dir;
    this.#maxBytes = options.maxMessageBytes;
    this.#httpPort = options.httpPort;
  }

  /** Number of distinct (method, member path) mutations. */
  get mutationCount(): number {
    return this.#mutations.length;
  }

  /** A fresh, unique request id as JSON text, in one of several spellings. */
  #id(): { text: string; key: string } {
    const n = this.#nextId++;
    switch (this.rng.int(6)) {
      case 0: {
        const text = String(1_000_000 + n);
        return { text, key: `n:${text}` };
      }
      case 1: {
        const value = `f${n}`;
        return { text: JSON.stringify(value), key: `s:${value}` };
      }
      case 2: {
        const big = (2n ** 63n - 1n - BigInt(n)).toString();
        return { text: big, key: `n:${big}` };
      }
      case 3: {
        const neg = (-(2n ** 63n) + BigInt(n)).toString();
        return { text: neg, key: `n:${neg}` };
      }
      case 4: {
        const text = String(-(n + 1));
        return { text, key: `n:${text}` };
      }
      default: {
        const value = `é${n}\u2028"\\`;
        return { text: JSON.stringify(value), key: `s:${value}` };
      }
    }
  }

  #count(category: string): void {
    this.counts.set(category, (this.counts.get(category) ?? 0) + 1);
  }

  /** The next case: never one that ends the connection (see {@linkcode FuzzGenerator.nextFatal}). */
  next(): FuzzCase {
    const r = this.rng.float();
    const c = r < 0.30
      ? this.#wrongType()
      : r < 0.42
      ? this.#typedRandom()
      : r < 0.47
      ? this.#unknownMethod()
      : r < 0.52
      ? this.#badId()
      : r < 0.58
      ? this.#randomJson()
      : r < 0.64
      ? this.#truncated()
      : r < 0.68
      ? this.#deepNesting()
      : r < 0.685
      ? this.#hugeArray()
      : r < 0.72
      ? this.#duplicateKeys()
      : r < 0.722
      ? this.#oversized()
      : r < 0.78
      ? this.#randomBytes()
      : r < 0.82
      ? this.#invalidUtf8()
      : r < 0.86
      ? this.#jsonEdge()
      : r < 0.88
      ? this.#blank()
      : r < 0.90
      ? this.#initialized()
      : this.#valid();
    this.#count(c.category);
    return c;
  }

  #reply(
    category: string,
    payload: string,
    id: string,
    extra: Partial<Expect & { kind: "reply" }>,
  ) {
    const expect: Expect = { kind: "reply", id, result: false, ...extra } as Expect;
    return { category, payload, stdio: expect, ws: expect };
  }

  #malformed(category: string, payload: string | Uint8Array): FuzzCase {
    return { category, payload, stdio: { kind: "malformed" }, ws: { kind: "malformed" } };
  }

  #request(method: string, params: unknown): { text: string; key: string } {
    const id = this.#id();
    const text = params === undefined
      ? `{"id":${id.text},"method":${JSON.stringify(method)}}`
      : `{"id":${id.text},"method":${JSON.stringify(method)},"params":${serialize(params)}}`;
    return { text, key: id.key };
  }

  #wrongType(): FuzzCase {
    const index = this.#mutationAt++ % this.#mutations.length;
    const mutation = this.#mutations[index]!;
    this.mutationsCovered.add(index);
    const { text, key } = this.#request(mutation.method, mutation.params);
    return this.#reply("wrong-type params", text, key, {
      codes: [-32602],
      field: mutation.path === "" ? undefined : mutation.path,
    });
  }

  #randomString(): string {
    const rng = this.rng;
    switch (rng.int(4)) {
      case 0:
        return rng.pick(STRING_POOL);
      case 1:
        return `file://${this.#dir}/${
          rng.pick(["a", "b", "c", "d/e", "..", "a/../b", "%2e%2e", "x y"])
        }`;
      case 2:
        return rng.pick([
          "file:///etc/passwd",
          "file:///",
          "file://otherhost/x",
          "file:///x?y=1",
          "file:///x#f",
          "/tmp/x",
          "not a url",
          "http://127.0.0.1:1/",
          "https://127.0.0.1:1/x",
          "ftp://127.0.0.1/x",
          "http://[::1",
          ...(this.#httpPort ? [`http://127.0.0.1:${this.#httpPort}/readyz`] : []),
        ]);
      default: {
        let s = "";
        const n = rng.int(12);
        for (let i = 0; i < n; i++) {
          s += String.fromCodePoint(rng.pick([rng.range(32, 126), rng.range(0x80, 0x2fff)]));
        }
        return s;
      }
    }
  }

  /** A value of the right JSON type with random content. */
  #typedValue(schema: JsonSchema, depth = 0): unknown {
    const rng = this.rng;
    const { inner, nullable } = unwrap(schema);
    if (nullable && rng.chance(0.3)) return rng.chance(0.5) ? null : undefined;
    switch (inner.type) {
      case "string":
        if (inner.enum) return rng.pick(inner.enum as string[]);
        if (inner.contentEncoding === "base64") return rng.bytes(rng.int(40)).toBase64();
        if (inner.format === "uuid") return crypto.randomUUID();
        return this.#randomString();
      case "boolean":
        return rng.chance(0.5);
      case "integer":
        return rng.pick([0, 1, 2, 3, 5, 64, 4096, 1048576, 1048577, 2 ** 53 - 1]);
      case "null":
        return rng.pick([null, undefined, {}]);
      case "array": {
        if (depth > 3) return [];
        const n = rng.int(4);
        return Array.from(
          { length: n },
          () => this.#typedValue(inner.items as JsonSchema, depth + 1),
        );
      }
      case "object": {
        if (inner.properties) {
          const out: Record<string, unknown> = {};
          for (
            const [key, member] of Object.entries(inner.properties as Record<string, JsonSchema>)
          ) {
            const required = ((inner.required as string[]) ?? []).includes(key);
            if (!required && rng.chance(0.5)) continue;
            out[key] = this.#typedValue(member, depth + 1);
          }
          if (rng.chance(0.1)) out[this.#randomString()] = this.#randomJson0(2);
          return out;
        }
        const out: Record<string, unknown> = {};
        for (let i = rng.int(3); i > 0; i--) {
          out[rng.pick(["PATH", "HOME", "X", "", "LD_PRELOAD", "é"])] = this.#typedValue(
            inner.additionalProperties as JsonSchema,
            depth + 1,
          );
        }
        return out;
      }
      default:
        return rng.chance(0.8) ? undefined : this.#randomJson0(2);
    }
  }

  #typedRandom(): FuzzCase {
    const method = this.rng.pick(this.#methods);
    const { text, key } = this.#request(method.name, this.#typedValue(method.schema));
    return this.#reply(`typed random params`, text, key, { result: true });
  }

  #unknownMethod(): FuzzCase {
    const method = this.rng.chance(0.5) ? this.rng.pick(METHOD_NOISE) : this.#randomString();
    if (
      Object.hasOwn(METHODS, method) && METHODS[method as keyof typeof METHODS].kind === "request"
    ) {
      return this.#valid();
    }
    const params = this.rng.chance(0.5) ? undefined : this.#randomJson0(3);
    const { text, key } = this.#request(method, params);
    return this.#reply("unknown method", text, key, { codes: [-32601] });
  }

  #badId(): FuzzCase {
    const id = this.rng.pick(BAD_IDS);
    return this.#malformed("invalid id", `{"id":${id},"method":"environment/status"}`);
  }

  /** A random JSON value (never an object with `method`, `result` or `error`). */
  #randomJson0(depth: number): unknown {
    const rng = this.rng;
    const kind = depth <= 0 ? rng.int(5) : rng.int(7);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return rng.chance(0.5);
      case 2:
        return rng.pick([0, -1, 1.5, 1e300, { $raw: "1e400" }, { $raw: "-0" }, 2 ** 53, {
          $raw: "123456789012345678901234567890",
        }]);
      case 3:
      case 4:
        return this.#randomString();
      case 5:
        return Array.from({ length: rng.int(5) }, () => this.#randomJson0(depth - 1));
      default: {
        const out: Record<string, unknown> = {};
        for (let i = rng.int(5); i > 0; i--) {
          out[rng.pick(["a", "b", "x", "data", "params", "jsonrpc", "0", "", "é", "id", "trace"])] =
            this.#randomJson0(depth - 1);
        }
        return out;
      }
    }
  }

  #randomJson(): FuzzCase {
    // Top level: anything but an object with method/result/error is malformed.
    return this.#malformed("random JSON", serialize(this.#randomJson0(4)));
  }

  #truncated(): FuzzCase {
    const base = this.rng.chance(0.5)
      ? this.#request(
        "process/start",
        this.#typedValue(decodingView(METHODS["process/start"].params.jsonSchema())),
      ).text
      : this.#request(this.rng.pick(this.#methods).name, this.#randomJson0(3)).text;
    const cut = this.rng.range(1, base.length - 1);
    return this.#malformed("truncated JSON", base.slice(0, cut));
  }

  #deepNesting(): FuzzCase {
    const rng = this.rng;
    const depth = rng.chance(0.1) ? rng.pick([1000, 10_000, 100_000]) : rng.range(120, 130);
    const object = rng.chance(0.5);
    const open = object ? '{"a":' : "[";
    const close = object ? "}" : "]";
    const inner = open.repeat(depth) + "0" + close.repeat(depth);
    if (rng.chance(0.1)) {
      // Never closed.
      return this.#malformed(
        "deep nesting",
        `{"id":1,"method":"environment/status","params":${open.repeat(depth)}`,
      );
    }
    const { text, key } = this.#request("environment/status", { $raw: inner });
    // The envelope is level 1; params adds `depth` levels.
    if (1 + depth > 127) return this.#malformed("deep nesting", text);
    return this.#reply("deep nesting", text, key, { codes: [-32602] });
  }

  #hugeArray(): FuzzCase {
    const rng = this.rng;
    const n = rng.chance(0.5) ? rng.pick([262_140, 262_141]) : rng.range(1000, 300_000);
    const element = rng.pick(["0", "null", '""', "[]"]);
    const { text, key } = this.#request("environment/status", {
      $raw: `[${Array(n).fill(element).join(",")}]`,
    });
    // Values: the envelope, id, method, the params array, and n elements (one value each).
    if (4 + n > 262_144) return this.#malformed("huge array", text);
    if (text.length > this.#maxBytes) return this.#malformed("huge array", text);
    return this.#reply("huge array", text, key, { codes: [-32602] });
  }

  #duplicateKeys(): FuzzCase {
    const rng = this.rng;
    const id = this.#id().text;
    const forms = [
      `{"id":${id},"id":${id},"method":"environment/status"}`,
      `{"id":${id},"method":"environment/status","method":"environment/status"}`,
      `{"id":${id},"method":"environment/status","params":null,"params":null}`,
      `{"id":${id},"method":"fs/readFile","params":{"path":"file:///x","path":"file:///y"}}`,
      `{"id":${id},"method":"environment/status","params":[{"a":{"b":1,"b":2}}]}`,
      `{"id":${id},"method":"process/start","params":{"env":{"A":"1","A":"2"}}}`,
      `{"id":${id},"method":"environment/status","x":1,"x":1}`,
      `{"id":${id},"method":"environment/status","__proto__":1,"__proto__":2}`,
      `{"method":"initialized","method":"initialized"}`,
      `{"result":1,"result":2,"id":1}`,
    ];
    return this.#malformed("duplicate keys", rng.pick(forms));
  }

  #oversized(): FuzzCase {
    const { text } = this.#request("fs/writeFile", {
      path: `file://${this.#dir}/big`,
      dataBase64: "A".repeat(this.#maxBytes + this.rng.int(1000)),
    });
    return this.#malformed("oversized message", text);
  }

  #randomBytes(): FuzzCase {
    const rng = this.rng;
    const bytes = rng.bytes(rng.range(1, 200));
    for (let i = 0; i < bytes.length; i++) if (bytes[i] === 10) bytes[i] = 11;
    // Neither blank nor an object: malformed on both transports whatever follows.
    if ([9, 13, 32, 123].includes(bytes[0]!)) bytes[0] = 0x23;
    return this.#malformed("random bytes", bytes);
  }

  #invalidUtf8(): FuzzCase {
    const { text } = this.#request("environment/status", { a: "before--after" });
    const bytes = new TextEncoder().encode(text);
    const at = new TextEncoder().encode(text.slice(0, text.indexOf("--") + 1)).length;
    const bad = this.rng.pick(INVALID_UTF8);
    const out = new Uint8Array(bytes.length + bad.length);
    out.set(bytes.subarray(0, at));
    out.set(bad, at);
    out.set(bytes.subarray(at), at + bad.length);
    return this.#malformed("invalid UTF-8", out);
  }

  #jsonEdge(): FuzzCase {
    return this.#malformed("JSON edge cases", this.rng.pick(JSON_EDGE));
  }

  #blank(): FuzzCase {
    // stdio ignores blank lines; a blank WebSocket message is malformed (§1.2).
    return {
      category: "blank message",
      payload: this.rng.pick(["", " ", "\t", "\r", "  \t \r"]),
      stdio: { kind: "silent" },
      ws: { kind: "malformed" },
    };
  }

  #initialized(): FuzzCase {
    const params = this.rng.pick([undefined, null, {}, [1], "x"]);
    const payload = params === undefined
      ? `{"method":"initialized"}`
      : `{"method":"initialized","params":${serialize(params)}}`;
    return {
      category: "repeated initialized",
      payload,
      stdio: { kind: "silent" },
      ws: { kind: "silent" },
    };
  }

  #valid(): FuzzCase {
    const method = this.rng.pick(["environment/status", "environment/info"]);
    const { text, key } = this.#request(method, this.rng.pick([undefined, null, {}]));
    return this.#reply("valid request", text, key, { result: true, codes: [] });
  }

  /** A message that must end the connection without a reply (docs/protocol.md §4.5). */
  nextFatal(): FuzzCase {
    const c = this.#fatal();
    this.#count(c.category);
    return c;
  }

  #fatal(): FuzzCase {
    const rng = this.rng;
    const forms = [
      `{"method":"foo/bar"}`,
      `{"method":"$/cancelRequest","params":{"id":1}}`,
      `{"method":"initialize","params":{"clientName":"x"}}`,
      `{"method":"process/start"}`,
      `{"method":""}`,
      `{"id":1,"result":{}}`,
      `{"id":"x","result":null}`,
      `{"id":1,"error":{"code":1,"message":"m"}}`,
      `{"id":2,"error":{"code":-32600,"message":"m","data":[1]}}`,
    ];
    const payload = rng.pick(forms);
    return { category: "fatal message", payload, stdio: { kind: "fatal" }, ws: { kind: "fatal" } };
  }
}
