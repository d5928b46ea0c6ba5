/**
 * Reading one HTTP/1.1 request head from a raw connection, bounded in size
 * and time, and writing a small complete response. The WebSocket listener
 * owns its connections from `accept` on (rather than `Deno.serve`, which
 * gives no head timeout, no count of unfinished heads and stops listening on
 * the first failed `accept`), so these are the only HTTP it speaks.
 *
 * @module
 */

/** Largest request head accepted, in bytes (request line and headers). */
export const MAX_HEAD_BYTES = 64 * 1024;

/**
 * What the listener reads of a request's header fields: a head's
 * {@linkcode RequestHead.headers} or a `Headers`.
 */
export interface HeaderFields {
  /** The field's value (repeated fields joined by `, `); `null` or `undefined` when absent. */
  get(name: string): string | null | undefined;
  /** Whether the field is present. */
  has(name: string): boolean;
}

/** A parsed request head. */
export interface RequestHead {
  /** The method, e.g. `GET`. */
  method: string;
  /** The request target as sent, e.g. `/readyz`. */
  target: string;
  /**
   * The header fields by lower-case name, repeated fields joined by `, ` (what a `Headers`
   * would hold, without loading Deno's fetch headers for every connection's head).
   */
  headers: ReadonlyMap<string, string>;
  /**
   * Bytes the client sent after the head (e.g. early WebSocket frames): a view into the buffer
   * the head was read into, which nothing else holds (a connection's reader can take it over).
   */
  rest: Uint8Array;
}

/** Why no head could be read. */
export type HeadFailure = "closed" | "too-large" | "malformed";

/**
 * Where the head ends, searching from `from - 2`: the head's text is `bytes[0, end)` (its last
 * line without its line end) and the body starts at `rest`; `undefined` if no blank line is in
 * yet. Lines may end in CRLF or, as
 * RFC 9112 §2.2 allows a recipient to accept, a bare LF: the blank line is `\n\n` or `\n\r\n`.
 */
function headEnd(bytes: Uint8Array, from: number): { end: number; rest: number } | undefined {
  // The native `indexOf` finds each LF: a byte loop runs once per connection, too rarely to
  // leave V8's interpreter.
  for (let i = bytes.indexOf(10, Math.max(0, from - 2)); i >= 0; i = bytes.indexOf(10, i + 1)) {
    if (i + 1 >= bytes.length) return undefined;
    const end = i > 0 && bytes[i - 1] === 13 ? i - 1 : i;
    if (bytes[i + 1] === 10) return { end, rest: i + 2 };
    if (bytes[i + 1] === 13) {
      if (i + 2 >= bytes.length) return undefined;
      if (bytes[i + 2] === 10) return { end, rest: i + 3 };
    }
  }
  return undefined;
}

/** Shared by every connection (building a `TextDecoder` costs more than a head's decoding). */
const HEAD_DECODER = new TextDecoder("utf-8", { fatal: true });

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A character `Headers` refuses in a value: NUL, CR, LF, or beyond a byte (U+0100 and above). */
const INVALID_VALUE = /[\0\r\n\u0100-\uffff]/;

/**
 * Parses the text of a head (without the line end before the blank line), followed by the bytes
 * `rest`.
 * A line ends at an LF, a CR before it dropped; any other CR leaves the head malformed.
 */
function parseHead(text: string, rest: Uint8Array): RequestHead | undefined {
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.endsWith("\r")) lines[i] = lines[i]!.slice(0, -1);
  }
  const match = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0]!);
  if (!match) return undefined;
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return undefined;
    const value = line.slice(colon + 1).trim();
    if (INVALID_VALUE.test(value)) return undefined;
    const key = name.toLowerCase();
    const before = headers.get(key);
    headers.set(key, before === undefined ? value : `${before}, ${value}`);
  }
  return { method: match[1]!, target: match[2]!, headers, rest };
}

/**
 * Reads a request head. The caller bounds the time (closing the connection
 * ends the read with `"closed"`).
 *
 * @param conn The connection.
 * @returns The head, or why there is none.
 */
