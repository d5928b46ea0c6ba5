/**
 * Who may use the web console. Two rules, both checked on every console
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
 *   cookie holds a random id, never the token; the id lives in memory for
 *   {@linkcode CONSOLE_LOGIN_TTL_MS} and at most
 *   {@linkcode MAX_CONSOLE_LOGINS} are kept (the oldest go first).
 *
 * @module
 */

/** The console's cookie. */
export const CONSOLE_COOKIE = "exec_server_console";
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

/** The console's logins: random ids handed out as cookies. */
export class ConsoleLogins {
  readonly #expiry = new Map<string, number>();
  readonly #secure: boolean;

  /**
   * Creates an empty set of logins.
   *
   * @param secure Whether cookies are marked `Secure` (the server speaks TLS).
   */
  constructor(secure: boolean) {
    this.#secure = secure;
  }

  /**
   * Starts a login and returns its `Set-Cookie` value. It lasts
   * {@linkcode CONSOLE_LOGIN_TTL_MS}, or until `until` when that is sooner.
   *
   * @example
   * ```ts
   * import { ConsoleLogins } from "./console_access.ts";
   * const logins = new ConsoleLogins(false);
   * const cookie = logins.start();
   * const request = new Request("http://x/", { headers: { cookie: cookie.split(";")[0]! } });
   * console.log(logins.has(request)); // true
   * ```
   *
   * @param until When the credential of the login expires (ms since the epoch), if it does.
   */
  start(until?: number): string {
    const now = Date.now();
    for (const [id, expiry] of this.#expiry) if (expiry <= now) this.#expiry.delete(id);
    while (this.#expiry.size >= MAX_CONSOLE_LOGINS) {
      this.#expiry.delete(this.#expiry.keys().next().value!);
    }
    const id = crypto.getRandomValues(new Uint8Array(32)).toHex();
    const expiry = Math.min(now + CONSOLE_LOGIN_TTL_MS, until ?? Infinity);
    this.#expiry.set(id, expiry);
    return this.#cookie(id, Math.max(0, Math.floor((expiry - now) / 1000)));
  }

  /**
   * Whether the request carries a live login.
   *
   * @param request The request.
   */
  has(request: Request): boolean {
    const id = cookieValue(request.headers, CONSOLE_COOKIE);
    const expiry = id === undefined ? undefined : this.#expiry.get(id);
    return expiry !== undefined && expiry > Date.now();
  }

  /**
   * Ends the request's login and returns the `Set-Cookie` value that clears it.
   *
   * @param request The request.
   */
  end(request: Request): string {
    const id = cookieValue(request.headers, CONSOLE_COOKIE);
    if (id !== undefined) this.#expiry.delete(id);
    return this.#cookie("", 0);
  }

  #cookie(value: string, maxAgeSeconds: number): string {
    return `${CONSOLE_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${
      this.#secure ? "; Secure" : ""
    }`;
  }
}
