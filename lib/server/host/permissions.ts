/**
 * Scoping of requests by the server's own Deno permission flags.
 *
 * Every check asks Deno's permissions before the operation runs, so a
 * request outside the flags gets a typed protocol error instead of Deno's
 * interactive prompt or a `NotCapable` crash. Whether a whole permission is
 * granted without a scope (`--allow-read`, `--allow-all`) is asked once per
 * name and remembered ({@linkcode grantedEverywhere}): a grant changes at run
 * time only through `Deno.permissions.revoke` or `request`, which the server
 * never calls. Scoped answers are asked per path, each time.
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import { fsSyscallsAvailable } from "./fs_syscalls.ts";
import { osError } from "./os_errors.ts";
import {
  permissionDenied,
  type PermissionDeniedData,
  type PermissionName,
} from "./permission_errors.ts";

const UNSCOPED = new Map<Deno.PermissionName, boolean>();

/**
 * Whether `permission` is granted for every resource (the flag without a
 * scope, or `--allow-all`, and no `--deny-*` exception). Asked once per name: the server never revokes
 * nor requests a permission, so the answer holds for its lifetime.
 *
 * @example
 * ```ts
 * import { grantedEverywhere } from "./permissions.ts";
 * console.log(typeof grantedEverywhere("read")); // "boolean"
 * ```
 *
 * @param permission The permission's name.
 */
export function grantedEverywhere(permission: Deno.PermissionName): boolean {
  let granted = UNSCOPED.get(permission);
  if (granted === undefined) {
    const status = Deno.permissions.querySync({ name: permission });
    // `partial`: granted with exceptions (Deno's `--deny-*`), so each resource is asked.
    granted = status.state === "granted" && status.partial !== true;
    UNSCOPED.set(permission, granted);
  }
  return granted;
}

function check(
  descriptor: Deno.PermissionDescriptor,
  permission: PermissionName,
  resource: string,
): void {
  if (Deno.permissions.querySync(descriptor).state !== "granted") {
    throw permissionDenied(permission, resource);
  }
}

/**
 * The path with its symlinks resolved as far as it exists (the missing rest
 * appended), or `undefined` when it cannot be resolved (a loop, or no read
 * permission to resolve it).
 */
function resolvedPath(path: string): string | undefined {
  const rest: string[] = [];
  let current = path;
  for (;;) {
    try {
      const real = Deno.realPathSync(current);
      if (rest.length === 0) return real;
      return `${real === "/" ? "" : real}/${rest.reverse().join("/")}`;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound) || current === "/") return undefined;
      const slash = current.lastIndexOf("/");
      rest.push(current.slice(slash + 1));
      current = slash <= 0 ? "/" : current.slice(0, slash);
    }
  }
}

/**
 * Checks a path permission on the path as given and, when the permission is
 * scoped, on the path with its symlinks resolved: Deno checks paths
 * lexically, so a link inside the scope would otherwise lead out of it.
 * (A check-then-use race with a concurrent link swap remains.)
 */
function checkPath(permission: "read" | "write", path: string): void {
  if (grantedEverywhere(permission)) return;
  check({ name: permission, path }, permission, path);
  const real = resolvedPath(path);
  if (real !== undefined && real !== path) {
    check({ name: permission, path: real }, permission, real);
  }
  // With --allow-ffi writes are resolved on descriptors (`fs/resolve.ts`); without it a write
  // whose symlinks cannot be followed here, or that ends in a dangling link, is refused.
  if (permission === "write" && !fsSyscallsAvailable()) {
    if (real === undefined) throw permissionDenied("read", path);
    if (isSymlink(real)) throw permissionDenied("write", path);
  }
}

function isSymlink(path: string): boolean {
  try {
    return Deno.lstatSync(path).isSymlink;
  } catch {
    return false;
  }
}

/**
 * Throws unless the server may read `path` (and the file its symlinks lead to).
 *
 * @param path An absolute native path.
 * @throws {RpcError} `-32600` with {@linkcode PermissionDeniedData}.
 */
export function requireRead(path: string): void {
  checkPath("read", path);
}

/**
 * For metadata lookups (`fs/getMetadata`, `fs/canonicalize`): throws the
 * not-found error of a missing path unless the server may read `path` (and
 * the file its symlinks lead to). A path outside the read scope thus answers
 * exactly like one that does not exist, revealing nothing about it, and a
 * client probing parent directories (Codex looks for `.git` and `AGENTS.md`
 * in each) sees the answer it expects for an absent file.
 *
 * @param path An absolute native path.
 * @throws {RpcError} `-32004` `No such file or directory (os error 2)`.
 */
