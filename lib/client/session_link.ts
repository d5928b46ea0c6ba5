/**
 * The session link: one exec-server session over a sequence of connections.
 * It dials, initializes, and after a WebSocket outage dials again and resumes
 * the session (`resumeSessionId`), retrying with backoff for a bounded time.
 * The typed facade ({@linkcode ExecClient}) sits on top and never sees a
 * connection come or go, only the events below.
 *
 * @module
 */

import { ErrorCode, errorKind } from "../protocol/errors.ts";
import { type EnvironmentInfo, EXTENSIONS } from "../protocol/methods.ts";
import { ClosedError, Connection, RemoteError, TimedOutError } from "../rpc/connection.ts";
import { dial, type DialCredentials, type Endpoint } from "./dial.ts";
import { ConnectError, SessionLostError } from "./errors.ts";
import { parseResult } from "./wire.ts";

/** How the link connects and reconnects. */
export interface SessionLinkOptions extends DialCredentials {
  /**
   * The `clientName` sent in `initialize`.
   *
   * @default {"exec-server-client"}
   */
  clientName?: string;
  /** Resume this (detached) session on the first connect instead of opening a new one. */
  resumeSessionId?: string;
  /**
   * Reconnect (WebSocket only) when the connection is lost: the next call, or
   * a live process handle, opens a new connection and resumes the session.
   *
   * @default {true}
   */
  reconnect?: boolean;
  /**
   * How long one reconnect attempt keeps retrying before it gives up.
   *
   * @default {30000}
   */
  reconnectTimeoutMs?: number;
  /**
   * Timeout of opening a connection and of its `initialize` call.
   *
   * @default {10000}
   */
  connectTimeoutMs?: number;
  /**
   * The protocol extensions to opt in to (sent in `initialize`); the server
   * grants those it has. `[]` asks for none: the server then behaves exactly
   * like the reference.
   *
   * @default {every extension this client knows}
   */
  extensions?: readonly string[];
  /**
   * Largest message the client reads from the server, in bytes (a WebSocket message or a
   * stdio line). A larger answer fails its call with `MessageTooLargeError` at once.
   *
   * @default {67108864}
   */
  maxMessageBytes?: number;
}

/** What the link tells its owner. */
export interface SessionLinkEvents {
  /** A server → client notification of the current connection (not yet validated). */
  notification(method: string, params: unknown): void;
  /** The open connection was lost and the link may reconnect (WebSocket with `reconnect`). */
  disconnected(): void;
  /** A new connection resumed the same session. */
  resumed(): void;
  /**
   * The session's processes are out of reach for good: the session expired
   * while away ({@linkcode SessionLostError}), reconnecting gave up, or the
   * connection closed without reconnection.
   */
  lost(error: unknown): void;
}

/** Options of one call through the link. */
export interface LinkCallOptions {
  /** Fails the call with `TimedOutError` after this many ms. */
  timeoutMs?: number;
  /** Send the call again after a reconnect if the connection was lost before the answer. */
  retry?: boolean;
  /** A cleanup call, which may use the reserved in-flight slot. */
  cleanup?: boolean;
}

const CLIENT_CLOSED = "Client is closed";
const CONNECTION_LOST = "Connection to the exec-server was lost";

/**
 * One session over successive connections.
 *
 * @example A link dials lazily
 * ```ts
 * import { SessionLink } from "./session_link.ts";
 * import { endpointOf } from "./dial.ts";
 * const link = new SessionLink(endpointOf("ws://127.0.0.1:1"), {}, {
 *   notification() {},
 *   disconnected() {},
 *   resumed() {},
 *   lost() {},
 * });
 * console.log(link.connected); // false
 * await link.close();
 * ```
 */
