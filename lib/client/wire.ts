/**
 * The client's two conversions at the wire: params out (bytes as base64)
 * and results in (validated against the method table).
 *
 * @module
 */

import {
  type ClientRequestName,
  METHODS,
  type MethodSpec,
  type ResultOf,
} from "../protocol/methods.ts";

/**
 * Validates a result against the method table and returns it typed.
 *
 * @example
 * ```ts
 * import { parseResult } from "./wire.ts";
 * console.log(parseResult("process/terminate", { running: false })); // { running: false }
 * ```
 *
 * @param method The request's wire name.
 * @param raw The `result` member as received.
 * @throws {SchemaError} When the result does not match.
 */
export function parseResult<M extends ClientRequestName>(method: M, raw: unknown): ResultOf<M> {
  return (METHODS[method] as unknown as MethodSpec & { result: { parse(v: unknown): unknown } })
    .result.parse(raw) as ResultOf<M>;
}

/**
 * Converts params to their wire form: `Uint8Array` members become base64 strings.
 *
 * @example
 * ```ts
 * import { toWire } from "./wire.ts";
 * console.log(toWire({ chunk: new Uint8Array([104, 105]) })); // { chunk: "aGk=" }
 * ```
 *
 * @param value The params.
 */
export function toWire(value: unknown): unknown {
  if (value instanceof Uint8Array) return value.toBase64();
  if (Array.isArray(value)) return value.map(toWire);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) out[key] = toWire(member);
    return out;
  }
  return value;
}
