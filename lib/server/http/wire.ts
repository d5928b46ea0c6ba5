/**
 * A minimal HTTP/1.1 client exchange over one `Deno.Conn`: it writes a request
 * head and body, reads the response head, and yields the de-framed response
 * body as it arrives from the network.
 *
 * Why not `fetch()` or `node:http`: `fetch()` merges repeated response headers
 * into one comma-joined value, upper-cases `get`/`post`/... method names, and
 * adds `user-agent`, `accept-language` and friends; `node:http` also
 * upper-cases the method. The protocol needs the method sent literally, the
 * exact request header set, and every response header value separately, so
 * the exchange is written here on top of `Deno.connect` / `Deno.connectTls`.
 * A connection whose response was read completely and that both sides keep
 * open ({@linkcode keepsAlive}) carries the next exchange to the same origin
 * (`pool.ts`); no `connection` request header is added.
 *
 * @module
 */

import { concatBytes } from "../../rpc/bytes.ts";

const CR = 0x0d;
const LF = 0x0a;
const READ_SIZE = 64 * 1024;

/** Largest response head accepted, in bytes: status line, headers and the empty line, each with its CR LF. */
export const MAX_RESPONSE_HEAD_BYTES = 256 * 1024;
/** Most header fields in a response head, and in a chunked body's trailer section (the reference's client's limit). */
export const MAX_RESPONSE_FIELDS = 100;
/**
 * Largest trailer section of a chunked body, in bytes: its lines with their CR LF and the empty
 * line that ends it (the reference's client refuses 16 KiB).
 */
export const MAX_TRAILER_BYTES = 16 * 1024 - 1;
/** Largest chunk-size line accepted in a chunked body, in bytes. */
const MAX_LINE_BYTES = 64 * 1024;

/** The response head as read from the wire. */
export interface ResponseHead {
  /** The status code. */
  status: number;
  /** The minor HTTP version of the status line (`HTTP/1.0` or `HTTP/1.1`). */
  minor: 0 | 1;
  /** Header fields in wire order: lowercase name, value as Latin-1 text with outer whitespace trimmed. */
  headers: [string, string][];
}

/** How the response body is delimited on the wire. */
export type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "eof" };

/** The response or its framing violates HTTP/1.1. */
export class HttpWireError extends Error {
  /**
   * Creates the error.
   *
   * @param message What was wrong.
   */
  constructor(message: string) {
    super(message);
    this.name = "HttpWireError";
  }
}

/**
 * Serializes a request: `<method> <target> HTTP/1.1`, then one `name: value`
 * line per header, then the empty line and the body, in one array (one
 * write: a body written after the head would wait for the head's ACK).
 * Header values are sent as UTF-8. With a `transfer-encoding` line the body
 * goes out as one chunk and the last chunk (`hopHeaders` makes `chunked` its last coding).
 *
 * @param method The method, sent literally.
 * @param target The request target (origin form, or authority form for `CONNECT`).
 * @param headers Header lines in the order they are sent.
 * @param body The body, or `null` for none.
 */
export function encodeRequest(
  method: string,
  target: string,
  headers: readonly (readonly [string, string])[],
  body: Uint8Array | null = null,
): Uint8Array {
  let text = `${method} ${target} HTTP/1.1\r\n`;
  let chunked = false;
  for (let i = 0; i < headers.length; i++) {
    text += `${headers[i]![0]}: ${headers[i]![1]}\r\n`;
    if (headers[i]![0] === "transfer-encoding") chunked = true;
  }
  text += "\r\n";
  if (body !== null && chunked) {
    // The reference's client writes the size in upper-case hex.
    text += `${body.length.toString(16).toUpperCase()}\r\n`;
    body = concatBytes([body, LAST_CHUNK]);
  }
  const bodyLength = body === null ? 0 : body.length;
  // A head is ASCII but for the rare non-ASCII header value, whose UTF-8 takes more room.
  const message = new Uint8Array(text.length + bodyLength);
  const head = body === null ? message : message.subarray(0, text.length);
  if (encoder.encodeInto(text, head).read < text.length) {
    return concatBytes(body === null ? [encoder.encode(text)] : [encoder.encode(text), body]);
  }
  if (body !== null) message.set(body, text.length);
  return message;
}

