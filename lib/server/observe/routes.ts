/**
 * The operator's HTTP routes beside the protocol's WebSocket: `GET /healthz`
 * (liveness, never authenticated), `GET /readyz` (the reference's
 * readiness probe) and `GET /metrics` (Prometheus text, behind the same
 * authentication as the WebSocket when it is on).
 *
 * @module
 */

import type { AuthResult } from "../listen/auth.ts";
import { audit } from "./audit.ts";
import { metricsText, type ServerState } from "./server_metrics.ts";

/** What the routes need from their server. */
export interface OperatorRoutesOptions {
  /** The server's live state, for the gauges. */
  state: ServerState;
  /** The WebSocket's authentication, when it is on. */
  authorize?: (request: Request) => Promise<AuthResult>;
}

/** Answers an operator route, or `undefined` for a request that is not one. */
export type OperatorRoutes = (
  request: Request,
  remoteAddress: string,
) => Promise<Response | undefined>;

/**
 * Checks a request against the server's authentication; a refusal is
 * audited (`auth.refused`, with its reason, never the credential).
 *
 * @param authorize The server's authentication (`undefined`: it is off).
 * @param request The request.
 * @param remoteAddress The peer, for the audit event.
 * @returns The authentication's result.
 */
export async function authorizeRequest(
  authorize: ((request: Request) => Promise<AuthResult>) | undefined,
  request: Request,
  remoteAddress: string,
): Promise<AuthResult> {
  if (!authorize) return { ok: true };
  const result = await authorize(request);
  if (!result.ok) {
    audit("auth.refused", {
      remoteAddress,
      path: new URL(request.url).pathname,
      reason: await result.response.clone().text(),
    });
  }
  return result;
}

/**
 * Builds the operator routes of a server.
 *
 * @example Liveness
 * ```ts
 * import { operatorRoutes } from "./routes.ts";
 * const routes = operatorRoutes({
 *   state: { processesRunning: () => 0, connections: () => 0, sessions: () => 0 },
 * });
 * const answer = await routes(new Request("http://127.0.0.1/healthz"), "127.0.0.1:1");
 * console.log(answer?.status, await answer?.text()); // 200 "ok\n"
 * ```
 *
 * @param options The server's state and authentication.
 * @returns The routes.
 */
export function operatorRoutes(options: OperatorRoutesOptions): OperatorRoutes {
  return async (request, remoteAddress) => {
    if (request.method !== "GET") return undefined;
    const path = new URL(request.url).pathname;
    if (path === "/healthz") {
      return new Response("ok\n", { headers: { "content-type": "text/plain; charset=utf-8" } });
    }
    if (path === "/readyz") return new Response(null);
    if (path !== "/metrics") return undefined;
    const auth = await authorizeRequest(options.authorize, request, remoteAddress);
    if (!auth.ok) return auth.response;
    return new Response(metricsText(options.state), {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
    });
  };
}
