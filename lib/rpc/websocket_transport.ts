/**
 * One JSON message per WebSocket message (docs/protocol.md §1.2), over any standard
 * `WebSocket` (a server-side socket from `Deno.upgradeWebSocket`, or a client
 * socket).
 *
 * @module
 */

import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Inbound,
  joinStreamed,
  type Outbound,
  OUTBOUND_HIGH_WATER_BYTES,
  outboundString,
  OVERSIZED_HEAD_BYTES,
  oversizedFault,
  type Transport,
} from "./transport.ts";
import { StreamedJson } from "../protocol/streamed_json.ts";

/** Options for {@linkcode websocketTransport}. */
export interface WebSocketTransportOptions {
  /** Prefix of malformed-message replies. */
  parseErrorPrefix?: string;
  /** Label for logs, e.g. `exec-server websocket 127.0.0.1:50000`. */
  label?: string;
  /**
   * Largest inbound message in bytes; a larger one yields a fault (naming the limit, and the
   * id of the response it is when its first bytes show one).
   *
   * @default {64 MiB}
   */
  maxMessageBytes?: number;
  /**
   * Inbound bytes (UTF-16 units) that may wait unprocessed before the
   * connection is closed with code 1008.
   *
   * @default {256 MiB}
   */
  maxQueuedBytes?: number;
  /**
   * Outbound high-water mark in bytes: `send` waits while the socket buffers more.
   *
   * @default {8 MiB}
   */
  highWaterBytes?: number;
}

/**
 * Wraps a WebSocket as a {@linkcode Transport}. Text and binary messages are
 * both accepted (binary payloads are read as UTF-8, as the reference does).
 * Deno's WebSocket cannot pause inbound reading, so inbound buffering is
 * bounded only by the message size limit and the connection's queue.
 *
 * @param socket An open or opening WebSocket.
 * @param options Labels and limits.
 */
export function websocketTransport(
  socket: WebSocket,
  options: WebSocketTransportOptions = {},
): Transport {
  socket.binaryType = "arraybuffer";
  const label = options.label ?? "exec-server websocket";
  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const highWater = options.highWaterBytes ?? OUTBOUND_HIGH_WATER_BYTES;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const opened = socket.readyState === WebSocket.OPEN
    ? Promise.resolve(true)
    : new Promise<boolean>((resolve) => {
      socket.addEventListener("open", () => resolve(true), { once: true });
      socket.addEventListener("close", () => resolve(false), { once: true });
    });
  let done = false;
  // Deno's WebSocket cannot pause reading, so a peer that sends faster than
  // its requests are served is cut off once this much waits unprocessed.
  const inboundLimit = options.maxQueuedBytes ?? 256 * 1024 * 1024;
  const readable = new ReadableStream<Inbound>({
    start(controller) {
      socket.addEventListener("message", (event) => {
        if (done) return;
        if (controller.desiredSize !== null && -controller.desiredSize > inboundLimit) {
          done = true;
          controller.close();
          socket.close(1008, "inbound queue limit exceeded");
          return;
        }
        const data = event.data;
        if (typeof data === "string") {
          // A UTF-16 unit is at most 3 UTF-8 bytes: count bytes only when it can matter.
          if (data.length * 3 > maxBytes && new TextEncoder().encode(data).length > maxBytes) {
            controller.enqueue(oversizedFault(maxBytes, data.slice(0, OVERSIZED_HEAD_BYTES)));
          } else controller.enqueue(data);
          return;
        }
        const bytes = new Uint8Array(data as ArrayBuffer);
        if (bytes.length > maxBytes) {
          const head = new TextDecoder().decode(bytes.subarray(0, OVERSIZED_HEAD_BYTES));
          controller.enqueue(oversizedFault(maxBytes, head));
          return;
        }
        try {
          controller.enqueue(decoder.decode(bytes));
        } catch {
          controller.enqueue({ fault: "invalid UTF-8 in binary message" });
        }
      });
      const end = () => {
        if (done) return;
        done = true;
        controller.close();
      };
      socket.addEventListener("close", end);
      socket.addEventListener("error", end);
    },
    cancel() {
      done = true;
    },
  }, { highWaterMark: 0, size: (item) => typeof item === "string" ? item.length : 1 });
  async function send(message: Outbound): Promise<void> {
    if (socket.readyState !== WebSocket.OPEN && !(await opened)) return;
    // A standard WebSocket sends whole messages only.
    const text = message instanceof StreamedJson ? await joinStreamed(message) : message;
    if (socket.readyState !== WebSocket.OPEN) return;
    socket.send(outboundString(text));
    while (socket.bufferedAmount > highWater && socket.readyState === WebSocket.OPEN) {
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
  return {
    readable,
    send,
    close() {
      if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) {
        try {
          socket.close();
        } catch {
          // Already closing.
        }
      }
    },
    parseErrorPrefix: options.parseErrorPrefix ??
      `failed to parse websocket JSON-RPC message from ${label}`,
    label,
  };
}
