/**
 * Protocol error codes and the single wire error type.
 *
 * @module
 */

/** JSON-RPC and exec-server error codes, as the reference server uses them. */
export const ErrorCode = {
  /** Malformed message, handshake gating, unknown session or process, fs precondition errors. */
  InvalidRequest: -32600,
  /** Unknown method. */
  MethodNotFound: -32601,
  /** Params that do not decode, or semantic parameter errors. */
  InvalidParams: -32602,
  /** OS errors, spawn failures, HTTP transport failures. */
  InternalError: -32603,
  /** A filesystem path or a file handle that does not exist. */
  NotFound: -32004,
  /** `initialize` tried to resume a session another connection holds. */
  SessionAlreadyAttached: -32010,
} as const;

/** One of the numeric codes in {@linkcode ErrorCode}. */
export type ErrorCodeValue = typeof ErrorCode[keyof typeof ErrorCode];

/**
 * Every `error.data.kind` this server sends, with the codes it comes with
 * (the first is the usual one) and what it means: a program tells conditions apart by `data.kind`, never by
 * the message text. The reference sends only the three `spawn*` kinds; the
 * others are this server's extension (the code and message stay the
 * reference's).
 */
export const ERROR_KINDS = {
  spawnNotFound: {
    codes: [ErrorCode.InternalError],
    description: "process/start: the program or the working directory does not exist (ENOENT).",
  },
  spawnPermissionDenied: {
    codes: [ErrorCode.InternalError],
    description:
      "process/start: the program is not executable, or is a directory (EACCES), or the sandbox hides the working directory.",
  },
  spawnFailed: {
    codes: [ErrorCode.InternalError],
    description:
      "process/start: any other spawn failure (bad argv, no sandbox, no pseudo-terminal).",
  },
  sandboxUnavailable: {
    codes: [ErrorCode.InternalError],
    description:
      "process/start: no sandbox layer can enforce the request's sandbox here; the message names what each layer misses (user namespaces for bubblewrap, a Landlock ABI for landlock, ...).",
  },
  permissionDenied: {
    codes: [ErrorCode.InvalidRequest],
    description:
      "The server's own permission flags do not cover the resource; `data` also names `permission`, `resource` and `flag`.",
  },
  unknownSession: {
    codes: [ErrorCode.InvalidRequest],
    description:
      "initialize: `resumeSessionId` names no session (it never existed or its TTL expired).",
  },
  osError: {
    codes: [ErrorCode.InternalError, ErrorCode.NotFound, ErrorCode.InvalidRequest],
    description:
      "A filesystem operation failed in the OS; `data.errno` is the POSIX name (`ENOENT`, `EEXIST`, `EACCES`, `ENOTDIR`, \u2026). The code is -32004 for ENOENT, -32600 for EINVAL/EACCES/EPERM, else -32603.",
  },
  replyTooLarge: {
    codes: [ErrorCode.InvalidRequest],
    description:
      "The reply would exceed a documented limit (e.g. `fs/readFile` over 512 MiB, with the reference's message); the data can be had in parts (`fs/open` + `fs/readBlock`).",
  },
  processExists: {
    codes: [ErrorCode.InvalidRequest],
    description: "process/start: the session already has a process with this `processId`.",
  },
  configInvalid: {
    codes: [ErrorCode.InternalError],
    description:
      "environmentConfig/read: a Codex config, project config or requirements file is not TOML, not UTF-8, over 4 MiB or unreadable, or a managed_config.toml policy or `projects`/`project_root_markers` entry has the wrong form; the message names the file or key.",
  },
  limitReached: {
    codes: [ErrorCode.InvalidRequest, ErrorCode.InternalError],
    description:
      "A documented bound is reached (docs/guide/limits.md): open file handles, missing-path watches or streamed http/request responses of the connection (-32600), live processes or pty processes of the server (-32603, as spawn failures); the same request can succeed once one of them has ended.",
  },
} as const satisfies Record<string, { codes: readonly ErrorCodeValue[]; description: string }>;

