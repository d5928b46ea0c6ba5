/**
 * Joining byte chunks.
 *
 * @module
 */

/**
 * The chunks one after the other in one array (the only chunk itself, uncopied).
 *
 * @param parts The chunks, in order.
 * @param total Their summed length, when the caller kept count.
 *
 * @example
 * ```ts
 * import { concatBytes } from "./bytes.ts";
 * console.log(concatBytes([new Uint8Array([1]), new Uint8Array([2, 3])])); // Uint8Array(3) [ 1, 2, 3 ]
 * ```
 */
export function concatBytes(
  parts: readonly Uint8Array[],
  total: number = parts.reduce((sum, part) => sum + part.length, 0),
): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}
