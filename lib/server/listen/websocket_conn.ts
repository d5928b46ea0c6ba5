/**
 * The server side of RFC 6455 on a raw connection: the `101` handshake and a
 * {@linkcode Transport} that reads from the socket only when the connection
 * asks for the next message (decoding together the frames already in its
 * read buffer of at most 64 KiB), so a peer that sends faster than it is
 * served is held back by TCP instead of by the server's memory.
 *
 * Text and binary messages are both accepted (binary payloads are read as
 * UTF-8, as the reference does); fragments are reassembled; pings are
 * answered; no extension is negotiated. A message over the size limit is
 * skipped without being held and yields a fault; a protocol violation or
 * invalid UTF-8 in a text message closes the connection (1002/1007).
 *
 * @module
 */

import {
  type Inbound,
  type Outbound,
  OUTBOUND_HIGH_WATER_BYTES,
  receiveStream,
  type Transport,
} from "../../rpc/transport.ts";
import { concatBytes } from "../../rpc/bytes.ts";
import { StreamedJson } from "../../protocol/streamed_json.ts";
import { FrameWriter } from "./frame_writer.ts";
import { type HeaderFields, writeAll } from "./http_head.ts";
import { unmask, wordsOf } from "./unmask.ts";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * The `Sec-WebSocket-Accept` value for a client's key.
 *
 * @example
 * ```ts
 * import { acceptKey } from "./websocket_conn.ts";
 * console.log(await acceptKey("dGhlIHNhbXBsZSBub25jZQ==")); // s3pPLMBiTxaQ9kYGzzhZRbK+xOo=
 * ```
 *
 * @param key The request's `Sec-WebSocket-Key`.
 */
export async function acceptKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", ENCODER.encode(key + GUID));
  return new Uint8Array(digest).toBase64();
}

const ENCODER = new TextEncoder();

/**
 * The refusal of a request that cannot be upgraded, or `undefined` when it can: 400 with the
 * reason, or, for a `Sec-WebSocket-Version` other than 13 (or none), 426 naming the version this
 * server speaks (RFC 6455 section 4.2.2).
 *
 * @example
 * ```ts
 * import { upgradeRefusal } from "./websocket_conn.ts";
 * const refusal = upgradeRefusal(new Headers({
 *   upgrade: "websocket",
 *   connection: "Upgrade",
 *   "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
 *   "sec-websocket-version": "8",
 * }));
 * console.log(refusal?.status, refusal?.headers.get("sec-websocket-version")); // 426 "13"
 * ```
 *
 * @param headers The request headers.
 */
export function upgradeRefusal(headers: HeaderFields): Response | undefined {
  const tokens = (name: string) =>
    (headers.get(name) ?? "").toLowerCase().split(",").map((t) => t.trim());
  const refuse = (status: number, text: string, fields: Record<string, string> = {}) =>
    new Response(text, {
      status,
      headers: { "content-type": "text/plain; charset=utf-8", ...fields },
    });
  if (!tokens("upgrade").includes("websocket")) {
    return refuse(400, "Connection header did not include 'upgrade'");
  }
  if (!tokens("connection").includes("upgrade")) {
    return refuse(400, "Connection header did not include 'upgrade'");
  }
  if (headers.get("sec-websocket-version") !== "13") {
    return refuse(426, "unsupported websocket version: this server speaks version 13", {
      "sec-websocket-version": "13",
    });
  }
  const key = headers.get("sec-websocket-key") ?? "";
  if (!/^[A-Za-z0-9+/]{22}==$/.test(key)) return refuse(400, "invalid Sec-WebSocket-Key");
  return undefined;
}

/**
 * Writes the `101 Switching Protocols` answer: its fields named in lower
 * case and in the order of a `Headers` object's iteration, as
 * `responseHead` writes them, but without building one (that cost a
 * connection far more than the rest of its answer).
 *
 * @param conn The connection.
 * @param headers The request headers (checked with {@linkcode upgradeRefusal}).
 * @param protocol The selected subprotocol, if any.
 * @throws {TypeError} For a subprotocol that cannot be a header value.
 */
export async function writeUpgrade(
  conn: Deno.Conn,
  headers: HeaderFields,
  protocol?: string,
): Promise<void> {
  if (protocol !== undefined && /[\0\r\n]/.test(protocol)) {
    throw new TypeError("invalid subprotocol");
  }
  const accept = await acceptKey(headers.get("sec-websocket-key")!);
  const selected = protocol === undefined
    ? ""
    : `sec-websocket-protocol: ${protocol.replace(/^[\t ]+|[\t ]+$/g, "")}\r\n`;
  await writeAll(
    conn,
    ENCODER.encode(
      "HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\n" +
        `sec-websocket-accept: ${accept}\r\n${selected}upgrade: websocket\r\n\r\n`,
    ),
  );
}

