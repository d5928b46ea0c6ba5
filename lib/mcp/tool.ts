/**
 * What an MCP tool is here: its name, description, input schema and
 * annotations (what `tools/list` shows), and the function that runs it on
 * the exec-server through the client library. Also the few helpers every
 * tool shares: its result, and text-or-base64 content.
 *
 * @module
 */

import type { ExecClient } from "../client/client.ts";
import type { SessionRequestName } from "../client/request_types.ts";
import type { ResultOf } from "../protocol/methods.ts";
import type { JsonSchema } from "../protocol/schema.ts";
import type { OutputStore } from "./output_capture.ts";
import { ToolError } from "./tool_errors.ts";
import type { DerivedArguments } from "./tool_schema.ts";

/** MCP's tool annotations (hints for the client). */
export interface ToolAnnotations {
  /** The tool does not change anything. */
  readonly readOnlyHint?: boolean;
  /** The tool may destroy or overwrite data. */
  readonly destructiveHint?: boolean;
  /** Calling it again with the same arguments has no further effect. */
  readonly idempotentHint?: boolean;
  /** The tool reaches beyond the server's machine (the network). */
  readonly openWorldHint?: boolean;
}

/** What a running tool call has. */
export interface ToolContext {
  /** The exec-server, connected. */
  readonly client: ExecClient;
  /** Aborted when the MCP client cancels the call (or goes away). */
  readonly signal: AbortSignal;
  /**
   * Reports progress (an MCP `notifications/progress`, when the client asked for it with a
   * progress token): `progress` must grow from one report to the next.
   */
  progress(progress: number, message: string): void;
  /** A path argument as the protocol's `file:` URI (relative to the server's working directory). */
  resolvePath(path: string): string;
  /** The output of finished commands kept for `read_output`. */
  readonly outputs: OutputStore;
  /** State of this MCP connection shared by its calls. */
  readonly connection: ConnectionState;
}

/** What the calls of one MCP connection share. */
export interface ConnectionState {
  /** `run_command` calls running now. */
  runningCommands: number;
  /** Processes started with `start_process` (terminated when the MCP client goes away). */
  readonly startedProcesses: Set<string>;
}

/** A tool's answer: its structured content and, optionally, its text for a model to read. */
export interface ToolOutput {
  /** `structuredContent` (also the text, as JSON, when `text` is absent). */
  readonly structured: Record<string, unknown>;
  /** The text content items, in order. */
  readonly text?: readonly string[];
}

/** One tool. */
export interface ToolDefinition {
  /** The name, as common MCP servers name the same tool. */
  readonly name: string;
  /** A short display title. */
  readonly title: string;
  /** What it does, its limits included, for the model. */
  readonly description: string;
  /** The JSON Schema of its arguments (an object). */
  readonly inputSchema: JsonSchema & { type: "object" };
  /** Hints for the client. */
  readonly annotations: ToolAnnotations;
  /**
   * Runs the tool with arguments that matched {@linkcode ToolDefinition.inputSchema}; throws
   * a `ToolError` or the client's errors when it fails.
   */
  run(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput>;
}

/** The two encodings of byte content in arguments and results. */
export const CONTENT_ENCODINGS = ["text", "base64"] as const;

/** One of {@linkcode CONTENT_ENCODINGS}. */
export type ContentEncoding = typeof CONTENT_ENCODINGS[number];

/**
 * The JSON Schema of an `encoding` argument.
 *
 * @param what What the argument is the encoding of.
 */
export function encodingArgument(what: string): JsonSchema {
  return {
    type: "string",
    enum: [...CONTENT_ENCODINGS],
    default: "text",
    description: `How ${what} is given: text (UTF-8) or base64 (any bytes).`,
  };
}

/**
 * The bytes of a text or base64 argument.
 *
 * @example
 * ```ts
 * import { contentBytes } from "./tool.ts";
 * console.log(contentBytes("aGk=", "base64", "content")); // Uint8Array(2) [ 104, 105 ]
 * ```
 *
 * @param value The argument.
 * @param encoding Its encoding.
 * @param name The argument's name, for the error.
 * @throws {ToolError} `invalidArguments` for base64 that does not decode.
 */
export function contentBytes(value: string, encoding: ContentEncoding, name: string): Uint8Array {
  if (encoding === "text") return new TextEncoder().encode(value);
  try {
    return Uint8Array.fromBase64(value);
  } catch {
    throw new ToolError("invalidArguments", `${name} is not valid base64`);
  }
}

/**
 * Bytes as result content: UTF-8 text when asked for text and they are
 * valid UTF-8, else base64 (the result says which).
 *
 * @example
 * ```ts
 * import { contentOf } from "./tool.ts";
 * console.log(contentOf(new Uint8Array([104, 105]), "text")); // { content: "hi", encoding: "text" }
 * console.log(contentOf(new Uint8Array([255]), "text")); // { content: "/w==", encoding: "base64" }
 * ```
 *
 * @param bytes The bytes.
 * @param wanted The encoding asked for.
 */
export function contentOf(
  bytes: Uint8Array,
  wanted: ContentEncoding,
): { content: string; encoding: ContentEncoding } {
  if (wanted === "text") {
    try {
      return { content: new TextDecoder("utf-8", { fatal: true }).decode(bytes), encoding: "text" };
    } catch {
      // Not UTF-8: base64 below.
    }
  }
  return { content: bytes.toBase64(), encoding: "base64" };
}

/**
 * The length of the longest prefix of `bytes` that does not end inside a
 * UTF-8 character (where a range of text may be cut).
 *
 * @example
 * ```ts
 * import { wholeCharacters } from "./tool.ts";
 * console.log(wholeCharacters(new TextEncoder().encode("a\u00e9").subarray(0, 2))); // 1
 * ```
 *
 * @param bytes The bytes.
 */
export function wholeCharacters(bytes: Uint8Array): number {
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const byte = bytes[bytes.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // A continuation byte: look further back.
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return length > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}

/**
 * Checks a size against a documented bound.
 *
 * @param size The size in bytes.
 * @param limit The bound.
 * @param what What is measured, for the message.
 * @throws {ToolError} `tooLarge` beyond the bound.
 */
export function checkSize(size: number, limit: number, what: string): void {
  if (size > limit) {
    throw new ToolError("tooLarge", `${what} is ${size} bytes, over the limit of ${limit} bytes`);
  }
}

/**
 * Calls a tool's method with the params its arguments give, and the members
 * the tool fills in itself (ids, defaults); the server checks them as it
 * checks every request.
 *
 * @param context The call's context.
 * @param derived The tool's arguments from the method table.
 * @param args The arguments.
 * @param filled The members the tool sets, over those of the arguments.
 */
export function callMethod<M extends SessionRequestName, A>(
  context: ToolContext,
  derived: DerivedArguments<A, M>,
  args: A,
  filled: Record<string, unknown> = {},
): Promise<ResultOf<M>> {
  const params = { ...derived.params(args, context), ...filled };
  const request = context.client.request as (method: M, params: unknown) => Promise<ResultOf<M>>;
  return request.call(context.client, derived.method, params);
}
