/**
 * The transport interface: how messages move, nothing about what they mean.
 *
 * @module
 */

import type { StreamedJson } from "../protocol/streamed_json.ts";

/** A framing failure the transport noticed (e.g. a line over the size limit). */
export interface TransportFault {
  /** Detail text, reported to the peer as a malformed message. */
  fault: string;
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

/** Default limit of one inbound message, in bytes (a stdio line or a WebSocket message). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
