import assert from "node:assert/strict";
import { unmask, wordsOf } from "../lib/server/listen/unmask.ts";

/** RFC 6455 §5.3 as written: payload byte j is XORed with key byte j mod 4. */
function maskedBytes(payload: Uint8Array, key: Uint8Array, offset: number): Uint8Array {
  return payload.map((byte, j) => byte ^ key[(offset + j) & 3]!);
}

Deno.test("unmask restores payloads at every buffer alignment, payload offset and length around the word loop", () => {
  const key = Uint8Array.of(0x3c, 0xa5, 0x01, 0xfe);
  for (let length = 0; length <= 40; length++) {
    for (let from = 4; from < 12; from++) {
      for (let offset = 0; offset < 4; offset++) {
        const payload = Uint8Array.from({ length }, (_, j) => (j * 37 + from) & 0xff);
        // The key sits just before the payload, as in a frame; 5 spare bytes after it stay as they are.
        const bytes = new Uint8Array(from + length + 5).fill(0x77);
        bytes.set(key, from - 4);
        bytes.set(maskedBytes(payload, key, offset), from);
        unmask(bytes, wordsOf(bytes), from, from + length, bytes, from - 4, offset);
        assert.deepEqual(
          bytes.subarray(from, from + length),
          payload,
          `${length} at ${from}+${offset}`,
        );
        assert.deepEqual(bytes.subarray(0, from - 4), new Uint8Array(from - 4).fill(0x77));
        assert.deepEqual(bytes.subarray(from - 4, from), key);
        assert.deepEqual(bytes.subarray(from + length), new Uint8Array(5).fill(0x77));
      }
    }
  }
});
