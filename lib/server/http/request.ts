/**
 * `http/request`: the executor-side HTTP client (SPEC §11), buffered and
 * streaming.
 *
 * The exchange itself is a small HTTP/1.1 client in `http_wire.ts` (see there
 * why `fetch()` is not used). This module adds the protocol semantics: param
 * validation with the reference messages, default headers, `valueEnvVar`,
 * redirects, the whole-exchange deadline, transparent `gzip`/`zstd` decoding,
 * the buffered body bound and the `http/request/bodyDelta` stream.
 *
 * Header lists follow the reference's header-map order on both sides: all
 * values of one name are kept in their original order, grouped at the
 * position where the name first appears (`x-a: 1`, `y: 2`, `x-a: 3` goes out
 * as `x-a: 1`, `x-a: 3`, `y: 2`; the same for response headers).
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import { requireNet } from "../host/permissions.ts";
import {
  type BodyFraming,
  bodyFraming,
  encodeRequestHead,
  isToken,
  type ResponseHead,
  ResponseReader,
  writeAll,
} from "./wire.ts";

/** One request header; `value` is prefixed to the executor's environment variable `valueEnvVar` when set. */
export interface HttpHeader {
  /** Header name (an HTTP token; sent lowercased). */
  name: string;
  /** Header value, or the prefix of the value when `valueEnvVar` is set. */
  value: string;
  /** Name of a server-side environment variable whose value is appended to `value`. */
  valueEnvVar?: string | null;
}

/** Decoded params of `http/request` (base64 already decoded by the caller). */
export interface HttpRequestParams {
  /** HTTP method, sent exactly as given (`get` stays `get`). */
  method: string;
  /** Absolute `http` or `https` URL. */
  url: string;
  /** Request headers in order; repeats allowed. */
  headers?: HttpHeader[] | null;
  /** Request body; an empty body is not sent (no `content-length`). */
  body?: Uint8Array | null;
  /** Deadline for the whole exchange, body included; absent or `null` means none. */
  timeoutMs?: number | null;
  /** `follow` (default, at most {@linkcode MAX_REDIRECTS}) or `stop` (return the `3xx`). */
  redirectPolicy?: "follow" | "stop" | null;
  /** Stream identity for `http/request/bodyDelta`; only reserved when `streamResponse` is true. */
  requestId: string;
  /** Return after the headers and deliver the body as deltas. */
  streamResponse?: boolean | null;
}

/** One response header as returned to the client. */
export interface HttpResponseHeader {
  /** Lowercase header name. */
  name: string;
  /** Header value (visible ASCII only; other values are left out). */
  value: string;
}

/** The `http/request` result. */
export interface HttpResponseResult {
  /** Final status code (after redirects). */
  status: number;
  /** Response headers, grouped per name in first-appearance order. */
  headers: HttpResponseHeader[];
  /** The whole body in base64 (always `""` when streaming). */
  bodyBase64: string;
}

/** Params of one `http/request/bodyDelta` notification. */
export interface BodyDelta {
  /** The streaming request's `requestId`. */
  requestId: string;
  /** 1 for the first delta, then +1 per delta. */
  seq: number;
  /** Body bytes in base64 (non-empty except in the final delta, which is always `""`). */
  deltaBase64: string;
  /** `true` only in the final delta. */
  done: boolean;
  /** `null`, or in the final delta the reason the body ended early. */
  error: string | null;
}

