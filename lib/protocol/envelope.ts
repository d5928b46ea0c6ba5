/**
 * Message envelopes: classification of inbound JSON values (docs/protocol.md section 2.2) and
 * compact encoding of outbound messages (docs/protocol.md section 2.1). The dialect is JSON-RPC
 * 2.0 without the `jsonrpc` member.
 *
 * @module
 */

import type { WireError } from "./errors.ts";
import { decodeJson, JsonDecodeError } from "./json_decode.ts";
import { describeValue } from "./schema.ts";

/** A request id: a string, or an integer in the signed 64-bit range (bigint above 2^53). */
export type RequestId = string | number | bigint;

/** An inbound or outbound request. */
export interface RequestMessage {
  /** Discriminator. */
  kind: "request";
  /** The id echoed in the response. */
  id: RequestId;
  /** Method name. */
  method: string;
  /** Raw params (undefined when absent). */
  params: unknown;
}

/** A notification: no id, no answer. */
export interface NotificationMessage {
  /** Discriminator. */
  kind: "notification";
  /** Method name. */
  method: string;
  /** Raw params (undefined when absent). */
  params: unknown;
}

/** A success response. */
export interface ResponseMessage {
  /** Discriminator. */
  kind: "response";
  /** The id of the request it answers. */
  id: RequestId;
  /** The result value. */
  result: unknown;
}

/** An error response. */
export interface ErrorMessage {
  /** Discriminator. */
  kind: "error";
  /** The id of the request it answers (`-1` for malformed input). */
  id: RequestId;
  /** The error. */
  error: WireError;
}

/** Any message of the protocol. */
export type Message = RequestMessage | NotificationMessage | ResponseMessage | ErrorMessage;

/** Thrown when a message cannot be decoded or classified; `message` is the detail text. */
export class EnvelopeError extends Error {
  /**
   * Creates an envelope error.
   *
   * @param detail serde-style detail, e.g. "missing field `error`".
   */
  constructor(detail: string) {
    super(detail);
    this.name = "EnvelopeError";
  }
}

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const BAD_ID = "data did not match any variant of untagged enum RequestId";

function parseId(value: unknown): RequestId {
  if (typeof value === "string" || typeof value === "number") return value;
  if (typeof value === "bigint" && value >= I64_MIN && value <= I64_MAX) return value;
  throw new EnvelopeError(BAD_ID);
}

function expectString(value: unknown): string {
  if (typeof value !== "string") {
    throw new EnvelopeError(`invalid type: ${describeValue(value)}, expected a string`);
  }
  return value;
}

function parseTrace(value: unknown): void {
  if (value === null || value === undefined) return;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new EnvelopeError(
      `invalid type: ${describeValue(value)}, expected struct W3cTraceContext`,
    );
  }
  const trace = value as Record<string, unknown>;
  for (const key of ["traceparent", "tracestate"]) {
    const member = trace[key];
    if (member !== undefined && member !== null) expectString(member);
  }
}

/**
 * Classifies a decoded JSON value as a message (docs/protocol.md section 2.2): `method` and `id`
 * -> request; `method` only -> notification; `result` -> response; otherwise an
 * error object.
 *
 * @param value A decoded JSON value.
 */
export function classifyMessage(value: unknown): Message {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new EnvelopeError("expected a JSON-RPC object");
  }
  const obj = value as Record<string, unknown>;
  if (Object.hasOwn(obj, "method")) {
    if (Object.hasOwn(obj, "id")) {
      const id = parseId(obj.id);
      const method = expectString(obj.method);
      parseTrace(obj.trace);
      return { kind: "request", id, method, params: obj.params };
    }
    return { kind: "notification", method: expectString(obj.method), params: obj.params };
  }
  if (Object.hasOwn(obj, "result")) {
    if (!Object.hasOwn(obj, "id")) throw new EnvelopeError("missing field `id`");
    return { kind: "response", id: parseId(obj.id), result: obj.result };
  }
  if (!Object.hasOwn(obj, "error")) throw new EnvelopeError("missing field `error`");
  const error = obj.error;
  if (typeof error !== "object" || error === null || Array.isArray(error)) {
    throw new EnvelopeError(
      `invalid type: ${describeValue(error)}, expected struct JSONRPCErrorError`,
    );
  }
  const fields = error as Record<string, unknown>;
  if (!Object.hasOwn(fields, "code")) throw new EnvelopeError("missing field `code`");
  if (typeof fields.code !== "number" && typeof fields.code !== "bigint") {
    throw new EnvelopeError(`invalid type: ${describeValue(fields.code)}, expected i64`);
  }
  if (!Object.hasOwn(fields, "message")) throw new EnvelopeError("missing field `message`");
  const message = expectString(fields.message);
  if (!Object.hasOwn(obj, "id")) throw new EnvelopeError("missing field `id`");
  const wire: WireError = { code: Number(fields.code), message };
  if (fields.data !== undefined) wire.data = fields.data;
  return { kind: "error", id: parseId(obj.id), error: wire };
}

/**
 * Decodes one message's text with the bounded decoder and classifies it.
 * Throws {@linkcode EnvelopeError} with the detail text on any failure.
 *
 * @param text The message text (one stdio line or one WebSocket message).
 */
export function decodeMessage(text: string): Message {
  let value: unknown;
  try {
    value = decodeJson(text);
  } catch (err) {
    if (err instanceof JsonDecodeError) throw new EnvelopeError(err.message);
    throw err;
  }
  return classifyMessage(value);
}

/** Encodes an id exactly, keeping every digit of 64-bit integers. */
export function encodeId(id: RequestId): string {
  return typeof id === "string" ? JSON.stringify(id) : String(id);
}

/** A key that keeps `1` and `"1"` apart, for pending-call tables. */
export function idKey(id: RequestId): string {
  return typeof id === "string" ? `s${id}` : `n${id}`;
}

/**
 * A response's text in three parts, the result's JSON whole in the middle: a transport encodes
 * each part where it goes, where the joined text of a large result would first be copied.
 *
 * @example
 * ```ts
 * import { responseParts } from "./envelope.ts";
 * console.log(responseParts(7, { ok: true }).join("")); // {"id":7,"result":{"ok":true}}
 * ```
 *
 * @param id The request's id.
 * @param result The result (`undefined` is sent as `null`).
 */
export function responseParts(id: RequestId, result: unknown): readonly string[] {
  return [`{"id":${encodeId(id)},"result":`, JSON.stringify(result ?? null), "}"];
}

/** Encodes a message compactly, in the reference's key order. */
export function encodeMessage(message: Message): string {
  switch (message.kind) {
    case "request":
      return message.params === undefined
        ? `{"id":${encodeId(message.id)},"method":${JSON.stringify(message.method)}}`
        : `{"id":${encodeId(message.id)},"method":${JSON.stringify(message.method)},"params":${
          JSON.stringify(message.params)
        }}`;
    case "notification":
      return message.params === undefined
        ? `{"method":${JSON.stringify(message.method)}}`
        : `{"method":${JSON.stringify(message.method)},"params":${JSON.stringify(message.params)}}`;
    case "response":
      return responseParts(message.id, message.result).join("");
    case "error": {
      const { code, data, message: text } = message.error;
      const error = data === undefined
        ? `{"code":${code},"message":${JSON.stringify(text)}}`
        : `{"code":${code},"data":${JSON.stringify(data)},"message":${JSON.stringify(text)}}`;
      return `{"error":${error},"id":${encodeId(message.id)}}`;
    }
  }
}
