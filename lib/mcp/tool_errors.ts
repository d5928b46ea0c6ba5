/**
 * How a failed tool call looks to an MCP client: an `isError` result whose
 * `structuredContent.error` carries a `kind` a program can match, the
 * protocol's `code` and `data` when the exec-server refused the call, and a
 * message; never a stack trace. The exec-server's own kinds
 * (`spawnNotFound`, `permissionDenied`, `osError`, ...) pass through as they
 * are; the MCP layer adds the kinds of {@linkcode MCP_ERROR_KINDS}.
 *
 * @module
 */

import { ErrorCode, errorKind } from "../protocol/errors.ts";
import { AtCapacityError, ClosedError, RemoteError, TimedOutError } from "../rpc/connection.ts";
import { ConnectError, SessionLostError } from "../client/errors.ts";

/** The error kinds of the MCP layer, beside the exec-server's own `data.kind`s. */
export const MCP_ERROR_KINDS = {
  invalidArguments: "The arguments do not match the tool's input schema, or contradict each other.",
  tooLarge: "An argument or a result is over one of the tool's documented limits.",
  timedOut:
    "run_command: the command ran past timeoutMs and was killed; the output so far is kept.",
  unknownOutput: "read_output: no kept output has this outputId (never, or evicted by newer ones).",
  outputDropped: "read_output: the range lies in the middle of a stream that was not kept.",
  tooManyCommands: "run_command: as many commands as the bound allows are already running.",
  editFailed:
    "edit_file: an oldText occurs not exactly once (or more than once without replaceAll).",
  processNotAccepted:
    "write_process_stdin: the process is unknown, its stdin is closed, or it is still starting.",
  connectFailed: "The exec-server could not be reached, or refused the credentials.",
  connectionLost: "The connection to the exec-server (or its session) was lost.",
  requestTimedOut: "The exec-server did not answer within the client's timeout.",
  rpcError: "The exec-server refused the call without a data.kind; code and message say why.",
  internal: "An unexpected failure of the MCP layer (its message, never a stack trace).",
} as const;

/** One of the {@linkcode MCP_ERROR_KINDS}. */
export type McpErrorKind = keyof typeof MCP_ERROR_KINDS;

/** A failure of the MCP layer, with its kind. */
export class ToolError extends Error {
  /** What went wrong, for programs. */
  readonly kind: McpErrorKind;
  /** More members of the error result's `structuredContent` (e.g. the output so far). */
  readonly details?: Record<string, unknown>;

  /**
   * Creates the error.
   *
   * @param kind The kind.
   * @param message What went wrong, for people.
   * @param details More members of the result.
   */
  constructor(kind: McpErrorKind, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = "ToolError";
    this.kind = kind;
    if (details !== undefined) this.details = details;
  }
}

/** `structuredContent.error` of a failed call. */
export interface ToolErrorInfo {
  /** An exec-server `data.kind` or one of the {@linkcode MCP_ERROR_KINDS}. */
  kind: string;
  /** What went wrong. */
  message: string;
  /** The exec-server's error code, when it refused the call. */
  code?: number;
  /** The rest of the exec-server's `data` (`errno`, `permission`, `resource`, `flag`, `field`). */
  [member: string]: unknown;
}

/**
 * Describes any failure as an error result's `error` member.
 *
 * @example
 * ```ts
 * import { errorInfo, ToolError } from "./tool_errors.ts";
 * console.log(errorInfo(new ToolError("tooLarge", "content is over 8 MiB")));
 * // { kind: "tooLarge", message: "content is over 8 MiB" }
 * ```
 *
 * @param err What was thrown.
 */
export function errorInfo(err: unknown): ToolErrorInfo {
  if (err instanceof ToolError) return { kind: err.kind, message: err.message };
  if (err instanceof RemoteError) {
    const data = err.data !== null && typeof err.data === "object"
      ? err.data as Record<string, unknown>
      : {};
    const kind = errorKind(err.data) ??
      (err.code === ErrorCode.InvalidParams ? "invalidArguments" : "rpcError");
    return { ...data, kind, code: err.code, message: err.message };
  }
  if (err instanceof ConnectError) return { kind: "connectFailed", message: err.message };
  if (err instanceof ClosedError || err instanceof SessionLostError) {
    return { kind: "connectionLost", message: err.message };
  }
  if (err instanceof TimedOutError) return { kind: "requestTimedOut", message: err.message };
  if (err instanceof AtCapacityError) return { kind: "tooManyCommands", message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { kind: "internal", message: message || "internal error" };
}