/** Largest response body returned by a buffered request (64 MiB); larger bodies fail with `-32603`. */
export const MAX_BUFFERED_BODY_BYTES: number = 64 * 1024 * 1024;
/** Largest decoded chunk carried by one `http/request/bodyDelta` (1 MiB). */
export const MAX_DELTA_BYTES: number = 1024 * 1024;
/** Redirects followed before `too many redirects` (the reference's client limit). */
export const MAX_REDIRECTS: number = 10;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const SENSITIVE_HEADERS = [
  "authorization",
  "cookie",
  "cookie2",
  "proxy-authorization",
  "www-authenticate",
];
const BODY_DECODE_ERROR = "error decoding response body";
/** setTimeout's upper bound; larger timeouts are treated as no timeout. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs `http/request` for one connection and tracks its active streams.
 *
 * Streaming: {@linkcode HttpRequestTable.request} resolves with the response
 * head as soon as it arrives; the body pump starts in a later macrotask
 * (`setTimeout(0)`), so the caller must queue the response before it next
 * yields to the event loop (the RPC connection does so right after awaiting the
 * handler). Each delta is awaited before the next network read, which gives
 * backpressure when `sendDelta` returns a promise.
 *
 * @example Buffered request
 * ```ts ignore
 * const table = new HttpRequestTable((delta) => conn.notify("http/request/bodyDelta", delta));
 * const result = await table.request({ method: "GET", url: "http://127.0.0.1:8080/", requestId: "" });
 * ```
 */
export class HttpRequestTable {
  #sendDelta: (delta: BodyDelta) => Promise<void> | void;
  #active = new Map<string, Exchange>();
  #inflight = new Set<Exchange>();
  #closed = false;

  /**
   * Creates the table for one connection.
   *
   * @param sendDelta Sends one `http/request/bodyDelta` notification.
   */
  constructor(sendDelta: (delta: BodyDelta) => Promise<void> | void) {
    this.#sendDelta = sendDelta;
  }

  /** Number of streaming `requestId`s currently reserved. */
  get activeStreams(): number {
    return this.#active.size;
  }

  /**
   * Performs one request.
   *
   * @param params The decoded request params.
   * @throws {RpcError} `-32602` for invalid params or a duplicate active
   * streaming `requestId`; `-32603` for transport failures, timeouts, redirect
   * failures and body errors (buffered); `-32600` from the network policy.
   */
  async request(params: HttpRequestParams): Promise<HttpResponseResult> {
    if (this.#closed) throw failed("connection closed");
    const streaming = params.streamResponse === true;
    const exchange = new Exchange(params.requestId);
    if (streaming) {
      if (this.#active.has(params.requestId)) {
        throw new RpcError(
          ErrorCode.InvalidParams,
          `http/request streamResponse requestId \`${params.requestId}\` is already active`,
        );
      }
      this.#active.set(params.requestId, exchange);
    }
    this.#inflight.add(exchange);
    let handedOff = false;
    try {
      const prepared = prepareRequest(params);
      if (params.timeoutMs === 0) throw failed("route-aware request timed out");
      exchange.startDeadline(params.timeoutMs);
      const response = await send(prepared, exchange);
      const body = decodedBody(response);
      if (!streaming) {
        return { ...body.result, bodyBase64: (await collect(body.chunks)).toBase64() };
      }
      handedOff = true;
      setTimeout(() => this.#pump(exchange, body.chunks), 0);
      return { ...body.result, bodyBase64: "" };
    } finally {
      if (!handedOff) this.#finish(exchange);
    }
  }

  /**
   * Ends every exchange of this connection: active streams stop without further deltas,
   * pending requests reject with `-32603`, and later requests fail with `connection closed`.
   */
  closeAll(): void {
    this.#closed = true;
    for (const exchange of this.#inflight) exchange.cancel();
    this.#inflight.clear();
    this.#active.clear();
  }

  #finish(exchange: Exchange): void {
    exchange.dispose();
    this.#inflight.delete(exchange);
    if (this.#active.get(exchange.requestId) === exchange) this.#active.delete(exchange.requestId);
  }

  async #pump(exchange: Exchange, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    const { requestId } = exchange;
    let seq = 0;
    let error: string | null = null;
    try {
      for await (const chunk of chunks) {
        for (let at = 0; at < chunk.length; at += MAX_DELTA_BYTES) {
          const deltaBase64 = chunk.subarray(at, at + MAX_DELTA_BYTES).toBase64();
          seq += 1;
          await this.#deliver(exchange, { requestId, seq, deltaBase64, done: false, error: null });
        }
      }
    } catch {
      error = BODY_DECODE_ERROR;
    }
    const cancelled = exchange.cancelled;
    // Release the id in the same tick as the final delta is queued, so a request that reuses it
    // is processed after the final delta.
    this.#finish(exchange);
    if (cancelled) return;
    await this.#deliver(exchange, { requestId, seq: seq + 1, deltaBase64: "", done: true, error })
      .catch(() => {});
  }

  /** Sends one delta unless the exchange was cancelled; a failed send cancels the exchange. */
  async #deliver(exchange: Exchange, delta: BodyDelta): Promise<void> {
    if (exchange.cancelled) throw new Error("exchange cancelled");
    try {
      await this.#sendDelta(delta);
    } catch (err) {
      exchange.cancel();
      throw err;
    }
  }
}

/** A validated request, ready for the first hop. */
interface PreparedRequest {
  method: string;
  url: URL;
  headers: HeaderMap;
  body: Uint8Array | null;
  redirects: "follow" | "stop";
}

/** A received response head plus the reader positioned at its body. */
interface ReceivedResponse {
  head: ResponseHead;
  reader: ResponseReader;
  framing: BodyFraming;
}

/** Deadline and cancellation for one request, plus the connection it currently uses. */
class Exchange {
  readonly requestId: string;
  #conn: Deno.Conn | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #cancelled = false;
  #stopListeners = new Set<() => void>();

