/**
 * The transport interface: how messages move, nothing about what they mean.
 *
 * @module
 */

import type { RequestId } from "../protocol/envelope.ts";
import type { StreamedJson } from "../protocol/streamed_json.ts";

/** A framing failure the transport noticed (e.g. a line over the size limit). */
export interface TransportFault {
  /** Detail text, reported to the peer as a malformed message. */
  fault: string;
  /** For a message over the size limit: the limit, in bytes. */
  limit?: number;
  /**
   * For a message over the size limit: the id of the response it is, when its first bytes
   * say so ({@linkcode responseIdOf}), so that the call it answers can fail instead of waiting.
   */
  responseId?: RequestId;
}

/** Bytes of an over-limit message that a transport keeps to find its id: 1 KiB. */
export const OVERSIZED_HEAD_BYTES = 1024;

/**
 * The fault for a message over the size limit, carrying the limit and the id of the response
 * the message's first bytes show it to be, if any.
 *
 * @example
 * ```ts
 * import { oversizedFault } from "./transport.ts";
 * console.log(oversizedFault(8, '{"id":3,"result":"aaaa')); // { fault: ..., limit: 8, responseId: 3 }
 * ```
 *
 * @param limit The size limit, in bytes.
 * @param head The message's first bytes as text (up to {@linkcode OVERSIZED_HEAD_BYTES}).
 */
export function oversizedFault(limit: number, head: string): TransportFault {
  const fault: TransportFault = { fault: `message exceeds the limit of ${limit} bytes`, limit };
  const responseId = responseIdOf(head);
  if (responseId !== undefined) fault.responseId = responseId;
  return fault;
}

/** `{"id":...,"result":` or `{"id":...,"error":`, optionally after `"jsonrpc":"2.0",`. */
const RESPONSE_HEAD =
  /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*"(?:result|error)"\s*:/;

/**
 * The id of a response, read from the first bytes of its text alone: only when the id is the
 * object's first member (after `"jsonrpc"`) and a `result` or `error` member follows it, as
 * exec-server and the reference write responses; otherwise `undefined` (the message may still
 * be a response, but telling would take parsing all of it).
 *
 * @example
 * ```ts
 * import { responseIdOf } from "./transport.ts";
 * console.log(responseIdOf('{"id":7,"result":{"dataBase64":"AAAA')); // 7
 * console.log(responseIdOf('{"jsonrpc":"2.0","id":"a","error":{')); // "a"
 * console.log(responseIdOf('{"id":7,"method":"x","params":{')); // undefined (a request)
 * console.log(responseIdOf('{"result":{"id":7},"id":8}')); // undefined
 * ```
 *
 * @param head The start of the message text.
 */
export function responseIdOf(head: string): RequestId | undefined {
  const match = RESPONSE_HEAD.exec(head);
  if (match === null) return undefined;
  const id = match[1]!;
  if (id.startsWith('"')) {
    try {
      return JSON.parse(id) as string;
    } catch {
      return undefined; // A malformed escape: not a response this side sent a request for.
    }
  }
  const n = Number(id);
  return Number.isSafeInteger(n) ? n : BigInt(id);
}

/** What a transport yields: one message's text, or a framing fault. */
export type Inbound = string | TransportFault;

/**
 * An outbound message's text: whole, or in parts that are sent one after
 * the other (a large notification is cheaper to send as its pieces than as
 * one joined string).
 */
export type OutboundText = string | readonly string[];

/**
 * An outbound message: its text, whole or in parts, or a {@linkcode StreamedJson} whose
 * chunks are made while it is sent (one message all the same: a stdio line written in
 * pieces, a WebSocket message in continuation frames; nothing else is sent in between).
 */
export type Outbound = OutboundText | StreamedJson;

/**
 * The whole text of an outbound message.
 *
 * @example
 * ```ts
 * import { outboundString } from "./transport.ts";
 * console.log(outboundString(['{"a":', '"b"}'])); // {"a":"b"}
 * ```
 *
 * @param text The message, whole or in parts.
 */
export function outboundString(text: OutboundText): string {
  return typeof text === "string" ? text : text.join("");
}

/**
 * One bidirectional message channel (a stdio pipe pair or a WebSocket).
 *
 * Backpressure: {@linkcode Transport.send} resolves once the message is
 * buffered and the buffer is below the transport's high-water mark, so a
 * sender that awaits it never buffers without bound when the peer stops
 * reading.
 */