const encoder = new TextEncoder();
/** The end of the one chunk `encodeRequest` sends, then the last chunk and no trailers. */
const LAST_CHUNK = encoder.encode("\r\n0\r\n\r\n");
/** No bytes (shared: a zero-length array cannot be written to). */
const EMPTY = new Uint8Array(0);

const readBuffers = new WeakMap<Deno.Conn, Uint8Array>();

/**
 * One read of `conn` into its own buffer (made once per connection; the
 * connection is read by one reader at a time), returning a copy of the bytes
 * read, or `null` at end of stream. Copying the few bytes of a small
 * response costs less than a fresh zeroed 64 KiB buffer per read.
 *
 * @param conn The connection.
 */
export async function readInto(conn: Deno.Conn): Promise<Uint8Array | null> {
  let buffer = readBuffers.get(conn);
  if (buffer === undefined) {
    buffer = new Uint8Array(READ_SIZE);
    readBuffers.set(conn, buffer);
  }
  const n = await conn.read(buffer);
  return n === null ? null : buffer.slice(0, n);
}

/** Writes every byte of `data` to `conn`. */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < data.length) offset += await conn.write(data.subarray(offset));
}

/**
 * Decides the body framing of a response (RFC 9112 §6.3).
 *
 * @param method The request method.
 * @param head The response head.
 * @throws {HttpWireError} On an invalid or conflicting `content-length`.
 */
export function bodyFraming(method: string, head: ResponseHead): BodyFraming {
  const { status } = head;
  if (method === "HEAD" || status < 200 || status === 204 || status === 304) {
    return { kind: "none" };
  }
  if (method === "CONNECT" && status < 300) return { kind: "none" };
  const codings = listValues(head.headers, "transfer-encoding");
  let lastCoding = "";
  for (let i = 0; i < codings.length; i++) if (codings[i] !== "") lastCoding = codings[i]!;
  if (lastCoding !== "") {
    return lastCoding.toLowerCase() === "chunked" ? { kind: "chunked" } : { kind: "eof" };
  }
  const lengths = listValues(head.headers, "content-length");
  if (lengths.length === 0) return { kind: "eof" };
  const first = lengths[0]!;
  if (!/^\d{1,15}$/.test(first)) throw new HttpWireError("invalid content-length");
  for (let i = 1; i < lengths.length; i++) {
    if (lengths[i] !== first) throw new HttpWireError("invalid content-length");
  }
  const length = Number(first);
  return length === 0 ? { kind: "none" } : { kind: "length", length };
}

/**
 * Reads an HTTP/1.1 response from a connection.
 *
 * Reads are issued one at a time, so the chunks of a body follow network
 * reads. Closing the connection from outside makes a pending read reject,
 * which is how deadlines and cancellation stop an exchange.
 */
export class ResponseReader {
  #conn: Deno.Conn;
  #firstRead: Promise<Uint8Array | null> | null;
  #pending: Uint8Array = EMPTY;
  #received = 0;
  #complete = false;
  /** Where the search for the end of the head resumes, and the head bytes counted before it. */
  #headScan = 0;
  #headCounted = 0;

  /**
   * Wraps a connection.
   *
   * @param conn The connection the request was written to.
   * @param firstRead A read of `conn` already pending (a pooled connection's), used first.
   */
  constructor(conn: Deno.Conn, firstRead: Promise<Uint8Array | null> | null = null) {
    this.#conn = conn;
    this.#firstRead = firstRead;
  }

  /** Bytes received from the connection so far. */
  get received(): number {
    return this.#received;
  }

