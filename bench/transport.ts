/**
 * Lean message transports for the benchmark client: a WebSocket client written directly on
 * `Deno.connect` (so the harness controls `TCP_NODELAY` and batches its writes), the built-in
 * `WebSocket` for comparison, and newline-delimited JSON over a child's stdio.
 *
 * @module
 */

/** One bidirectional message channel; each message is one JSON document as text. */
export interface Transport {
  /** Queues one message; writes are batched and flushed in order. */
  send(text: string): void;
  /** Called once per received message. */
  onMessage: (text: string) => void;
  /** Resolves when the channel has ended, for whatever reason. */
  readonly closed: Promise<void>;
  /** Ends the channel; idempotent. */
  close(): void;
}

/** Options for {@linkcode connectWebSocket}. */
export interface ConnectWebSocketOptions {
  /**
   * Set `TCP_NODELAY` on the client socket. Deno's built-in `WebSocket` explicitly leaves Nagle's
   * algorithm on, which can add delayed-ACK stalls to the measurement.
   * @default {true}
   */
  noDelay?: boolean;
  /**
   * Give up when the upgrade has not completed after this many milliseconds.
   * @default {10000}
   */
  timeoutMs?: number;
}

const ENCODER = new TextEncoder();
const DECODER = new TextDecoder();
const READ_BUFFER_BYTES = 256 * 1024;
const MAX_FRAME_BYTES = 256 * 1024 * 1024;

/**
 * Opens a WebSocket connection with a minimal RFC 6455 client on a raw TCP socket.
 *
 * Client frames are masked as a real client masks them (RFC 6455 §5.3; the Codex CLI's client
 * does the same): each frame with a fresh random 4-byte key, so the server under test pays for
 * unmasking what a real client sends. Keys come from a pool of random bytes refilled when used
 * up, and the payload is XORed a 32-bit word at a time, which keeps the client's own CPU (it runs
 * on the servers' machine) near a copy.
 *
 * @param url `ws://host:port[/path]`
 * @param options see {@linkcode ConnectWebSocketOptions}
 */
