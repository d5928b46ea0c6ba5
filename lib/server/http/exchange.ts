/**
 * One exchange of `http/request`: its deadline, its cancellation when the
 * connection goes away, and the network connection it currently uses: an idle
 * one of the client connection's pool, or a new one (directly, or through the
 * proxy, tunnelled for `https:`).
 *
 * @module
 */

import type { ConnectionPool } from "./pool.ts";
import type { ProxyRoute } from "./proxy.ts";
import { bareHost, effectivePort } from "./url.ts";
import { openTunnel } from "./wire.ts";

/** setTimeout's upper bound; larger timeouts are treated as no timeout. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The pool key of the connections for a hop to `url`: its origin and the proxy. */
function poolKey(url: URL, proxy: ProxyRoute | null): string {
  const origin = `${url.protocol}//${url.host}`;
  return proxy === null ? origin : `${origin} via ${proxy.url?.href}`;
}

/** The connection of one hop. */
export interface HopConn {
  /** The connection. */
  conn: Deno.Conn;
  /** The read that was pending while a pooled connection was idle; `null` for a new connection. */
  firstRead: Promise<Uint8Array | null> | null;
}

/** Deadline and cancellation for one request, plus the connection it currently uses. */
export class Exchange {
  readonly requestId: string;
  #pool: ConnectionPool;
  #conn: Deno.Conn | null = null;
  #key = "";
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #cancelled = false;
  /** Wakes the one connection attempt under way (`#track`) when the exchange stops. */
  #onStop: (() => void) | null = null;

  constructor(requestId: string, pool: ConnectionPool) {
    this.requestId = requestId;
    this.#pool = pool;
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
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#stop();
  }

  #stop(): void {
    this.#stopped = true;
    this.closeConn();
    const onStop = this.#onStop;
    this.#onStop = null;
    onStop?.();
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

  /** Hands the current connection back to the pool (its response was read completely). */
  release(): void {
    const conn = this.#conn;
    this.#conn = null;
    if (conn !== null && !this.#stopped) this.#pool.put(this.#key, conn);
    else conn?.close();
  }

  /**
   * Takes an idle connection to the origin (and proxy) of a hop to `url`, or
   * returns `null` when the pool holds none; it becomes the current one.
   */
  reuse(url: URL, proxy: ProxyRoute | null): HopConn | null {
    if (this.#stopped) return null;
    this.#key = poolKey(url, proxy);
    const idle = this.#pool.take(this.#key);
    if (idle !== null) this.#conn = idle.conn;
    return idle;
  }

  /**
   * A new connection for a hop to `url` (directly, or through the proxy,
   * tunnelled for `https:`), given up when the deadline expires or the
   * exchange is cancelled.
   */
  async connect(url: URL, proxy: ProxyRoute | null): Promise<HopConn> {
    if (this.#stopped) throw new Error("exchange stopped");
    this.#key = poolKey(url, proxy);
    const secure = url.protocol === "https:";
    if (proxy === null) return { conn: await this.#dial(url, secure), firstRead: null };
    if (proxy.url === null) throw new Error("unsupported proxy scheme");
    const viaTls = proxy.url.protocol === "https:";
    const conn = await this.#dial(proxy.url, viaTls);
    if (!secure) return { conn, firstRead: null };
    // A TLS session inside the TLS session to an https proxy is not available in Deno.
    if (viaTls) throw new Error("https through an https proxy is not supported");
    await openTunnel(conn, `${url.hostname}:${effectivePort(url)}`, proxy.authorization);
    const tls = Deno.startTls(conn as Deno.TcpConn, {
      hostname: bareHost(url.hostname),
      alpnProtocols: ["http/1.1"],
    });
    return { conn: await this.#track(tls), firstRead: null };
  }

  /** Connects to `url`'s host and port, with TLS when `secure`. */
  #dial(url: URL, secure: boolean): Promise<Deno.Conn> {
    const hostname = bareHost(url.hostname);
    const port = effectivePort(url);
    return this.#track(
      secure
        ? Deno.connectTls({ hostname, port, alpnProtocols: ["http/1.1"] })
        : Deno.connect({ hostname, port }).then((conn) => {
          // Requests are written whole; a request's last segment never waits for an ACK.
          conn.setNoDelay(true);
          return conn;
        }),
    );
  }

  /** Waits for a connection unless the exchange stops first; it becomes the current one. */
  async #track(pending: Promise<Deno.Conn>): Promise<Deno.Conn> {
    if (this.#stopped) {
      pending.then((late) => late.close(), () => {});
      throw new Error("exchange stopped");
    }
    const stopped = Promise.withResolvers<null>();
    this.#onStop = () => stopped.resolve(null);
    try {
      const conn = await Promise.race([pending, stopped.promise]);
      if (conn === null) {
        pending.then((late) => late.close(), () => {});
        throw new Error("exchange stopped");
      }
      this.#conn = conn;
      return conn;
    } finally {
      this.#onStop = null;
    }
  }
}