export interface Transport {
  /** Inbound messages; ends when the peer closes. */
  readonly readable: ReadableStream<Inbound>;
  /**
   * The next inbound message, `null` once the peer has closed: at once when it is already
   * read, else a promise. A transport may offer it as a cheaper way to read than `readable`
   * (no stream objects per connection and per message); a reader uses one or the other.
   */
  receive?(): Inbound | null | Promise<Inbound | null>;
  /**
   * Sends one message; resolves when the outbound buffer has room again (a streamed one:
   * once its last chunk is queued, each chunk having waited for room).
   *
   * @param text The message, whole, in parts or streamed.
   * @param alone True for the answer to the only request the connection holds (nothing else
   *   queued, running or read ahead): the transport may write it at once instead of waiting to
   *   batch it with other messages of this event-loop turn.
   */
  send(text: Outbound, alone?: boolean): Promise<void>;
  /** Closes the channel; idempotent. */
  close(): void;
  /** Prefix for malformed-message replies, e.g. `failed to parse JSON-RPC message from exec-server stdio`. */
  readonly parseErrorPrefix: string;
  /** Human readable name of the peer for logs. */
  readonly label: string;
}

/**
 * A transport's `receive` as a stream (for a reader that asks for `readable`): it pulls one
 * message at a time and ends at `null`; cancelling it calls `cancel`.
 *
 * @example
 * ```ts
 * import { receiveStream } from "./transport.ts";
 * const queued = ["a", "b"];
 * const stream = receiveStream(() => queued.shift() ?? null, () => {});
 * console.log(await Array.fromAsync(stream)); // ["a", "b"]
 * ```
 *
 * @param receive The transport's `receive`.
 * @param cancel Called when the reader cancels the stream.
 */
export function receiveStream(
  receive: () => Inbound | null | Promise<Inbound | null>,
  cancel: () => void,
): ReadableStream<Inbound> {
  return new ReadableStream<Inbound>({
    async pull(controller) {
      const message = await receive();
      if (message === null) controller.close();
      else controller.enqueue(message);
    },
    cancel,
  }, { highWaterMark: 0 });
}

/**
 * The whole text of a streamed message, for a transport that cannot send one in parts
 * (a standard `WebSocket`): as large as the message.
 *
 * @example
 * ```ts
 * import { StreamedJson, StreamedString } from "../protocol/streamed_json.ts";
 * import { joinStreamed } from "./transport.ts";
 * async function* chunks() {
 *   yield "aGk=";
 * }
 * const message = new StreamedJson('{"a":"', new StreamedString(chunks()), '"}');
 * console.log(await joinStreamed(message)); // {"a":"aGk="}
 * ```
 *
 * @param message The streamed message.
 */
export async function joinStreamed(message: StreamedJson): Promise<string> {
  const parts = [message.head];
  for await (const chunk of message.string.take()) parts.push(chunk);
  parts.push(message.tail);
  return parts.join("");
}

/** Default high-water mark of outbound buffers, in bytes. */
export const OUTBOUND_HIGH_WATER_BYTES = 8 * 1024 * 1024;

/**
 * A message at least this large (16 KiB: a chunk of bulk output, a large answer; for a
 * WebSocket, its frame) is bulk: its sender waits for room below {@linkcode BULK_QUEUED_BYTES},
 * not the high-water mark.
 */
export const BULK_MESSAGE_BYTES = 16 * 1024;

/**
 * Bulk senders wait while more than this is queued (256 KiB), so that a small message (a
 * keystroke's echo, an answer) queued behind their output waits for about this much to be
 * written, and finds room below the high-water mark without waiting. Against the 8 MiB mark for
 * everything, a keystroke's echo beside eight busy writers came back about four times sooner at
 * p99 over WebSocket, at the same output rate (docs/benchmarks.md, `load`); 64 KiB cost the
 * eight streams a quarter of their rate.
 */
export const BULK_QUEUED_BYTES = 256 * 1024;

/**
 * How much may be queued once a sender of a `size`-byte message stops waiting.
 *
 * @example
 * ```ts
 * import { roomFor } from "./transport.ts";
 * console.log(roomFor(100, 8 << 20)); // 8388608
 * console.log(roomFor(64 << 10, 8 << 20)); // 262144
 * ```
 *
 * @param size The message's size (bytes, or characters where the queue counts them).
 * @param highWater The queue's high-water mark.
 * @returns The most queued bytes the sender waits for.
 */
export function roomFor(size: number, highWater: number): number {
  return size >= BULK_MESSAGE_BYTES ? Math.min(BULK_QUEUED_BYTES, highWater) : highWater;
}

/** Default limit of one inbound message, in bytes (a stdio line or a WebSocket message). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