export async function readRequestHead(conn: Deno.Conn): Promise<RequestHead | HeadFailure> {
  // Grows up to the limit: most heads are a few hundred bytes. An upgraded connection's reader
  // takes this buffer over (its 4 KiB start).
  let buffer = new Uint8Array(4096);
  let length = 0;
  while (true) {
    if (length === buffer.length) {
      const grown = new Uint8Array(Math.min(buffer.length * 2, MAX_HEAD_BYTES + 4));
      grown.set(buffer);
      buffer = grown;
    }
    let n: number | null;
    try {
      n = await conn.read(buffer.subarray(length));
    } catch {
      return "closed";
    }
    if (n === null) return "closed";
    const before = length;
    length += n;
    const found = headEnd(buffer.subarray(0, length), before);
    if (found !== undefined) {
      if (found.end > MAX_HEAD_BYTES) return "too-large";
      let text: string;
      try {
        text = HEAD_DECODER.decode(buffer.subarray(0, found.end));
      } catch {
        return "malformed";
      }
      return parseHead(text, buffer.subarray(found.rest, length)) ?? "malformed";
    }
    if (length >= MAX_HEAD_BYTES + 4) return "too-large";
  }
}

/** Largest request body read, in bytes: the web console's login form is the only one served. */
export const MAX_BODY_BYTES = 64 * 1024;

/** Why a request's body could not be read. */
export type BodyFailure = "closed" | "too-large" | "length-required" | "malformed";

/**
 * Reads the body a head announces with `Content-Length`, at most {@linkcode MAX_BODY_BYTES}:
 * the bytes read with the head first, then the connection. A `Transfer-Encoding` is refused
 * (`length-required`: browsers send a length for a form). The caller bounds the time.
 *
 * @param conn The connection.
 * @param head Its request head.
 * @returns The body (`undefined` when the head announces none), or why it cannot be read.
 */
export async function readRequestBody(
  conn: Deno.Conn,
  head: RequestHead,
): Promise<Uint8Array | undefined | BodyFailure> {
  if (head.headers.has("transfer-encoding")) return "length-required";
  const declared = head.headers.get("content-length");
  if (declared === undefined) return undefined;
  if (!/^\d{1,16}$/.test(declared)) return "malformed";
  const length = Number(declared);
  if (length > MAX_BODY_BYTES) return "too-large";
  if (length === 0) return undefined;
  const body = new Uint8Array(length);
  let filled = Math.min(length, head.rest.length);
  body.set(head.rest.subarray(0, filled));
  while (filled < length) {
    let n: number | null;
    try {
      n = await conn.read(body.subarray(filled));
    } catch {
      return "closed";
    }
    if (n === null) return "closed";
    filled += n;
  }
  return body;
}

const REASONS: Record<number, string> = {
  101: "Switching Protocols",
  200: "OK",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  408: "Request Timeout",
  411: "Length Required",
  413: "Content Too Large",
  426: "Upgrade Required",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/**
 * Encodes a response head (status line, the given headers, blank line).
 *
 * @param status The status code.
 * @param headers The header fields.
 */
export function responseHead(status: number, headers: Headers): Uint8Array {
  let text = `HTTP/1.1 ${status} ${REASONS[status] ?? "Unknown"}\r\n`;
  for (const [name, value] of headers) text += `${name}: ${value}\r\n`;
  return new TextEncoder().encode(`${text}\r\n`);
}

/** Writes all of `bytes`. */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

/** Options for {@linkcode writeResponse}. */
export interface WriteResponseOptions {
  /**
   * Write the head only, with the body's `content-length`: the answer to a `HEAD` request,
   * which carries what `GET` would (RFC 9110 §9.3.2).
   *
   * @default {false}
   */
  headOnly?: boolean;
}

/**
 * Writes a complete response (head and body, `connection: close`); the
 * caller closes the connection afterwards.
 *
 * @param conn The connection.
 * @param response The response to send.
 * @param options Whether to leave the body out.
 */
export async function writeResponse(
  conn: Deno.Conn,
  response: Response,
  options: WriteResponseOptions = {},
): Promise<void> {
  const body = new Uint8Array(await response.arrayBuffer());
  const headers = new Headers(response.headers);
  headers.set("content-length", String(body.length));
  headers.set("connection", "close");
  await writeAll(conn, responseHead(response.status, headers));
  if (body.length > 0 && !options.headOnly) await writeAll(conn, body);
}
