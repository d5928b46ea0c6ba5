/**
 * The typed error of a request outside the server's Deno permissions: built
 * by the checks of `permissions.ts`, and converted from Deno's own refusal
 * when an operation ran into one (`os_errors.ts` passes it through).
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";

/** The Deno permissions the server checks. */
export type PermissionName = "read" | "write" | "net" | "run";

/** The `data` member of a permission error. */
export interface PermissionDeniedData {
  /** Always `"permissionDenied"`. */
  kind: "permissionDenied";
  /** The Deno permission that is missing. */
  permission: PermissionName;
  /** The path, `host:port` or program that was refused. */
  resource: string;
  /** The flag that grants the permission, e.g. `--allow-read`. */
  flag: string;
}

/**
 * Builds the typed `-32600` error for a resource outside the server's
 * permissions, e.g. `read access to "/etc/passwd" is denied by the server's
 * permissions; start it with --allow-read=/etc/passwd`.
 *
 * @param permission The missing permission.
 * @param resource The refused path, `host:port` or program.
 */
export function permissionDenied(permission: PermissionName, resource: string): RpcError {
  const flag = `--allow-${permission}`;
  const data: PermissionDeniedData = { kind: "permissionDenied", permission, resource, flag };
  return new RpcError(
    ErrorCode.InvalidRequest,
    `${permission} access to "${resource}" is denied by the server's permissions; ` +
      `start it with ${flag}=${resource}`,
    { data },
  );
}

/**
 * Converts Deno's own permission refusal (`Deno.errors.NotCapable`, or
 * `PermissionDenied` carrying Deno's "Requires ... access" text) into the
 * typed error of {@linkcode permissionDenied}; returns `undefined` for any
 * other value.
 *
 * @param err The thrown value.
 */
export function permissionDeniedFromDeno(err: unknown): RpcError | undefined {
  if (!(err instanceof Error)) return undefined;
  const match = /Requires (read|write|net|run) access to "?(.*?)"?, run again with/
    .exec(err.message);
  if (match !== null) return permissionDenied(match[1] as PermissionName, match[2]!);
  if (err instanceof Deno.errors.NotCapable) {
    return new RpcError(ErrorCode.InvalidRequest, "access is denied by the server's permissions");
  }
  return undefined;
}
