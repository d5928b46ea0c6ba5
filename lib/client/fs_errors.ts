/**
 * Typed errors of `client.fs`: one class per condition a program handles
 * (not found, permission denied, already exists, …), each carrying the path.
 * They are told apart by the error's code and `data` (`data.kind`,
 * `data.errno`), never by its message.
 *
 * @module
 */

import { ErrorCode, errorKind } from "../protocol/errors.ts";
import { RemoteError } from "../rpc/connection.ts";

/** A failed `client.fs` operation; the subclasses name the common conditions. */
export class FsError extends Error {
  /** The path the operation was about (for `copy`, the source). */
  readonly path: string;
  /** The protocol error code (e.g. -32004, -32603). */
  readonly code: number;
  /** The POSIX errno name the server reported (e.g. `EEXIST`), if any. */
  readonly errno?: string;

  /**
   * Creates the error from the server's refusal.
   *
   * @param path The path.
   * @param cause The server's error.
   */
  constructor(path: string, cause: RemoteError) {
    super(`${cause.message}: ${path}`, { cause });
    this.name = new.target.name;
    this.path = path;
    this.code = cause.code;
    const errno = (cause.data as { errno?: unknown } | undefined)?.errno;
    if (typeof errno === "string") this.errno = errno;
  }
}

/** The path (or a parent of it) does not exist. */
export class NotFoundError extends FsError {}
/** The server's OS or its permission flags refuse the access. */
export class PermissionDeniedError extends FsError {}
/** Something already exists at the path. */
export class AlreadyExistsError extends FsError {}
/** A component of the path is not a directory. */
export class NotADirectoryError extends FsError {}
/** The path is a directory where a file was expected. */
export class IsADirectoryError extends FsError {}
/** The directory is not empty (remove it with `recursive: true`). */
export class DirectoryNotEmptyError extends FsError {}

const BY_ERRNO: Record<string, typeof FsError> = {
  ENOENT: NotFoundError,
  EACCES: PermissionDeniedError,
  EPERM: PermissionDeniedError,
  EROFS: PermissionDeniedError,
  EEXIST: AlreadyExistsError,
  ENOTDIR: NotADirectoryError,
  EISDIR: IsADirectoryError,
  ENOTEMPTY: DirectoryNotEmptyError,
};

/**
 * Turns a server refusal of a path operation into its typed error; other
 * errors (a lost connection, …) are returned unchanged.
 *
 * @example
 * ```ts
 * import { fsErrorOf, NotFoundError, RemoteError } from "@exec-server/exec-server";
 * const refusal = new RemoteError({
 *   code: -32004,
 *   data: { kind: "osError", errno: "ENOENT" },
 *   message: "No such file or directory (os error 2)",
 * });
 * const err = fsErrorOf(refusal, "/nope");
 * console.log(err instanceof NotFoundError, (err as NotFoundError).path); // true "/nope"
 * ```
 *
 * @param err What the request threw.
 * @param path The path of the operation.
 */
export function fsErrorOf(err: unknown, path: string): unknown {
  if (!(err instanceof RemoteError)) return err;
  const kind = errorKind(err.data);
  if (kind === "permissionDenied") return new PermissionDeniedError(path, err);
  if (kind === "osError") {
    const errno = (err.data as { errno?: string }).errno ?? "";
    return new (BY_ERRNO[errno] ?? FsError)(path, err);
  }
  // A server without `data.errno` (the reference): its not-found code is unambiguous for paths.
  if (err.code === ErrorCode.NotFound) return new NotFoundError(path, err);
  return new FsError(path, err);
}
