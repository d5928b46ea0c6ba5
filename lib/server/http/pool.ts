/**
 * Idle HTTP/1.1 connections of `http/request`, kept per origin for reuse
 * (keep-alive). Each idle connection has one read pending: when the peer
 * closes it (or sends anything unasked) the connection leaves the pool at
 * once; when it is taken, that pending read becomes the first read of the next
 * response. Bounded by {@linkcode POOL_MAX_IDLE_PER_ORIGIN},
 * {@linkcode POOL_MAX_IDLE} and {@linkcode POOL_IDLE_TIMEOUT_MS}; the oldest
 * idle connection is closed first.
 *
 * @module
 */

import { readInto } from "./wire.ts";

/** How long an idle connection is kept (90 s, the reference client's pool idle timeout). */
export const POOL_IDLE_TIMEOUT_MS: number = 90_000;
/** Idle connections kept per origin (and proxy) for one client connection. */
export const POOL_MAX_IDLE_PER_ORIGIN: number = 8;
/** Idle connections kept in all for one client connection. */
export const POOL_MAX_IDLE: number = 64;

/** A connection taken from the pool, with the read that was pending while it was idle. */
export interface PooledConn {
  /** The connection. */
  conn: Deno.Conn;
  /** The bytes of the pending read (`null` at end of stream); it rejects when the read fails. */
  firstRead: Promise<Uint8Array | null>;
}

interface Idle extends PooledConn {
  key: string;
  since: number;
}

/**
 * The idle connections of one client connection, oldest first. One timer
 * retires the expired ones (a timer per connection would cost more than the
 * exchange it saves).
 */
export class ConnectionPool {
  #idle: Idle[] = [];
  #sweep: ReturnType<typeof setTimeout> | undefined;
  #timeoutMs: number;

  /**
   * Creates an empty pool.
   *
   * @param idleTimeoutMs How long a connection may stay idle.
   */
  constructor(idleTimeoutMs: number = POOL_IDLE_TIMEOUT_MS) {
    this.#timeoutMs = idleTimeoutMs;
  }

  /** Number of idle connections. */
  get size(): number {
    return this.#idle.length;
  }

  /**
   * Takes the most recently used idle connection for `key`.
   *
   * @param key The origin (and proxy) the connection leads to.
   */
  take(key: string): PooledConn | null {
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const idle = this.#idle[i]!;
      if (idle.key !== key) continue;
      this.#idle.splice(i, 1);
      return idle;
    }
    return null;
  }

  /**
   * Keeps a connection whose last response was read completely.
   *
   * @param key The origin (and proxy) the connection leads to.
   * @param conn The connection.
   */
  put(key: string, conn: Deno.Conn): void {
    const firstRead = readInto(conn);
    const idle: Idle = { key, conn, firstRead, since: performance.now() };
    // While idle, anything the read returns (end of stream, stray bytes, an error) retires it.
    const retire = () => this.#drop(idle);
    firstRead.then(retire, retire);
    let oldest: Idle | undefined;
    let sameOrigin = 0;
    for (let i = 0; i < this.#idle.length; i++) {
      const other = this.#idle[i]!;
      if (other.key !== key) continue;
      oldest ??= other;
      sameOrigin++;
    }
    if (sameOrigin >= POOL_MAX_IDLE_PER_ORIGIN) this.#drop(oldest!);
    if (this.#idle.length >= POOL_MAX_IDLE) this.#drop(this.#idle[0]!);
    this.#idle.push(idle);
    this.#sweep ??= setTimeout(() => this.#expire(), this.#timeoutMs);
  }

  /** Closes the connections idle for the idle timeout; waits for the next to expire. */
  #expire(): void {
    this.#sweep = undefined;
    const now = performance.now();
    while (this.#idle[0] !== undefined && now - this.#idle[0].since >= this.#timeoutMs) {
      this.#drop(this.#idle[0]);
    }
    const oldest = this.#idle[0];
    if (oldest !== undefined) {
      this.#sweep = setTimeout(() => this.#expire(), oldest.since + this.#timeoutMs - now);
    }
  }

  /** Closes every idle connection. */
  closeAll(): void {
    for (const idle of [...this.#idle]) this.#drop(idle);
  }

  /** Closes `idle` if it is still in the pool. */
  #drop(idle: Idle): void {
    const at = this.#idle.indexOf(idle);
    if (at < 0) return;
    this.#idle.splice(at, 1);
    if (this.#idle.length === 0) {
      clearTimeout(this.#sweep);
      this.#sweep = undefined;
    }
    try {
      idle.conn.close();
    } catch {
      // Already closed.
    }
  }
}