export class SessionLink {
  #endpoint: Endpoint;
  #options: SessionLinkOptions;
  #events: SessionLinkEvents;
  #canReconnect: boolean;
  #conn: Connection | undefined;
  #opening: Connection | undefined;
  #dispose: (() => Promise<void>) | undefined;
  #disposing = new Set<Promise<void>>();
  #connecting: Promise<Connection> | undefined;
  #everConnected = false;
  #closed = false;
  #sessionId: string | undefined;
  #environmentInfo: EnvironmentInfo | undefined;
  #extensions: ReadonlySet<string> = new Set();
  #sleep: { timer: ReturnType<typeof setTimeout>; resolve(): void } | undefined;
  #abort = new AbortController();

  /**
   * Creates a link; it dials on the first {@linkcode SessionLink.connection} or call.
   *
   * @param endpoint Where the server is.
   * @param options Token, names and reconnection.
   * @param events Where notifications and connection changes go.
   */
  constructor(endpoint: Endpoint, options: SessionLinkOptions, events: SessionLinkEvents) {
    this.#endpoint = endpoint;
    this.#options = options;
    this.#events = events;
    this.#canReconnect = endpoint.kind === "websocket" && (options.reconnect ?? true);
    this.#sessionId = options.resumeSessionId;
  }

  /** True while a connection is open and initialized. */
  get connected(): boolean {
    return this.#conn !== undefined && !this.#conn.isClosed;
  }

  /** True after {@linkcode SessionLink.close}. */
  get closed(): boolean {
    return this.#closed;
  }

  /** True when a lost connection is followed by a reconnect. */
  get canReconnect(): boolean {
    return this.#canReconnect;
  }

  /** The session id, once connected. */
  get sessionId(): string | undefined {
    return this.#sessionId;
  }

  /** The server's `environmentInfo` from the latest `initialize`, if any. */
  get environmentInfo(): EnvironmentInfo | undefined {
    return this.#environmentInfo;
  }

  /** The extensions granted at the latest `initialize`. */
  get extensions(): ReadonlySet<string> {
    return this.#extensions;
  }

  /**
   * Sends a request on the current connection (connecting first if needed).
   * A lost connection fails it with `ClosedError`, unless `retry` is set and
   * the link reconnects: then it is sent again.
   *
   * @param method The wire name.
   * @param params The wire params.
   * @param options Timeout, retry and cleanup.
   */
  async call(method: string, params: unknown, options: LinkCallOptions = {}): Promise<unknown> {
    while (true) {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      const conn = await this.connection();
      try {
        return await conn.call(method, params, {
          timeoutMs: options.timeoutMs,
          cleanup: options.cleanup,
        });
      } catch (err) {
        if (!(err instanceof ClosedError)) throw err;
        if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
        if (!options.retry || !this.#canReconnect) throw new ClosedError(CONNECTION_LOST);
      }
    }
  }

  /** The open, initialized connection; concurrent callers share one connect attempt. */
  connection(): Promise<Connection> {
    if (this.#closed) return Promise.reject(new ClosedError(CLIENT_CLOSED));
    if (this.#conn && !this.#conn.isClosed) return Promise.resolve(this.#conn);
    if (this.#everConnected && !this.#canReconnect) {
      return Promise.reject(new ClosedError(CONNECTION_LOST));
    }
    this.#connecting ??= this.#establish().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  /** Closes the connection (a spawned server is stopped) and fails later calls. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#abort.abort();
      if (this.#sleep) {
        clearTimeout(this.#sleep.timer);
        this.#sleep.resolve();
      }
      this.#conn?.close();
      this.#opening?.close();
      if (this.#dispose) this.#disposing.add(this.#dispose());
      this.#dispose = undefined;
      await this.#connecting?.catch(() => {});
    }
    await Promise.all(this.#disposing);
  }

  async #establish(): Promise<Connection> {
    const reconnecting = this.#everConnected;
    const deadline = Date.now() + (this.#options.reconnectTimeoutMs ?? 30_000);
    let delay = 25;
    while (true) {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      try {
        return await this.#open();
      } catch (err) {
        if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
        const retriable = reconnecting && this.#canReconnect && Date.now() < deadline &&
          isTransient(err);
        if (!retriable) {
          if (reconnecting) this.#events.lost(err);
          throw err;
        }
      }
      await this.#pause(delay);
      delay = Math.min(delay * 2, 1000);
    }
  }

  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#sleep = undefined;
        resolve();
      }, ms);
      this.#sleep = { timer, resolve };
    });
  }

