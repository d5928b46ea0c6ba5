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

/**
 * Result of checking an upgrade request: accepted with the subprotocol to select and, for a
 * credential that expires (a signed bearer token's `exp`), when it does (ms since the epoch);
 * or refused with the response to send.
 */
export type AuthResult =
  | { ok: true; protocol?: string; expiresAt?: number }
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

/**
 * A refusal of the upgrade: HTTP 401 with a short plain-text reason (the
 * reference's wording).
 *
 * @param message The reason.
 */
export function unauthorized(message: string): Response {
  return new Response(message, {
    status: 401,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/** The credential an upgrade request presents, or its refusal. */
export type PresentedToken =
  | { ok: true; token: string; protocol?: string }
  | { ok: false; response: Response };

/**
 * Finds the bearer credential of an upgrade request, for either mode.
 *
 * `Authorization` is read as the reference reads it: visible ASCII, a scheme
 * matching `Bearer` in any case, one space, then the token with surrounding
 * whitespace trimmed. Without that header, a browser's subprotocol entry
 * `exec-server.bearer.<token>` is used; the selected subprotocol is then
 * `exec-server` when offered too. Tokens in the query string are refused.
 *
 * @param request The upgrade request.
 */
export function presentedToken(request: Request): PresentedToken {
  const url = new URL(request.url);
  if (url.searchParams.has("token") || url.searchParams.has("access_token")) {
    return { ok: false, response: unauthorized("tokens in the query string are not accepted") };
  }
  const header = request.headers.get("authorization");
  if (header !== null) {
    const space = header.indexOf(" ");
    const token = header.slice(space + 1).trim();
    if (
      !/^[\t\x20-\x7e]*$/.test(header) || space < 0 ||
      header.slice(0, space).toLowerCase() !== "bearer" || token === ""
    ) {
      return { ok: false, response: unauthorized("invalid authorization header") };
    }
    return { ok: true, token };
  }
  const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) =>
    p.trim()
  );
  const entry = offered.find((p) => p.startsWith(`${BEARER_SUBPROTOCOL}.`));
  if (entry === undefined || entry === `${BEARER_SUBPROTOCOL}.`) {
    return { ok: false, response: unauthorized("missing websocket bearer token") };
  }
  return {
    ok: true,
    token: entry.slice(BEARER_SUBPROTOCOL.length + 1),
    protocol: offered.includes(SUBPROTOCOL) ? SUBPROTOCOL : entry,
  };
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
    const presented = presentedToken(request);
    if (!presented.ok) return presented;
    const digest = await sha256(encoder.encode(presented.token));
    if (!constantTimeEqual(digest, expected)) {
      return { ok: false, response: unauthorized("invalid websocket bearer token") };
    }
    return { ok: true, protocol: presented.protocol };
  };
}

/**
 * Reads a secret file once: its content trimmed of surrounding whitespace,
 * which must not be empty. Error messages name the file, never its content.
 *
 * @param path The file.
 */
export async function readSecretFile(path: string): Promise<string> {
  let content: string;
  try {
    content = await Deno.readTextFile(path);
  } catch (err) {
    // Deno appends the operation and the path (`: readfile '/x'`); the message names the path once.
    const reason = (err as Error).message.replace(/: \w+ '[^']*'$/, "");
    throw new TypeError(`Cannot read secret file "${path}": ${reason}`);
  }
  const secret = content.trim();
  if (secret === "") throw new TypeError(`Cannot use secret file "${path}": it is empty`);
  return secret;
}

/**
 * Returns the SHA-256 (hex) of a token file's content, trimmed of
 * surrounding whitespace.
 *
 * @param path The token file.
 */
export async function tokenFileDigest(path: string): Promise<string> {
  return (await sha256(new TextEncoder().encode(await readSecretFile(path)))).toHex();
}
