import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { sha1 } from "../lib/server/listen/sha1.ts";
import { acceptKey } from "../lib/server/listen/websocket_conn.ts";

const ENCODER = new TextEncoder();

function hex(bytes: Uint8Array): string {
  return bytes.toHex();
}

Deno.test("the Sec-WebSocket-Accept of RFC 6455's sample key is the RFC's value", () => {
  assertEquals(acceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
});

Deno.test("sha1 gives the FIPS 180-4 example digests (one block, two blocks, empty)", () => {
  assertEquals(hex(sha1(ENCODER.encode("abc"))), "a9993e364706816aba3e25717850c26c9cd0d89d");
  assertEquals(
    hex(sha1(ENCODER.encode("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
    "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
  );
  assertEquals(hex(sha1(new Uint8Array(0))), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
});

Deno.test("sha1 of one million 'a' is the FIPS 180-4 digest", () => {
  assertEquals(
    hex(sha1(new Uint8Array(1_000_000).fill(0x61))),
    "34aa973cd4c4daa4f61eeb2bdbad27316534016f",
  );
});

Deno.test("sha1 agrees with crypto.subtle.digest for every length 0..200 (padding edges 55, 56, 63, 64)", async () => {
  for (let length = 0; length <= 200; length++) {
    const message = crypto.getRandomValues(new Uint8Array(length));
    const expected = new Uint8Array(await crypto.subtle.digest("SHA-1", message));
    assertEquals(hex(sha1(message)), hex(expected), `length ${length}`);
  }
});

Deno.test("sha1 reads only the message's own bytes of a view into a larger buffer", async () => {
  const buffer = crypto.getRandomValues(new Uint8Array(300));
  const message = buffer.subarray(7, 7 + 130);
  const expected = new Uint8Array(await crypto.subtle.digest("SHA-1", message.slice()));
  assertEquals(hex(sha1(message)), hex(expected));
});
