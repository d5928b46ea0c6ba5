/**
 * Where UTF-8 text goes wrong, told as the reference (Rust's `Utf8Error`) tells it.
 *
 * @module
 */

/** The continuation bytes allowed after a lead byte, for the byte right after it. */
function secondByteRange(lead: number): [number, number] {
  if (lead === 0xe0) return [0xa0, 0xbf];
  if (lead === 0xed) return [0x80, 0x9f];
  if (lead === 0xf0) return [0x90, 0xbf];
  if (lead === 0xf4) return [0x80, 0x8f];
  return [0x80, 0xbf];
}

/** How many bytes the sequence a lead byte starts has; 0 for a byte that starts none. */
function sequenceWidth(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/**
 * Why `bytes` is not UTF-8, in the words of Rust's `Utf8Error` (`invalid utf-8 sequence of 1
 * bytes from index 2`, or `incomplete utf-8 byte sequence from index 2` when the text ends inside a
 * character); `undefined` for valid UTF-8.
 *
 * @example
 * ```ts
 * import { utf8Error } from "./utf8_error.ts";
 * console.log(utf8Error(new Uint8Array([0x61, 0x62, 0xff]))); // "invalid utf-8 sequence of 1 bytes from index 2"
 * console.log(utf8Error(new Uint8Array([0x6f, 0x6b, 0xe2, 0x82]))); // "incomplete utf-8 byte sequence from index 2"
 * console.log(utf8Error(new TextEncoder().encode("é"))); // undefined
 * ```
 */
export function utf8Error(bytes: Uint8Array): string | undefined {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index]!;
    const width = sequenceWidth(lead);
    if (width === 1) {
      index++;
      continue;
    }
    if (width === 0) return `invalid utf-8 sequence of 1 bytes from index ${index}`;
    // Each following byte must be in range; the first one out of range ends the bad sequence.
    for (let offset = 1; offset < width; offset++) {
      if (index + offset >= bytes.length) {
        return `incomplete utf-8 byte sequence from index ${index}`;
      }
      const [low, high] = offset === 1 ? secondByteRange(lead) : [0x80, 0xbf];
      const byte = bytes[index + offset]!;
      if (byte < low || byte > high) {
        return `invalid utf-8 sequence of ${offset} bytes from index ${index}`;
      }
    }
    index += width;
  }
  return undefined;
}
