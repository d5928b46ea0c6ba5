/**
 * The web console's HTTP routes, served beside the protocol's WebSocket:
 *
 * - `GET /` from a browser (it accepts `text/html` and asks for no
 *   upgrade): the console, or its login form when authentication is on and
 *   the request carries no live login. Other `GET /` requests keep the
 *   protocol's answers. `GET /console/login` is the login form.
 * - `GET /console/app.js`, `app.css`, `xterm.js`, `xterm.css`: the assets,
 *   embedded in the server.
 * - `POST /console/login` with the token in the form's `token` field
 *   (`application/x-www-form-urlencoded`, what the login form posts with or
 *   without its script) or in `Authorization: Bearer <token>`: answered with
 *   the login cookie and the console page carrying the login's key, in place
 *   (no redirect), or 401 and the form saying the token was refused. The
 *   token is the WebSocket's credential (the login may terminate processes)
 *   or the console's own (`--console-token-file`: it may watch, and terminate
 *   only with `--console-can-terminate`). `POST /console/logout` ends it.
 * - `GET /console/feed`: the console's WebSocket (see `console_feed.ts`):
 *   with authentication on, the login's cookie and its key (see
 *   `console_access.ts`).
 *
 * Every console route requires the same origin and, with authentication
 * on, a login; anything else is 403 or 401. Every answer carries the
 * {@linkcode SECURITY_HEADERS}, `Cache-Control: no-store` and `nosniff`
 * among them, refusals included.
 *
 * @module
 */

import type { Transport } from "../../rpc/transport.ts";
import type { SessionRegistry } from "../session/registry.ts";
import {
  CONSOLE_SUBPROTOCOL,
  ConsoleLogins,
  consoleSameOrigin,
  presentedKey,
} from "./console_access.ts";
import { type ConsoleFeed, serveConsoleFeed } from "./console_feed.ts";
import { APP_CSS, APP_JS, consoleHtml, loginHtml } from "./console_page.ts";
import { audit } from "./audit.ts";
import { type Authorize, withHeaders } from "./routes.ts";

/**
 * What the console routes need from their server. The WebSocket-specific parts (the upgrade
 * check, the refusal) are the listener's own, handed in by it.
 */
export interface ConsoleRoutesOptions {
  /** The server's sessions. */
  sessions: SessionRegistry;
  /** The WebSocket's authentication, when it is on: its logins may terminate processes. */
  authorize?: Authorize;
  /** The console's own credential (`--console-token-file`), when there is one. */
  consoleAuthorize?: Authorize;
  /** Whether the logins of {@linkcode consoleAuthorize} may terminate processes. */
  consoleCanTerminate?: boolean;
  /** The server's port: the cookie is named after it. */
  port: number;
  /** The refusal of a request that cannot be upgraded to a WebSocket, `undefined` when it can. */
  upgradeRefusal: (headers: Headers) => Response | undefined;
  /** The listener's refusal of an unauthenticated request (HTTP 401 with the reason). */
  unauthorized: (reason: string) => Response;
  /** Whether the server speaks TLS. */
  tls: boolean;
  /** Origins admitted besides the server's own (`--allow-origin`). */
  allowedOrigins: readonly string[];
}

/** A console route's answer: a response, or an upgrade to the console feed. */
export type ConsoleAnswer =
  | { response: Response }
  | { upgrade: true; protocol?: string; attach(transport: Transport): ConsoleFeed };

/**
 * Headers of every console response: no framing, no sniffing, no caching, only this server's
 * scripts.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  // Not `no-referrer`: under it a browser sends `Origin: null` with the login form's post, which
  // the same-origin rule refuses. `same-origin` still sends no referrer to any other origin.
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
};

function respond(body: string | null, contentType: string, init: ResponseInit = {}): Response {
  const headers = new Headers(SECURITY_HEADERS);
  headers.set("content-type", contentType);
  for (const [name, value] of new Headers(init.headers)) headers.append(name, value);
  return new Response(body, { status: init.status ?? 200, headers });
}

const ASSETS: Record<string, { type: string; text: () => Promise<string> }> = {
  "/console/app.js": {
    type: "text/javascript; charset=utf-8",
    text: () => Promise.resolve(APP_JS),
  },
  "/console/app.css": { type: "text/css; charset=utf-8", text: () => Promise.resolve(APP_CSS) },
  // The terminal emulator (≈ 290 kB) is loaded on its first request only.
  "/console/xterm.js": {
    type: "text/javascript; charset=utf-8",
    text: async () => (await import("./xterm_assets.ts")).XTERM_JS,
  },
  "/console/xterm.css": {
    type: "text/css; charset=utf-8",
    text: async () => (await import("./xterm_assets.ts")).XTERM_CSS,
  },
};

/** Whether a request is a browser's visit to `/` (not a protocol client's). */
function isPageVisit(request: Request, path: string): boolean {
  return path === "/" && request.method === "GET" && !request.headers.has("upgrade") &&
    (request.headers.get("accept") ?? "").includes("text/html");
}

