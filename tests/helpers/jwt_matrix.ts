/**
 * The signed-bearer-token matrix: tokens (and `Authorization` forms) that a
 * server started with `--ws-auth signed-bearer-token` must accept or refuse,
 * with the answers the reference (Codex 0.171.0) gives. Tokens are minted
 * here with Web Crypto directly, not with a JWT library, so that malformed,
 * mis-signed and oddly encoded variants can be built byte by byte.
 *
 * Times are relative to the moment the matrix is built and stay at least
 * 15 seconds away from every boundary, so the answers do not depend on how
 * fast the test runs.
 *
 * @module
 */

/** The shared secret every matrix server is started with (64 hex digits). */
export const MATRIX_SECRET = "6b1c8e0f4d2a9b7c3e5f1a0d8c6b4e2f9a7d5c3b1e0f8a6c4d2b0e9f7a5c3d1b";
/** Issuer configured in the `strict` configuration. */
export const MATRIX_ISSUER = "orchestrator";
/** Audience configured in the `strict` configuration. */
export const MATRIX_AUDIENCE = "exec-server";

/** The server configurations the matrix runs against. */
export const MATRIX_CONFIGS = {
  /** Issuer and audience required, 60 s of clock skew. */
  strict: { issuer: MATRIX_ISSUER, audience: MATRIX_AUDIENCE, skewSeconds: 60 },
  /** No issuer or audience configured, the default skew (30 s). */
  open: { issuer: undefined, audience: undefined, skewSeconds: undefined },
} as const;

/** A configuration name. */
export type MatrixConfig = keyof typeof MATRIX_CONFIGS;

/** The server flags of a configuration, given where the secret file is. */
export function matrixFlags(config: MatrixConfig, secretFile: string): string[] {
  const c = MATRIX_CONFIGS[config];
  return [
    "--ws-auth",
    "signed-bearer-token",
    "--ws-shared-secret-file",
    secretFile,
    ...(c.issuer === undefined ? [] : ["--ws-issuer", c.issuer]),
    ...(c.audience === undefined ? [] : ["--ws-audience", c.audience]),
    ...(c.skewSeconds === undefined ? [] : ["--ws-max-clock-skew-seconds", String(c.skewSeconds)]),
  ];
}

/** One matrix row. */
export interface MatrixCase {
  /** What the row tries. */
  name: string;
  /** The configuration it runs against. */
  config: MatrixConfig;
  /** Request headers of the upgrade (none means no credential at all). */
  headers: Record<string, string>;
  /** Whether the reference upgrades (101) rather than refusing (401). */
  accept: boolean;
}

const encoder = new TextEncoder();

function b64url(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/** Encodes a JSON text (given raw, so odd number forms survive) as a segment. */
function segment(json: string): string {
  return b64url(encoder.encode(json));
}

async function hmac(hash: string, secret: string, data: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(data)));
}

/** Options of {@linkcode mint}. */
export interface MintOptions {
  /** The header JSON text (default `{"alg":"HS256","typ":"JWT"}`). */
  header?: string;
  /** Hash of the HMAC signature (default the one `alg` names, else SHA-256). */
  hash?: "SHA-256" | "SHA-384" | "SHA-512";
  /** The signing secret (default {@linkcode MATRIX_SECRET}). */
  secret?: string;
}

