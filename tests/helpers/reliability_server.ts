/**
 * Reliability test helpers around the server process: a raw WebSocket client
 * on a plain TCP socket, which can do what a `WebSocket` object cannot (stop
 * reading, send invalid UTF-8 in a text frame, or send an arbitrary upgrade
 * request), and a forced garbage collection through the V8 inspector.
 *
 * Servers and protocol clients are the shared harness's
 * (`ServerProcess`, `StdioClient`, `WsClient`).
 *
 * @module
 */

import { concat } from "./server_harness.ts";

// ---------------------------------------------------------------------------
// Raw WebSocket client

/** The HTTP answer to an upgrade request. */
export interface UpgradeAnswer {
  /** Status code (101 on success). */
  status: number;
  /** Header lines, lower-cased names. */
  headers: Map<string, string>;
  /** Body text for a refused upgrade (read up to `content-length`). */
  body: string;
}

/** Options for {@linkcode RawWebSocket.connect}. */
export interface RawConnectOptions {
  /**
   * Request target.
   *
   * @default {"/"}
   */
  path?: string;
  /** Extra request headers (e.g. `Authorization`). */
  headers?: Record<string, string>;
  /** Leave out the upgrade headers (a plain GET). */
  noUpgrade?: boolean;
  /** Bytes sent in the same write as the request head (e.g. frames sent before the answer). */
  early?: Uint8Array;
}

const encoder = new TextEncoder();

/**
 * A WebSocket client written directly on a TCP socket (RFC 6455 client side,
 * masked frames). It reads only when asked to, so a test can make it stop
 * reading and let the server's socket buffer fill.
 */
export class RawWebSocket implements AsyncDisposable {
  /** The TCP connection. */
  readonly conn: Deno.TcpConn;
  /** The upgrade answer. */
  readonly answer: UpgradeAnswer;
  #buffer: Uint8Array;
  #closed = false;

  private constructor(conn: Deno.TcpConn, answer: UpgradeAnswer, rest: Uint8Array) {
    this.conn = conn;
    this.answer = answer;
    this.#buffer = rest;
  }

