/**
 * SHA-1 (FIPS 180-4 §6.1), synchronous, for the `Sec-WebSocket-Accept` of
 * each WebSocket handshake (RFC 6455 §4.2.2). `crypto.subtle.digest` is
 * asynchronous: each call is a round trip through Deno's blocking thread
 * pool. Measured here (2026-12-01, CPU of all threads per hash of a
 * handshake's 60 bytes, medians of fresh processes): over the first 1000
 * hashes about 19 µs against 44 for `crypto.subtle`; over the first 100,
 * before V8 has compiled this function, about the same (73 against 71 µs).
 * SHA-1 is not collision resistant; the handshake needs it only because the
 * RFC names it. Nothing else here should use it.
 *
 * @module
 */

/** The message schedule (FIPS 180-4 §6.1.2 step 1), reused by every call. */
const SCHEDULE = new Int32Array(80);

/** Bytes of one block. */
const BLOCK_BYTES = 64;

/**
 * The SHA-1 digest of `message`.
 *
 * @example RFC 6455's sample handshake
 * ```ts
 * import { sha1 } from "./sha1.ts";
 * const text = "dGhlIHNhbXBsZSBub25jZQ==" + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
 * const digest = sha1(new TextEncoder().encode(text));
 * if (digest.toBase64() !== "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") throw new Error("wrong digest");
 * ```
 *
 * @param message The bytes to digest.
 * @returns The 20-byte digest.
 */
export function sha1(message: Uint8Array): Uint8Array {
  // Padding (§5.1.1): a 1 bit, zeros up to 56 bytes mod 64, then the bit length in 64 bits.
  const blocks = Math.floor((message.length + 8) / BLOCK_BYTES) + 1;
  const padded = new Uint8Array(blocks * BLOCK_BYTES);
  padded.set(message);
  padded[message.length] = 0x80;
  const view = new DataView(padded.buffer);
  const bits = message.length * 8;
  view.setUint32(padded.length - 8, Math.floor(bits / 0x1_0000_0000));
  view.setUint32(padded.length - 4, bits >>> 0);

  // Initial hash value (§5.3.1).
  let h0 = 0x67452301;
  let h1 = 0xefcdab89 | 0;
  let h2 = 0x98badcfe | 0;
  let h3 = 0x10325476;
  let h4 = 0xc3d2e1f0 | 0;
  const w = SCHEDULE;
  for (let offset = 0; offset < padded.length; offset += BLOCK_BYTES) {
    for (let t = 0; t < 16; t++) w[t] = view.getInt32(offset + 4 * t);
    for (let t = 16; t < 80; t++) {
      const x = w[t - 3]! ^ w[t - 8]! ^ w[t - 14]! ^ w[t - 16]!;
      w[t] = (x << 1) | (x >>> 31);
    }
    let a = h0;
    let b = h1;
    let c = h2;
    let d = h3;
    let e = h4;
    for (let t = 0; t < 80; t++) {
      // The function and constant of each group of 20 rounds (§4.1.1, §4.2.1).
      let f: number;
      let k: number;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const temp = (((a << 5) | (a >>> 27)) + f + e + k + w[t]!) | 0;
      e = d;
      d = c;
      c = (b << 30) | (b >>> 2);
      b = a;
      a = temp;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + b) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
  }
  const digest = new Uint8Array(20);
  const out = new DataView(digest.buffer);
  out.setInt32(0, h0);
  out.setInt32(4, h1);
  out.setInt32(8, h2);
  out.setInt32(12, h3);
  out.setInt32(16, h4);
  return digest;
}
