/**
 * Header lists of `http/request`, in the reference's header-map order: all
 * values of one name are kept in their original order, grouped at the
 * position where the name first appears (`x-a: 1`, `y: 2`, `x-a: 3` goes
 * out as `x-a: 1`, `x-a: 3`, `y: 2`; the same for response headers).
 *
 * @module
 */

/** An ordered header map: one entry per lowercase name, values in order. */
export type HeaderMap = { name: string; values: string[] }[];

/**
 * The values of a name, or `undefined` when it has none.
 *
 * @param map The map.
 * @param name A lowercase name.
 */
export function headerGet(map: HeaderMap, name: string): string[] | undefined {
  return map.find((entry) => entry.name === name)?.values;
}

/**
 * Replaces a name's values with one value, keeping the name's position.
 *
 * @param map The map (changed).
 * @param name A lowercase name.
 * @param value The value.
 */
export function headerSet(map: HeaderMap, name: string, value: string): void {
  const entry = map.find((candidate) => candidate.name === name);
  if (entry) entry.values = [value];
  else map.push({ name, values: [value] });
}

/**
 * The map without some names.
 *
 * @param map The map.
 * @param names Lowercase names to drop.
 */
export function headerDelete(map: HeaderMap, names: readonly string[]): HeaderMap {
  return map.filter((entry) => !names.includes(entry.name));
}

/**
 * Request header values: tab, visible ASCII, space and any non-ASCII text (sent as UTF-8).
 * A regular expression, not a loop over the characters: a client's values (a bearer token,
 * a session id) run to hundreds of characters, and the server runs most of its code in V8's
 * lower tiers, where such a loop over 295 characters took 13-17 µs under Sparkplug and 1.1-1.9
 * µs under Maglev against 0.5-1.0 µs for the expression (the benchmark notes: `git show fbec4dc:docs/benchmarks.md`, `http/request`).
 *
 * @example
 * ```ts
 * import { isValidHeaderValue } from "./headers.ts";
 * console.log(isValidHeaderValue("Bearer t\u00e9"), isValidHeaderValue("a\rb")); // true false
 * ```
 */
export function isValidHeaderValue(value: string): boolean {
  // Control characters are what the expression looks for.
  // deno-lint-ignore no-control-regex
  return !/[\x00-\x08\x0a-\x1f\x7f]/.test(value);
}

/** Response header values returned to the client: tab, space and visible ASCII only. */
export function isVisibleAscii(value: string): boolean {
  return /^[\t\x20-\x7e]*$/.test(value);
}

/**
 * The header lines of one hop: the request headers, then the defaults that are missing
 * (`proxy-authorization` after `accept`, as the reference client sends them to a proxy).
 */
export function hopHeaders(
  headers: HeaderMap,
  url: URL,
  body: Uint8Array | null,
  proxyAuthorization: string | null = null,
): [string, string][] {
  const lines: [string, string][] = [];
  let accept = false;
  let authorization = false;
  let encoding = false;
  let host = false;
  let length = false;
  for (let i = 0; i < headers.length; i++) {
    const { name, values } = headers[i]!;
    if (name === "content-length" && body !== null) {
      lines.push([name, String(body.length)]);
      length = true;
      continue;
    }
    for (let j = 0; j < values.length; j++) lines.push([name, values[j]!]);
    if (name === "accept") accept = true;
    else if (name === "proxy-authorization") authorization = true;
    else if (name === "accept-encoding") encoding = true;
    else if (name === "host") host = true;
  }
  if (!accept) lines.push(["accept", "*/*"]);
  if (proxyAuthorization !== null && !authorization) {
    lines.push(["proxy-authorization", proxyAuthorization]);
  }
  if (!encoding) lines.push(["accept-encoding", "zstd,gzip"]);
  if (!host) lines.push(["host", url.host]);
  if (body !== null && !length) lines.push(["content-length", String(body.length)]);
  return lines;
}
