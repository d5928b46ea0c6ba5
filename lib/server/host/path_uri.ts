/**
 * Conversion between the protocol's `file:` URIs (`PathUri`) and native paths.
 *
 * @module
 */

import { ErrorCode, invalidParams, RpcError } from "../../protocol/errors.ts";

const SCHEME = /^[A-Za-z][A-Za-z0-9+\-.]*:/;
const SPECIAL_SCHEMES = new Set(["http", "https", "ws", "wss", "ftp"]);
const WINDOWS_DRIVE = /^\/[A-Za-z]:(\/|$)/;
const HEX = /^[0-9A-Fa-f]{2}$/;

/**
 * Parses a `PathUri` into an absolute native path (docs/protocol.md section 10.1).
 *
 * The URI goes through the WHATWG URL parser (so dot segments are removed and
 * `localhost` counts as no host), is percent-decoded byte-wise (invalid UTF-8
 * becomes U+FFFD), and empty and trailing path components are dropped, so
 * `file:///tmp//a/` gives `/tmp/a`.
 *
 * @param uri The `file:` URI sent by the client.
 * @returns The absolute native path.
 * @throws {RpcError} `-32602` for syntax errors, a non-`file` scheme, a query, a
 * fragment or a NUL byte; `-32600` for a URI naming another host or a Windows drive.
 *
 * @example Parse a URI
 * ```ts
 * import { pathFromUri } from "./path_uri.ts";
 * console.log(pathFromUri("file:///tmp/a%20b")); // "/tmp/a b"
 * ```
 */
export function pathFromUri(uri: string): string {
  const parsed = parseFileUri(uri);
  if (typeof parsed === "string") return parsed;
  throw new RpcError(ErrorCode.InvalidRequest, notNativeMessage(parsed.foreign));
}

/**
 * Parses the `cwd` of `process/start`: as {@linkcode pathFromUri}, except that
 * a URI of another host or a Windows drive is invalid params (`-32602`) naming
 * the `cwd`, as the reference answers it there.
 *
 * @param uri The `cwd` URI sent by the client.
 * @returns The absolute native path.
 * @throws {RpcError} `-32602` for every URI that is not a local path.
 *
 * @example A cwd on another host
 * ```ts
 * import { cwdPathFromUri } from "./path_uri.ts";
 * try {
 *   cwdPathFromUri("file://otherhost/tmp");
 * } catch (err) {
 *   console.log((err as { code: number }).code); // -32602
 * }
 * ```
 */
export function cwdPathFromUri(uri: string): string {
  const parsed = parseFileUri(uri);
  if (typeof parsed === "string") return parsed;
  throw invalidParams(
    `cwd URI \`${parsed.foreign}\` is not valid on this exec-server host: ${
      notNativeMessage(parsed.foreign)
    }`,
  );
}

function notNativeMessage(href: string): string {
  return `'${href}' is invalid on 'linux'`;
}

/**
 * The characters of a plain `file:///` URI's path: those the URL parser keeps as they are
 * (`A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * + , ; = @ /`), so no percent sign, no character it would
 * encode, no backslash, no `:` or `|` (drive letters), no query or fragment. 1 for each.
 */
const PLAIN_CHARS = Uint8Array.from({ length: 128 }, (_, c) => {
  const char = String.fromCharCode(c);
  return /[A-Za-z0-9\-._~!$&'()*+,;=@/]/.test(char) ? 1 : 0;
});

const PLAIN_PREFIX = "file:///";
const SLASH = 0x2f;
const DOT = 0x2e;

/**
 * The path of a plain URI (`file:///` and {@linkcode PLAIN_CHARS}) without dot
 * segments, as the URL parser would give it; `undefined` for any other URI.
 * Almost every URI a client sends is one, and this skips the parser; one that
 * is already normal (no empty or dot segment, no trailing slash) is its own
 * path, without a split.
 */
function plainPath(uri: string): string | undefined {
  if (!uri.startsWith(PLAIN_PREFIX)) return undefined;
  let normal = true;
  let previous = SLASH;
  for (let i = PLAIN_PREFIX.length; i < uri.length; i++) {
    const c = uri.charCodeAt(i);
    if (c >= 128 || PLAIN_CHARS[c] === 0) return undefined;
    if (previous === SLASH && (c === SLASH || c === DOT)) normal = false;
    previous = c;
  }
  if (normal && (uri.length === PLAIN_PREFIX.length || previous !== SLASH)) {
    return uri.slice(PLAIN_PREFIX.length - 1);
  }
  const parts = uri.slice(PLAIN_PREFIX.length).split("/").filter((part) => part !== "");
  if (parts.some((part) => part === "." || part === "..")) return undefined;
  return "/" + parts.join("/");
}

/** The native path, or the normalised URI when it names another host or a drive. */
function parseFileUri(uri: string): string | { foreign: string } {
  return plainPath(uri) ?? parsedFileUri(uri);
}

/** {@linkcode parseFileUri} of a URI that is not a plain path, through the URL parser. */
function parsedFileUri(uri: string): string | { foreign: string } {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw invalidParams(`invalid URI: ${describeParseFailure(uri)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== "file") {
    throw invalidParams(`unsupported path URI scheme \`${scheme}\``);
  }
  const href = url.href;
  const hashAt = href.indexOf("#");
  if ((hashAt < 0 ? href : href.slice(0, hashAt)).includes("?")) {
    throw invalidParams("query parameters are not allowed in path URIs");
  }
  if (hashAt >= 0) throw invalidParams("fragments are not allowed in path URIs");
  if (url.hostname !== "" || WINDOWS_DRIVE.test(url.pathname)) return { foreign: href };
  const bytes = percentDecode(url.pathname);
  if (bytes.includes(0)) throw invalidParams(notNativeMessage(href));
  const decoded = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  return "/" + decoded.split("/").filter((part) => part !== "").join("/");
}