export async function connectWebSocket(
  url: string,
  options: ConnectWebSocketOptions = {},
): Promise<Transport> {
  const parsed = new URL(url);
  if (parsed.protocol !== "ws:") throw new TypeError(`Cannot connect to "${url}": not a ws: URL`);
  const hostname = parsed.hostname.replace(/^\[|\]$/g, "");
  const port = Number(parsed.port || 80);
  const conn = await Deno.connect({ hostname, port });
  if (options.noDelay ?? true) conn.setNoDelay(true);
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const request = `GET ${parsed.pathname || "/"} HTTP/1.1\r\nHost: ${parsed.host}\r\n` +
    `Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\n` +
    `Sec-WebSocket-Version: 13\r\n\r\n`;
  await writeAll(conn, ENCODER.encode(request));
  const timer = setTimeout(() => conn.close(), options.timeoutMs ?? 10_000);
  let rest: Uint8Array;
  try {
    rest = await readUpgradeResponse(conn, url);
  } catch (err) {
    try {
      conn.close();
    } catch { /* already closed by the timer */ }
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return new RawWebSocket(conn, rest);
}

async function readUpgradeResponse(conn: Deno.Conn, url: string): Promise<Uint8Array> {
  let head: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  const chunk = new Uint8Array(4096);
  for (let i = 0; i < 64; i++) {
    const n = await conn.read(chunk);
    if (n === null) throw new Error(`Cannot upgrade "${url}": connection closed`);
    head = concat([head, chunk.subarray(0, n)]);
    const end = indexOfHeaderEnd(head);
    if (end < 0) continue;
    const text = DECODER.decode(head.subarray(0, end));
    const status = text.slice(0, text.indexOf("\r\n"));
    if (!/^HTTP\/1\.1 101\b/.test(status)) {
      throw new Error(`Cannot upgrade "${url}": server answered "${status}"`);
    }
    return head.slice(end + 4);
  }
  throw new Error(`Cannot upgrade "${url}": response header too long`);
}

function indexOfHeaderEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

function concat(parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

async function writeAll(w: { write(p: Uint8Array): Promise<number> }, bytes: Uint8Array) {
  let offset = 0;
  while (offset < bytes.length) offset += await w.write(bytes.subarray(offset));
}

/** Frames queued messages into one buffer per flush, so a burst of sends is one syscall. */
class WriteQueue {
  #pending: Uint8Array[] = [];
  #flushing = false;
  #write: (bytes: Uint8Array) => Promise<void>;
  #onError: (err: unknown) => void;

  constructor(write: (bytes: Uint8Array) => Promise<void>, onError: (err: unknown) => void) {
    this.#write = write;
    this.#onError = onError;
  }

  push(bytes: Uint8Array): void {
    this.#pending.push(bytes);
    if (!this.#flushing) this.#flush();
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      // Bounded: each pass drains everything queued so far; a pass ends when nothing was added.
      while (this.#pending.length > 0) {
        const batch = this.#pending.length === 1 ? this.#pending[0]! : concat(this.#pending);
        this.#pending = [];
        await this.#write(batch);
      }
    } catch (err) {
      this.#pending = [];
      this.#onError(err);
    } finally {
      this.#flushing = false;
    }
  }
}

class RawWebSocket implements Transport {
  onMessage: (text: string) => void = () => {};
  readonly closed: Promise<void>;
  #conn: Deno.Conn;
  #queue: WriteQueue;
  #done = false;
  #resolveClosed: () => void;

  constructor(conn: Deno.Conn, initial: Uint8Array) {
    this.#conn = conn;
    const { promise, resolve } = Promise.withResolvers<void>();
    this.closed = promise;
    this.#resolveClosed = resolve;
    this.#queue = new WriteQueue((b) => writeAll(conn, b), () => this.close());
    this.#readLoop(initial);
  }

  send(text: string): void {
    if (this.#done) return;
    this.#queue.push(encodeClientFrame(1, ENCODER.encode(text)));
  }

  close(): void {
    if (this.#done) return;
    this.#done = true;
    try {
      this.#conn.close();
    } catch { /* already closed */ }
    this.#resolveClosed();
  }

  async #readLoop(initial: Uint8Array): Promise<void> {
    let buf = new Uint8Array(Math.max(READ_BUFFER_BYTES, initial.length * 2));
    buf.set(initial);
    let start = 0;
    let end = initial.length;
    let fragments: Uint8Array[] = [];
    try {
      while (!this.#done) {
        // Parse every complete frame in buf[start, end).
        while (end - start >= 2) {
          const b0 = buf[start]!;
          const b1 = buf[start + 1]!;
          let len = b1 & 0x7f;
          let header = 2;
          if (len === 126) {
            if (end - start < 4) break;
            len = (buf[start + 2]! << 8) | buf[start + 3]!;
            header = 4;
          } else if (len === 127) {
            if (end - start < 10) break;
            len = 0;
            for (let i = 2; i < 10; i++) len = len * 256 + buf[start + i]!;
            header = 10;
          }
          if (b1 & 0x80) header += 4;
          if (len > MAX_FRAME_BYTES) throw new RangeError(`Frame of ${len} bytes is too large`);
          if (end - start < header + len) {
            if (header + len > buf.length) {
              const bigger = new Uint8Array(Math.max(buf.length * 2, header + len));
              bigger.set(buf.subarray(start, end));
              end -= start;
              start = 0;
              buf = bigger;
            }
            break;
          }
          let payload = buf.subarray(start + header, start + header + len);
          if (b1 & 0x80) payload = unmask(payload, buf.subarray(start + header - 4));
          start += header + len;
          const opcode = b0 & 0x0f;
          const fin = (b0 & 0x80) !== 0;
          if (opcode === 1 || opcode === 2 || opcode === 0) {
            if (fin && fragments.length === 0) {
              this.onMessage(DECODER.decode(payload));
            } else {
              fragments.push(payload.slice());
              if (fin) {
                this.onMessage(DECODER.decode(concat(fragments)));
                fragments = [];
              }
            }
          } else if (opcode === 8) {
            this.close();
            return;
          } else if (opcode === 9) {
            this.#queue.push(encodeClientFrame(10, payload.slice()));
          }
        }
        if (start === end) {
          start = 0;
          end = 0;
        } else if (buf.length - end < 16 * 1024) {
          buf.copyWithin(0, start, end);
          end -= start;
          start = 0;
        }
        const n = await this.#conn.read(buf.subarray(end));
        if (n === null) break;
        end += n;
      }
    } catch {
      // A read error ends the connection like EOF does.
    }
    this.close();
  }
}

function unmask(payload: Uint8Array, key: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(payload.length);
  for (let i = 0; i < payload.length; i++) out[i] = payload[i]! ^ key[i & 3]!;
  return out;
}

/** Random masking keys, one 32-bit word per frame, refilled from `crypto` when all are used. */
const MASK_KEYS = new Uint32Array(1024);
let maskKeysUsed = MASK_KEYS.length;

/** A fresh random masking key (one word of {@linkcode MASK_KEYS}). */
function nextMaskKey(): number {
  if (maskKeysUsed === MASK_KEYS.length) {
    crypto.getRandomValues(MASK_KEYS);
    maskKeysUsed = 0;
  }
  return MASK_KEYS[maskKeysUsed++]!;
}

/**
 * A final client frame of `opcode` carrying `payload`, masked with a fresh random key.
 *
 * The frame is laid out in a buffer of whole 32-bit words, starting 0 or 2 bytes in, so that its
 * key and payload start on word boundaries: the key is stored as one word and the payload XORed
 * with it a word at a time, the last word's bytes past the frame included (they are outside the
 * returned view). Storing and XORing the same word in memory order makes this independent of
 * the machine's byte order.
 */
function encodeClientFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const len = payload.length;
  const extra = len < 126 ? 0 : len < 65536 ? 2 : 8;
  const head = 2 + extra + 4;
  const pad = (4 - (head & 3)) & 3;
  const words = new Uint32Array((pad + head + len + 3) >>> 2);
  const frame = new Uint8Array(words.buffer, pad, head + len);
  frame[0] = 0x80 | opcode;
  if (extra === 0) {
    frame[1] = 0x80 | len;
  } else if (extra === 2) {
    frame[1] = 0x80 | 126;
    frame[2] = len >>> 8;
    frame[3] = len & 0xff;
  } else {
    frame[1] = 0x80 | 127;
    let rest = len;
    for (let i = 9; i >= 2; i--) {
      frame[i] = rest % 256;
      rest = Math.floor(rest / 256);
    }
  }
  const keyAt = (pad + head - 4) >>> 2;
  const key = nextMaskKey();
  words[keyAt] = key;
  frame.set(payload, head);
  for (let w = keyAt + 1; w < words.length; w++) words[w]! ^= key;
  return frame;
}

/**
 * Opens a connection with Deno's built-in `WebSocket` (Nagle stays on, see
 * {@linkcode ConnectWebSocketOptions.noDelay}).
 *
 * @param url `ws://host:port`
 */
export function connectBuiltinWebSocket(url: string): Promise<Transport> {
  const ws = new WebSocket(url);
  const { promise: closed, resolve: resolveClosed } = Promise.withResolvers<void>();
  const { promise: opened, resolve: resolveOpened, reject } = Promise.withResolvers<Transport>();
  const transport: Transport = {
    onMessage: () => {},
    closed,
    send: (text) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(text);
    },
    close: () => {
      ws.close();
      resolveClosed();
    },
  };
  ws.binaryType = "arraybuffer";
  ws.onopen = () => resolveOpened(transport);
  ws.onerror = () => reject(new Error(`Cannot connect to "${url}"`));
  ws.onclose = () => resolveClosed();
  ws.onmessage = (e) => {
    transport.onMessage(typeof e.data === "string" ? e.data : DECODER.decode(e.data));
  };
  return opened;
}

/**
 * Wraps a child's piped stdin/stdout as a transport of newline-delimited JSON (the stdio
 * transport of the protocol). Closing the transport closes the child's stdin.
 *
 * @param child a child started with `stdin: "piped"` and `stdout: "piped"`
 */
export function stdioTransport(child: Deno.ChildProcess): Transport {
  const writer = child.stdin.getWriter();
  const { promise: closed, resolve: resolveClosed } = Promise.withResolvers<void>();
  let done = false;
  const transport: Transport = {
    onMessage: () => {},
    closed,
    send: (text) => {
      if (!done) queue.push(ENCODER.encode(text + "\n"));
    },
    close: () => {
      if (done) return;
      done = true;
      writer.close().catch(() => {});
      resolveClosed();
    },
  };
  const queue = new WriteQueue((b) => writer.write(b), () => transport.close());
  readLines(child.stdout, (line) => transport.onMessage(line)).finally(() => {
    done = true;
    resolveClosed();
  });
  return transport;
}

async function readLines(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void) {
  const decoder = new TextDecoder();
  let pending = "";
  try {
    for await (const chunk of stream) {
      pending += decoder.decode(chunk, { stream: true });
      let nl = pending.indexOf("\n");
      let from = 0;
      while (nl >= 0) {
        const line = pending.slice(from, nl);
        if (line.trim() !== "") onLine(line);
        from = nl + 1;
        nl = pending.indexOf("\n", from);
      }
      pending = pending.slice(from);
    }
  } catch {
    // The child went away; EOF handling below.
  }
}
