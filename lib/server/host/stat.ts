/**
 * `stat` and `lstat` that answer "nothing there" instead of throwing.
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

/**
 * The `stat` of `path` (symlinks followed), or `null` when it cannot be read.
 *
 * @param path Native absolute path.
 *
 * @example
 * ```ts
 * import { statOrNull } from "./stat.ts";
 * console.log(statOrNull("/")?.isDirectory); // true
 * ```
 */
export function statOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.statSync(path);
  } catch {
    return null;
  }
}

/**
 * The `lstat` of `path`, or `null` when it cannot be read.
 *
 * @param path Native absolute path.
 */
export function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch {
    return null;
  }
}

/**
 * The `stat` of what the symlink at `path` leads to, or `undefined` when it
 * leads nowhere the server may read: dangling, looping, or out of its read
 * scope. A listing then answers for the link alone (it is left out, as a
 * dangling link), so it reveals nothing about a target outside the scope.
 *
 * @param path Native absolute path of a symlink.
 *
 * @example
 * ```ts
 * import { linkTargetInScope } from "./stat.ts";
 * console.log(await linkTargetInScope("/no/such/link")); // undefined
 * ```
 */
export async function linkTargetInScope(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    const real = await Deno.realPath(path);
    if (Deno.permissions.querySync({ name: "read", path: real }).state !== "granted") {
      return undefined;
    }
    return await Deno.stat(real);
  } catch {
    return undefined;
  }
}
