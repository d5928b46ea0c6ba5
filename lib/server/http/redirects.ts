/**
 * The hops of `http/request`: one exchange per hop over the wire client,
 * following redirects the way the reference's client does.
 *
 * @module
 */

import { requireNet } from "../host/permissions.ts";
import { failed, sendFailed } from "./errors.ts";
import type { Exchange } from "./exchange.ts";
import { headerDelete, headerSet, hopHeaders } from "./headers.ts";
import type { PreparedRequest } from "./prepare.ts";
import { proxyFor, type ProxySettings } from "./proxy.ts";
import { effectivePort, sameOrigin } from "./url.ts";
import {
  type BodyFraming,
  bodyFraming,
  encodeRequest,
  keepsAlive,
  type ResponseHead,
  ResponseReader,
  writeAll,
} from "./wire.ts";

/** Redirects followed before `too many redirects` (the reference's client limit). */
export const MAX_REDIRECTS: number = 10;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const SENSITIVE_HEADERS = [
  "authorization",
  "cookie",
  "cookie2",
  "proxy-authorization",
  "www-authenticate",
];

/** A received response head plus the reader positioned at its body. */
export interface ReceivedResponse {
  /** Status and headers. */
  head: ResponseHead;
  /** The reader, positioned at the body. */
  reader: ResponseReader;
  /** How the body is delimited. */
  framing: BodyFraming;
  /** Whether the connection may carry another exchange once the body was read completely. */
  keepAlive: boolean;
}

/**
 * Sends the request, following redirects per policy (at most
 * {@linkcode MAX_REDIRECTS}), and returns the final response head. Each hop
 * is checked against the server's `--allow-net` before it opens a connection
 * (an idle connection to its origin was opened after the same check, and the
 * server never revokes a permission); a redirect drops the body
 * (for `301`–`303`), the credentials (across origins) and sets `referer`.
 * A hop goes through the proxy {@linkcode proxyFor} picks; it reuses an idle
 * connection to its origin when there is one, and when that connection turns
 * out closed before any byte of the response arrived the hop is sent again
 * on a new connection.
 *
 * @param request The validated request.
 * @param exchange Its deadline, cancellation and connection.
 * @param proxies The proxy settings.
 * @throws {RpcError} `-32603` for transport and redirect failures; `permissionDenied` for a
 * hop outside `--allow-net`.
 */
export async function send(
  request: PreparedRequest,
  exchange: Exchange,
  proxies: ProxySettings,
): Promise<ReceivedResponse> {
  let { method, url, headers, body } = request;
  for (let redirects = 0;; redirects++) {
    const proxy = proxyFor(proxies, url);
    const forwarded = proxy !== null && url.protocol === "http:";
    const target = method === "CONNECT"
      ? `${url.hostname}:${effectivePort(url)}`
      : forwarded
      ? `${url.protocol}//${url.host}${url.pathname}${url.search}`
      : `${url.pathname}${url.search}`;
    const lines = hopHeaders(headers, url, body, forwarded ? proxy.authorization : null);
    const message = encodeRequest(method, target, lines, body);
    let received: ReceivedResponse | null = null;
    // An idle connection to the origin was opened after this same check passed.
    let hop = exchange.reuse(url, proxy);
    if (hop === null) requireNet(url.hostname, effectivePort(url));
    while (received === null) {
      let reader: ResponseReader | null = null;
      const reused = hop !== null;
      try {
        hop ??= await exchange.connect(url, proxy);
        await writeAll(hop.conn, message);
        reader = new ResponseReader(hop.conn, hop.firstRead);
        const response = await reader.readHead();
        received = {
          head: response,
          reader,
          framing: bodyFraming(method, response),
          keepAlive: keepsAlive(method, lines, response),
        };
      } catch {
        exchange.closeConn();
        // An idle connection the origin closed meanwhile: send once more on a new one.
        if (!reused || (reader !== null && reader.received > 0)) throw sendFailed(url);
        hop = null;
        requireNet(url.hostname, effectivePort(url));
      }
    }
    const next = request.redirects === "follow" ? redirectTarget(received.head, url) : null;
    if (next === null) return received;
    exchange.closeConn();
    if (redirects >= MAX_REDIRECTS) throw failed("too many redirects");
    const scheme = next.protocol.slice(0, -1);
    if (scheme !== "http" && scheme !== "https") {
      throw failed(`redirect target uses unsupported URL scheme: ${scheme}`);
    }
    if (received.head.status <= 303) {
      if (method !== "GET" && method !== "HEAD") method = "GET";
      body = null;
      headers = headerDelete(headers, [
        "transfer-encoding",
        "content-encoding",
        "content-type",
        "content-length",
      ]);
    }
    const crossOrigin = !sameOrigin(url, next);
    if (crossOrigin) headers = headerDelete(headers, SENSITIVE_HEADERS);
    if (!(url.protocol === "https:" && next.protocol === "http:")) {
      const referer = new URL(crossOrigin ? `${url.origin}/` : url.href);
      referer.hash = "";
      headerSet(headers, "referer", referer.href);
    }
    url = next;
  }
}

/** The URL a redirect response points to, or `null` when it is not a usable redirect. */
function redirectTarget(head: ResponseHead, base: URL): URL | null {
  if (!REDIRECT_STATUSES.has(head.status)) return null;
  const location = head.headers.find(([name]) => name === "location")?.[1];
  if (location === undefined) return null;
  try {
    const next = new URL(utf8FromLatin1(location), base);
    next.username = "";
    next.password = "";
    return next;
  } catch {
    return null;
  }
}

function utf8FromLatin1(text: string): string {
  const bytes = Uint8Array.from(text, (char) => char.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}