  async #open(): Promise<Connection> {
    const timeoutMs = this.#options.connectTimeoutMs ?? 10_000;
    const dialed = await dial(this.#endpoint, {
      token: this.#options.token,
      caCerts: this.#options.caCerts,
      maxMessageBytes: this.#options.maxMessageBytes,
      timeoutMs,
      signal: this.#abort.signal,
    });
    const conn: Connection = new Connection(dialed.transport, {
      handlers: {
        notification: (method, params) => {
          if (conn === this.#conn || conn === this.#opening) {
            this.#events.notification(method, params);
          }
        },
      },
    });
    this.#opening = conn;
    try {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      const clientName = this.#options.clientName ?? "exec-server-client";
      const wanted = this.#options.extensions ?? Object.keys(EXTENSIONS);
      const extensions = wanted.length > 0 ? wanted : undefined;
      let raw: unknown;
      try {
        raw = await conn.call(
          "initialize",
          { clientName, resumeSessionId: this.#sessionId, extensions },
          { timeoutMs },
        );
      } catch (err) {
        const lost = this.#sessionId !== undefined && this.#everConnected &&
          err instanceof RemoteError && errorKind(err.data) === "unknownSession";
        if (!lost) throw err;
        // The session expired while we were away: its processes are gone.
        this.#events.lost(new SessionLostError(this.#sessionId!, { cause: err }));
        this.#sessionId = undefined;
        raw = await conn.call("initialize", { clientName, extensions }, { timeoutMs });
      }
      const result = parseResult("initialize", raw);
      await conn.notify("initialized", {});
      if (conn.isClosed) throw new ClosedError(CONNECTION_LOST);
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      this.#sessionId = result.sessionId;
      this.#environmentInfo = result.environmentInfo;
      this.#extensions = new Set(result.extensions ?? []);
    } catch (caught) {
      let err = caught;
      if (!this.#closed && (err instanceof ClosedError || err instanceof TimedOutError)) {
        err = new ConnectError(this.#endpoint.label, `no answer to initialize: ${err.message}`, {
          cause: err,
        });
      }
      this.#opening = undefined;
      conn.close();
      const disposal = dialed.dispose();
      this.#disposing.add(disposal);
      disposal.finally(() => this.#disposing.delete(disposal));
      await disposal;
      throw err;
    }
    this.#opening = undefined;
    const resumed = this.#everConnected;
    this.#conn = conn;
    this.#dispose = dialed.dispose;
    this.#everConnected = true;
    conn.closed.then(() => this.#onClosed(conn));
    if (resumed) this.#events.resumed();
    return conn;
  }

  #onClosed(conn: Connection): void {
    if (conn !== this.#conn) return;
    this.#conn = undefined;
    if (this.#dispose) {
      const disposal = this.#dispose();
      this.#dispose = undefined;
      this.#disposing.add(disposal);
      disposal.finally(() => this.#disposing.delete(disposal));
    }
    if (this.#closed) return;
    if (this.#canReconnect) this.#events.disconnected();
    else this.#events.lost(new ClosedError(CONNECTION_LOST));
  }
}

function isTransient(err: unknown): boolean {
  if (err instanceof ConnectError) return err.status === undefined || err.status >= 500;
  if (err instanceof RemoteError) return err.code === ErrorCode.SessionAlreadyAttached;
  return err instanceof ClosedError || err instanceof TimedOutError;
}
