/**
 * Maps operating-system errors to the reference server's wire errors:
 * `<strerror text> (os error N)` in the reference's (musl) wording, `-32004`
 * for not-found, `-32600` for invalid-argument and permission errors and
 * `-32603` for everything else.
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import { permissionDeniedFromDeno } from "./permission_errors.ts";

/**
 * errno number and `strerror` text for the error codes Deno reports. The
 * reference is a musl build, so these are musl's texts (which differ from
 * glibc's for some codes, e.g. `Resource busy`, `Symbolic link loop`).
 */
const OS_ERRORS: Record<string, readonly [number, string]> = {
  EPERM: [1, "Operation not permitted"],
  ENOENT: [2, "No such file or directory"],
  ESRCH: [3, "No such process"],
  EINTR: [4, "Interrupted system call"],
  EIO: [5, "I/O error"],
  ENXIO: [6, "No such device or address"],
  E2BIG: [7, "Argument list too long"],
  ENOEXEC: [8, "Exec format error"],
  EBADF: [9, "Bad file descriptor"],
  ECHILD: [10, "No child process"],
  EAGAIN: [11, "Resource temporarily unavailable"],
  ENOMEM: [12, "Out of memory"],
  EACCES: [13, "Permission denied"],
  EFAULT: [14, "Bad address"],
  ENOTBLK: [15, "Block device required"],
  EBUSY: [16, "Resource busy"],
  EEXIST: [17, "File exists"],
  EXDEV: [18, "Cross-device link"],
  ENODEV: [19, "No such device"],
  ENOTDIR: [20, "Not a directory"],
  EISDIR: [21, "Is a directory"],
  EINVAL: [22, "Invalid argument"],
  ENFILE: [23, "Too many open files in system"],
  EMFILE: [24, "No file descriptors available"],
  ENOTTY: [25, "Not a tty"],
  ETXTBSY: [26, "Text file busy"],
  EFBIG: [27, "File too large"],
  ENOSPC: [28, "No space left on device"],
  ESPIPE: [29, "Invalid seek"],
  EROFS: [30, "Read-only file system"],
  EMLINK: [31, "Too many links"],
  EPIPE: [32, "Broken pipe"],
  EDEADLK: [35, "Resource deadlock would occur"],
  ENAMETOOLONG: [36, "Filename too long"],
  ENOLCK: [37, "No locks available"],
  ENOSYS: [38, "Function not implemented"],
  ENOTEMPTY: [39, "Directory not empty"],
  ELOOP: [40, "Symbolic link loop"],
  ENODATA: [61, "No data available"],
  EOVERFLOW: [75, "Value too large for data type"],
  EILSEQ: [84, "Illegal byte sequence"],
  ENOTSOCK: [88, "Not a socket"],
  // 95 is named EOPNOTSUPP by {@linkcode osErrorName} (the first entry of a number wins).
  EOPNOTSUPP: [95, "Not supported"],
  ENOTSUP: [95, "Not supported"],
  EAFNOSUPPORT: [97, "Address family not supported by protocol"],
  EADDRINUSE: [98, "Address in use"],
  EADDRNOTAVAIL: [99, "Address not available"],
  ENETDOWN: [100, "Network is down"],
  ENETUNREACH: [101, "Network unreachable"],
  ECONNABORTED: [103, "Connection aborted"],
  ECONNRESET: [104, "Connection reset by peer"],
  ENOTCONN: [107, "Socket not connected"],
  ETIMEDOUT: [110, "Operation timed out"],
  ECONNREFUSED: [111, "Connection refused"],
  EHOSTDOWN: [112, "Host is down"],
  EHOSTUNREACH: [113, "Host is unreachable"],
  ESTALE: [116, "Stale file handle"],
  EDQUOT: [122, "Quota exceeded"],
  ECANCELED: [125, "Operation canceled"],
};

/** errno names the reference reports as `-32600` (Rust's `InvalidInput` and `PermissionDenied` kinds). */
const INVALID_REQUEST_CODES = new Set(["EINVAL", "EACCES", "EPERM"]);