  /**
   * Whether the body was read to its framed end with nothing after it, so the
   * connection is positioned at the next response.
   */
  get complete(): boolean {
    return this.#complete && this.#pending.length === 0;
  }

  /** Bytes received but not consumed yet. */
  get buffered(): number {
    return this.#pending.length;
  }

  /** Reads more bytes into the pending buffer; returns `false` at end of stream. */
  async #fill(): Promise<boolean> {
    let bytes: Uint8Array | null;
    if (this.#firstRead !== null) {
      const first = this.#firstRead;
      this.#firstRead = null;
      bytes = await first;
    } else {
      bytes = await readInto(this.#conn);
    }
    if (bytes === null) return false;
    this.#received += bytes.length;
    this.#pending = this.#pending.length === 0 ? bytes : concatBytes([this.#pending, bytes]);
    return true;
  }

  #take(max: number): Uint8Array {
    const n = Math.min(max, this.#pending.length);
    const piece = this.#pending.subarray(0, n);
    this.#pending = this.#pending.subarray(n);
    return piece;
  }

  /** Takes one line already received (see {@linkcode #readLine}), or returns `null`. */
  #takeLine(from = 0): string | null {
    const at = this.#pending.indexOf(LF, from);
    if (at < 0) return null;
    const end = at > 0 && this.#pending[at - 1] === CR ? at - 1 : at;
    const line = latin1(this.#pending.subarray(0, end));
    this.#pending = this.#pending.subarray(at + 1);
    return line;
  }