/**
 * Formats an absolute native path as a `PathUri`: `file://` plus the
 * percent-encoded path, without a trailing slash except for the root.
 *
 * @param path An absolute native path.
 * @returns The `file:` URI.
 *
 * @example Format a path
 * ```ts
 * import { uriFromPath } from "./path_uri.ts";
 * console.log(uriFromPath("/tmp/a b")); // "file:///tmp/a%20b"
 * ```
 */
export function uriFromPath(path: string): string {
  const parts = path.split("/").filter((part) => part !== "");
  if (parts.length === 0) return "file:///";
  return "file:///" + parts.map(encodeSegment).join("/");
}

/**
 * The `PathUri` of an entry named `name` in the directory whose `PathUri` is `parent`: the same
 * text as {@linkcode uriFromPath} of the joined path, without encoding the parent again (a
 * listing names thousands of entries of one directory).
 *
 * @param parent The directory's URI, from {@linkcode uriFromPath}.
 * @param name One name of an entry (no `/`).
 * @returns The entry's URI.
 *
 * @example
 * ```ts
 * import { childUri, uriFromPath } from "./path_uri.ts";
 * console.log(childUri(uriFromPath("/tmp/a b"), "c#d")); // "file:///tmp/a%20b/c%23d"
 * console.log(childUri("file:///", "tmp")); // "file:///tmp"
 * ```
 */
export function childUri(parent: string, name: string): string {
  return `${parent.endsWith("/") ? parent : `${parent}/`}${encodeSegment(name)}`;
}

/** A segment of printable ASCII with nothing to escape: its encoding is itself. */
const PLAIN_SEGMENT = /^[!$&-;=@-[\]-_a-z|~]*$/;

function encodeSegment(segment: string): string {
  if (PLAIN_SEGMENT.test(segment)) return segment;
  let out = "";
  for (const byte of new TextEncoder().encode(segment)) {
    if (byte <= 0x20 || byte >= 0x7f || ` "#%<>?\\\`{}`.includes(String.fromCharCode(byte))) {
      out += "%" + byte.toString(16).toUpperCase().padStart(2, "0");
    } else {
      out += String.fromCharCode(byte);
    }
  }
  return out;
}

function percentDecode(text: string): Uint8Array {
  const input = new TextEncoder().encode(text);
  const out: number[] = [];
  for (let i = 0; i < input.length; i++) {
    const byte = input[i]!;
    const hex = text.slice(i + 1, i + 3);
    // The WHATWG serializer leaves the path ASCII-only, so byte and char offsets agree.
    if (byte === 0x25 && HEX.test(hex)) {
      out.push(parseInt(hex, 16));
      i += 2;
    } else {
      out.push(byte);
    }
  }
  return new Uint8Array(out);
}

/** Names the reason a URI failed to parse, in the reference's words. */
function describeParseFailure(uri: string): string {
  // deno-lint-ignore no-control-regex
  const input = uri.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "");
  const scheme = SCHEME.exec(input)?.[0].slice(0, -1).toLowerCase();
  if (scheme === undefined) return "relative URL without a base";
  const rest = input.slice(scheme.length + 1);
  const authority = /^[/\\]*([^/\\?#]*)/.exec(rest)?.[1] ?? "";
  const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
  if (SPECIAL_SCHEMES.has(scheme) && hostPort === "") return "empty host";
  if (hostPort.startsWith("[")) return "invalid IPv6 address";
  let host = hostPort;
  if (scheme !== "file") {
    const colon = hostPort.lastIndexOf(":");
    if (colon >= 0) {
      const port = hostPort.slice(colon + 1);
      if (!/^\d*$/.test(port) || Number(port) > 65535) return "invalid port number";
      host = hostPort.slice(0, colon);
    }
  }
  const labels = host.replace(/\.$/, "").split(".");
  const last = labels[labels.length - 1] ?? "";
  if (/^(\d+|0[xX][0-9A-Fa-f]*)$/.test(last)) return "invalid IPv4 address";
  return "invalid international domain name";
}

/**
 * Joins a native directory path and an entry name without doubling the root slash.
 *
 * @param directory An absolute native path.
 * @param name A name or relative path.
 */
export function joinPath(directory: string, name: string): string {
  return directory.endsWith("/") ? directory + name : `${directory}/${name}`;
}