  constructor(requestId: string) {
    this.requestId = requestId;
  }

  /** Whether the connection that owns this exchange went away. */
  get cancelled(): boolean {
    return this.#cancelled;
  }

  startDeadline(timeoutMs: number | null | undefined): void {
    if (timeoutMs === null || timeoutMs === undefined || timeoutMs > MAX_TIMER_MS) return;
    this.#timer = setTimeout(() => this.#stop(), timeoutMs);
  }

  cancel(): void {
    this.#cancelled = true;
    this.dispose();
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#stop();
  }

  #stop(): void {
    this.#stopped = true;
    this.closeConn();
    for (const listener of this.#stopListeners) listener();
    this.#stopListeners.clear();
  }

  closeConn(): void {
    const conn = this.#conn;
    this.#conn = null;
    try {
      conn?.close();
    } catch {
      // Already closed.
    }
  }

  /** Connects to `url`'s origin, giving up when the deadline expires or the exchange is cancelled. */
  async connect(url: URL): Promise<Deno.Conn> {
    if (this.#stopped) throw new Error("exchange stopped");
    const hostname = bareHost(url.hostname);
    const port = effectivePort(url);
    const pending = url.protocol === "https:"
      ? Deno.connectTls({ hostname, port, alpnProtocols: ["http/1.1"] })
      : Deno.connect({ hostname, port });
    const stopped = Promise.withResolvers<null>();
    const listener = (): void => stopped.resolve(null);
    this.#stopListeners.add(listener);
    try {
      const conn = await Promise.race([pending, stopped.promise]);
      if (conn === null) {
        pending.then((late) => late.close(), () => {});
        throw new Error("exchange stopped");
      }
      this.#conn = conn;
      return conn;
    } finally {
      this.#stopListeners.delete(listener);
    }
  }
}

/** An ordered header map: one entry per lowercase name, values in order. */
type HeaderMap = { name: string; values: string[] }[];

function headerGet(map: HeaderMap, name: string): string[] | undefined {
  return map.find((entry) => entry.name === name)?.values;
}

function headerSet(map: HeaderMap, name: string, value: string): void {
  const entry = map.find((candidate) => candidate.name === name);
  if (entry) entry.values = [value];
  else map.push({ name, values: [value] });
}

function headerDelete(map: HeaderMap, names: readonly string[]): HeaderMap {
  return map.filter((entry) => !names.includes(entry.name));
}

function invalid(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidParams, message);
}

function failed(reason: string): RpcError {
  return new RpcError(ErrorCode.InternalError, `http/request failed: ${reason}`);
}

function bodyFailed(reason: string): RpcError {
  return new RpcError(
    ErrorCode.InternalError,
    `failed to read http/request response body: ${reason}`,
  );
}

function sendFailed(url: URL): RpcError {
  return failed(`error sending request for url (${displayUrl(url)})`);
}

/** Validates the params in the reference's order: method, URL, scheme, then each header. */
function prepareRequest(params: HttpRequestParams): PreparedRequest {
  if (!isToken(params.method)) throw invalid("http/request method is invalid: invalid HTTP method");
  let url: URL;
  try {
    url = new URL(params.url);
  } catch {
    throw invalid(`http/request url is invalid: ${urlErrorReason(params.url)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== "http" && scheme !== "https") {
    throw invalid(`http/request only supports http and https URLs, got ${scheme}`);
  }
  const headers: HeaderMap = [];
  if (url.username !== "" || url.password !== "") {
    const credentials = `${percentDecode(url.username)}:${percentDecode(url.password)}`;
    headers.push({
      name: "authorization",
      values: [`Basic ${new TextEncoder().encode(credentials).toBase64()}`],
    });
    url.username = "";
    url.password = "";
  }
  const given = new Set<string>();
  for (const header of params.headers ?? []) {
    if (!isToken(header.name)) {
      throw invalid("http/request header name is invalid: invalid HTTP header name");
    }
    let value = header.value;
    if (header.valueEnvVar !== null && header.valueEnvVar !== undefined) {
      value += envValue(header.name, header.valueEnvVar);
    }
    if (!isValidHeaderValue(value)) {
      throw invalid(
        `http/request header value is invalid for ${header.name}: failed to parse header value`,
      );
    }
    const name = header.name.toLowerCase();
    if (given.has(name)) headerGet(headers, name)!.push(value);
    else headerSet(headers, name, value);
    given.add(name);
  }
  return {
    method: params.method,
    url,
    headers,
    body: params.body && params.body.length > 0 ? params.body : null,
    redirects: params.redirectPolicy === "stop" ? "stop" : "follow",
  };
}

/** Reads `valueEnvVar` for header `header`, with the reference's messages when it is unset or empty. */
function envValue(header: string, variable: string): string {
  let value: string | undefined;
  if (variable !== "" && !/[=\0]/.test(variable)) {
    const state = Deno.permissions.querySync({ name: "env", variable }).state;
    if (state !== "granted") {
      throw new RpcError(
        ErrorCode.InvalidRequest,
        `env access to "${variable}" is denied by the server's permissions; ` +
          `start it with --allow-env=${variable}`,
        {
          data: {
            kind: "permissionDenied",
            permission: "env",
            resource: variable,
            flag: "--allow-env",
          },
        },
      );
    }
    value = Deno.env.get(variable);
  }
  if (value === undefined) {
    throw invalid(
      `http/request header ${header} requires executor environment variable ${variable}`,
    );
  }
  if (value === "") {
    throw invalid(
      `http/request header ${header} requires a non-empty executor environment variable ${variable}`,
    );
  }
  return value;
}

