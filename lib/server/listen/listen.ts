/**
 * The two listeners: stdio (one connection, the session ends with it; in
 * `stdio_listen.ts`, re-exported here) and a WebSocket server on its own TCP
 * (or TLS) listener (many connections, sessions detach).
 *
 * @module
 */

import type { AuthResult } from "./auth.ts";
import { log } from "../host/log.ts";
import { isSandboxedPeer } from "../sandbox/peer.ts";
import { HandshakeDeadlines } from "./handshake_deadlines.ts";
import { audit } from "../observe/audit.ts";
import { authorizeRequest, methodNotAllowed, operatorRoutes } from "../observe/routes.ts";
import type { ConsoleFeed } from "../observe/console_feed.ts";
import type { ConsoleAnswer } from "../observe/console_routes.ts";
import { osErrorCode } from "../host/os_errors.ts";
import {
  MAX_BODY_BYTES,
  readRequestBody,
  readRequestHead,
  type RequestHead,
  writeResponse,
} from "./http_head.ts";
import { upgradeRefusal, websocketConnTransport, writeUpgrade } from "./websocket_conn.ts";
import { originGate } from "./origin.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../rpc/transport.ts";
import { serveConnection } from "../session/serve_connection.ts";
import { watchProcesses } from "../observe/process_watch.ts";
import { observeRequests } from "../observe/requests.ts";
import { SessionRegistry } from "../session/registry.ts";
import type { ListenOptions, RunningServer } from "./stdio_listen.ts";
import { DEFAULT_MAX_CONNECTIONS } from "./connection_limit.ts";

export { type ListenOptions, type RunningServer, serveStdio } from "./stdio_listen.ts";

/** Longest a connection may take from `accept` to a complete upgrade (TLS, head, authorization). */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Most connections that are accepted but not yet upgraded; a newer one evicts the oldest. */
export const MAX_PENDING_CONNECTIONS = 1024;
export { DEFAULT_MAX_CONNECTIONS } from "./connection_limit.ts";
/** Longest pause between retries of a failing `accept` (e.g. EMFILE). */
const ACCEPT_BACKOFF_MAX_MS = 1000;

/** Options for {@linkcode serveWebSocket}. */
export interface WebSocketListenOptions extends ListenOptions {
  /**
   * Interface to bind.
   *
   * @default {"127.0.0.1"}
   */
  hostname?: string;
  /**
   * Port to bind; 0 picks a free one.
   *
   * @default {0}
   */
  port?: number;
  /**
   * Decides whether an upgrade request may proceed; returns a response to
   * refuse it (e.g. 401). Runs before the upgrade.
   */
  authorize?: (request: Request) => Promise<AuthResult>;
  /**
   * The web console's own credential (`--console-token-file`), checked like `authorize` at a
   * console login only: its logins watch, and terminate only with
   * {@linkcode WebSocketListenOptions.consoleCanTerminate}. It opens no protocol connection.
   */
  consoleAuthorize?: (request: Request) => Promise<AuthResult>;
  /** Whether the logins of `consoleAuthorize`'s credential may terminate processes. */
  consoleCanTerminate?: boolean;
  /** TLS certificate and key (PEM) to serve `wss://`. */
  tls?: { cert: string; key: string };
  /**
   * Origins whose requests are served; any other request carrying an
   * `Origin` header gets 403 (`--allow-origin`).
   *
   * @default {[]}
   */
  allowedOrigins?: readonly string[];
  /**
   * Most upgraded connections at once; a further upgrade gets 503
   * (`--max-connections`).
   *
   * @default {1024}
   */
  maxConnections?: number;
  /**
   * Most accepted connections not yet upgraded; beyond it the oldest is closed.
   *
   * @default {1024}
   */
  maxPendingConnections?: number;
  /**
   * Milliseconds from `accept` to a complete upgrade before the connection is closed.
   *
   * @default {10000}
   */
  handshakeTimeoutMs?: number;
}