  /**
   * Reads one line (without its CR LF or bare LF), as Latin-1 text. A line
   * already received is taken without awaiting: the lines of a small head
   * all arrive in one read.
   */
  #readLine(limit: number): Promise<string> | string {
    return this.#takeLine() ?? this.#receiveLine(limit);
  }

  async #receiveLine(limit: number): Promise<string> {
    while (true) {
      const searched = this.#pending.length;
      if (searched > limit) throw new HttpWireError("line too long");
      if (!(await this.#fill())) {
        throw new HttpWireError("connection closed before message completed");
      }
      const line = this.#takeLine(searched);
      if (line !== null) return line;
    }
  }

  /**
   * Reads the final response head, skipping interim `1xx` responses (except `101`).
   *
   * @throws {HttpWireError} On a malformed or oversized head, or end of stream.
   */
  async readHead(): Promise<ResponseHead> {
    while (true) {
      const head = this.#takeHead();
      if (head === null) {
        if (!(await this.#fill())) {
          throw new HttpWireError("connection closed before message completed");
        }
      } else if (head.status >= 200 || head.status === 101) {
        return head;
      }
    }
  }

  /**
   * Parses the head at the start of the pending bytes once its empty line has
   * arrived (`null` before that): the head is decoded in one piece, not line
   * by line. Every line counts with its line end (as CR LF), the empty line
   * included, against {@linkcode MAX_RESPONSE_HEAD_BYTES}; the scan resumes
   * where the previous call stopped.
   */
  #takeHead(): ResponseHead | null {
    const pending = this.#pending;
    let from = this.#headScan;
    let counted = this.#headCounted;
    while (true) {
      const at = pending.indexOf(LF, from);
      if (at < 0) {
        this.#headScan = from;
        this.#headCounted = counted;
        if (counted + pending.length - from > MAX_RESPONSE_HEAD_BYTES) {
          throw new HttpWireError(from === 0 ? "line too long" : "response head too large");
        }
        return null;
      }
      const end = at > from && pending[at - 1] === CR ? at - 1 : at;
      counted += end - from + 2;
      if (counted > MAX_RESPONSE_HEAD_BYTES) throw new HttpWireError("response head too large");
      if (end === from) {
        if (from === 0) throw new HttpWireError("invalid status line");
        this.#headScan = 0;
        this.#headCounted = 0;
        this.#pending = pending.subarray(at + 1);
        return parseHead(latin1(pending.subarray(0, from)));
      }
      from = at + 1;
    }
  }

  /**
   * The whole body when it has `content-length` framing (or none) and all of
   * it was already received with the head, else `null` (read it with
   * {@linkcode ResponseReader.body}). A small response arrives in one read,
   * so this spares it the body generator.
   *
   * @param framing How the body is delimited.
   */
  takeReceivedBody(framing: BodyFraming): Uint8Array | null {
    if (framing.kind === "none") {
      this.#complete = true;
      return EMPTY;
    }
    if (framing.kind !== "length" || this.#pending.length < framing.length) return null;
    this.#complete = true;
    return this.#take(framing.length);
  }

  /**
   * Yields the de-framed body; each chunk is at most one network read.
   *
   * @param framing How the body is delimited.
   * @throws {HttpWireError} When the stream ends early or the chunked framing is invalid.
   */
  async *body(framing: BodyFraming): AsyncGenerator<Uint8Array, void, undefined> {
    switch (framing.kind) {
      case "none":
        break;
      case "length":
        yield* this.#exactly(framing.length);
        break;
      case "eof":
        while (this.#pending.length > 0 || await this.#fill()) yield this.#take(Infinity);
        return;
      case "chunked":
        yield* this.#chunked();
    }
    this.#complete = true;
  }

  async *#exactly(length: number): AsyncGenerator<Uint8Array, void, undefined> {
    let remaining = length;
    while (remaining > 0) {
      if (this.#pending.length === 0 && !(await this.#fill())) {
        throw new HttpWireError("connection closed before message completed");
      }
      const piece = this.#take(remaining);
      remaining -= piece.length;
      yield piece;
    }
  }

  /**
   * Reads the trailer section to its empty line, within {@linkcode MAX_TRAILER_BYTES} (every
   * line counted with CR LF) and {@linkcode MAX_RESPONSE_FIELDS} fields; the fields are dropped.
   */
  async #skipTrailers(): Promise<void> {
    let bytes = 0;
    for (let fields = 0;; fields++) {
      const line = await this.#readLine(MAX_TRAILER_BYTES - bytes);
      bytes += line.length + 2;
      if (bytes > MAX_TRAILER_BYTES) throw new HttpWireError("trailer section too large");
      if (line === "") return;
      if (fields === MAX_RESPONSE_FIELDS) throw new HttpWireError("too many trailer fields");
    }
  }

  async *#chunked(): AsyncGenerator<Uint8Array, void, undefined> {
    while (true) {
      const sizeLine = await this.#readLine(MAX_LINE_BYTES);
      const size = /^([0-9A-Fa-f]{1,15})[ \t]*(?:;.*)?$/.exec(sizeLine)?.[1];
      if (size === undefined) throw new HttpWireError("invalid chunk size line");
      const length = parseInt(size, 16);
      if (length === 0) return await this.#skipTrailers();
      yield* this.#exactly(length);
      if ((await this.#readLine(MAX_LINE_BYTES)) !== "") {
        throw new HttpWireError("invalid chunk terminator");
      }
    }
  }
}

/**
 * Whether the connection stays open after this exchange (RFC 9112 §9.3): an
 * HTTP/1.1 response without `connection: close`, or an HTTP/1.0 one with
 * `connection: keep-alive`, to a request without `connection: close`; never
 * after `CONNECT`, `101` or a body delimited by the end of the stream.
 *
 * @param method The request method.
 * @param requestHeaders The request's header lines.
 * @param head The response head.
 */
export function keepsAlive(
  method: string,
  requestHeaders: readonly (readonly [string, string])[],
  head: ResponseHead,
): boolean {
  if (method === "CONNECT" || head.status === 101) return false;
  if (hasToken(requestHeaders, "connection", "close")) return false;
  if (hasToken(head.headers, "connection", "close")) return false;
  return head.minor === 1 || hasToken(head.headers, "connection", "keep-alive");
}

