/**
 * Unmasking of client WebSocket payloads (RFC 6455 section 5.3), in place and a
 * 32-bit word at a time through a word view of the whole buffer that a
 * connection makes once per read buffer, not once per message.
 *
 * @module
 */

/** Whether this machine stores the low byte of a 32-bit word first (it decides the mask word). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Payloads shorter than this are unmasked byte by byte (no word fits between their ends). */
const WORD_LOOP_BYTES = 8;

/**
 * The whole 32-bit words of `bytes`' buffer, for {@linkcode unmask}.
 *
 * @example
 * ```ts
 * import { wordsOf } from "./unmask.ts";
 * console.log(wordsOf(new Uint8Array(10)).length); // 2
 * ```
 *
 * @param bytes A view that starts at the beginning of its buffer.
 */
export function wordsOf(bytes: Uint8Array): Uint32Array {
  return new Uint32Array(bytes.buffer, 0, bytes.buffer.byteLength >>> 2);
}

/**
 * XORs the payload bytes `bytes[from, to)` with a frame's masking key
 * `mask[maskAt, maskAt + 4)`, `offset` being the position of `bytes[from]` in
 * the frame's payload: byte by byte up to a 4-byte boundary of the buffer,
 * then a word at a time through `words` with the key rotated to that
 * boundary, then the last bytes. The all-zero key leaves the payload as it
 * is, so it returns at once (a client may send it; real clients do not: they
 * draw a random key per frame, as RFC 6455 requires, and the benchmark's
 * client does too).
 *
 * @example
 * ```ts
 * import { unmask, wordsOf } from "./unmask.ts";
 * const frame = new Uint8Array([0x81, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2]); // "hi", key 1 2 3 4
 * unmask(frame, wordsOf(frame), 6, 8, frame, 2);
 * console.log(new TextDecoder().decode(frame.subarray(6))); // hi
 * ```
 *
 * @param bytes A view that starts at the beginning of its buffer (`byteOffset` 0).
 * @param words {@linkcode wordsOf} `bytes`, made once per buffer.
 * @param from Where the payload bytes start in `bytes`.
 * @param to Where they end.
 * @param mask Holds the 4-byte masking key.
 * @param maskAt Where the key starts in `mask`.
 * @param offset The payload offset of `bytes[from]` (a frame unmasked in pieces).
 */
export function unmask(
  bytes: Uint8Array,
  words: Uint32Array,
  from: number,
  to: number,
  mask: Uint8Array,
  maskAt: number,
  offset = 0,
): void {
  let i = from;
  // Key byte k masks payload offsets k, k + 4, ...: bytes[i] takes key byte (offset + i - from) & 3.
  const phase = offset - from;
  if (to - from >= WORD_LOOP_BYTES) {
    const aligned = (from + 3) & ~3;
    for (; i < aligned; i++) bytes[i]! ^= mask[maskAt + ((phase + i) & 3)]!;
    const k = (phase + i) & 3;
    const b0 = mask[maskAt + k]!;
    const b1 = mask[maskAt + ((k + 1) & 3)]!;
    const b2 = mask[maskAt + ((k + 2) & 3)]!;
    const b3 = mask[maskAt + ((k + 3) & 3)]!;
    const word = LITTLE_ENDIAN
      ? (b0 | (b1 << 8) | (b2 << 16) | (b3 << 24))
      : ((b0 << 24) | (b1 << 16) | (b2 << 8) | b3);
    if (word === 0) return;
    const last = to >>> 2;
    for (let w = i >>> 2; w < last; w++) words[w]! ^= word;
    i = last << 2;
  }
  for (; i < to; i++) bytes[i]! ^= mask[maskAt + ((phase + i) & 3)]!;
}
