/**
 * The web console's HTTP routes, served beside the protocol's WebSocket:
 *
 * - `GET /` from a browser (it accepts `text/html` and asks for no
 *   upgrade): the console, or its login form when authentication is on and
 *   the request carries no live login. Other `GET /` requests keep the
 *   protocol's answers.
 * - `GET /console/app.js`, `app.css`, `xterm.js`, `xterm.css`: the assets,
 *   embedded in the server.
 * - `POST /console/login` with `Authorization: Bearer <token>` (the form
 *   sends it from the password field, so the token is never in a URL):
 *   checked like a WebSocket upgrade; answered with the login cookie.
 *   `POST /console/logout` ends it.
 * - `GET /console/feed`: the console's WebSocket (see `console_feed.ts`).
 *
 * Every console route requires the same origin and, with authentication
 * on, a login (see `console_access.ts`); anything else is 403 or 401.
 *
 * @module
 */

import type { Transport } from "../../rpc/transport.ts";
import type { SessionRegistry } from "../session/registry.ts";
import { ConsoleLogins, consoleSameOrigin } from "./console_access.ts";
import { type ConsoleFeed, serveConsoleFeed } from "./console_feed.ts";
import { APP_CSS, APP_JS, consoleHtml, LOGIN_HTML } from "./console_page.ts";
import { audit } from "./audit.ts";
import { type Authorize, authorizeRequest } from "./routes.ts";

/**
 * What the console routes need from their server. The WebSocket-specific parts (the upgrade
 * check, the refusal) are the listener's own, handed in by it.
 */
export interface ConsoleRoutesOptions {
  /** The server's sessions. */
  sessions: SessionRegistry;
  /** The WebSocket's authentication, when it is on. */
  authorize?: Authorize;
  /** Why a request cannot be upgraded to a WebSocket, or `undefined` when it can. */
  upgradeProblem: (headers: Headers) => string | undefined;
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
  | { upgrade: true; attach(transport: Transport): ConsoleFeed };

/** Headers of every console response: no framing, no sniffing, only this server's scripts. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
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

/**
 * Builds the console routes of a server.
 *
 * @param options The server's sessions, authentication and origin rule.
 * @returns A function answering a console request, or `undefined` for any other request.
 */
export function consoleRoutes(
  options: ConsoleRoutesOptions,
): (request: Request, remoteAddress: string) => Promise<ConsoleAnswer | undefined> {
  const logins = new ConsoleLogins(options.tls);
  const authOn = options.authorize !== undefined;
  return async (request, remoteAddress) => {
    const path = new URL(request.url).pathname;
    if (!isPageVisit(request, path) && !path.startsWith("/console/")) return undefined;
    if (!consoleSameOrigin(request, options)) {
      return { response: new Response(null, { status: 403, headers: { "content-length": "0" } }) };
    }
    const loggedIn = !authOn || logins.has(request);
    const html = "text/html; charset=utf-8";
    if (path === "/") {
      return { response: respond(loggedIn ? consoleHtml(authOn) : LOGIN_HTML, html) };
    }
    const asset = ASSETS[path];
    if (asset && request.method === "GET") {
      return { response: respond(await asset.text(), asset.type) };
    }
    if (path === "/console/login" && request.method === "POST") {
      const auth = await authorizeRequest(options.authorize, request, remoteAddress);
      if (!auth.ok) return { response: auth.response };
      if (!authOn) return { response: respond(null, html) };
      const cookie = logins.start(auth.expiresAt);
      return { response: respond(null, html, { headers: { "set-cookie": cookie } }) };
    }
    if (path === "/console/logout" && request.method === "POST") {
      return { response: respond(null, html, { headers: { "set-cookie": logins.end(request) } }) };
    }
    if (path === "/console/feed" && request.method === "GET") {
      const problem = options.upgradeProblem(request.headers);
      if (problem) {
        return { response: respond(problem, "text/plain; charset=utf-8", { status: 400 }) };
      }
      if (!loggedIn) {
        const reason = "log in to the console first";
        audit("auth.refused", { remoteAddress, path, reason });
        return { response: options.unauthorized(reason) };
      }
      return {
        upgrade: true,
        attach: (transport) => serveConsoleFeed(transport, options.sessions, remoteAddress),
      };
    }
    return { response: respond(null, html, { status: 404 }) };
  };
}
