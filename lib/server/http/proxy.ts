/**
 * Proxies of `http/request`, chosen from the server's environment the way the
 * reference's HTTP client (reqwest) chooses them: `HTTP_PROXY` for `http:`
 * URLs (ignored when `REQUEST_METHOD` is set, as under CGI), `HTTPS_PROXY`
 * for `https:` URLs, `ALL_PROXY` for both; the upper-case name wins over the
 * lower-case one and an empty value counts as unset. `NO_PROXY` lists hosts
 * reached directly: IP addresses and CIDR ranges match IP hosts, names match
 * the host and its subdomains (a leading `.` is optional, no `*`, no ports),
 * case-insensitively. Loopback hosts are not exempt.
 *
 * @module
 */

import { percentDecode } from "./url.ts";

/** How one request reaches its origin through a proxy. */
export interface ProxyRoute {
  /** The proxy's URL (`http:` or `https:`), without credentials; `null` for an unsupported scheme. */
  url: URL | null;
  /** `Basic ...` from the proxy URL's userinfo, sent as `proxy-authorization`; `null` without. */
  authorization: string | null;
}

/** The proxy settings read from one environment. */
export interface ProxySettings {
  /** The proxy for `http:` URLs. */
  http: ProxyRoute | null;
  /** The proxy for `https:` URLs. */
  https: ProxyRoute | null;
  /** The `NO_PROXY` entries, trimmed and non-empty. */
  noProxy: string[];
}

/**
 * Reads the proxy settings from an environment.
 *
 * @param env Looks up one variable; `undefined` when unset.
 *
 * @example
 * ```ts
 * import { proxySettings } from "./proxy.ts";
 * const env: Record<string, string> = { HTTP_PROXY: "127.0.0.1:3128", NO_PROXY: "localhost" };
 * const settings = proxySettings((name) => env[name]);
 * console.log(settings.http?.url?.href, settings.noProxy); // "http://127.0.0.1:3128/" ["localhost"]
 * ```
 */
export function proxySettings(env: (name: string) => string | undefined): ProxySettings {
  const first = (...names: string[]): string | undefined =>
    names.map((name) => env(name)).find((value) => value !== undefined && value !== "");
  const all = first("ALL_PROXY", "all_proxy");
  const cgi = env("REQUEST_METHOD") !== undefined;
  const http = (cgi ? undefined : first("HTTP_PROXY", "http_proxy")) ?? all;
  const https = first("HTTPS_PROXY", "https_proxy") ?? all;
  const noProxy = (first("NO_PROXY", "no_proxy") ?? "").split(",").map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return { http: parseRoute(http), https: parseRoute(https), noProxy };
}

/**
 * The proxy settings of the server's own environment (variables it may not read count as unset).
 */
export function environmentProxySettings(): ProxySettings {
  return proxySettings((name) => {
    try {
      if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
        return undefined;
      }
      return Deno.env.get(name);
    } catch {
      return undefined;
    }
  });
}

/**
 * The proxy a request to `url` goes through, or `null` to connect directly.
 *
 * @param settings The proxy settings.
 * @param url An `http:` or `https:` URL.
 */
export function proxyFor(settings: ProxySettings, url: URL): ProxyRoute | null {
  const route = url.protocol === "https:" ? settings.https : settings.http;
  if (route === null || bypassed(settings.noProxy, url.hostname)) return null;
  return route;
}

function parseRoute(value: string | undefined): ProxyRoute | null {
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(/^[A-Za-z][A-Za-z0-9+.\-]*:\/\//.test(value) ? value : `http://${value}`);
  } catch {
    return { url: null, authorization: null };
  }
  let authorization: string | null = null;
  if (url.username !== "" || url.password !== "") {
    const credentials = `${percentDecode(url.username)}:${percentDecode(url.password)}`;
    authorization = `Basic ${new TextEncoder().encode(credentials).toBase64()}`;
    url.username = "";
    url.password = "";
  }
  const supported = url.protocol === "http:" || url.protocol === "https:";
  return { url: supported ? url : null, authorization };
}

/** Whether `NO_PROXY` exempts `hostname` (`URL.hostname`: IPv6 in brackets). */
function bypassed(entries: readonly string[], hostname: string): boolean {
  const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  const ip = ipBytes(host);
  if (ip !== null) return entries.some((entry) => cidrContains(entry, ip));
  const name = host.toLowerCase();
  return entries.some((entry) => {
    const domain = entry.toLowerCase();
    if (ipBytes(domain) !== null || domain.includes("/")) return false;
    const bare = domain.startsWith(".") ? domain.slice(1) : domain;
    return name === bare || name.endsWith(`.${bare}`);
  });
}

/** Whether `entry` (an address or `address/bits`) contains the address `ip`. */
function cidrContains(entry: string, ip: Uint8Array): boolean {
  const slash = entry.indexOf("/");
  const network = ipBytes(slash < 0 ? entry : entry.slice(0, slash));
  if (network === null || network.length !== ip.length) return false;
  const bits = slash < 0 ? ip.length * 8 : Number(entry.slice(slash + 1));
  if (!/^\d+$/.test(slash < 0 ? "0" : entry.slice(slash + 1)) || bits > ip.length * 8) return false;
  for (let bit = 0; bit < bits; bit++) {
    const mask = 0x80 >> (bit % 8);
    if ((network[bit >> 3]! & mask) !== (ip[bit >> 3]! & mask)) return false;
  }
  return true;
}

/** The bytes of a dotted-quad IPv4 or an IPv6 address (no brackets), or `null`. */
function ipBytes(text: string): Uint8Array | null {
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(text)) {
    const parts = text.split(".").map(Number);
    return parts.every((part) => part <= 255) ? Uint8Array.from(parts) : null;
  }
  if (!text.includes(":") || !URL.canParse(`http://[${text}]/`)) return null;
  const normal = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const [head, tail] = normal.includes("::") ? normal.split("::") : [normal, null];
  // The URL parser serializes IPv6 as hex groups only (no embedded dotted quad).
  const groups = (part: string | null | undefined): number[] =>
    part ? part.split(":").map((word) => parseInt(word, 16)) : [];
  const front = groups(head);
  const back = groups(tail);
  const words = [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
  return Uint8Array.from(words.flatMap((word) => [word >> 8, word & 0xff]));
}
