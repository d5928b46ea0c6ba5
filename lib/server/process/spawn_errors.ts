/**
 * The reference's `process/start` errors for a failed spawn, by errno.
 *
 * @module
 */

import { kindError, type RpcError } from "../../protocol/errors.ts";
import { osErrorMessage } from "../host/os_errors.ts";

/**
 * The spawn error for an errno name: `spawnNotFound` for `ENOENT`,
 * `spawnPermissionDenied` for `EACCES`, else `spawnFailed`, with the OS's
 * message (`No such file or directory (os error 2)`).
 *
 * @param code The errno name, e.g. `"ENOENT"`.
 *
 * @example
 * ```ts
 * import { spawnErrorFromErrno } from "./spawn_errors.ts";
 * console.log(spawnErrorFromErrno("ENOENT").data); // { kind: "spawnNotFound" }
 * ```
 */
export function spawnErrorFromErrno(code: string | undefined): RpcError {
  const message = (code && osErrorMessage(code)) ?? "failed to spawn process";
  const kind = code === "ENOENT"
    ? "spawnNotFound"
    : code === "EACCES"
    ? "spawnPermissionDenied"
    : "spawnFailed";
  return kindError(kind, message);
}
