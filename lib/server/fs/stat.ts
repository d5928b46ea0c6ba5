/**
 * `lstat` that answers `undefined` for a missing path.
 *
 * @module
 */

/**
 * The `lstat` of `path`, or `undefined` when nothing is there.
 *
 * @param path Native absolute path.
 * @throws Any other OS error.
 *
 * @example
 * ```ts
 * import { lstatOrUndefined } from "./stat.ts";
 * console.log(await lstatOrUndefined("/no/such/path")); // undefined
 * ```
 */
export async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}
