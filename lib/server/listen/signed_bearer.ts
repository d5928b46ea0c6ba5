/**
 * WebSocket authentication with signed bearer tokens (the reference's
 * `--ws-auth signed-bearer-token`): the upgrade carries a JWT (JWS compact
 * serialization) signed with HMAC-SHA-256 under a shared secret, and it is
 * accepted exactly when the reference (Codex 0.171.0) accepts it:
 *
 * - `alg` must be `HS256`; every other algorithm, `none` included, is
 *   refused, so a token cannot choose how it is checked.
 * - Every segment is strict base64url: no padding, no whitespace, no
 *   standard-alphabet characters, and zero unused bits in the last
 *   character (so one signature has one spelling).
 * - `exp` is required and `nbf` honoured, both 64-bit integers written as
 *   integers (`1.0`, `1e9`, `-0` and strings are refused). With skew `S`
 *   (default 30 s) a token is expired when `now > exp + S` and not yet valid
 *   when `now < nbf - S` (both saturating at the 64-bit bounds).
 * - `iss` must equal `--ws-issuer` and `aud` (a string or an array of
 *   strings) must equal or contain `--ws-audience`, each when configured.
 *   Whatever is configured, the members the reference reads must have the
 *   reference's types (e.g. a numeric `aud` is refused) and appear once.
 * - A `jwk` header member is accepted when the reference accepts it (see
 *   `jwt_header_jwk.ts`) and never used: the key is always the shared secret.
 *
 * The signature is verified with Web Crypto's HMAC (constant-time), not with
 * a JWT library: run over the token matrix (tests/helpers/jwt_matrix.ts),
 * `jose` 6.2.18's `jwtVerify` answers 52 of its 150 tokens differently from
 * the reference (lenient base64, fractional and out-of-range times, duplicate
 * members, `crit` and `b64` enforcement, member types, the `jwk` member's
 * shape), and none of those can be configured away.
 *
 * @module
 */

import { type AuthResult, presentedToken, readSecretFile, unauthorized } from "./auth.ts";
import { type MemberSource, objectMembers } from "./json_source.ts";
import { jwkAccepted } from "./jwt_header_jwk.ts";

/** Clock skew applied when `--ws-max-clock-skew-seconds` is not given. */
export const DEFAULT_MAX_CLOCK_SKEW_SECONDS = 30;
/** Shortest shared secret accepted, in bytes (after trimming), as the reference. */
export const MIN_SHARED_SECRET_BYTES = 32;

const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);

/** What a signed bearer token is checked against. */
export interface SignedBearerOptions {
  /** The shared HMAC secret. */
  secret: Uint8Array;
  /** Required `iss`, when set. */
  issuer?: string;
  /** Required `aud` (or member of an `aud` array), when set. */
  audience?: string;
  /**
   * Allowed clock skew in seconds (at most 2^63 - 1).
   *
   * @default {30}
   */
  maxClockSkewSeconds?: bigint;
  /**
   * The current time in milliseconds since the epoch (for tests).
   *
   * @default {Date.now}
   */
  now?: () => number;
}

/** Why a token was refused; the text is the reference's 401 body. */
export type SignedBearerRefusal =
  | "invalid websocket jwt"
  | "expired websocket jwt"
  | "websocket jwt is not valid yet"
  | "websocket jwt issuer mismatch"
  | "websocket jwt audience mismatch";

/** Members of the JWT header the reference decodes with a type (all but `alg` optional). */
const HEADER_STRINGS = ["typ", "cty", "jku", "kid", "x5u", "x5t", "x5t#S256"];
const HEADER_TYPED = new Set([...HEADER_STRINGS, "alg", "x5c", "jwk"]);
/** Claims the reference decodes (so they must appear once), whatever is configured. */
const CLAIMS_TYPED = new Set(["exp", "nbf", "iss", "aud", "sub"]);

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/** Strict base64url (no padding, canonical last character), or `undefined`. */
function base64url(segment: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(segment) || segment.length % 4 === 1) return undefined;
  try {
    return Uint8Array.fromBase64(segment.padEnd(Math.ceil(segment.length / 4) * 4, "="), {
      alphabet: "base64url",
      lastChunkHandling: "strict",
    });
  } catch {
    return undefined;
  }
}

/**
 * Decodes a segment as a JSON object whose listed members appear at most
 * once; records the source text of top-level numbers (to tell `1` from
 * `1.0`). `undefined` when it is anything else.
 */
