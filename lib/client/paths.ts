/**
 * Paths on the server as a client names them: a plain absolute path
 * (`/srv/app`), a `file:` URL object, or a `file:` URI string. The protocol
 * itself only carries `file:` URIs; these two functions convert at the edge.
 *
 * @module
 */

/** A path on the server: an absolute path, or a `file:` URL (as a `URL` or a string). */
export type RemotePath = string | URL;

/**
 * Converts a path to the protocol's `file:` URI; every byte that is not a
 * plain URL character is percent-encoded, so `%`, `?` and `#` in names
 * survive.
 *
 * @example
 * ```ts
 * import { toPathUri } from "@exec-server/exec-server";
 * console.log(toPathUri("/tmp/a b%")); // "file:///tmp/a%20b%25"
 * console.log(toPathUri(new URL("file:///tmp/x"))); // "file:///tmp/x"
 * ```
 *
 * @param path An absolute path or a `file:` URL.
 * @throws {TypeError} For a relative path or a URL of another scheme.
 */
export function toPathUri(path: RemotePath): string {
  if (path instanceof URL || /^file:/i.test(path)) {
    const url = new URL(path);
    if (url.protocol !== "file:") throw new TypeError(`Expected a file: URL, got "${url.href}"`);
    return url.href;
  }
  if (!path.startsWith("/")) {
    throw new TypeError(`Expected an absolute path or a file: URL, got "${path}"`);
  }
  return "file://" + path.split("/").map(encodeURIComponent).join("/");
}

/**
 * Converts a `file:` URI from the server to a plain path; bytes that are
 * not UTF-8 become U+FFFD.
 *
 * @example
 * ```ts
 * import { fromPathUri } from "@exec-server/exec-server";
 * console.log(fromPathUri("file:///tmp/a%20b")); // "/tmp/a b"
 * ```
 *
 * @param uri A `file:` URI.
 */
export function fromPathUri(uri: string): string {
  const pathname = new URL(uri).pathname;
  const bytes: number[] = [];
  for (let i = 0; i < pathname.length; i++) {
    const ch = pathname[i]!;
    if (ch === "%" && /^[0-9A-Fa-f]{2}$/.test(pathname.slice(i + 1, i + 3))) {
      bytes.push(parseInt(pathname.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...new TextEncoder().encode(ch));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}