/**
 * The comma-separated elements of every `name` line, trimmed.
 *
 * The loops over header lines here and in the rest of the client are indexed: the server
 * runs this code in V8's baseline and mid tiers (Sparkplug, Maglev), where `for...of` with
 * a destructured `[name, value]` pair costs an iterator per line, about six times an
 * indexed loop (TurboFan, which removes the difference, takes many thousands of requests).
 */
function listValues(lines: readonly (readonly [string, string])[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]![0] !== name) continue;
    const elements = lines[i]![1].split(",");
    for (let j = 0; j < elements.length; j++) values.push(elements[j]!.trim());
  }
  return values;
}

/** Whether a `name` line lists `token` (case-insensitively). */
function hasToken(
  lines: readonly (readonly [string, string])[],
  name: string,
  token: string,
): boolean {
  const elements = listValues(lines, name);
  for (let i = 0; i < elements.length; i++) {
    if (elements[i]!.toLowerCase() === token) return true;
  }
  return false;
}

/**
 * Opens a tunnel through an HTTP proxy (`CONNECT`, the reference client's
 * request shape): after it returns, `conn` carries bytes to `authority`.
 *
 * @param conn The connection to the proxy.
 * @param authority `host:port` of the origin.
 * @param authorization The `proxy-authorization` value, or `null`.
 * @throws {HttpWireError} When the proxy refuses (a status other than 2xx) or answers malformed.
 */
export async function openTunnel(
  conn: Deno.Conn,
  authority: string,
  authorization: string | null,
): Promise<void> {
  const headers: [string, string][] = [["Host", authority]];
  if (authorization !== null) headers.push(["Proxy-Authorization", authorization]);
  await writeAll(conn, encodeRequest("CONNECT", authority, headers));
  const reader = new ResponseReader(conn);
  const head = await reader.readHead();
  if (head.status < 200 || head.status >= 300 || reader.buffered > 0) {
    throw new HttpWireError(`proxy refused the tunnel with status ${head.status}`);
  }
}

/**
 * Whether `text` is a non-empty HTTP token (RFC 9110 §5.6.2), the syntax of
 * methods and header names.
 *
 * @param text The candidate token.
 */
export function isToken(text: string): boolean {
  return /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(text);
}

/** `line` from `start` without leading and trailing spaces and tabs (HTTP's optional whitespace). */
function withoutOuterWhitespace(line: string, start: number): string {
  let from = start;
  let to = line.length;
  while (from < to && isOws(line.charCodeAt(from))) from++;
  while (to > from && isOws(line.charCodeAt(to - 1))) to--;
  return line.slice(from, to);
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/**
 * The status line and header lines of one head (its text without the empty
 * line; lines end in CR LF or a bare LF).
 */
function parseHead(text: string): ResponseHead {
  const lines = text.split("\n");
  const statusLine = withoutCr(lines[0]!);
  const match = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(statusLine);
  if (match === null) throw new HttpWireError("invalid status line");
  const minor = match[1] === "1" ? 1 : 0;
  const status = Number(match[2]);
  if (status < 100) throw new HttpWireError("invalid status code");
  const headers: [string, string][] = [];
  // The text ends with the last header line's LF, so the last element is empty.
  if (lines.length - 2 > MAX_RESPONSE_FIELDS) throw new HttpWireError("too many headers");
  for (let i = 1; i < lines.length - 1; i++) {
    const line = withoutCr(lines[i]!);
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!isToken(name)) throw new HttpWireError("invalid header line");
    const value = withoutOuterWhitespace(line, colon + 1);
    // Control characters but tab end the head, as in the reference's parser; other bytes
    // (obs-text) are kept here and dropped from the result when not ASCII.
    // deno-lint-ignore no-control-regex
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) throw new HttpWireError("invalid header value");
    headers.push([name.toLowerCase(), value]);
  }
  return { status, minor, headers };
}

function withoutCr(line: string): string {
  return line.endsWith("\r") ? line.slice(0, -1) : line;
}

/** Bytes as Latin-1 text: one character per byte. */
function latin1(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192) as unknown as number[]);
  }
  return text;
}