/** Options for {@linkcode websocketConnTransport}. */
export interface WebSocketConnOptions {
  /** Label for logs, e.g. `exec-server websocket 127.0.0.1:50000`. */
  label: string;
  /** Largest inbound message in bytes; a larger one is skipped and yields a fault. */
  maxMessageBytes: number;
  /**
   * Bytes received after the handshake's head; the transport reads on into the rest of their
   * buffer (a request head's `rest`), which the caller must not use any more.
   */
  initial?: Uint8Array;
  /**
   * Outbound high-water mark: `send` waits while more is queued.
   *
   * @default {8 MiB}
   */
  highWaterBytes?: number;
}

/** A frame's fixed part. */
interface FrameHead {
  fin: boolean;
  opcode: number;
  length: number;
  mask: Uint8Array;
}

class ProtocolViolation extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/** The read buffer a connection starts with; most messages are far smaller. */
const INITIAL_READ_BYTES = 4096;

/** The read buffer grows (while reads fill it) up to this size. */
const READ_BYTES = 64 * 1024;

/**
 * Reads bytes from a connection on demand, keeping what was read ahead. The
 * buffer starts small (an idle connection holds 4 KiB, not 64) and doubles
 * while reads fill it, up to {@linkcode READ_BYTES}, or to the size of a
 * frame that must be whole.
 */
class ByteReader {
  #conn: Deno.Conn;
  #buffer: Uint8Array;
  #words: Uint32Array | undefined;
  #start = 0;
  #end: number;

  /**
   * @param conn The connection.
   * @param initial Bytes already read. The reader takes over the buffer they view (the request
   *   head's: no second buffer per connection) when it holds at least
   *   {@linkcode INITIAL_READ_BYTES}; else they are copied into a new one.
   */
  constructor(conn: Deno.Conn, initial: Uint8Array) {
    this.#conn = conn;
    if (initial.buffer.byteLength >= INITIAL_READ_BYTES) {
      this.#buffer = new Uint8Array(initial.buffer as ArrayBuffer);
      this.#start = initial.byteOffset;
      this.#end = initial.byteOffset + initial.length;
    } else {
      this.#buffer = new Uint8Array(Math.max(INITIAL_READ_BYTES, initial.length));
      this.#buffer.set(initial);
      this.#end = initial.length;
    }
  }

  get buffered(): number {
    return this.#end - this.#start;
  }

  /** Moves the buffered bytes to the front of a buffer of at least `capacity` bytes. */
  #compact(capacity: number): void {
    if (capacity > this.#buffer.length) {
      const grown = new Uint8Array(capacity);
      grown.set(this.#buffer.subarray(this.#start, this.#end));
      this.#buffer = grown;
      this.#words = undefined;
    } else this.#buffer.copyWithin(0, this.#start, this.#end);
    this.#end -= this.#start;
    this.#start = 0;
  }

