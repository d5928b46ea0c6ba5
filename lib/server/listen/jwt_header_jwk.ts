/**
 * The `jwk` member of a signed bearer token's header: accepted exactly when the
 * reference (Codex 0.171.0, whose `jsonwebtoken` 9.3.1 decodes it into its `Jwk`
 * type) accepts it, and never used for anything else. The token is verified with
 * the server's shared secret only: a `jwk` naming another key, with the token
 * signed by that key, is refused like any token with a wrong signature.
 *
 * Accepted: `null`, or an object
 *
 * - nesting at most {@linkcode JWK_MAX_DEPTH} deep (the object itself counts),
 *   every string in it, member names included, well-formed (no lone surrogate);
 * - whose common members ({@linkcode JWK_COMMON}) each appear at most once,
 *   `null` or of their type;
 * - and that is one of the key types of {@linkcode JWK_KEY_TYPES}: each of the
 *   type's members appears exactly once, of its type. Other members, even
 *   repeated or another type's, are ignored.
 *
 * @module
 */

import { nestingDepth, objectMembers, stringsWellFormed } from "./json_source.ts";

/** What a member must be: a string, an array of strings, or one of the listed strings. */
export type JwkRule = "string" | "strings" | readonly string[];

/** The curves of `EC` and `OKP` keys. */
const CURVES = ["P-256", "P-384", "P-521", "Ed25519"] as const;

/**
 * The members every key may carry, with their rule. `alg` names one of the
 * algorithms the reference knows (`ES512`, for one, is refused).
 */
export const JWK_COMMON: Readonly<Record<string, JwkRule>> = {
  use: "string",
  "key_ops": "strings",
  alg: [
    "HS256",
    "HS384",
    "HS512",
    "ES256",
    "ES384",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
    "RSA1_5",
    "RSA-OAEP",
    "RSA-OAEP-256",
  ],
  kid: "string",
  x5u: "string",
  x5c: "strings",
  x5t: "string",
  "x5t#S256": "string",
};

/** The key types, each with the members it requires. */
export const JWK_KEY_TYPES: readonly Readonly<Record<string, JwkRule>>[] = [
  { kty: ["EC"], crv: CURVES, x: "string", y: "string" },
  { kty: ["RSA"], n: "string", e: "string" },
  { kty: ["oct"], k: "string" },
  { kty: ["OKP"], crv: CURVES, x: "string" },
];

/**
 * Deepest nesting of a `jwk` object: `serde_json` refuses a 128th level, and the
 * header object holding the `jwk` is the first.
 */
export const JWK_MAX_DEPTH = 126;

function follows(value: unknown, rule: JwkRule): boolean {
  if (rule === "string") return typeof value === "string";
  if (rule === "strings") {
    return Array.isArray(value) && value.every((item) => typeof item === "string");
  }
  return typeof value === "string" && rule.includes(value);
}

/**
 * Whether a header's `jwk` member is one the reference accepts.
 *
 * @example
 * ```ts
 * import { jwkAccepted } from "./jwt_header_jwk.ts";
 * console.log(jwkAccepted(`{"kty": "oct", "k": "c2VjcmV0"}`)); // true
 * console.log(jwkAccepted(`{"kty": "oct", "k": "a", "k": "b"}`)); // false
 * console.log(jwkAccepted(`{}`)); // false
 * ```
 *
 * @param source The member value's source text (which `JSON.parse` accepts).
 */
export function jwkAccepted(source: string): boolean {
  const value: unknown = JSON.parse(source);
  if (value === null) return true;
  if (typeof value !== "object" || Array.isArray(value)) return false;
  if (nestingDepth(source) > JWK_MAX_DEPTH || !stringsWellFormed(source)) return false;
  const members = objectMembers(source);
  const count = (name: string) => members.filter((member) => member.name === name).length;
  const key = value as Record<string, unknown>;
  for (const [name, rule] of Object.entries(JWK_COMMON)) {
    const times = count(name);
    if (times > 1 || (times === 1 && key[name] !== null && !follows(key[name], rule))) {
      return false;
    }
  }
  return JWK_KEY_TYPES.some((type) =>
    Object.entries(type).every(([name, rule]) => count(name) === 1 && follows(key[name], rule))
  );
}