/** Deno error classes whose instances may lack a `code`, mapped to the errno name. */
const CLASS_CODES: Record<string, string> = {
  NotFound: "ENOENT",
  AlreadyExists: "EEXIST",
  NotADirectory: "ENOTDIR",
  IsADirectory: "EISDIR",
  PermissionDenied: "EACCES",
  FilesystemLoop: "ELOOP",
  Busy: "EBUSY",
  BrokenPipe: "EPIPE",
  TimedOut: "ETIMEDOUT",
  ConnectionRefused: "ECONNREFUSED",
  ConnectionReset: "ECONNRESET",
  AddrInUse: "EADDRINUSE",
};

/**
 * Returns the reference's message for an errno name, e.g.
 * `osErrorMessage("ENOENT")` is `No such file or directory (os error 2)`.
 *
 * @param code An errno name such as `"EACCES"`.
 * @returns The message, or `undefined` for an unknown name.
 */
export function osErrorMessage(code: string): string | undefined {
  const entry = OS_ERRORS[code];
  return entry === undefined ? undefined : `${entry[1]} (os error ${entry[0]})`;
}

/**
 * Returns the errno name of an error number, e.g. `osErrorName(24)` is
 * `"EMFILE"` (for errors libc reports through FFI): the first name listed
 * for the number.
 *
 * @param errno The error number.
 * @returns The name, or `undefined` for a number not listed.
 */
export function osErrorName(errno: number): string | undefined {
  for (const [name, [number]] of Object.entries(OS_ERRORS)) if (number === errno) return name;
  return undefined;
}

/**
 * Returns the errno name of an error thrown by a Deno or Node API
 * (`"ENOENT"`, ...), or `undefined` when it has none.
 *
 * @param err The thrown value.
 */
export function osErrorCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as Error & { code?: unknown }).code;
  if (typeof code === "string" && code !== "") return code;
  return CLASS_CODES[err.name];
}

/**
 * Converts an error thrown by a filesystem operation into the wire error the
 * reference sends, with the message `<strerror> (os error N)` and (our
 * extension) `data: {kind: "osError", errno: "ENOENT"}`: not-found
 * becomes `-32004`, `EINVAL`/`EACCES`/`EPERM` `-32600`, other OS errors `-32603`. A Deno permission
 * refusal becomes the typed permission error of `policy.ts`; an
 * {@linkcode RpcError} passes through unchanged.
 *
 * @param err The thrown value.
 * @returns The error to send.
 */
export function fsError(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  const denied = permissionDeniedFromDeno(err);
  if (denied !== undefined) return denied;
  const code = osErrorCode(err);
  const known = code === undefined ? undefined : osErrorMessage(code);
  let message = known;
  if (message === undefined && err instanceof Error) {
    // Deno's messages read "<strerror> (os error N): <syscall> '<path>'"; keep the first part.
    message = /^(.*? \(os error \d+\))/.exec(err.message)?.[1];
  }
  message ??= "internal error";
  return new RpcError(wireCodeOf(code), message, { cause: err, data: osErrorData(code) });
}

/**
 * Builds the wire error for an errno name, as if the OS had reported it,
 * e.g. `osError("EISDIR")` is `-32603 Is a directory (os error 21)`.
 *
 * @param code An errno name listed by {@linkcode osErrorMessage}.
 */
export function osError(code: string): RpcError {
  return new RpcError(wireCodeOf(code), osErrorMessage(code) ?? code, {
    data: osErrorData(code),
  });
}

/** `data` of an OS error: `{kind: "osError", errno}` for a known errno name (our extension). */
function osErrorData(code: string | undefined): { kind: "osError"; errno: string } | undefined {
  return code !== undefined && Object.hasOwn(OS_ERRORS, code)
    ? { kind: "osError", errno: code }
    : undefined;
}

function wireCodeOf(code: string | undefined): number {
  if (code === "ENOENT") return ErrorCode.NotFound;
  if (code !== undefined && INVALID_REQUEST_CODES.has(code)) return ErrorCode.InvalidRequest;
  return ErrorCode.InternalError;
}