  /**
   * Opens a TCP connection to `127.0.0.1:port` and sends an upgrade request.
   * Resolves even when the server refuses (check `answer.status`).
   */
  static async connect(port: number, options: RawConnectOptions = {}): Promise<RawWebSocket> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    const headers: Record<string, string> = {
      Host: `127.0.0.1:${port}`,
      ...(options.noUpgrade ? {} : {
        Upgrade: "websocket",
        Connection: "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
      }),
      ...(options.headers ?? {}),
    };
    let head = `GET ${options.path ?? "/"} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
    await writeAll(
      conn,
      concat([encoder.encode(`${head}\r\n`), options.early ?? new Uint8Array(0)]),
    );
    let buffer: Uint8Array = new Uint8Array(0);
    let end = -1;
    while ((end = indexOfCrlfCrlf(buffer)) < 0) {
      const more = await readSome(conn);
      if (more === null) break;
      buffer = concat([buffer, more]);
    }
    if (end < 0) {
      conn.close();
      throw new Error("connection closed before the upgrade answer");
    }
    const lines = new TextDecoder().decode(buffer.subarray(0, end)).split("\r\n");
    const status = Number(lines[0]!.split(" ")[1]);
    const headerMap = new Map<string, string>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon > 0) {
        headerMap.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    let rest = buffer.subarray(end + 4);
    let body = "";
    if (status !== 101) {
      const length = Number(headerMap.get("content-length") ?? "0");
      while (rest.length < length) {
        const more = await readSome(conn);
        if (more === null) break;
        rest = concat([rest, more]);
      }
      body = new TextDecoder().decode(rest.subarray(0, length));
      rest = new Uint8Array(0);
    }
    return new RawWebSocket(conn, { status, headers: headerMap, body }, rest);
  }

  /** Sends one frame (masked, as a client must). */
  async sendFrame(opcode: number, payload: Uint8Array, fin = true): Promise<void> {
    await writeAll(this.conn, encodeFrame(opcode, payload, fin));
  }

  /** Sends a text frame with these exact bytes (which may be invalid UTF-8). */
  sendTextBytes(bytes: Uint8Array): Promise<void> {
    return this.sendFrame(0x1, bytes);
  }

  /** Sends a text frame. */
  sendText(text: string): Promise<void> {
    return this.sendFrame(0x1, encoder.encode(text));
  }

  /**
   * Reads the next text or binary message (answering pings); `null` when the
   * server closed the connection.
   */
  async readMessage(): Promise<string | null> {
    let fragments: Uint8Array[] = [];
    while (true) {
      const frame = await this.#readFrame();
      if (frame === null) return null;
      if (frame.opcode === 0x8) return null;
      if (frame.opcode === 0x9) {
        await this.sendFrame(0xa, frame.payload).catch(() => {});
        continue;
      }
      if (frame.opcode === 0xa) continue;
      fragments.push(frame.payload);
      if (frame.fin) {
        const text = new TextDecoder().decode(concat(fragments));
        fragments = [];
        return text;
      }
    }
  }

  async #readFrame(): Promise<{ opcode: number; fin: boolean; payload: Uint8Array } | null> {
    const need = async (n: number) => {
      while (this.#buffer.length < n) {
        const more = await readSome(this.conn);
        if (more === null) return false;
        this.#buffer = concat([this.#buffer, more]);
      }
      return true;
    };
    if (!(await need(2))) return null;
    const b0 = this.#buffer[0]!;
    const b1 = this.#buffer[1]!;
    let length = b1 & 0x7f;
    let offset = 2;
    if (length === 126) {
      if (!(await need(4))) return null;
      length = (this.#buffer[2]! << 8) | this.#buffer[3]!;
      offset = 4;
    } else if (length === 127) {
      if (!(await need(10))) return null;
      length = Number(new DataView(this.#buffer.buffer, this.#buffer.byteOffset + 2, 8)
        .getBigUint64(0));
      offset = 10;
    }
    if (!(await need(offset + length))) return null;
    const payload = this.#buffer.slice(offset, offset + length);
    this.#buffer = this.#buffer.subarray(offset + length);
    return { opcode: b0 & 0x0f, fin: (b0 & 0x80) !== 0, payload };
  }

  /** Bytes read past the last message (for a test that goes on reading `conn` itself). */
  takeBuffered(): Uint8Array {
    const buffered = this.#buffer;
    this.#buffer = new Uint8Array(0);
    return buffered;
  }

  /** Closes the TCP connection (no close handshake). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.conn.close();
    } catch {
      // Already closed.
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    this.close();
    return Promise.resolve();
  }
}

/**
 * A masked client frame of `payload` (a random mask unless one is given).
 *
 * @param opcode The frame's opcode.
 * @param payload The unmasked payload.
 * @param fin Whether the frame ends its message.
 * @param mask The masking key.
 */
export function encodeFrame(
  opcode: number,
  payload: Uint8Array,
  fin: boolean,
  mask: Uint8Array = crypto.getRandomValues(new Uint8Array(4)),
): Uint8Array {
  const extra = payload.length < 126 ? 0 : payload.length < 65536 ? 2 : 8;
  const frame = new Uint8Array(2 + extra + 4 + payload.length);
  frame[0] = (fin ? 0x80 : 0) | opcode;
  if (extra === 0) frame[1] = 0x80 | payload.length;
  else if (extra === 2) {
    frame[1] = 0x80 | 126;
    frame[2] = payload.length >> 8;
    frame[3] = payload.length & 0xff;
  } else {
    frame[1] = 0x80 | 127;
    new DataView(frame.buffer).setBigUint64(2, BigInt(payload.length));
  }
  frame.set(mask, 2 + extra);
  const start = 2 + extra + 4;
  for (let i = 0; i < payload.length; i++) frame[start + i] = payload[i]! ^ mask[i & 3]!;
  return frame;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

async function readSome(conn: Deno.Conn): Promise<Uint8Array | null> {
  const buf = new Uint8Array(65536);
  let n: number | null;
  try {
    n = await conn.read(buf);
  } catch {
    return null;
  }
  return n === null ? null : buf.subarray(0, n);
}

function indexOfCrlfCrlf(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Memory: forcing a garbage collection in the server through the V8 inspector

/** A free TCP port on 127.0.0.1 (for `--inspect=127.0.0.1:PORT`). */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** V8 heap figures after a collection (`Runtime.getHeapUsage`). */
export interface HeapUsage {
  /** Bytes of live JavaScript objects. */
  usedSize: number;
  /** Bytes the V8 heap has reserved. */
  totalSize: number;
}

/**
 * Runs a full garbage collection in a server started with
 * `--inspect=127.0.0.1:<port>` (Chrome DevTools protocol,
 * `HeapProfiler.collectGarbage`), so resident memory can be compared with
 * an idle baseline without waiting for V8 to collect on its own. Returns the
 * JavaScript heap usage after the collection.
 */
export async function collectGarbage(inspectPort: number): Promise<HeapUsage> {
  const response = await fetch(`http://127.0.0.1:${inspectPort}/json/list`);
  const targets = await response.json() as { webSocketDebuggerUrl: string }[];
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  const closed = new Promise((resolve) => socket.addEventListener("close", resolve));
  try {
    await new Promise((resolve, reject) => {
      socket.addEventListener("open", resolve, { once: true });
      socket.addEventListener("error", () => reject(new Error("cannot reach the inspector")), {
        once: true,
      });
    });
    const usage = new Promise<HeapUsage>((resolve) => {
      socket.addEventListener("message", (event) => {
        const message = JSON.parse(event.data);
        if (message.id === 3) resolve(message.result as HeapUsage);
      });
    });
    socket.send(JSON.stringify({ id: 1, method: "HeapProfiler.enable" }));
    socket.send(JSON.stringify({ id: 2, method: "HeapProfiler.collectGarbage" }));
    socket.send(JSON.stringify({ id: 3, method: "Runtime.getHeapUsage" }));
    return await usage;
  } finally {
    socket.close();
    await closed;
  }
}
