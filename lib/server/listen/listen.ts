/**
 * The two listeners: stdio (one connection, the session ends with it) and a
 * WebSocket server on `Deno.serve` (many connections, sessions detach).
 *
 * @module
 */

import type { AuthResult } from "./auth.ts";
import { stdioTransport } from "../../rpc/stdio_transport.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../rpc/transport.ts";
import { websocketTransport } from "../../rpc/websocket_transport.ts";
import { audit } from "../observe/audit.ts";
import { authorizeRequest, operatorRoutes } from "../observe/routes.ts";
import { serveConnection } from "../session/serve_connection.ts";
import { SessionRegistry, type SessionRegistryOptions } from "../session/registry.ts";

/** Options shared by both listeners. */
export interface ListenOptions extends SessionRegistryOptions {
  /**
   * Requests run at once per lane after `initialized`.
   *
   * @default {1}
   */
  concurrentRequests?: number;
  /**
   * Largest inbound message in bytes.
   *
   * @default {64 MiB}
   */
  maxMessageBytes?: number;
}

/** A running server. */
export interface RunningServer {
  /** `stdio` or the bound `ws://host:port` URL. */
  readonly url: string;
  /** The sessions of this server. */
  readonly sessions: SessionRegistry;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
  /** Stops listening, ends every session (killing its processes) and closes connections. */
  shutdown(): Promise<void>;
}

/**
 * Serves one connection on the given byte streams (the process's stdin and
 * stdout by default). When the input ends, every process of the session is
 * killed and `finished` resolves.
 *
 * @param options Concurrency and limits.
 * @param input Bytes from the client.
 * @param output Bytes to the client.
 */
export function serveStdio(
  options: ListenOptions = {},
  input: ReadableStream<Uint8Array> = Deno.stdin.readable,
  output: WritableStream<Uint8Array> = Deno.stdout.writable,
): RunningServer {
  const sessions = new SessionRegistry(options);
  const transport = stdioTransport(input, output, { maxLineBytes: options.maxMessageBytes });
  const served = serveConnection(transport, {
    sessions,
    concurrentRequests: options.concurrentRequests,
    onClose: "end",
  });
  const finished = served.finished.then(() => sessions.endAll());
  return {
    url: "stdio",
    sessions,
    finished,
    shutdown() {
      served.connection.close();
      return finished;
    },
  };
}

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
  /** TLS certificate and key (PEM) to serve `wss://`. */
  tls?: { cert: string; key: string };
}

/**
 * Serves the protocol over WebSocket: `GET /` upgrades; `GET /healthz`,
 * `GET /readyz` and `GET /metrics` are the operator's routes; anything else
 * is 404 (spec §1.2).
 *
 * @param options Address, limits and authorization.
 */
export function serveWebSocket(options: WebSocketListenOptions = {}): Promise<RunningServer> {
  const sessions = new SessionRegistry(options);
  const controller = new AbortController();
  const open = new Set<{ close(): void }>();
  const { promise: listening, resolve: onListen } = Promise.withResolvers<Deno.NetAddr>();
  let connections = 0;
  const routes = operatorRoutes({
    authorize: options.authorize,
    state: {
      connections: () => open.size,
      sessions: () => sessions.size,
      processesRunning: () =>
        sessions.list().reduce((sum, session) => sum + session.processes.runningPids().length, 0),
    },
  });
  const handler = async (
    request: Request,
    info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ): Promise<Response> => {
    const peer = `${info.remoteAddr.hostname}:${info.remoteAddr.port}`;
    const routed = await routes(request, peer);
    if (routed) return routed;
    const url = new URL(request.url);
    if (url.pathname !== "/" || request.method !== "GET") {
      return new Response(null, { status: 404 });
    }
    if ((request.headers.get("upgrade") ?? "").toLowerCase() !== "websocket") {
      return new Response("Connection header did not include 'upgrade'", {
        status: 400,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
    const auth = await authorizeRequest(options.authorize, request, peer);
    if (!auth.ok) return auth.response;
    const { socket, response } = Deno.upgradeWebSocket(request, { protocol: auth.protocol });
    const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const transport = websocketTransport(socket, {
      label: `exec-server websocket ${peer}`,
      maxMessageBytes,
      // Two messages of the largest size may wait; beyond that the flooding peer is cut off.
      maxQueuedBytes: 2 * maxMessageBytes,
    });
    const served = serveConnection(transport, {
      sessions,
      concurrentRequests: options.concurrentRequests,
      onClose: "detach",
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
    return response;
  };
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    signal: controller.signal,
    onListen: (addr) => onListen(addr as Deno.NetAddr),
    ...(options.tls ? { cert: options.tls.cert, key: options.tls.key } : {}),
  }, handler);
  return listening.then((addr) => {
    const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    const scheme = options.tls ? "wss" : "ws";
    return {
      url: `${scheme}://${host}:${addr.port}`,
      sessions,
      finished: server.finished,
      async shutdown() {
        sessions.endAll();
        for (const entry of [...open]) entry.close();
        controller.abort();
        await server.finished;
      },
    };
  });
}
