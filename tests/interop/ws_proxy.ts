/**
 * A logging WebSocket proxy that sits between Codex and an exec-server.
 *
 * Every message is forwarded unchanged, in order, in both directions. Each JSON-RPC message is
 * summarised in {@linkcode WsProxy.log}: requests and notifications by method, responses by the
 * method of the request they answer, errors with their code and message. The proxy listens on
 * 127.0.0.1 only.
 *
 * @module
 */

/** Who sent a logged message. */
export type Direction = "client" | "server";

/** One JSON-RPC message seen by the proxy. */
export interface LoggedMessage {
  /** `client` for Codex → exec-server, `server` for exec-server → Codex. */
  direction: Direction;
  /** The message kind. */
  kind: "request" | "notification" | "response" | "error" | "unparsable";
  /** The method; for responses and errors, the method of the request they answer (if known). */
  method?: string;
  /** The request id, when the message has one. */
  id?: string | number;
  /** For errors: the JSON-RPC error object. */
  error?: { code: number; message: string };
  /** The message's `params` (requests, notifications) or `result` (responses). */
  payload?: unknown;
}

/** A running proxy; dispose it to stop listening and drop every connection. */
export interface WsProxy extends AsyncDisposable {
  /** The URL to hand to Codex, e.g. `ws://127.0.0.1:41235`. */
  readonly url: string;
  /** Every message seen so far, in the order the proxy forwarded them. */
  readonly log: readonly LoggedMessage[];
  /** How many WebSocket connections the client opened. */
  readonly connections: number;
  /** Forgets the log so far (and the connection count). */
  reset(): void;
  /** Stops listening, closes every connection and waits for the server to finish. */
  close(): Promise<void>;
}

/** Options for {@linkcode startWsProxy}. */
export interface WsProxyOptions {
  /**
   * Whether to keep `params`/`result` in the log. Output notifications are large; keep off
   * unless a test inspects payloads.
   * @default {true}
   */
  keepPayloads?: boolean;
  /**
   * Rewrites each parsed exec-server → Codex message before it is logged and forwarded (for
   * experiments, e.g. masking capability flags). Unparsable messages are forwarded untouched.
   */
  rewriteServerMessage?: (message: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * Starts a logging proxy on an ephemeral 127.0.0.1 port that forwards to `upstreamUrl`.
 *
 * @param upstreamUrl The exec-server's `ws://` URL.
 * @param options Logging options.
 * @returns The running proxy.
 */
export function startWsProxy(upstreamUrl: string, options: WsProxyOptions = {}): WsProxy {
  const keepPayloads = options.keepPayloads ?? true;
  const log: LoggedMessage[] = [];
  const sockets = new Set<WebSocket>();
  let connections = 0;

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => {
      if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
        return new Response("expected a WebSocket upgrade", { status: 400 });
      }
      const { socket: downstream, response } = Deno.upgradeWebSocket(request);
      connections += 1;
      bridge(downstream, new WebSocket(upstreamUrl));
      return response;
    },
  );

  /** Wires one client connection to one upstream connection. */
  function bridge(downstream: WebSocket, upstream: WebSocket): void {
    sockets.add(downstream);
    sockets.add(upstream);
    const pending: (string | ArrayBuffer)[] = [];
    // Request ids are per direction: a server → client request could reuse a client id.
    const clientRequests = new Map<string, string>();
    const serverRequests = new Map<string, string>();
    downstream.binaryType = "arraybuffer";
    upstream.binaryType = "arraybuffer";

    downstream.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
      record("client", event.data, clientRequests, serverRequests);
      if (upstream.readyState === WebSocket.OPEN) upstream.send(event.data);
      else pending.push(event.data);
    };
    upstream.onopen = () => {
      for (const data of pending.splice(0)) upstream.send(data);
    };
    upstream.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
      const data = rewrite(event.data);
      record("server", data, serverRequests, clientRequests);
      if (downstream.readyState === WebSocket.OPEN) downstream.send(data);
    };
    function closeBoth(): void {
      for (const socket of [downstream, upstream]) {
        sockets.delete(socket);
        if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) {
          socket.close();
        }
      }
    }
    downstream.onclose = closeBoth;
    upstream.onclose = closeBoth;
    downstream.onerror = closeBoth;
    upstream.onerror = closeBoth;
  }

  /** Applies `options.rewriteServerMessage` to one exec-server message. */
  function rewrite(data: string | ArrayBuffer): string | ArrayBuffer {
    const rewriteMessage = options.rewriteServerMessage;
    if (rewriteMessage === undefined) return data;
    const text = typeof data === "string" ? data : new TextDecoder().decode(data);
    try {
      return JSON.stringify(rewriteMessage(JSON.parse(text)));
    } catch {
      return data;
    }
  }

  /**
   * Logs one message. `ownRequests` holds requests sent in `direction`; `peerRequests` holds the
   * requests a response in `direction` may answer.
   */
  function record(
    direction: Direction,
    data: string | ArrayBuffer,
    ownRequests: Map<string, string>,
    peerRequests: Map<string, string>,
  ): void {
    const text = typeof data === "string" ? data : new TextDecoder().decode(data);
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(text);
    } catch {
      log.push({ direction, kind: "unparsable" });
      return;
    }
    const id = message.id as string | number | undefined;
    const method = typeof message.method === "string" ? message.method : undefined;
    if (method !== undefined) {
      const entry: LoggedMessage = {
        direction,
        kind: id === undefined ? "notification" : "request",
        method,
      };
      if (id !== undefined) {
        entry.id = id;
        ownRequests.set(JSON.stringify(id), method);
      }
      if (keepPayloads) entry.payload = message.params;
      log.push(entry);
      return;
    }
    const answered = id === undefined ? undefined : peerRequests.get(JSON.stringify(id));
    if ("error" in message) {
      const error = message.error as { code: number; message: string };
      log.push({ direction, kind: "error", method: answered, id, error });
    } else {
      const entry: LoggedMessage = { direction, kind: "response", method: answered, id };
      if (keepPayloads) entry.payload = message.result;
      log.push(entry);
    }
  }

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= shutdown();
    return closing;
  }
  async function shutdown(): Promise<void> {
    for (const socket of sockets) socket.close();
    sockets.clear();
    await server.shutdown();
  }

  return {
    url: `ws://127.0.0.1:${server.addr.port}`,
    log,
    get connections(): number {
      return connections;
    },
    reset(): void {
      log.length = 0;
      connections = 0;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