export function requireReadOrMissing(path: string): void {
  try {
    checkPath("read", path);
  } catch (err) {
    if (err instanceof RpcError) throw osError("ENOENT");
    throw err;
  }
}

/**
 * Throws unless the server may write `path` (and the file its symlinks lead to).
 *
 * @param path An absolute native path.
 * @throws {RpcError} `-32600` with {@linkcode PermissionDeniedData}.
 */
export function requireWrite(path: string): void {
  checkPath("write", path);
}

/**
 * Throws unless the server may connect to `host:port`.
 *
 * @param host A host name or IP address (IPv6 without brackets is fine).
 * @param port The TCP port.
 * @throws {RpcError} `-32600` with {@linkcode PermissionDeniedData}.
 */
export function requireNet(host: string, port: number): void {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const shown = bare.includes(":") ? `[${bare}]:${port}` : `${bare}:${port}`;
  check({ name: "net", host: shown }, "net", shown);
}

/**
 * Throws unless the server may run `program` (a name looked up on `PATH` or a path).
 *
 * @param program The program as it will be spawned.
 * @throws {RpcError} `-32600` with {@linkcode PermissionDeniedData}.
 */
export function requireRun(program: string): void {
  // An unscoped --allow-run grants every program: no query per spawn.
  if (grantedEverywhere("run")) return;
  check({ name: "run", command: program }, "run", program);
}

/**
 * Throws when the child environment holds dynamic-loader variables
 * (`LD_*`, `DYLD_*`) while the run permission is scoped: they would let a
 * child run code outside `--allow-run` (Deno refuses them the same way).
 *
 * @param env The child's environment.
 * @throws {RpcError} `-32600` with {@linkcode PermissionDeniedData}.
 */
export function requireSafeLoaderEnv(env: Record<string, string>): void {
  if (grantedEverywhere("run")) return;
  const name = Object.keys(env).find((key) => /^(LD|DYLD)_/.test(key));
  if (name !== undefined) throw loaderEnvRefused(name);
}

/** The error of {@linkcode requireSafeLoaderEnv} for the variable `name`. */
function loaderEnvRefused(name: string): RpcError {
  const data: PermissionDeniedData = {
    kind: "permissionDenied",
    permission: "run",
    resource: name,
    flag: "--allow-run",
  };
  return new RpcError(
    ErrorCode.InvalidRequest,
    `environment variable "${name}" is refused while the server's --allow-run is scoped; ` +
      "start it with an unscoped --allow-run to pass dynamic-loader variables",
    { data },
  );
}

/**
 * Returns whether the server may write `path`, without throwing.
 *
 * @param path An absolute native path.
 */
export function mayWrite(path: string): boolean {
  return grantedEverywhere("write") ||
    Deno.permissions.querySync({ name: "write", path }).state === "granted";
}

/**
 * Returns whether the server may read `path`, without throwing.
 *
 * @param path An absolute native path.
 */
export function mayRead(path: string): boolean {
  return grantedEverywhere("read") ||
    Deno.permissions.querySync({ name: "read", path }).state === "granted";
}

/**
 * The warning for a server whose file requests are scoped by `--allow-read`
 * or `--allow-write` but which cannot open files on checked descriptors
 * (no `--allow-ffi`): Deno opens by path only, so between the permission
 * check and the use a local process with write access inside the scope can
 * swap a link in (docs/security.md, threat model). `undefined` when the scope is
 * race-free: either unscoped or resolved on descriptors.
 *
 * @example A server with every permission needs no warning
 * ```ts
 * import { scopeRaceWarning } from "./permissions.ts";
 * console.log(scopeRaceWarning()); // undefined under `deno test --allow-all`
 * ```
 */
export function scopeRaceWarning(): string | undefined {
  if (grantedEverywhere("read") && grantedEverywhere("write")) return undefined;
  if (grantedEverywhere("ffi")) return undefined;
  return "file requests are scoped by --allow-read/--allow-write without --allow-ffi: " +
    "checks and uses are two path lookups, so a process that can write inside the scope " +
    "can race a symlink in; add --allow-ffi to resolve them on directory descriptors";
}
