/**
 * `http/request`: the executor-side HTTP client (docs/protocol.md §11), buffered and
 * streaming, one table per connection.
 *
 * The exchange itself is a small HTTP/1.1 client in `wire.ts` (see there why
 * `fetch()` is not used); `prepare.ts` checks the params, `headers.ts` keeps
 * the reference's header order, `redirects.ts` follows redirects,
 * `exchange.ts` holds the whole-exchange deadline, `pool.ts` keeps idle
 * connections per origin, `proxy.ts` picks the proxy from the environment and
 * `decoding.ts` undoes `gzip`/`zstd` and bounds a buffered body. This module
 * adds the `http/request/bodyDelta` stream.
 *
 * @module
 */

import { ErrorCode, kindError, RpcError } from "../../protocol/errors.ts";
import type { ParamsOf, ReplyOf } from "../../protocol/methods.ts";
import { STREAMED_CHUNK_BYTES, StreamedString } from "../../protocol/streamed_json.ts";
import { concatBytes } from "../../rpc/bytes.ts";

import { bodyChunks, bufferedBody, responseResult } from "./decoding.ts";
import { BODY_DECODE_ERROR, failed } from "./errors.ts";
import { Exchange } from "./exchange.ts";
import { ConnectionPool } from "./pool.ts";
import { prepareRequest } from "./prepare.ts";
import { environmentProxySettings, type ProxySettings } from "./proxy.ts";
import { type ReceivedResponse, send } from "./redirects.ts";

/**
 * A buffered body over this size (93 KiB) is answered with its base64 made in pieces of this
 * size while the reply is written.
 */
const STREAMED_BODY_BYTES = STREAMED_CHUNK_BYTES;

/** Streamed responses of one connection whose body has not ended, at most (`-32600` beyond). */
export const MAX_ACTIVE_STREAMS = 256;

/** Largest decoded chunk carried by one `http/request/bodyDelta` (1 MiB). */
export const MAX_DELTA_BYTES: number = 1024 * 1024;

/** Options of {@linkcode HttpRequestTable}. */
export interface HttpRequestTableOptions {
  /** The proxies to use; by default read once from the server's environment (`proxy.ts`). */
  proxies?: ProxySettings;
  /** How long an idle connection is kept (default `POOL_IDLE_TIMEOUT_MS`, 90 s). */
  idleTimeoutMs?: number;
}

/**
 * Runs `http/request` for one connection and tracks its active streams. The
 * connection's idle HTTP connections are kept in one pool (`pool.ts`), so
 * sequential requests to one origin reuse one TCP connection.
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
  #sendDelta: (delta: ParamsOf<"http/request/bodyDelta">) => Promise<void> | void;
  #active = new Map<string, Exchange>();
  #inflight = new Set<Exchange>();
  #pool: ConnectionPool;
  #proxies: ProxySettings | undefined;
  #closed = false;

  /**
   * Creates the table for one connection.
   *
   * @param sendDelta Sends one `http/request/bodyDelta` notification.
   * @param options The proxies (default: the server's environment).
   */
  constructor(
    sendDelta: (delta: ParamsOf<"http/request/bodyDelta">) => Promise<void> | void,
    options: HttpRequestTableOptions = {},
  ) {
    this.#sendDelta = sendDelta;
    this.#proxies = options.proxies;
    this.#pool = new ConnectionPool(options.idleTimeoutMs);
  }

  /** Number of idle HTTP connections kept for reuse. */
  get idleConnections(): number {
    return this.#pool.size;
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
  async request(params: ParamsOf<"http/request">): Promise<ReplyOf<"http/request">> {
    if (this.#closed) throw failed("connection closed");
    const streaming = params.streamResponse === true;
    const exchange = new Exchange(params.requestId, this.#pool);
    if (streaming) {
      if (this.#active.has(params.requestId)) {
        throw new RpcError(
          ErrorCode.InvalidParams,
          `http/request streamResponse requestId \`${params.requestId}\` is already active`,
        );
      }
      if (this.#active.size >= MAX_ACTIVE_STREAMS) {
        throw kindError(
          "limitReached",
          `at most ${MAX_ACTIVE_STREAMS} streamed http/request responses may be active per connection`,
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
      this.#proxies ??= environmentProxySettings();
      const response = await send(prepared, exchange, this.#proxies);
      const { result, coding } = responseResult(response);
      if (!streaming) {
        const body = bufferedBody(response, coding);
        const { parts, length } = body instanceof Promise ? await body : body;
        keepConnection(exchange, response);
        // A large body's base64 is made while the reply is written.
        const bodyBase64 = length > STREAMED_BODY_BYTES
          ? StreamedString.ofBytes(parts, STREAMED_BODY_BYTES)
          : (parts.length === 1 ? parts[0]! : concatBytes(parts, length)).toBase64();
        return { ...result, bodyBase64 };
      }
      handedOff = true;
      const chunks = bodyChunks(response, coding);
      setTimeout(() => this.#pump(exchange, response, chunks), 0);
      return { ...result, bodyBase64: "" };
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
    this.#pool.closeAll();
  }

  #finish(exchange: Exchange): void {
    exchange.dispose();
    this.#inflight.delete(exchange);
    if (this.#active.get(exchange.requestId) === exchange) this.#active.delete(exchange.requestId);
  }

  async #pump(
    exchange: Exchange,
    response: ReceivedResponse,
    chunks: AsyncIterable<Uint8Array>,
  ): Promise<void> {
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
      keepConnection(exchange, response);
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
  async #deliver(exchange: Exchange, delta: ParamsOf<"http/request/bodyDelta">): Promise<void> {
    if (exchange.cancelled) throw new Error("exchange cancelled");
    try {
      await this.#sendDelta(delta);
    } catch (err) {
      exchange.cancel();
      throw err;
    }
  }
}

/** Returns the exchange's connection to the pool when its response was read completely. */
function keepConnection(exchange: Exchange, response: ReceivedResponse): void {
  if (response.keepAlive && response.reader.complete) exchange.release();
}