/** One of the `data.kind` values of {@linkcode ERROR_KINDS}. */
export type ErrorKind = keyof typeof ERROR_KINDS;

/**
 * Returns the `data.kind` of an error's `data` member when it is one of
 * {@linkcode ERROR_KINDS}, else `undefined`.
 *
 * @example
 * ```ts
 * import { errorKind } from "@exec-server/exec-server";
 * console.log(errorKind({ kind: "unknownSession" })); // "unknownSession"
 * console.log(errorKind({ field: "argv" })); // undefined
 * ```
 *
 * @param data The `data` member of a wire error.
 */
export function errorKind(data: unknown): ErrorKind | undefined {
  if (data === null || typeof data !== "object") return undefined;
  const kind = (data as { kind?: unknown }).kind;
  return typeof kind === "string" && Object.hasOwn(ERROR_KINDS, kind)
    ? kind as ErrorKind
    : undefined;
}

/**
 * Builds an error of the given kind with `data: {kind}` and one of the kind's codes.
 *
 * @param kind The `data.kind`.
 * @param message The message sent on the wire.
 * @param code One of the kind's codes (default: the first).
 */
export function kindError<K extends ErrorKind>(
  kind: K,
  message: string,
  code: (typeof ERROR_KINDS)[K]["codes"][number] = ERROR_KINDS[kind].codes[0],
): RpcError {
  return new RpcError(code, message, { data: { kind } });
}

/** The `error` member of an error response, as it goes on the wire. */
export interface WireError {
  /** Numeric error code. */
  code: number;
  /** Optional structured detail (the reference only sends it for spawn failures). */
  data?: unknown;
  /** Human readable message. */
  message: string;
}

/** Options for {@linkcode RpcError}. */
export interface RpcErrorOptions extends ErrorOptions {
  /** Structured detail sent as the error's `data` member. */
  data?: unknown;
}

/**
 * An error that travels over the wire with a protocol code.
 *
 * Handlers throw it; the connection turns it into an error response. Any
 * other thrown value becomes a generic `-32603` without leaking its stack or
 * class name.
 *
 * @example Throw a not-found error
 * ```ts
 * import { ErrorCode, RpcError } from "./errors.ts";
 * const err = new RpcError(ErrorCode.NotFound, "No such file or directory (os error 2)");
 * console.log(err.toWire());
 * ```
 */
export class RpcError extends Error {
  /** The protocol error code. */
  readonly code: number;
  /** Optional structured detail. */
  readonly data?: unknown;

  /**
   * Creates an error with a protocol code.
   *
   * @param code The protocol error code.
   * @param message The message sent on the wire.
   * @param options `data` for the wire and an optional `cause`.
   */
  constructor(code: number, message: string, options: RpcErrorOptions = {}) {
    super(message, options);
    this.name = "RpcError";
    this.code = code;
    if (options.data !== undefined) this.data = options.data;
  }

  /** Returns the wire form `{code, data?, message}` in the reference's key order. */
  toWire(): WireError {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, data: this.data, message: this.message };
  }
}

/** Shorthand for an `-32600` invalid-request error. */
export function invalidRequest(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidRequest, message);
}

/** Shorthand for an `-32602` invalid-params error. */
export function invalidParams(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidParams, message);
}

/** Shorthand for an `-32603` internal error. */
export function internalError(message: string, data?: unknown): RpcError {
  return new RpcError(ErrorCode.InternalError, message, { data });
}

/**
 * Converts anything thrown by a handler into a wire error.
 *
 * {@linkcode RpcError}s keep their code; everything else becomes `-32603`
 * with a generic message, so no stack trace or runtime class name is sent.
 *
 * @param err The thrown value.
 */
export function toWireError(err: unknown): WireError {
  if (err instanceof RpcError) return err.toWire();
  return { code: ErrorCode.InternalError, message: "internal error" };
}
