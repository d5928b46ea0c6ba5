/**
 * `fs/remove` (docs/protocol.md §10.10).
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { fsError, osErrorCode } from "../host/os_errors.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { raceFreeWrites, removeAt, writeScope } from "./resolve.ts";

/**
 * `fs/remove`: removes a file, a symlink (never its target) or a directory.
 *
 * @param path Native absolute path, its write access already checked.
 * @param recursive Remove a non-empty directory with its content.
 * @param force Succeed when the path does not exist.
 * @param plans The sandbox plans the removal must stay inside (with `--allow-ffi` it is done
 * on descriptors that were checked, never through a link).
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
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/remove">> {
  try {
    if (raceFreeWrites()) removeAt(path, recursive, writeScope(path, plans));
    else await Deno.remove(path, { recursive });
  } catch (err) {
    if (!force || osErrorCode(err) !== "ENOENT") throw fsError(err);
  }
  return {};
}
