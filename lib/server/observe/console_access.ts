/**
 * Who may use the web console. Three rules, all checked on every console
 * request:
 *
 * - **Same origin.** A request carrying an `Origin` header must come from
 *   the page the server itself served: `Origin` equals `http(s)://` + the
 *   request's `Host`, and that host is an IP address or `localhost` (a DNS
 *   name could be rebound to this server by a foreign page), unless the
 *   origin is one of `--allow-origin`. A request without `Origin` is not
 *   from a browser's cross-origin script.
 * - **Logged in**, when authentication is on: the HttpOnly, SameSite=Strict
 *   cookie set by a login that presented a token the server accepts. The
 *   cookie holds a random id, never the token, and is named after the
 *   server's port (`exec_server_console_<port>`; `__Host-` first under TLS):
 *   cookies are not port-scoped, so a browser sends it to every web server
 *   of the host, and two servers on one host each keep their own. The id
 *   lives in memory for {@linkcode CONSOLE_LOGIN_TTL_MS} and at most
 *   {@linkcode MAX_CONSOLE_LOGINS} are kept (the oldest go first).
 * - **The login's key**, for the feed: a second random value, in the page the
 *   login answered with and nowhere else (not in the cookie, not in a page
 *   visited with the cookie). The page presents it as a WebSocket subprotocol
 *   ({@linkcode CONSOLE_SUBPROTOCOL}`.key.<key>`), so a cookie replayed by
 *   another web server of the host that received it opens nothing.
 *
 * A login also says whether it may terminate processes (see
 * `console_routes.ts`).
 *
 * @module
 */

/** The console's cookie name without its port. */
export const CONSOLE_COOKIE = "exec_server_console";
/** The `<meta>` name under which a login's page carries the login's key. */
export const CONSOLE_KEY_META = "exec-server-console-key";
/** The `<meta>` name saying whether the console page needs a login's key (`required`, `none`). */
export const CONSOLE_LOGIN_META = "exec-server-console-login";
/** The subprotocol the console's feed selects; `<it>.key.<key>` presents the login's key. */
export const CONSOLE_SUBPROTOCOL = "exec-server-console";
/** How long a console login lasts, in ms (8 hours). */
export const CONSOLE_LOGIN_TTL_MS = 8 * 60 * 60 * 1000;
/** Most console logins kept at once; a new one beyond it ends the oldest. */
export const MAX_CONSOLE_LOGINS = 64;

