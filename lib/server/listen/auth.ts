/**
 * WebSocket authentication with a capability token (the reference's
 * `--ws-auth capability-token`): the upgrade request must carry
 * `Authorization: Bearer <token>`; the token is compared in constant time
 * against the configured token or its SHA-256.
 *
 * Browsers cannot set headers on a WebSocket, so the token may instead be
 * offered as a subprotocol `exec-server.bearer.<token>` (the token must then
 * be subprotocol-safe, e.g. base64url or hex) together with the plain
 * subprotocol `exec-server`, which the server selects, so the token is never
 * echoed (the Kubernetes pattern). A client that offers only the bearer entry
 * gets it echoed, as the WebSocket handshake requires. Tokens in the query
 * string are always refused (URLs end up in logs and histories).
 *
 * @module
 */

/** The subprotocol a browser offers next to its token, and that the server selects. */
export const SUBPROTOCOL = "exec-server";
/** The subprotocol prefix browsers use to present a token. */
export const BEARER_SUBPROTOCOL = "exec-server.bearer";

/** Result of checking an upgrade request. */
export type AuthResult =
  | { ok: true; protocol?: string }
  | { ok: false; response: Response };

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

function unauthorized(message: string): Response {
  return new Response(message, {
    status: 401,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/**
 * Builds a checker for a token given as its SHA-256 digest (hex). Comparing
 * digests of equal length keeps the comparison constant-time whatever the
 * presented token's length.
 *
 * @param sha256Hex The expected token's SHA-256 as 64 hex digits.
 */
export function capabilityTokenAuth(
  sha256Hex: string,
): (request: Request) => Promise<AuthResult> {
  if (!/^[0-9a-fA-F]{64}$/.test(sha256Hex)) {
    throw new TypeError("Cannot use token digest: expected 64 hex digits");
  }
  const expected = Uint8Array.fromHex(sha256Hex.toLowerCase());
  const encoder = new TextEncoder();
  return async (request) => {
    const url = new URL(request.url);
    if (url.searchParams.has("token") || url.searchParams.has("access_token")) {
      return { ok: false, response: unauthorized("tokens in the query string are not accepted") };
    }
    let token: string | undefined;
    let protocol: string | undefined;
    const header = request.headers.get("authorization");
    if (header !== null) {
      const match = /^Bearer (.+)$/i.exec(header);
      token = match?.[1];
    } else {
      const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) =>
        p.trim()
      );
      const entry = offered.find((p) => p.startsWith(`${BEARER_SUBPROTOCOL}.`));
      if (entry) {
        token = entry.slice(BEARER_SUBPROTOCOL.length + 1);
        protocol = offered.includes(SUBPROTOCOL) ? SUBPROTOCOL : entry;
      }
    }
    if (token === undefined) {
      return { ok: false, response: unauthorized("missing websocket bearer token") };
    }
    const digest = await sha256(encoder.encode(token));
    if (!constantTimeEqual(digest, expected)) {
      return { ok: false, response: unauthorized("invalid websocket bearer token") };
    }
    return { ok: true, protocol };
  };
}

/**
 * Returns the SHA-256 (hex) of a token file's content, trimmed of
 * surrounding whitespace.
 *
 * @param path The token file.
 */
export async function tokenFileDigest(path: string): Promise<string> {
  const token = (await Deno.readTextFile(path)).trim();
  if (token === "") throw new TypeError(`Cannot use token file "${path}": it is empty`);
  return (await sha256(new TextEncoder().encode(token))).toHex();
}
