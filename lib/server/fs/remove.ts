/**
 * `fs/remove` (docs/protocol.md §10.10).
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { fsError, osErrorCode } from "../host/os_errors.ts";

/**
 * `fs/remove`: removes a file, a symlink (never its target) or a directory.
 *
 * @param path Native absolute path, its write access already checked.
 * @param recursive Remove a non-empty directory with its content.
 * @param force Succeed when the path does not exist.
 *
 * @example
 * ```ts
 * import { remove } from "./remove.ts";
 * console.log(await remove("/no/such/path", true, true)); // {}
 * ```
 */
export async function remove(
  path: string,
  recursive: boolean,
  force: boolean,
): Promise<ResultOf<"fs/remove">> {
  try {
    await Deno.remove(path, { recursive });
  } catch (err) {
    if (!force || osErrorCode(err) !== "ENOENT") throw fsError(err);
  }
  return {};
}
