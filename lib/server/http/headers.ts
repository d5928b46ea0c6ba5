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
 * The map without some names, removed one name after the other the way the reference's header
 * map removes an entry: the last entry takes its place.
 *
 * @param map The map.
 * @param names Lowercase names to drop.
 */
export function headerDelete(map: HeaderMap, names: readonly string[]): HeaderMap {
  const out = map.slice();
  for (const name of names) {
    const index = indexOf(out, name);
    if (index >= 0) swapRemove(out, index);
  }
  return out;
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
 * (`proxy-authorization` after `accept`, as the reference client sends them to a proxy), then
 * the body's framing, as the reference's client (hyper) sets it:
 * - no body: a `transfer-encoding` is dropped (there is nothing to encode);
 * - a body and a `transfer-encoding`: the body is sent chunked, so `chunked` is appended to the
 *   last line unless its last coding is `chunked`, and a `content-length` is dropped;
 * - a body without: `content-length` is the body's length, in place of the client's value.
 *
 * A dropped name's place is taken by the last line's name, as in the reference's header map
 * (`x, transfer-encoding, y` without a body goes out as `x, host, y, accept, …`).
 *
 * @example A body with `transfer-encoding: gzip`
 * ```ts
 * import { hopHeaders } from "./headers.ts";
 * const headers = [{ name: "transfer-encoding", values: ["gzip"] }];
 * const lines = hopHeaders(headers, new URL("http://example.test/"), new Uint8Array(2));
 * console.log(lines[0]); // ["transfer-encoding", "gzip, chunked"]
 * ```
 */
export function hopHeaders(
  headers: HeaderMap,
  url: URL,
  body: Uint8Array | null,
  proxyAuthorization: string | null = null,
): [string, string][] {
  // Indexed loops and no closures: this runs for every request (see `isValidHeaderValue`).
  const map = headers.slice();
  if (indexOf(map, "accept") < 0) map.push({ name: "accept", values: ["*/*"] });
  if (proxyAuthorization !== null && indexOf(map, "proxy-authorization") < 0) {
    map.push({ name: "proxy-authorization", values: [proxyAuthorization] });
  }
  if (indexOf(map, "accept-encoding") < 0) {
    map.push({ name: "accept-encoding", values: ["zstd,gzip"] });
  }
  if (indexOf(map, "host") < 0) map.push({ name: "host", values: [url.host] });
  const coding = indexOf(map, "transfer-encoding");
  const length = indexOf(map, "content-length");
  if (body === null) {
    if (coding >= 0) swapRemove(map, coding);
  } else if (coding >= 0) {
    const values = map[coding]!.values;
    if (!endsChunked(values[values.length - 1]!)) {
      map[coding] = {
        name: "transfer-encoding",
        values: [...values.slice(0, -1), `${values[values.length - 1]}, chunked`],
      };
    }
    if (length >= 0) swapRemove(map, length);
  } else if (length >= 0) {
    map[length] = { name: "content-length", values: [String(body.length)] };
  } else {
    map.push({ name: "content-length", values: [String(body.length)] });
  }
  const lines: [string, string][] = [];
  for (let i = 0; i < map.length; i++) {
    const { name, values } = map[i]!;
    for (let j = 0; j < values.length; j++) lines.push([name, values[j]!]);
  }
  return lines;
}

function indexOf(map: HeaderMap, name: string): number {
  for (let i = 0; i < map.length; i++) if (map[i]!.name === name) return i;
  return -1;
}

/** Whether the last coding of a `transfer-encoding` line is `chunked` (in any case). */
function endsChunked(line: string): boolean {
  return line.slice(line.lastIndexOf(",") + 1).trim().toLowerCase() === "chunked";
}

/** Removes an entry; the last one takes its place (the reference's header map does so). */
function swapRemove(map: HeaderMap, index: number): void {
  const last = map.pop()!;
  if (index < map.length) map[index] = last;
}