function jsonObject(
  segment: string,
  typed: Set<string>,
):
  | { value: Record<string, unknown>; numbers: Map<string, string>; members: MemberSource[] }
  | undefined {
  const bytes = base64url(segment);
  if (bytes === undefined) return undefined;
  let text: string;
  let value: unknown;
  // Source texts of numbers, per object that holds them.
  const sources = new WeakMap<object, Map<string, string>>();
  try {
    text = decoder.decode(bytes);
    value = JSON.parse(text, function (this: object, key, member, context?: { source?: string }) {
      if (typeof member === "number" && context?.source !== undefined) {
        const own = sources.get(this) ?? new Map<string, string>();
        sources.set(this, own.set(key, context.source));
      }
      return member;
    });
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const members = objectMembers(text);
  const seen = new Set<string>();
  for (const { name } of members) {
    if (typed.has(name) && seen.has(name)) return undefined;
    seen.add(name);
  }
  return {
    value: value as Record<string, unknown>,
    numbers: sources.get(value) ?? new Map(),
    members,
  };
}

/** A 64-bit integer written as one (`-0` is a float to the reference), or `undefined`. */
function int64(value: unknown, source: string | undefined): bigint | undefined {
  if (typeof value !== "number" || source === undefined) return undefined;
  if (!/^-?(0|[1-9][0-9]*)$/.test(source) || source === "-0") return undefined;
  const n = BigInt(source);
  return n >= I64_MIN && n <= I64_MAX ? n : undefined;
}

function isString(value: unknown): value is string {
  return typeof value === "string" && value.isWellFormed();
}

function headerOk(
  { value: header, members }: { value: Record<string, unknown>; members: MemberSource[] },
): boolean {
  if (header.alg !== "HS256") return false;
  for (const name of HEADER_STRINGS) {
    const member = header[name];
    if (member !== undefined && member !== null && !isString(member)) return false;
  }
  const x5c = header.x5c;
  if (x5c !== undefined && x5c !== null && !(Array.isArray(x5c) && x5c.every(isString))) {
    return false;
  }
  const jwk = members.find((member) => member.name === "jwk");
  return jwk === undefined || jwkAccepted(jwk.value);
}

/**
 * Checks one token; resolves to `undefined` when it is accepted, else to the
 * reason (the reference's wording).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { verifySignedBearer } from "./signed_bearer.ts";
 *
 * const secret = new TextEncoder().encode("a shared secret of at least 32 bytes");
 * assert.equal(await verifySignedBearer("not.a.jwt", { secret }), "invalid websocket jwt");
 * ```
 *
 * @param token The token (without the `Bearer ` scheme).
 * @param options Secret, issuer, audience, skew.
 */
export async function verifySignedBearer(
  token: string,
  options: SignedBearerOptions,
): Promise<SignedBearerRefusal | undefined> {
  const checked = await checkSignedBearer(token, options);
  return typeof checked === "bigint" ? undefined : checked;
}

/** {@linkcode verifySignedBearer}, with the accepted token's `exp` (seconds since the epoch). */
async function checkSignedBearer(
  token: string,
  options: SignedBearerOptions,
): Promise<SignedBearerRefusal | bigint> {
  const parts = token.split(".");
  if (parts.length !== 3) return "invalid websocket jwt";
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = jsonObject(headerPart, HEADER_TYPED);
  if (header === undefined || !headerOk(header)) return "invalid websocket jwt";
  const signature = base64url(signaturePart);
  if (signature === undefined) return "invalid websocket jwt";
  const key = await crypto.subtle.importKey(
    "raw",
    options.secret as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  const signed = encoder.encode(`${headerPart}.${payloadPart}`);
  if (!await crypto.subtle.verify("HMAC", key, signature as Uint8Array<ArrayBuffer>, signed)) {
    return "invalid websocket jwt";
  }
  const payload = jsonObject(payloadPart, CLAIMS_TYPED);
  if (payload === undefined) return "invalid websocket jwt";
  const claims = payload.value;
  const exp = int64(claims.exp, payload.numbers.get("exp"));
  const nbf = claims.nbf === undefined || claims.nbf === null
    ? null
    : int64(claims.nbf, payload.numbers.get("nbf"));
  const iss = claims.iss ?? null;
  const aud = claims.aud ?? null;
  if (
    exp === undefined || nbf === undefined ||
    (iss !== null && !isString(iss)) ||
    (aud !== null && !isString(aud) && !(Array.isArray(aud) && aud.every(isString)))
  ) {
    return "invalid websocket jwt";
  }
  const skew = options.maxClockSkewSeconds ?? BigInt(DEFAULT_MAX_CLOCK_SKEW_SECONDS);
  const now = BigInt(Math.floor((options.now ?? Date.now)() / 1000));
  const latest = exp + skew > I64_MAX ? I64_MAX : exp + skew;
  if (now > latest) return "expired websocket jwt";
  if (nbf !== null && now < (nbf - skew < I64_MIN ? I64_MIN : nbf - skew)) {
    return "websocket jwt is not valid yet";
  }
  if (options.issuer !== undefined && iss !== options.issuer) {
    return "websocket jwt issuer mismatch";
  }
  if (
    options.audience !== undefined &&
    !(aud === options.audience || (Array.isArray(aud) && aud.includes(options.audience)))
  ) {
    return "websocket jwt audience mismatch";
  }
  return exp;
}

/**
 * Builds the upgrade check of `--ws-auth signed-bearer-token`. The token
 * comes from `Authorization: Bearer <jwt>` or, for browsers, the
 * subprotocol form (see {@linkcode presentedToken}).
 *
 * @param options Secret, issuer, audience, skew.
 */
export function signedBearerAuth(
  options: SignedBearerOptions,
): (request: Request) => Promise<AuthResult> {
  if (options.secret.length < MIN_SHARED_SECRET_BYTES) {
    throw new TypeError(
      `Cannot use a signed-bearer secret of ${options.secret.length} bytes: at least ${MIN_SHARED_SECRET_BYTES} are needed`,
    );
  }
  return async (request) => {
    const presented = presentedToken(request);
    if (!presented.ok) return presented;
    const checked = await checkSignedBearer(presented.token, options);
    if (typeof checked !== "bigint") return { ok: false, response: unauthorized(checked) };
    return { ok: true, protocol: presented.protocol, expiresAt: Number(checked) * 1000 };
  };
}

/**
 * Reads the shared secret once: the file's content, trimmed of surrounding
 * whitespace, which must be at least {@linkcode MIN_SHARED_SECRET_BYTES}
 * bytes. Error messages name the file, never its content.
 *
 * @param path The secret file.
 */
export async function readSharedSecret(path: string): Promise<Uint8Array> {
  const secret = encoder.encode(await readSecretFile(path));
  if (secret.length < MIN_SHARED_SECRET_BYTES) {
    throw new TypeError(
      `Cannot use secret file "${path}": it holds ${secret.length} bytes, at least ${MIN_SHARED_SECRET_BYTES} are needed`,
    );
  }
  return secret;
}