  /** Makes at least one byte available; false at end of stream. */
  async fill(): Promise<boolean> {
    if (this.#start === this.#end) this.#start = this.#end = 0;
    else if (this.#end === this.#buffer.length) this.#compact(this.#buffer.length);
    let n: number | null;
    try {
      n = await this.#conn.read(this.#buffer.subarray(this.#end));
    } catch {
      return false;
    }
    if (n === null) return false;
    this.#end += n;
    if (this.#end === this.#buffer.length && this.#buffer.length < READ_BYTES) {
      this.#compact(Math.min(READ_BYTES, this.#buffer.length * 2));
    }
    return true;
  }

  /** True when `n` bytes are buffered. */
  has(n: number): boolean {
    return this.#end - this.#start >= n;
  }

  /** Reads until `n` bytes are buffered (growing the buffer to hold them); false at end of stream. */
  async ensure(n: number): Promise<boolean> {
    while (this.buffered < n) {
      if (this.#buffer.length - this.#start < n) {
        this.#compact(Math.max(n, this.#buffer.length));
      }
      if (!(await this.fill())) return false;
    }
    return true;
  }

  /** The buffer; the buffered bytes are `bytes[start, end)` (valid until the next read). */
  get bytes(): Uint8Array {
    return this.#buffer;
  }

  /** {@linkcode ByteReader.bytes} as 32-bit words (made once per buffer), to unmask in place. */
  get words(): Uint32Array {
    return this.#words ??= wordsOf(this.#buffer);
  }

  /** Where the buffered bytes start in {@linkcode ByteReader.bytes}. */
  get start(): number {
    return this.#start;
  }

  /** Where the buffered bytes end in {@linkcode ByteReader.bytes}. */
  get end(): number {
    return this.#end;
  }

  /** The buffered bytes, without copying (valid until the next read). */
  peek(): Uint8Array {
    return this.#buffer.subarray(this.#start, this.#end);
  }

  /** Drops `n` buffered bytes. */
  skip(n: number): void {
    this.#start += n;
  }

  /** Takes exactly `n` bytes (a copy), or `null` at end of stream. */
  async take(n: number): Promise<Uint8Array | null> {
    if (!(await this.ensure(n))) return null;
    const out = this.#buffer.slice(this.#start, this.#start + n);
    this.#start += n;
    return out;
  }

  /** Takes up to `n` bytes without copying them out (valid until the next call). */
  async chunk(n: number): Promise<Uint8Array | null> {
    if (this.buffered === 0 && !(await this.fill())) return null;
    const size = Math.min(n, this.buffered);
    const out = this.#buffer.subarray(this.#start, this.#start + size);
    this.#start += size;
    return out;
  }
}

/**
 * Whether the reader's buffered bytes begin with a whole frame of at most 64 KiB (decoding it
 * needs no read). It reads the buffer in place: a view of it per call cost each message several.
 */
function frameBuffered(reader: ByteReader): boolean {
  const bytes = reader.bytes;
  const at = reader.start;
  const buffered = reader.end - at;
  if (buffered < 2) return false;
  const short = bytes[at + 1]! & 0x7f;
  if (short === 127) return false;
  const headSize = short === 126 ? 8 : 6;
  if (buffered < headSize) return false;
  const length = short === 126 ? (bytes[at + 2]! << 8) | bytes[at + 3]! : short;
  return buffered >= headSize + length;
}

async function readFrameHead(reader: ByteReader): Promise<FrameHead | null> {
  if (!reader.has(2) && !(await reader.ensure(2))) return null;
  const [b0, b1] = reader.peek();
  if ((b0! & 0x70) !== 0) throw new ProtocolViolation(1002, "reserved bits set");
  if ((b1! & 0x80) === 0) throw new ProtocolViolation(1002, "client frames must be masked");
  const short = b1! & 0x7f;
  const size = 2 + (short === 126 ? 2 : short === 127 ? 8 : 0) + 4;
  if (!reader.has(size) && !(await reader.ensure(size))) return null;
  const head = reader.peek();
  let length = short;
  if (short === 126) length = (head[2]! << 8) | head[3]!;
  else if (short === 127) {
    const big = new DataView(head.buffer, head.byteOffset + 2, 8).getBigUint64(0);
    if (big > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtocolViolation(1009, "frame too long");
    length = Number(big);
  }
  const mask = head.slice(size - 4, size);
  reader.skip(size);
  return { fin: (b0! & 0x80) !== 0, opcode: b0! & 0x0f, length, mask };
}

function closePayload(code: number, reason = ""): Uint8Array {
  const text = new TextEncoder().encode(reason);
  const payload = new Uint8Array(2 + text.length);
  payload[0] = code >> 8;
  payload[1] = code & 0xff;
  payload.set(text, 2);
  return payload;
}

/**
 * Whether a close frame may carry `code` (RFC 6455 section 7.4 and the IANA registry): 1000-1003,
 * 1007-1014 and the applications' 3000-4999. 1004 is reserved, 1005, 1006 and 1015 name local
 * conditions that are never sent, and the rest are unassigned.
 *
 * @example
 * ```ts
 * import { validCloseCode } from "./websocket_conn.ts";
 * console.log([1000, 1005, 1012, 2999, 4999].map(validCloseCode)); // [true, false, true, false, true]
 * ```
 *
 * @param code The status code.
 */
export function validCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
}

/**
 * The status of the close frame that answers a peer's close `payload`: its own code echoed, 1000
 * for a close without one, 1002 for a one-byte payload or an invalid code, 1007 for a reason
 * that is not UTF-8.
 */
function closeAnswer(payload: Uint8Array): number {
  if (payload.length === 0) return 1000;
  if (payload.length === 1) return 1002;
  const code = (payload[0]! << 8) | payload[1]!;
  if (!validCloseCode(code)) return 1002;
  try {
    STRICT_UTF8.decode(payload.subarray(2));
  } catch {
    return 1007;
  }
  return code;
}

// A byte order mark stays in the text (and makes the message malformed, as the reference has it).
const REPLACING_UTF8 = new TextDecoder("utf-8", { ignoreBOM: true });
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The UTF-8 text of `bytes`, `undefined` when they are not valid UTF-8.
 * Deno's replacing decoder is several times faster than its fatal one on
 * long messages (a 5.5 KB `process/write`: about 4 against 25 us here), so
 * the fatal one runs only on a text that came out holding U+FFFD, to tell a
 * replaced sequence from a U+FFFD that was sent.
 */
function utf8(bytes: Uint8Array): string | undefined {
  const text = REPLACING_UTF8.decode(bytes);
  if (!text.includes("\uFFFD")) return text;
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Frames up to this size are unmasked and decoded in the read buffer, without a copy. */
const INLINE_FRAME_BYTES = 60 * 1024;

/** How long a closing connection may take to flush what was queued before it. */
const CLOSE_LINGER_MS = 2000;

/**
 * Wraps an upgraded connection as a {@linkcode Transport}.
 *
 * @param conn The connection, after {@linkcode writeUpgrade}.
 * @param options Label and limits.
 */
export function websocketConnTransport(
  conn: Deno.Conn,
  options: WebSocketConnOptions,
): Transport {
  const reader = new ByteReader(conn, options.initial ?? new Uint8Array(0));
  const highWater = options.highWaterBytes ?? OUTBOUND_HIGH_WATER_BYTES;
  const maxBytes = options.maxMessageBytes;
  let closing = false;
  let connClosed = false;
  let lingerTimer: ReturnType<typeof setTimeout> | undefined;

  // Outbound: frames are encoded into write batches that one writer drains.
  const writer = new FrameWriter(conn, highWater, closeConn);

  function closeConn(): void {
    if (connClosed) return;
    connClosed = true;
    clearTimeout(lingerTimer);
    try {
      conn.close();
    } catch {
      // Already closed.
    }
    writer.close();
  }

  /**
   * Sends a close frame, lets queued frames go first (for at most
   * {@linkcode CLOSE_LINGER_MS}: a peer that does not read cannot hold the
   * socket open), then closes the socket.
   */
  function closeWith(code: number, reason = ""): void {
    if (closing) return;
    closing = true;
    lingerTimer = setTimeout(closeConn, CLOSE_LINGER_MS);
    void writer.frame(0x8, closePayload(code, reason));
    writer.idle().then(closeConn);
  }

  /** Decodes a whole message's payload (invalid UTF-8: close for text, a fault for binary). */
  function decodeMessage(bytes: Uint8Array, opcode: number): Inbound {
    const text = utf8(bytes);
    if (text !== undefined) return text;
    if (opcode === 0x1) throw new ProtocolViolation(1007, "invalid UTF-8 in text message");
    return { fault: "invalid UTF-8 in binary message" };
  }

  /**
   * The message of a whole, final, masked text or binary frame of at most
   * {@linkcode INLINE_FRAME_BYTES} at the front of the buffer, decoded in place
   * without a read or an await (most requests); `undefined` for anything else,
   * which {@linkcode nextMessage} reads and checks.
   */
  function bufferedMessage(): Inbound | undefined {
    if (!frameBuffered(reader)) return undefined;
    const bytes = reader.bytes;
    const at = reader.start;
    const opcode = bytes[at]! ^ 0x80;
    if ((opcode !== 0x1 && opcode !== 0x2) || (bytes[at + 1]! & 0x80) === 0) return undefined;
    const short = bytes[at + 1]! & 0x7f;
    const length = short === 126 ? (bytes[at + 2]! << 8) | bytes[at + 3]! : short;
    if (length > INLINE_FRAME_BYTES || length > maxBytes) return undefined;
    const start = at + (short === 126 ? 8 : 6);
    unmask(bytes, reader.words, start, start + length, bytes, start - 4);
    reader.skip(start + length - at);
    return decodeMessage(bytes.subarray(start, start + length), opcode);
  }

  /**
   * The next message when none is buffered whole, after reading; at the end (or a protocol
   * violation) `null`, once {@linkcode end} has run.
   */
  async function next(): Promise<Inbound | null> {
    try {
      if (reader.buffered === 0) {
        if (!(await reader.fill())) return end();
        const read = bufferedMessage();
        if (read !== undefined) return read;
      }
      return (await nextMessage()) ?? end();
    } catch (err) {
      return violated(err);
    }
  }

  /** Reads the next message, any frames; `null` when the stream ends. */
  async function nextMessage(): Promise<Inbound | null> {
    const parts: Uint8Array[] = [];
    let total = 0;
    let opcode = -1;
    let oversized = false;
    while (true) {
      const head = await readFrameHead(reader);
      if (head === null) return null;
      if (head.opcode >= 0x8) {
        if (!head.fin || head.length > 125) {
          throw new ProtocolViolation(1002, "invalid control frame");
        }
        const payload = await reader.take(head.length);
        if (payload === null) return null;
        unmask(payload, wordsOf(payload), 0, payload.length, head.mask, 0);
        if (head.opcode === 0x8) {
          closeWith(closeAnswer(payload));
          return null;
        }
        if (head.opcode === 0x9) void writer.frame(0xa, payload);
        else if (head.opcode !== 0xa) throw new ProtocolViolation(1002, "unknown opcode");
        continue;
      }
      if (head.opcode === 0x0 ? opcode < 0 : opcode >= 0) {
        throw new ProtocolViolation(1002, "unexpected continuation state");
      }
      if (head.opcode !== 0x0) {
        if (head.opcode !== 0x1 && head.opcode !== 0x2) {
          throw new ProtocolViolation(1002, "unknown opcode");
        }
        opcode = head.opcode;
      }
      if (!oversized && head.length <= INLINE_FRAME_BYTES && total + head.length <= maxBytes) {
        // The common case: the whole frame fits in the read buffer; unmask it there.
        if (!reader.has(head.length) && !(await reader.ensure(head.length))) return null;
        const from = reader.start;
        unmask(reader.bytes, reader.words, from, from + head.length, head.mask, 0);
        const payload = reader.bytes.subarray(from, from + head.length);
        if (head.fin && parts.length === 0) {
          // Skipping only moves the read offset: the payload's bytes stay where they are.
          reader.skip(head.length);
          return decodeMessage(payload, opcode);
        }
        parts.push(payload.slice());
        reader.skip(head.length);
        total += head.length;
        if (!head.fin) continue;
        return decodeMessage(concatBytes(parts, total), opcode);
      }
      let offset = 0;
      while (offset < head.length) {
        const chunk = await reader.chunk(head.length - offset);
        if (chunk === null) return null;
        if (total + chunk.length > maxBytes) oversized = true;
        if (!oversized) {
          const copy = chunk.slice();
          unmask(copy, wordsOf(copy), 0, copy.length, head.mask, 0, offset);
          parts.push(copy);
        }
        total += chunk.length;
        offset += chunk.length;
      }
      if (!head.fin) continue;
      if (oversized) return { fault: `message exceeds the limit of ${maxBytes} bytes` };
      return decodeMessage(concatBytes(parts, total), opcode);
    }
  }

  let ended = false;

  /** The message that ends reading: `null`, after closing the socket unless a close is under way. */
  function end(): null {
    if (!ended) {
      ended = true;
      if (!closing) closeConn();
    }
    return null;
  }

  /**
   * The next message: at once when its frame is buffered (the further requests of one TCP
   * read), else once read; `null` at the end. A protocol violation closes with its code.
   */
  function receive(): Inbound | null | Promise<Inbound | null> {
    if (ended || closing) return end();
    try {
      const buffered = bufferedMessage();
      if (buffered !== undefined) return buffered;
    } catch (err) {
      return violated(err);
    }
    return next();
  }

  function violated(err: unknown): null {
    if (err instanceof ProtocolViolation) closeWith(err.code, err.message);
    return end();
  }

  let stream: ReadableStream<Inbound> | undefined;
  /** `receive` as a stream, made for a reader that asks for one. */
  function readable(): ReadableStream<Inbound> {
    return stream ??= receiveStream(receive, () => closeWith(1000));
  }

  return {
    get readable() {
      return readable();
    },
    receive,
    send(text: Outbound, alone = false): Promise<void> {
      if (closing) return Promise.resolve();
      if (text instanceof StreamedJson) return writer.stream(text);
      // A lone answer goes at once when no further request is read ahead either (a whole frame
      // buffered): nothing can join it.
      return writer.text(text, alone && !frameBuffered(reader));
    },
    close() {
      closeWith(1000);
    },
    parseErrorPrefix: `failed to parse websocket JSON-RPC message from ${options.label}`,
    label: options.label,
  };
}