/** What to do with an upgrade request: answer it, or upgrade it with this subprotocol. */
type Route = { response: Response } | { upgrade: true; protocol?: string } | ConsoleAnswer;

function textResponse(status: number, text: string): Response {
  return new Response(text, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/** The fetch API's view of a request head; `undefined` when it refuses the head. */
function requestOf(head: RequestHead, body?: Uint8Array): Request | undefined {
  try {
    // Origin-form targets ("/path") are the path of this server, whatever they look like.
    const url = head.target.startsWith("/")
      ? new URL(`http://exec-server${head.target}`)
      : new URL(head.target);
    const bodyAllowed = head.method !== "GET" && head.method !== "HEAD";
    return new Request(url, {
      method: head.method,
      headers: [...head.headers],
      body: bodyAllowed ? body as Uint8Array<ArrayBuffer> | undefined : undefined,
    });
  } catch {
    return undefined;
  }
}

/** The answers to a body that cannot be read (a closed connection gets none). */
const BODY_REFUSALS = {
  "too-large": { status: 413, text: `request bodies are at most ${MAX_BODY_BYTES} bytes` },
  "length-required": { status: 411, text: "a request body needs a Content-Length" },
  malformed: { status: 400, text: "malformed Content-Length" },
} as const;

function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Serves the protocol over WebSocket: `GET /` upgrades; `GET /healthz`,
 * `GET /readyz` and `GET /metrics` are the operator's routes; anything else
 * is 404 (docs/protocol.md section 1.2). A request carrying an
 * `Origin` header that is not allowed gets 403 first.
 *
 * The server owns its connections from `accept` on: a connection must finish
 * its upgrade within {@linkcode HANDSHAKE_TIMEOUT_MS}; at most
 * {@linkcode MAX_PENDING_CONNECTIONS} wait for that at once (the oldest is
 * closed for a newer one, so half-open connections cannot lock out a real
 * client); at most `maxConnections` are upgraded; a failing `accept`
 * (EMFILE, ENFILE, ECONNABORTED...) is logged and retried with backoff,
 * never fatal.
 *
 * @param options Address, limits and authorization.
 */
export function serveWebSocket(options: WebSocketListenOptions = {}): Promise<RunningServer> {
  const hostname = options.hostname ?? "127.0.0.1";
  const port = options.port ?? 0;
  let listener: Deno.Listener;
  try {
    listener = options.tls
      ? Deno.listenTls({ hostname, port, cert: options.tls.cert, key: options.tls.key })
      : Deno.listen({ hostname, port });
  } catch (err) {
    return Promise.reject(err);
  }
  watchProcesses();
  observeRequests();
  const sessions = new SessionRegistry(options);
  const crossOrigin = originGate(options.allowedOrigins);
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const maxPending = options.maxPendingConnections ?? MAX_PENDING_CONNECTIONS;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
  /** Accepted connections still in their handshake, oldest first; closed when it runs out. */
  const pending = new HandshakeDeadlines<Deno.Conn>(handshakeTimeoutMs, closeQuietly);
  /** Upgraded connections. */
  const open = new Set<{ close(): void }>();
  const stopping = new AbortController();
  let connections = 0;
  /** Open web console feeds. */
  const feeds = new Set<ConsoleFeed>();
  /**
   * The web console's routes and the largest message of its feed, loaded with the first request
   * that is not a plain upgrade (the protocol's connections never need them, nor the refusal
   * the console is handed).
   */
  async function loadConsole() {
    const [{ consoleRoutes }, { CONSOLE_MAX_MESSAGE_BYTES }, { unauthorized }] = await Promise.all([
      import("../observe/console_routes.ts"),
      import("../observe/console_feed.ts"),
      import("./auth.ts"),
    ]);
    return {
      answer: consoleRoutes({
        sessions,
        authorize: options.authorize,
        consoleAuthorize: options.consoleAuthorize,
        consoleCanTerminate: options.consoleCanTerminate,
        port: addr.port,
        tls: options.tls !== undefined,
        allowedOrigins: options.allowedOrigins ?? [],
        upgradeRefusal,
        unauthorized,
      }),
      maxMessageBytes: CONSOLE_MAX_MESSAGE_BYTES,
    };
  }
  let webConsole: ReturnType<typeof loadConsole> | undefined;
  const operator = operatorRoutes({
    authorize: options.authorize,
    state: {
      connections: () => open.size,
      sessions: () => sessions.size,
      processesRunning: () =>
        sessions.list().reduce((sum, session) => sum + session.processes.runningPids().length, 0),
    },
  });

  function closeQuietly(conn: Deno.Conn): void {
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  }

  function evictOldestPending(): void {
    const oldest = pending.takeOldest();
    if (oldest !== undefined) closeQuietly(oldest);
  }

  /**
   * Where a request goes. A WebSocket upgrade of `/` on a server without authorization is
   * decided on its head alone, so no `Request` is built for it (the first one loads Deno's
   * fetch module: several ms of CPU on the first connection); every other request is routed
   * as the `Request` of its head.
   */
  async function route(head: RequestHead, peer: string, body?: Uint8Array): Promise<Route> {
    // The console answers `/` only without an upgrade header, the operator routes never.
    const plainUpgrade = head.method === "GET" && head.target === "/" &&
      head.headers.has("upgrade") && options.authorize === undefined;
    const request = plainUpgrade ? undefined : requestOf(head, body);
    if (!plainUpgrade && request === undefined) {
      return { response: textResponse(400, "malformed request") };
    }
    // The web console admits its own origin; every other path refuses any Origin below.
    const consoleAnswered = request && await (await (webConsole ??= loadConsole())).answer(
      request,
      peer,
    );
    if (consoleAnswered) return consoleAnswered;
    const refused = crossOrigin(head.headers);
    if (refused) return { response: refused };
    const answered = request && await operator(request, peer);
    if (answered) return { response: answered };
    if (request && new URL(request.url).pathname !== "/") {
      return { response: new Response(null, { status: 404 }) };
    }
    // The reference's text for another method on `/`.
    if (request && request.method !== "GET") {
      return { response: methodNotAllowed("Request method must be `GET`") };
    }
    const refusal = upgradeRefusal(head.headers);
    if (refusal) return { response: refusal };
    const auth: AuthResult = request
      ? await authorizeRequest(options.authorize, request, peer)
      : { ok: true };
    if (!auth.ok) return { response: auth.response };
    if (open.size >= maxConnections) {
      return { response: textResponse(503, `at most ${maxConnections} connections are served`) };
    }
    return { upgrade: true, protocol: auth.protocol };
  }

  async function handshake(conn: Deno.Conn): Promise<void> {
    const peerAddr = conn.remoteAddr as Deno.NetAddr;
    const peer = `${peerAddr.hostname}:${peerAddr.port}`;
    pending.add(conn);
    if (pending.size > maxPending) evictOldestPending();
    // Replies and notifications are small writes: send them at once (as `Deno.serve` did).
    if ("setNoDelay" in conn) (conn as Deno.TcpConn).setNoDelay(true);
    let upgraded = false;
    try {
      const head = await readRequestHead(conn);
      if (head === "closed" || !pending.has(conn)) return;
      if (isSandboxedPeer(peerAddr, conn.localAddr as Deno.NetAddr)) {
        log("warn", `connection refused: ${peer} is one of the server's sandboxed processes`);
        await writeResponse(
          conn,
          textResponse(403, "connections from the server's own sandboxed processes are refused"),
        );
        return;
      }
      if (head === "too-large") {
        await writeResponse(conn, textResponse(431, "request head too large"));
        return;
      }
      if (head === "malformed") {
        await writeResponse(conn, textResponse(400, "malformed request"));
        return;
      }
      const body = await readRequestBody(conn, head);
      if (body === "closed" || !pending.has(conn)) return;
      if (typeof body === "string") {
        await writeResponse(
          conn,
          textResponse(BODY_REFUSALS[body].status, BODY_REFUSALS[body].text),
        );
        return;
      }
      // HEAD is answered wherever GET is: routed as GET, written without the body.
      const headOnly = head.method === "HEAD";
      const decision = await route(headOnly ? { ...head, method: "GET" } : head, peer, body);
      if (!pending.has(conn)) return;
      if ("response" in decision || headOnly) {
        const response = "response" in decision
          ? decision.response
          : textResponse(400, "a WebSocket upgrade needs GET");
        await writeResponse(conn, response, { headOnly });
        return;
      }
      await writeUpgrade(
        conn,
        head.headers,
        "protocol" in decision ? decision.protocol : undefined,
      );
      if (!pending.delete(conn)) return;
      upgraded = true;
      if ("attach" in decision) {
        const feed = decision.attach(websocketConnTransport(conn, {
          label: `exec-server console ${peer}`,
          maxMessageBytes: (await webConsole!).maxMessageBytes,
          initial: head.rest,
        }));
        feeds.add(feed);
        feed.finished.then(() => feeds.delete(feed));
      } else {
        serve(conn, peer, head.rest);
      }
    } catch (err) {
      log("debug", `handshake with ${peer} failed: ${describeError(err)}`);
    } finally {
      if (!upgraded) {
        pending.delete(conn);
        closeQuietly(conn);
      }
    }
  }

  function serve(conn: Deno.Conn, peer: string, initial: Uint8Array): void {
    const transport = websocketConnTransport(conn, {
      label: `exec-server websocket ${peer}`,
      maxMessageBytes,
      initial,
    });
    const served = serveConnection(transport, {
      sessions,
      concurrentRequests: options.concurrentRequests,
      onClose: "detach",
      // Twice the largest message may wait unanswered; beyond that the peer is not read.
      maxHeldUnits: 2 * maxMessageBytes,
    });
    const entry = { close: () => served.connection.close() };
    open.add(entry);
    const connection = ++connections;
    const opened = performance.now();
    audit("connection.open", { connection, remoteAddress: peer });
    served.finished.then(() => {
      open.delete(entry);
      audit("connection.close", {
        connection,
        remoteAddress: peer,
        session: served.sessionId ?? null,
        durationMs: Math.round(performance.now() - opened),
      });
    });
  }

  async function acceptLoop(): Promise<void> {
    let failures = 0;
    while (!stopping.signal.aborted) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (err) {
        if (stopping.signal.aborted || err instanceof Deno.errors.BadResource) break;
        const code = osErrorCode(err);
        // Out of descriptors: give one back by closing the oldest unfinished handshake.
        if (code === "EMFILE" || code === "ENFILE") evictOldestPending();
        failures++;
        if (failures === 1) log("warn", `accept failed, retrying: ${describeError(err)}`);
        await sleep(Math.min(ACCEPT_BACKOFF_MAX_MS, 5 * 2 ** failures), stopping.signal);
        continue;
      }
      if (failures > 0) {
        log("warn", `accept recovered after ${failures} failed attempts`);
        failures = 0;
      }
      handshake(conn);
    }
  }

  const addr = listener.addr as Deno.NetAddr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  const finished = acceptLoop();
  return Promise.resolve({
    url: `${options.tls ? "wss" : "ws"}://${host}:${addr.port}`,
    sessions,
    finished,
    async shutdown() {
      stopping.abort();
      try {
        listener.close();
      } catch {
        // Already closed.
      }
      for (const conn of pending.takeAll()) closeQuietly(conn);
      sessions.endAll();
      for (const entry of [...open, ...feeds]) entry.close();
      await finished;
    },
  });
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });
}
