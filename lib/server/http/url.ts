/**
 * URL details of `http/request`: the reference's parse-failure wording,
 * ports, origins and how a URL is shown in messages.
 *
 * @module
 */

/**
 * Explains why `new URL()` refused `input`, with the Rust `url` crate's wording the reference reports.
 *
 * @param input The refused URL.
 *
 * @example
 * ```ts
 * import { urlErrorReason } from "./url.ts";
 * console.log(urlErrorReason("/relative")); // "relative URL without a base"
 * ```
 */
export function urlErrorReason(input: string): string {
  let start = 0;
  let end = input.length;
  while (start < end && input.charCodeAt(start) <= 0x20) start++;
  while (end > start && input.charCodeAt(end - 1) <= 0x20) end--;
  const text = input.slice(start, end).replace(/[\t\n\r]/g, "");
  const scheme = /^[A-Za-z][A-Za-z0-9+.\-]*:(.*)$/s.exec(text);
  if (scheme === null) return "relative URL without a base";
  const authority = scheme[1]!.replace(/^[/\\]*/, "").split(/[/\\?#]/)[0]!;
  const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
  const close = hostPort.startsWith("[") ? hostPort.indexOf("]") : -1;
  const colon = hostPort.indexOf(":", close + 1);
  const host = colon < 0 ? hostPort : hostPort.slice(0, colon);
  if (host === "") return "empty host";
  if (host.startsWith("[")) {
    if (close < 0 || !URL.canParse(`http://${host}/`)) return "invalid IPv6 address";
  } else if (!URL.canParse(`http://${host}/`)) {
    const last = host.split(".").filter((label) => label !== "").at(-1) ?? "";
    return /^(0x[0-9a-f]*|\d+)$/i.test(last)
      ? "invalid IPv4 address"
      : "invalid international domain name";
  }
  if (colon >= 0) return "invalid port number";
  return "invalid international domain name";
}

/**
 * Percent-decodes URL userinfo; malformed text is kept as it is.
 *
 * @param text The encoded text.
 */
export function percentDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * A host name without the brackets of an IPv6 literal.
 *
 * @param hostname `URL.hostname`.
 */
export function bareHost(hostname: string): string {
  return hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
}

/**
 * The port a URL connects to (its scheme's default when it names none).
 *
 * @param url An `http:` or `https:` URL.
 */
export function effectivePort(url: URL): number {
  if (url.port !== "") return Number(url.port);
  return url.protocol === "https:" ? 443 : 80;
}

/**
 * The URL as shown in error messages: without credentials, with the fragment.
 *
 * @param url The URL.
 */
export function displayUrl(url: URL): string {
  const shown = new URL(url.href);
  shown.username = "";
  shown.password = "";
  return shown.href;
}

/**
 * Whether two URLs have the same scheme, host and port.
 *
 * @param a One URL.
 * @param b The other.
 */
export function sameOrigin(a: URL, b: URL): boolean {
  return a.protocol === b.protocol && a.hostname === b.hostname &&
    effectivePort(a) === effectivePort(b);
}