/** What a login is: whether it may terminate, and when its credential expires. */
type LoginOutcome = { ok: true; canTerminate: boolean; expiresAt?: number } | { ok: false };

/** The token a login request presents: `Authorization`, or the form's `token` field. */
async function loginToken(request: Request): Promise<string | undefined> {
  const header = request.headers.get("authorization");
  if (header !== null) return header;
  const type = request.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/x-www-form-urlencoded")) return undefined;
  const token = new URLSearchParams(await request.text()).get("token");
  return token === null ? undefined : `Bearer ${token}`;
}

/**
 * Builds the console routes of a server.
 *
 * @param options The server's sessions, credentials, port and origin rule.
 * @returns A function answering a console request, or `undefined` for any other request.
 */
export function consoleRoutes(
  options: ConsoleRoutesOptions,
): (request: Request, remoteAddress: string) => Promise<ConsoleAnswer | undefined> {
  const logins = new ConsoleLogins(options.port, options.tls);
  const credentials = [
    { authorize: options.authorize, canTerminate: true },
    { authorize: options.consoleAuthorize, canTerminate: options.consoleCanTerminate === true },
  ].filter((c): c is { authorize: Authorize; canTerminate: boolean } => c.authorize !== undefined);
  const authOn = credentials.length > 0;
  const html = "text/html; charset=utf-8";

  /** Checks the token against each credential in turn; a refusal is audited once. */
  async function logIn(request: Request, remoteAddress: string): Promise<LoginOutcome> {
    const authorization = await loginToken(request);
    if (authorization !== undefined) {
      const presented = new Request(request.url, { headers: { authorization } });
      for (const { authorize, canTerminate } of credentials) {
        const result = await authorize(presented);
        if (result.ok) return { ok: true, canTerminate, expiresAt: result.expiresAt };
      }
    }
    const reason = authorization === undefined ? "no token" : "the token was refused";
    audit("auth.refused", { remoteAddress, path: "/console/login", reason });
    return { ok: false };
  }

  async function answer(request: Request, remoteAddress: string): Promise<ConsoleAnswer> {
    const path = new URL(request.url).pathname;
    if (!consoleSameOrigin(request, options)) {
      return { response: respond(null, html, { status: 403 }) };
    }
    const login = authOn ? logins.login(request) : undefined;
    if (path === "/") {
      return {
        response: respond(
          !authOn || login ? consoleHtml({ login: authOn }) : loginHtml(),
          html,
        ),
      };
    }
    const asset = ASSETS[path];
    if (asset && request.method === "GET") {
      return { response: respond(await asset.text(), asset.type) };
    }
    if (path === "/console/login" && request.method === "GET") {
      return { response: respond(authOn ? loginHtml() : consoleHtml({ login: false }), html) };
    }
    if (path === "/console/login" && request.method === "POST") {
      if (!authOn) return { response: respond(consoleHtml({ login: false }), html) };
      const outcome = await logIn(request, remoteAddress);
      if (!outcome.ok) return { response: respond(loginHtml(true), html, { status: 401 }) };
      const { cookie, key } = logins.start(outcome.canTerminate, outcome.expiresAt);
      return {
        response: respond(consoleHtml({ login: true, key }), html, {
          headers: { "set-cookie": cookie },
        }),
      };
    }
    if (path === "/console/logout" && request.method === "POST") {
      return { response: respond(null, html, { headers: { "set-cookie": logins.end(request) } }) };
    }
    if (path === "/console/feed" && request.method === "GET") {
      const refusal = options.upgradeRefusal(request.headers);
      if (refusal) return { response: await withHeaders(refusal, SECURITY_HEADERS) };
      const keyed = authOn ? logins.keyed(request) : undefined;
      if (authOn && keyed === undefined) {
        const reason = login === undefined
          ? "log in to the console first"
          : "the console key is missing or wrong: open the console from its login";
        audit("auth.refused", { remoteAddress, path, reason });
        return { response: await withHeaders(options.unauthorized(reason), SECURITY_HEADERS) };
      }
      const offered = presentedKey(request) !== undefined ||
        (request.headers.get("sec-websocket-protocol") ?? "").split(",").some((p) =>
          p.trim() === CONSOLE_SUBPROTOCOL
        );
      const canTerminate = keyed?.canTerminate ?? true;
      return {
        upgrade: true,
        protocol: offered ? CONSOLE_SUBPROTOCOL : undefined,
        attach: (transport) =>
          serveConsoleFeed(transport, options.sessions, remoteAddress, canTerminate),
      };
    }
    return { response: respond(null, html, { status: 404 }) };
  }

  return async (request, remoteAddress) => {
    const path = new URL(request.url).pathname;
    if (!isPageVisit(request, path) && !path.startsWith("/console/")) return undefined;
    return await answer(request, remoteAddress);
  };
}