/** The value of a cookie in a request's `Cookie` header. */
function cookieValue(headers: Headers, name: string): string | undefined {
  for (const part of (headers.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Whether a `Host` value names this server by address (no DNS name that could be rebound). */
function isAddressHost(host: string): boolean {
  let hostname: string;
  try {
    hostname = new URL(`http://${host}`).hostname;
  } catch {
    return false;
  }
  return hostname === "localhost" || hostname.startsWith("[") ||
    /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * Whether a console request is same-origin (see the module's rules).
 *
 * @example
 * ```ts
 * import { consoleSameOrigin } from "./console_access.ts";
 * const request = (headers: Record<string, string>) =>
 *   new Request("http://exec-server/console/feed", { headers });
 * const rule = { tls: false, allowedOrigins: [] };
 * const own = { host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080" };
 * console.log(consoleSameOrigin(request(own), rule)); // true
 * console.log(consoleSameOrigin(request({ ...own, origin: "https://evil.example" }), rule)); // false
 * const rebound = { host: "evil.example:8080", origin: "http://evil.example:8080" };
 * console.log(consoleSameOrigin(request(rebound), rule)); // false
 * ```
 *
 * @param request The request.
 * @param rule Whether the server speaks TLS, and the `--allow-origin` list.
 */
export function consoleSameOrigin(
  request: Request,
  rule: { tls: boolean; allowedOrigins: readonly string[] },
): boolean {
  const origin = request.headers.get("origin");
  if (origin === null) return true;
  if (rule.allowedOrigins.includes(origin)) return true;
  const host = request.headers.get("host") ?? "";
  return isAddressHost(host) && origin === `${rule.tls ? "https" : "http"}://${host}`;
}

/**
 * The cookie name of the console of the server listening on `port`.
 *
 * @example
 * ```ts
 * import { consoleCookieName } from "./console_access.ts";
 * console.log(consoleCookieName(8080, false)); // "exec_server_console_8080"
 * console.log(consoleCookieName(8443, true)); // "__Host-exec_server_console_8443"
 * ```
 *
 * @param port The server's port.
 * @param tls Whether it speaks TLS (the cookie is then `Secure`, and `__Host-` holds it to this
 * host, path `/` and a secure origin).
 */
export function consoleCookieName(port: number, tls: boolean): string {
  return `${tls ? "__Host-" : ""}${CONSOLE_COOKIE}_${port}`;
}

/** The key an upgrade request presents, when it also offers {@linkcode CONSOLE_SUBPROTOCOL}. */
export function presentedKey(request: Request): string | undefined {
  const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) =>
    p.trim()
  );
  const prefix = `${CONSOLE_SUBPROTOCOL}.key.`;
  const entry = offered.find((p) => p.startsWith(prefix));
  return entry !== undefined && offered.includes(CONSOLE_SUBPROTOCOL)
    ? entry.slice(prefix.length)
    : undefined;
}

function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** What a live login holds. */
export interface ConsoleLogin {
  /** When it ends (ms since the epoch). */
  expiry: number;
  /** The key its page holds (64 hex digits). */
  key: string;
  /** Whether it may terminate processes. */
  canTerminate: boolean;
}

/** The console's logins: random ids handed out as cookies, each with its key. */
export class ConsoleLogins {
  readonly #logins = new Map<string, ConsoleLogin>();
  readonly #secure: boolean;
  /** The cookie's name ({@linkcode consoleCookieName}). */
  readonly cookieName: string;

  /**
   * Creates an empty set of logins.
   *
   * @param port The server's port (the cookie is named after it).
   * @param secure Whether cookies are marked `Secure` and `__Host-` (the server speaks TLS).
   */
  constructor(port: number, secure: boolean) {
    this.#secure = secure;
    this.cookieName = consoleCookieName(port, secure);
  }

  /**
   * Starts a login: its `Set-Cookie` value and its key. It lasts
   * {@linkcode CONSOLE_LOGIN_TTL_MS}, or until `until` when that is sooner.
   *
   * @example
   * ```ts
   * import { ConsoleLogins } from "./console_access.ts";
   * const logins = new ConsoleLogins(8080, false);
   * const { cookie, key } = logins.start(true);
   * const request = new Request("http://x/", { headers: { cookie: cookie.split(";")[0]! } });
   * console.log(logins.login(request)?.key === key); // true
   * ```
   *
   * @param canTerminate Whether the login may terminate processes.
   * @param until When the credential of the login expires (ms since the epoch), if it does.
   */
  start(canTerminate: boolean, until?: number): { cookie: string; key: string } {
    const now = Date.now();
    for (const [id, login] of this.#logins) if (login.expiry <= now) this.#logins.delete(id);
    while (this.#logins.size >= MAX_CONSOLE_LOGINS) {
      this.#logins.delete(this.#logins.keys().next().value!);
    }
    const id = crypto.getRandomValues(new Uint8Array(32)).toHex();
    const key = crypto.getRandomValues(new Uint8Array(32)).toHex();
    const expiry = Math.min(now + CONSOLE_LOGIN_TTL_MS, until ?? Infinity);
    this.#logins.set(id, { expiry, key, canTerminate });
    return { cookie: this.#cookie(id, Math.max(0, Math.floor((expiry - now) / 1000))), key };
  }

  /**
   * The live login of the request's cookie, if any.
   *
   * @param request The request.
   */
  login(request: Request): ConsoleLogin | undefined {
    const id = cookieValue(request.headers, this.cookieName);
    const login = id === undefined ? undefined : this.#logins.get(id);
    return login !== undefined && login.expiry > Date.now() ? login : undefined;
  }

  /**
   * The live login of the request's cookie when the request also presents that login's key
   * ({@linkcode presentedKey}), compared in constant time.
   *
   * @param request The feed's upgrade request.
   */
  keyed(request: Request): ConsoleLogin | undefined {
    const login = this.login(request);
    const key = presentedKey(request);
    return login !== undefined && key !== undefined && sameText(key, login.key) ? login : undefined;
  }

  /**
   * Ends the request's login and returns the `Set-Cookie` value that clears it.
   *
   * @param request The request.
   */
  end(request: Request): string {
    const id = cookieValue(request.headers, this.cookieName);
    if (id !== undefined) this.#logins.delete(id);
    return this.#cookie("", 0);
  }

  #cookie(value: string, maxAgeSeconds: number): string {
    return `${this.cookieName}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${
      this.#secure ? "; Secure" : ""
    }`;
  }
}
