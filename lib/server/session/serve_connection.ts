/**
 * Serving one connection: the handshake and its gating (docs/protocol.md section 4), routing
 * through the method table, concurrency lanes (docs/protocol.md section 12) and the fatal
 * conditions that end a connection (docs/protocol.md section 4.5).
 *
 * @module
 */

import { ErrorCode, invalidRequest, RpcError } from "../../protocol/errors.ts";
import { type ClientRequestName, lookupMethod, type ParamsOf } from "../../protocol/methods.ts";
import { parseParams, SchemaError } from "../../protocol/schema.ts";
import { Connection, type Schedule } from "../../rpc/connection.ts";
import { Semaphore } from "../../rpc/semaphore.ts";
import type { OutboundText, Transport } from "../../rpc/transport.ts";
import { StreamedJson } from "../../protocol/streamed_json.ts";
import { logEvent } from "../host/log.ts";
import { environmentInfo } from "./environment.ts";
import { type HandlerContext, HANDLERS } from "./handlers.ts";
import { ConnectionState } from "./connection_state.ts";
import { keepLastClosed } from "./last_closed.ts";
import { answerRequest } from "./request_events.ts";
import type { Session, SessionRegistry } from "./registry.ts";

/** Options for {@linkcode serveConnection}. */
export interface ServeConnectionOptions {
  /** The registry shared by all connections of this server. */
  sessions: SessionRegistry;
  /**
   * Requests run at once per lane after `initialized` (1 = strictly in order).
   *
   * @default {1}
   */
  concurrentRequests?: number;
  /**
   * What happens to the session when the connection ends: `detach` keeps it
   * for the TTL (WebSocket), `end` kills its processes (stdio).
   *
   * @default {"detach"}
   */
  onClose?: "detach" | "end";
  /**
   * Inbound text (UTF-16 units) that may wait unanswered before the
   * transport stops being read (see `ConnectionOptions.maxHeldUnits`).
   *
   * @default {Infinity}
   */
  maxHeldUnits?: number;
}

/** A served connection. */
export interface ServedConnection {
  /** The underlying JSON-RPC connection. */
  readonly connection: Connection;
  /** The id of the session this connection created or resumed, once it has one. */
  readonly sessionId: string | undefined;
  /** Resolves when the connection has ended and its session was detached or ended. */
  readonly finished: Promise<void>;
}

/**
 * Serves the exec-server protocol on one transport.
 *
 * @param transport The channel to the client.
 * @param options Session registry and concurrency.
 */
export function serveConnection(
  transport: Transport,
  options: ServeConnectionOptions,
): ServedConnection {
  const registry = options.sessions;
  const concurrency = options.concurrentRequests ?? 1;
  // Requests run inline (in order) unless more than one may run at once.
  const lanes = concurrency > 1
    ? { control: new Semaphore(concurrency), ordinary: new Semaphore(concurrency) }
    : undefined;
  const owner = {};
  let session: Session | undefined;
  let initializedNotified = false;

  const sink = (text: OutboundText) => connection.sendRaw(text);
  const state = new ConnectionState((method, params) => connection.notify(method, params));

  const context: HandlerContext = {
    get session(): Session {
      return session!;
    },
    initialize(params: ParamsOf<"initialize">) {
      if (session) throw invalidRequest("initialize may only be sent once per connection");
      session = params.resumeSessionId === undefined
        ? registry.create(owner, sink, params.clientName)
        : registry.resume(params.resumeSessionId, owner, sink, params.clientName);
      return { sessionId: session.id, environmentInfo: environmentInfo() };
    },
    state,
  };

  function gate(family: string | undefined): void {
    if (family === undefined) return;
    if (!session) {
      throw invalidRequest(`client must call initialize before using ${family} methods`);
    }
    if (!session.isAttachedTo(owner)) {
      throw invalidRequest("session has been resumed by another connection");
    }
    if (!initializedNotified) {
      throw invalidRequest(`client must send initialized before using ${family} methods`);
    }
  }

  /** Answers a request: its result, or a promise of it for an asynchronous handler; throws its error. */
  function handleRequest(method: string, rawParams: unknown): unknown {
    const spec = lookupMethod(method);
    if (!spec || spec.kind !== "request" || spec.direction !== "clientToServer") {
      throw new RpcError(
        ErrorCode.MethodNotFound,
        `exec-server stub does not implement \`${method}\` yet`,
      );
    }
    let params: unknown;
    try {
      params = parseParams(spec.params, rawParams);
    } catch (err) {
      if (err instanceof SchemaError) {
        throw new RpcError(ErrorCode.InvalidParams, err.message, {
          data: err.path ? { field: err.path } : undefined,
        });
      }
      throw err;
    }
    gate(spec.family);
    const handler = HANDLERS[method as ClientRequestName] as (
      params: unknown,
      context: HandlerContext,
    ) => unknown;
    return handler(params, context);
  }

  /**
   * The reply to send for a result: the member the method table marks streamed, when it is a
   * streamed string, made while the reply is sent (audits have seen the result as it is).
   */
  function replyOf(method: string, result: unknown): unknown {
    const spec = lookupMethod(method);
    const field = spec?.kind === "request" ? spec.streamed : undefined;
    if (field === undefined) return result;
    const streamed = (value: unknown) =>
      value !== null && typeof value === "object" ? StreamedJson.of(value, field) ?? value : value;
    return result instanceof Promise ? result.then(streamed) : streamed(result);
  }

  function fatal(): void {
    connection.close();
  }

  const connection: Connection = new Connection(transport, {
    maxHeldUnits: options.maxHeldUnits,
    handlers: {
      request: (method, params) =>
        replyOf(
          method,
          answerRequest(method, params, () => session?.id, () => handleRequest(method, params)),
        ),
      notification(method) {
        if (method === "initialized" && session) initializedNotified = true;
        else fatal();
      },
      unmatched: fatal,
      // Not a protocol error (a bug, or a package that could not be loaded): its reply says only
      // `internal error`, so the cause goes to the log.
      failed(method, err) {
        logEvent("error", "request.failed", {
          method,
          error: err instanceof Error ? err.message : String(err),
        });
      },
      schedule(method): Schedule {
        if (lanes === undefined || !initializedNotified) return "inline";
        const spec = lookupMethod(method);
        return spec?.kind === "request" && spec.lane === "control" ? lanes.control : lanes.ordinary;
      },
    },
  });

  const finished = connection.closed.then(() => {
    state.closeAll();
    // Its objects keep the maps the request path's optimized code embeds (see last_closed.ts).
    keepLastClosed(connection);
    if (!session || !session.isAttachedTo(owner)) return;
    if (options.onClose === "end") registry.end(session);
    else registry.detach(session);
  });
  return {
    connection,
    finished,
    get sessionId() {
      return session?.id;
    },
  };
}