/** Signs a payload JSON text (HMAC over `header.payload`, as JWS compact serialization). */
export async function mint(payload: string, options: MintOptions = {}): Promise<string> {
  const header = options.header ?? `{"alg":"HS256","typ":"JWT"}`;
  const named = /"alg":"HS(256|384|512)"/.exec(header)?.[1];
  const hash = options.hash ?? `SHA-${named ?? "256"}`;
  const input = `${segment(header)}.${segment(payload)}`;
  return `${input}.${b64url(await hmac(hash, options.secret ?? MATRIX_SECRET, input))}`;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/**
 * Builds every row. `now` is the current Unix time in seconds.
 *
 * @param now Seconds since the epoch.
 */
export async function buildMatrix(now = Math.floor(Date.now() / 1000)): Promise<MatrixCase[]> {
  const rows: MatrixCase[] = [];
  const later = now + 600;
  const iss = `"iss":"${MATRIX_ISSUER}"`;
  const aud = `"aud":"${MATRIX_AUDIENCE}"`;
  /** A payload valid in the strict configuration, with `extra` members added. */
  const claims = (extra = "", exp = `"exp":${later}`) =>
    `{${[iss, aud, exp, extra].filter(Boolean).join(",")}}`;
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const add = async (
    name: string,
    accept: boolean,
    payload: string,
    options: MintOptions & { config?: MatrixConfig } = {},
  ) => {
    rows.push({
      name,
      config: options.config ?? "strict",
      headers: bearer(await mint(payload, options)),
      accept,
    });
  };
  const good = await mint(claims());
  const [goodHeader, goodPayload, goodSignature] = good.split(".") as [string, string, string];

  // Valid tokens.
  await add("good token", true, claims());
  await add(
    "good token with sub, iat, jti and a past nbf",
    true,
    claims(
      `"sub":"agent-7","iat":${now},"jti":"j1","nbf":${now - 10}`,
    ),
  );
  await add("good token with a kid and no typ", true, claims(), {
    header: `{"alg":"HS256","kid":"k1"}`,
  });
  await add("good token with a null nbf", true, claims(`"nbf":null`));

  // Time claims (skew 60 s in strict, 30 s in open).
  await add("expired 120 s ago (beyond the 60 s skew)", false, claims("", `"exp":${now - 120}`));
  await add("expired 30 s ago (within the 60 s skew)", true, claims("", `"exp":${now - 30}`));
  await add("nbf 30 s ahead (within the 60 s skew)", true, claims(`"nbf":${now + 30}`));
  await add("nbf 120 s ahead (beyond the 60 s skew)", false, claims(`"nbf":${now + 120}`));
  await add("expired 15 s ago (within the default 30 s skew)", true, `{"exp":${now - 15}}`, {
    config: "open",
  });
  await add("expired 60 s ago (beyond the default 30 s skew)", false, `{"exp":${now - 60}}`, {
    config: "open",
  });
  await add(
    "nbf 60 s ahead (beyond the default 30 s skew)",
    false,
    `{"exp":${later},"nbf":${now + 60}}`,
    { config: "open" },
  );
  await add("missing exp", false, `{${iss},${aud}}`);
  await add("missing exp, nothing configured", false, `{"sub":"x"}`, { config: "open" });
  await add("exp null", false, claims("", `"exp":null`));
  await add("exp as a string", false, claims("", `"exp":"${later}"`));
  await add("exp with a fraction", false, claims("", `"exp":${later}.5`));
  await add("exp written as a float with .0", false, claims("", `"exp":${later}.0`));
  await add("exp in exponent form", false, claims("", `"exp":1e10`));
  await add("exp beyond 64 bits", false, claims("", `"exp":18446744073709551616`));
  await add("exp at the largest 64-bit integer", true, claims("", `"exp":9223372036854775807`));
  await add("exp true", false, claims("", `"exp":true`));
  await add("exp given twice", false, claims(`"exp":${later}`));
  await add("nbf as a string", false, claims(`"nbf":"${now}"`));
  await add("nbf with a fraction", false, claims(`"nbf":${now}.5`));

  // Issuer.
  await add("wrong issuer", false, claims().replace(MATRIX_ISSUER, "mallory"));
  await add("issuer in another case", false, claims().replace(MATRIX_ISSUER, "Orchestrator"));
  await add(
    "issuer with a trailing space",
    false,
    claims().replace(MATRIX_ISSUER, "orchestrator "),
  );
  await add("missing issuer", false, `{${aud},"exp":${later}}`);
  await add("null issuer", false, `{"iss":null,${aud},"exp":${later}}`);
  await add("issuer as an array", false, `{"iss":["${MATRIX_ISSUER}"],${aud},"exp":${later}}`);
  await add("any issuer when none is configured", true, `{"iss":"mallory","exp":${later}}`, {
    config: "open",
  });
  await add("numeric issuer when none is configured", false, `{"iss":7,"exp":${later}}`, {
    config: "open",
  });

  // Audience.
  await add("wrong audience", false, claims().replace(`${aud}`, `"aud":"other"`));
  await add("missing audience", false, `{${iss},"exp":${later}}`);
  await add("null audience", false, claims().replace(`${aud}`, `"aud":null`));
  await add(
    "audience array containing it",
    true,
    claims().replace(`${aud}`, `"aud":["other","${MATRIX_AUDIENCE}"]`),
  );
  await add(
    "audience array not containing it",
    false,
    claims().replace(`${aud}`, `"aud":["other","exec-server-2"]`),
  );
  await add("empty audience array", false, claims().replace(`${aud}`, `"aud":[]`));
  await add(
    "audience array containing it and a number",
    false,
    claims().replace(`${aud}`, `"aud":[7,"${MATRIX_AUDIENCE}"]`),
  );
  await add("audience in another case", false, claims().replace(`${aud}`, `"aud":"Exec-Server"`));
  await add(
    "any audience array when none is configured",
    true,
    `{"aud":["a","b"],"exp":${later}}`,
    {
      config: "open",
    },
  );
  await add("numeric audience when none is configured", false, `{"aud":7,"exp":${later}}`, {
    config: "open",
  });

  // Algorithms and keys.
  await add("HS384", false, claims(), { header: `{"alg":"HS384","typ":"JWT"}` });
  await add("HS512", false, claims(), { header: `{"alg":"HS512","typ":"JWT"}` });
  await add("RS256 header over an HMAC-SHA256 signature", false, claims(), {
    header: `{"alg":"RS256","typ":"JWT"}`,
  });
  await add("ES256 header over an HMAC-SHA256 signature", false, claims(), {
    header: `{"alg":"ES256","typ":"JWT"}`,
  });
  await add("lower-case hs256", false, claims(), { header: `{"alg":"hs256","typ":"JWT"}` });
  await add("no alg", false, claims(), { header: `{"typ":"JWT"}` });
  await add("HS256 header over an HMAC-SHA512 signature", false, claims(), { hash: "SHA-512" });
  const none = `${segment(`{"alg":"none","typ":"JWT"}`)}.${goodPayload}`;
  rows.push({
    name: "alg none, empty signature",
    config: "strict",
    headers: bearer(`${none}.`),
    accept: false,
  });
  rows.push({
    name: "alg none, HS256 signature kept",
    config: "strict",
    headers: bearer(`${none}.${goodSignature}`),
    accept: false,
  });
  rows.push({
    name: "alg none, nothing configured",
    config: "open",
    headers: bearer(`${segment(`{"alg":"none"}`)}.${segment(`{"exp":${later}}`)}.`),
    accept: false,
  });
  await add("wrong key", false, claims(), { secret: MATRIX_SECRET.replace(/.$/, "0") });
  await add("key with the file's newline kept", false, claims(), { secret: `${MATRIX_SECRET}\n` });
  await add("crit header naming exp (not enforced by the reference)", true, claims(), {
    header: `{"alg":"HS256","crit":["exp"]}`,
  });
  await add("b64 false header (ignored by the reference)", true, claims(), {
    header: `{"alg":"HS256","b64":false,"crit":["b64"]}`,
  });
  await add("typ as a number", false, claims(), { header: `{"alg":"HS256","typ":7}` });
  await add("header given as an array", false, claims(), { header: `["HS256"]` });
  await add(
    "payload given as an array",
    false,
    `[${later},null,"${MATRIX_ISSUER}","${MATRIX_AUDIENCE}"]`,
  );
  await add("payload not JSON", false, "exp=1");
  await add("typ null", true, claims(), { header: `{"alg":"HS256","typ":null}` });
  await add("kid as a number", false, claims(), { header: `{"alg":"HS256","kid":7}` });
  await add("empty jwk in the header", false, claims(), { header: `{"alg":"HS256","jwk":{}}` });
  // A `jwk` header member is decoded as a JWK and never used as the key.
  const forged = "a forged secret that only the token's maker holds";
  const octKey = (secret: string) => `{"kty":"oct","k":"${b64url(encoder.encode(secret))}"}`;
  await add("jwk naming another key, the token signed with it", false, claims(), {
    header: `{"alg":"HS256","jwk":${octKey(forged)}}`,
    secret: forged,
  });
  await add("jwk naming another key, alg HS256 in it, the token signed with it", false, claims(), {
    header: `{"alg":"HS256","jwk":${octKey(forged).replace("}", `,"alg":"HS256"}`)}}`,
    secret: forged,
  });
  const jwkRows: [string, boolean, string][] = [
    ["jwk null", true, "null"],
    ["jwk naming the shared secret", true, octKey(MATRIX_SECRET)],
    ["jwk as a string", false, `"x"`],
    ["jwk as an array", false, "[]"],
    ["jwk: RSA key", true, `{"kty":"RSA","n":"AQAB","e":"AQAB"}`],
    ["jwk: RSA key without e", false, `{"kty":"RSA","n":"AQAB"}`],
    ["jwk: EC key on P-521", true, `{"kty":"EC","crv":"P-521","x":"AA","y":"AA"}`],
    ["jwk: EC key on an unknown curve", false, `{"kty":"EC","crv":"P-999","x":"AA","y":"AA"}`],
    ["jwk: OKP key on Ed25519", true, `{"kty":"OKP","crv":"Ed25519","x":"AA"}`],
    [
      "jwk: OKP key on X25519 (not a curve the reference knows)",
      false,
      `{"kty":"OKP","crv":"X25519","x":"AA"}`,
    ],
    ["jwk: kty in upper case", false, `{"kty":"OCT","k":"AA"}`],
    ["jwk: no kty", false, `{"k":"AA"}`],
    [
      "jwk: k not base64 (the reference does not decode it)",
      true,
      `{"kty":"oct","k":"not base64 !!"}`,
    ],
    ["jwk: k a number", false, `{"kty":"oct","k":7}`],
    ["jwk: k null", false, `{"kty":"oct","k":null}`],
    [
      "jwk: every common member",
      true,
      `{"kty":"oct","k":"AA","use":"sig","key_ops":["verify"],"alg":"HS256","kid":"k1","x5u":"u","x5c":["a"],"x5t":"t","x5t#S256":"s"}`,
    ],
    [
      "jwk: common members null",
      true,
      `{"kty":"oct","k":"AA","use":null,"alg":null,"kid":null,"x5c":null}`,
    ],
    ["jwk: use and key_ops of any text", true, `{"kty":"oct","k":"AA","use":"x","key_ops":["y"]}`],
    ["jwk: alg RSA-OAEP-256", true, `{"kty":"oct","k":"AA","alg":"RSA-OAEP-256"}`],
    ["jwk: alg ES512 (not one the reference knows)", false, `{"kty":"oct","k":"AA","alg":"ES512"}`],
    ["jwk: alg in lower case", false, `{"kty":"oct","k":"AA","alg":"hs256"}`],
    ["jwk: key_ops as a string", false, `{"kty":"oct","k":"AA","key_ops":"verify"}`],
    ["jwk: key_ops holding null", false, `{"kty":"oct","k":"AA","key_ops":[null]}`],
    ["jwk: kid a number", false, `{"kty":"oct","k":"AA","kid":7}`],
    ["jwk: x5c as a string", false, `{"kty":"oct","k":"AA","x5c":"a"}`],
    ["jwk: k given twice", false, `{"kty":"oct","k":"AA","k":"AB"}`],
    ["jwk: kid given twice, both null", false, `{"kty":"oct","k":"AA","kid":null,"kid":null}`],
    ["jwk: kty given twice, once escaped", false, `{"kty":"oct","k":"AA","k\\u0074y":"oct"}`],
    ["jwk: unknown member given twice", true, `{"kty":"oct","k":"AA","z":1,"z":2}`],
    ["jwk: another key type's member given twice", true, `{"kty":"oct","k":"AA","n":"a","n":"b"}`],
    ["jwk: another key type's member of the wrong type", true, `{"kty":"oct","k":"AA","x":7}`],
    ["jwk: EC key with a y of the wrong type", false, `{"kty":"EC","crv":"P-256","x":"AA","y":7}`],
    ["jwk: lone surrogate in an unknown member", false, `{"kty":"oct","k":"AA","z":["\\udc00"]}`],
    ["jwk: lone surrogate in a member name", false, `{"kty":"oct","k":"AA","\\ud800":1}`],
    ["jwk: a number beyond 64-bit floats", true, `{"kty":"oct","k":"AA","z":1e400}`],
    [
      "jwk: nested 126 deep",
      true,
      `{"kty":"oct","k":"AA","z":${"[".repeat(125)}${"]".repeat(125)}}`,
    ],
    [
      "jwk: nested 127 deep",
      false,
      `{"kty":"oct","k":"AA","z":${"[".repeat(126)}${"]".repeat(126)}}`,
    ],
  ];
  for (const [name, accept, jwk] of jwkRows) {
    await add(name, accept, claims(), { header: `{"alg":"HS256","jwk":${jwk}}` });
  }
  await add("jwk given twice", false, claims(), {
    header: `{"alg":"HS256","jwk":${octKey(MATRIX_SECRET)},"jwk":null}`,
  });
  await add("unknown header member nested 300 deep", true, claims(), {
    header: `{"alg":"HS256","z":${"[".repeat(300)}${"]".repeat(300)}}`,
  });
  await add("lone surrogate in an unknown header member", true, claims(), {
    header: `{"alg":"HS256","z":"\\ud800"}`,
  });
  await add("x5c as an array of strings", true, claims(), {
    header: `{"alg":"HS256","x5c":["a"]}`,
  });
  await add("x5c as a string", false, claims(), { header: `{"alg":"HS256","x5c":"a"}` });
  await add("unknown header member given twice", true, claims(), {
    header: `{"alg":"HS256","foo":1,"foo":2}`,
  });
  await add("typ given twice", false, claims(), { header: `{"alg":"HS256","typ":"a","typ":"b"}` });
  await add("alg given twice", false, claims(), { header: `{"alg":"HS256","alg":"HS256"}` });
  await add("whitespace around the header and payload JSON", true, ` ${claims()} `, {
    header: ` {"alg":"HS256"} `,
  });
  await add("byte order mark before the payload", false, `\ufeff${claims()}`);
  await add("characters after the payload JSON", false, `${claims()}x`);
  await add("unknown claim given twice", true, claims(`"foo":1,"foo":2`));
  await add("sub given twice", false, claims(`"sub":"a","sub":"b"`));
  await add("duplicate keys nested in an unknown claim", true, claims(`"x":{"a":1,"a":2}`));
  await add("numeric sub", true, claims(`"sub":5`));
  await add("lone surrogate in an unknown claim", true, claims(`"x":"\\ud800"`));
  await add(
    "lone surrogate in the issuer, none configured",
    false,
    `{"iss":"a\\ud800","exp":${later}}`,
    {
      config: "open",
    },
  );
  await add("escaped issuer", true, claims().replace(MATRIX_ISSUER, "orches\\u0074rator"));
  await add("claim nested 1000 deep", true, claims(`"x":${"[".repeat(1000)}${"]".repeat(1000)}`));
  await add("6000-character claim", true, claims(`"x":"${"a".repeat(6000)}"`));
  await add("nbf -0", false, claims(`"nbf":-0`));
  await add("nbf at the smallest 64-bit integer", true, claims(`"nbf":-9223372036854775808`));
  await add("nbf at the largest 64-bit integer", false, claims(`"nbf":9223372036854775807`));
  await add("exp at the smallest 64-bit integer", false, claims("", `"exp":-9223372036854775808`));
  await add("exp 2^63", false, claims("", `"exp":9223372036854775808`));

  // Tampering and malformed encodings.
  const flip = (s: string, at: number, xor: number) =>
    s.slice(0, at) + ALPHABET[ALPHABET.indexOf(s[at]!) ^ xor]! + s.slice(at + 1);
  const raw = (name: string, token: string, accept = false) =>
    rows.push({ name, config: "strict", headers: bearer(token), accept });
  raw(
    "tampered signature (first character)",
    `${goodHeader}.${goodPayload}.${flip(goodSignature, 0, 1)}`,
  );
  // The last of 43 characters carries 4 bits of the MAC and 2 unused bits: flipping an unused
  // bit changes the text, not the decoded bytes.
  raw(
    "signature with a non-canonical last character",
    `${goodHeader}.${goodPayload}.${flip(goodSignature, goodSignature.length - 1, 1)}`,
  );
  raw("signature with base64 padding", `${good}=`);
  raw(
    "signature in standard base64",
    `${goodHeader}.${goodPayload}.${goodSignature.replaceAll("-", "+").replaceAll("_", "/")}${
      goodSignature.includes("-") || goodSignature.includes("_") ? "" : "+"
    }`,
  );
  raw(
    "space inside the signature",
    `${goodHeader}.${goodPayload}.${goodSignature.slice(0, 10)} ${goodSignature.slice(10)}`,
  );
  raw(
    "tampered payload (later exp, old signature)",
    `${goodHeader}.${segment(claims("", `"exp":${later + 1}`))}.${goodSignature}`,
  );
  raw("truncated signature", good.slice(0, -2));
  raw("signature dropped", `${goodHeader}.${goodPayload}.`);
  raw("two segments", `${goodHeader}.${goodPayload}`);
  raw("four segments", `${good}.${goodSignature}`);
  raw("one segment", "abc");
  raw("only dots", "..");
  raw("token twice", `${good} ${good}`);

  // Authorization header forms.
  const header = (name: string, value: string, accept: boolean) =>
    rows.push({ name, config: "strict", headers: { Authorization: value }, accept });
  header("lower-case bearer scheme", `bearer ${good}`, true);
  header("upper-case BEARER scheme", `BEARER ${good}`, true);
  header("two spaces after the scheme", `Bearer  ${good}`, true);
  header("trailing spaces", `Bearer ${good}   `, true);
  header("tab after the scheme", `Bearer\t${good}`, false);
  header("Basic scheme", `Basic ${good}`, false);
  header("no scheme", good, false);
  header("scheme only", "Bearer", false);
  header("scheme and a space", "Bearer ", false);
  rows.push({ name: "no Authorization header", config: "strict", headers: {}, accept: false });
  return rows;
}