/** Request header values: tab, visible ASCII, space and any non-ASCII text (sent as UTF-8). */
function isValidHeaderValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return false;
  }
  return true;
}

/** Response header values returned to the client: tab, space and visible ASCII only. */
function isVisibleAscii(value: string): boolean {
  return /^[\t\x20-\x7e]*$/.test(value);
}

/** Explains why `new URL()` refused `input`, with the Rust `url` crate's wording the reference reports. */
function urlErrorReason(input: string): string {
  let start = 0;
  let end = input.length;
  while (start < end && input.charCodeAt(start) <= 0x20) start++;
  while (end > start && input.charCodeAt(end - 1) <= 0x20) end--;
  const text = input.slice(start, end).replace(/[\t\n\r]/g, "");
  const scheme = /^[A-Za-z][A-Za-z0-9+.\-]*:(.*)$/s.exec(text);
  if (scheme === null) return "relative URL without a base";
  const authority = scheme[1]!.replace(/^[/\\]*/, "").split(/[/\\?#]/)[0]!;
  const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
  const close = hostPort.startsWith("[") ? hostPort.indexOf("]") : -1;
  const colon = hostPort.indexOf(":", close + 1);
  const host = colon < 0 ? hostPort : hostPort.slice(0, colon);
  if (host === "") return "empty host";
  if (host.startsWith("[")) {
    if (close < 0 || !URL.canParse(`http://${host}/`)) return "invalid IPv6 address";
  } else if (!URL.canParse(`http://${host}/`)) {
    const last = host.split(".").filter((label) => label !== "").at(-1) ?? "";
    return /^(0x[0-9a-f]*|\d+)$/i.test(last)
      ? "invalid IPv4 address"
      : "invalid international domain name";
  }
  if (colon >= 0) return "invalid port number";
  return "invalid international domain name";
}

function percentDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function bareHost(hostname: string): string {
  return hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
}

function effectivePort(url: URL): number {
  if (url.port !== "") return Number(url.port);
  return url.protocol === "https:" ? 443 : 80;
}

/** The URL as shown in error messages: without credentials, with the fragment. */
function displayUrl(url: URL): string {
  const shown = new URL(url.href);
  shown.username = "";
  shown.password = "";
  return shown.href;
}

function sameOrigin(a: URL, b: URL): boolean {
  return a.protocol === b.protocol && a.hostname === b.hostname &&
    effectivePort(a) === effectivePort(b);
}

/** The header lines of one hop: the request headers, then the defaults that are missing. */
function hopHeaders(headers: HeaderMap, url: URL, body: Uint8Array | null): [string, string][] {
  const map: HeaderMap = headers.map((entry) => ({ name: entry.name, values: [...entry.values] }));
  if (!headerGet(map, "accept")) headerSet(map, "accept", "*/*");
  if (!headerGet(map, "accept-encoding")) headerSet(map, "accept-encoding", "zstd,gzip");
  if (!headerGet(map, "host")) headerSet(map, "host", url.host);
  if (body !== null) headerSet(map, "content-length", String(body.length));
  return map.flatMap((entry) => entry.values.map((value): [string, string] => [entry.name, value]));
}

/** Sends the request, following redirects per policy, and returns the final response head. */
async function send(request: PreparedRequest, exchange: Exchange): Promise<ReceivedResponse> {
  let { method, url, headers, body } = request;
  for (let redirects = 0;; redirects++) {
    requireNet(url.hostname, effectivePort(url));
    let received: ReceivedResponse;
    try {
      const conn = await exchange.connect(url);
      const target = method === "CONNECT"
        ? `${url.hostname}:${effectivePort(url)}`
        : `${url.pathname}${url.search}`;
      await writeAll(conn, encodeRequestHead(method, target, hopHeaders(headers, url, body)));
      if (body !== null) await writeAll(conn, body);
      const reader = new ResponseReader(conn);
      const head = await reader.readHead();
      received = { head, reader, framing: bodyFraming(method, head) };
    } catch {
      exchange.closeConn();
      throw sendFailed(url);
    }
    const next = request.redirects === "follow" ? redirectTarget(received.head, url) : null;
    if (next === null) return received;
    exchange.closeConn();
    if (redirects >= MAX_REDIRECTS) throw failed("too many redirects");
    const scheme = next.protocol.slice(0, -1);
    if (scheme !== "http" && scheme !== "https") {
      throw failed(`redirect target uses unsupported URL scheme: ${scheme}`);
    }
    if (received.head.status <= 303) {
      if (method !== "GET" && method !== "HEAD") method = "GET";
      body = null;
      headers = headerDelete(headers, [
        "transfer-encoding",
        "content-encoding",
        "content-type",
        "content-length",
      ]);
    }
    const crossOrigin = !sameOrigin(url, next);
    if (crossOrigin) headers = headerDelete(headers, SENSITIVE_HEADERS);
    if (!(url.protocol === "https:" && next.protocol === "http:")) {
      const referer = new URL(crossOrigin ? `${url.origin}/` : url.href);
      referer.hash = "";
      headerSet(headers, "referer", referer.href);
    }
    url = next;
  }
}

/** The URL a redirect response points to, or `null` when it is not a usable redirect. */
function redirectTarget(head: ResponseHead, base: URL): URL | null {
  if (!REDIRECT_STATUSES.has(head.status)) return null;
  const location = head.headers.find(([name]) => name === "location")?.[1];
  if (location === undefined) return null;
  try {
    const next = new URL(utf8FromLatin1(location), base);
    next.username = "";
    next.password = "";
    return next;
  } catch {
    return null;
  }
}

function utf8FromLatin1(text: string): string {
  const bytes = Uint8Array.from(text, (char) => char.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The response headers for the client plus the decoded body chunks. */
function decodedBody(
  response: ReceivedResponse,
): { result: Omit<HttpResponseResult, "bodyBase64">; chunks: AsyncIterable<Uint8Array> } {
  const grouped: HeaderMap = [];
  for (const [name, value] of response.head.headers) {
    const values = headerGet(grouped, name);
    if (values) values.push(value);
    else grouped.push({ name, values: [value] });
  }
  const encodings = headerGet(grouped, "content-encoding") ?? [];
  const coding = encodings.length === 1 ? encodings[0]!.toLowerCase() : "";
  const decode = coding === "gzip" || coding === "zstd";
  const kept = decode ? headerDelete(grouped, ["content-encoding", "content-length"]) : grouped;
  const headers = kept.flatMap((entry) =>
    entry.values.filter(isVisibleAscii).map((value) => ({ name: entry.name, value }))
  );
  const raw = response.reader.body(response.framing);
  const chunks = decode ? decompress(raw, coding === "gzip" ? gunzip() : unzstd()) : raw;
  return { result: { status: response.head.status, headers }, chunks };
}

/** Decodes a content-coded body; an empty body stays empty instead of failing. */
async function* decompress(
  raw: AsyncGenerator<Uint8Array, void, undefined>,
  decoder: TransformStream<Uint8Array, Uint8Array>,
): AsyncGenerator<Uint8Array, void, undefined> {
  let first: Uint8Array | undefined;
  for await (const chunk of raw) {
    if (chunk.length > 0) {
      first = chunk;
      break;
    }
  }
  if (first === undefined) return;
  const input = first;
  async function* source(): AsyncGenerator<Uint8Array, void, undefined> {
    yield input;
    yield* raw;
  }
  for await (const chunk of ReadableStream.from(source()).pipeThrough(decoder)) {
    if (chunk.length > 0) yield chunk;
  }
}

function gunzip(): TransformStream<Uint8Array, Uint8Array> {
  return new DecompressionStream("gzip") as TransformStream<Uint8Array, Uint8Array>;
}

/**
 * A web `TransformStream` over `node:zlib`'s zstd decoder (Web `DecompressionStream` has no zstd).
 * `node:zlib` is imported on first use: loading it costs about 15 ms of server start-up.
 */
function unzstd(): TransformStream<Uint8Array, Uint8Array> {
  let zstd: ReturnType<typeof import("node:zlib").createZstdDecompress>;
  let ended: Promise<void>;
  return new TransformStream<Uint8Array, Uint8Array>({
    async start(controller): Promise<void> {
      const { createZstdDecompress } = await import("node:zlib");
      zstd = createZstdDecompress();
      ended = new Promise<void>((resolve, reject) => {
        zstd.once("end", resolve);
        zstd.once("error", reject);
      });
      ended.catch(() => {});
      zstd.on("data", (chunk: Uint8Array) => {
        try {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        } catch {
          // The stream was already errored or cancelled.
        }
      });
    },
    transform(chunk): Promise<void> {
      return new Promise((resolve, reject) => {
        zstd.write(chunk, (err) => err ? reject(err) : resolve());
      });
    },
    flush(): Promise<void> {
      zstd.end();
      return ended;
    },
    cancel(): void {
      zstd.destroy();
    },
  });
}

/** Reads a whole buffered body, bounded by {@linkcode MAX_BUFFERED_BODY_BYTES}. */
async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of chunks) {
      total += chunk.length;
      if (total > MAX_BUFFERED_BODY_BYTES) {
        throw bodyFailed(
          `response body exceeds the ${MAX_BUFFERED_BODY_BYTES} byte limit of buffered requests; ` +
            "use streamResponse",
        );
      }
      parts.push(chunk);
    }
  } catch (err) {
    if (err instanceof RpcError) throw err;
    throw bodyFailed(BODY_DECODE_ERROR);
  }
  const body = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    body.set(part, offset);
    offset += part.length;
  }
  return body;
}
