/**
 * The operator's HTTP routes beside the protocol's WebSocket: `GET /healthz`
 * (liveness, never authenticated), `GET /readyz` (the reference's
 * readiness probe) and `GET /metrics` (Prometheus text, behind the same
 * authentication as the WebSocket when it is on, never cached: {@linkcode PRIVATE_HEADERS}).
 *
 * @module
 */

import { audit } from "./audit.ts";
import { metricsText, type ServerState } from "./server_metrics.ts";

/**
 * What the operator's routes read of the listener's authentication (its `AuthResult` is one):
 * accepted, with when the credential expires, or refused with the response to send.
 */
export type AuthOutcome = { ok: true; expiresAt?: number } | { ok: false; response: Response };

/** The listener's authentication of a request, handed to the routes by the listener. */
export type Authorize<R extends AuthOutcome = AuthOutcome> = (request: Request) => Promise<R>;

/** What the routes need from their server. */
export interface OperatorRoutesOptions {
  /** The server's live state, for the gauges. */
  state: ServerState;
  /** The WebSocket's authentication, when it is on. */
  authorize?: Authorize;
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
 * @returns The authentication's result (with authentication off, accepted and never expiring).
 */
export async function authorizeRequest<R extends AuthOutcome>(
  authorize: Authorize<R> | undefined,
  request: Request,
  remoteAddress: string,
): Promise<R | { ok: true; expiresAt?: undefined }> {
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
 * A copy of `response` with `headers` set on it (the listener's refusals are its own responses).
 *
 * @example
 * ```ts
 * import { withHeaders } from "./routes.ts";
 * const refused = new Response("no", { status: 401 });
 * const marked = await withHeaders(refused, { "cache-control": "no-store" });
 * console.log(marked.status, marked.headers.get("cache-control"), await marked.text()); // 401 "no-store" "no"
 * ```
 *
 * @param response The response.
 * @param headers The headers to set.
 */
export async function withHeaders(
  response: Response,
  headers: Readonly<Record<string, string>>,
): Promise<Response> {
  const merged = new Headers(response.headers);
  for (const [name, value] of Object.entries(headers)) merged.set(name, value);
  return new Response(await response.arrayBuffer(), { status: response.status, headers: merged });
}

/** Headers of `/metrics` answers, refusals included: never cached, never sniffed as another type. */
export const PRIVATE_HEADERS: Readonly<Record<string, string>> = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
};

/**
 * `405 Method Not Allowed` for a path served only to `GET` (and `HEAD`, which is answered as
 * `GET`), with its `Allow` field.
 *
 * @example
 * ```ts
 * import { methodNotAllowed } from "./routes.ts";
 * const answer = methodNotAllowed("Request method must be `GET`");
 * console.log(answer.status, answer.headers.get("allow")); // 405 "GET, HEAD"
 * ```
 *
 * @param text A plain-text body, or none.
 */
export function methodNotAllowed(text: string | null = null): Response {
  const headers: Record<string, string> = { allow: "GET, HEAD" };
  if (text !== null) headers["content-type"] = "text/plain; charset=utf-8";
  return new Response(text, { status: 405, headers });
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
  // The one list of the operator's paths: each is served to GET (and HEAD), 405 otherwise.
  const routes: Record<
    string,
    (request: Request, remoteAddress: string) => Response | Promise<Response>
  > = {
    "/healthz": () =>
      new Response("ok\n", { headers: { "content-type": "text/plain; charset=utf-8" } }),
    "/readyz": () => new Response(null),
    "/metrics": async (request, remoteAddress) => {
      const auth = await authorizeRequest(options.authorize, request, remoteAddress);
      if (!auth.ok) return await withHeaders(auth.response, PRIVATE_HEADERS);
      return new Response(metricsText(options.state), {
        headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", ...PRIVATE_HEADERS },
      });
    },
  };
  return async (request, remoteAddress) => {
    const path = new URL(request.url).pathname;
    if (!Object.hasOwn(routes, path)) return undefined;
    const route = routes[path]!;
    return request.method === "GET" ? await route(request, remoteAddress) : methodNotAllowed();
  };
}
