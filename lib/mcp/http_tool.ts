/**
 * `http_request`: an HTTP request made by the server (`http/request`), for
 * what the server can reach and the MCP client cannot (a service on the
 * server's loopback, a private network). Listed only when the server gives
 * network access: an exec-server without a sandbox, or whose sandbox has
 * `--network-access` (what `protocol/describe` reports).
 *
 * @module
 */

import type { JsonSchema } from "../protocol/schema.ts";
import {
  callMethod,
  checkSize,
  contentBytes,
  type ContentEncoding,
  contentOf,
  encodingArgument,
  type ToolDefinition,
  wholeCharacters,
} from "./tool.ts";
import { deriveArguments, inputSchema } from "./tool_schema.ts";

/** Largest request body of `http_request`: 8 MiB. */
export const MAX_HTTP_BODY_BYTES = 8 * 1024 * 1024;
/** Largest response body `http_request` returns (the size is stated; beyond it truncated): 1 MiB. */
export const MAX_HTTP_RESPONSE_BYTES = 1024 * 1024;
/** Default `timeoutMs` of `http_request`: 30 s. */
export const DEFAULT_HTTP_TIMEOUT_MS = 30_000;
/** Largest `timeoutMs` of `http_request`: 5 minutes. */
export const MAX_HTTP_TIMEOUT_MS = 300_000;

interface HttpArgs {
  method: string;
  url: string;
  headers?: { name: string; value: string }[];
  body?: string;
  bodyEncoding?: ContentEncoding;
  timeoutMs?: number;
  redirectPolicy?: "follow" | "stop";
  responseEncoding?: ContentEncoding;
}

/** A header as a tool gives it: name and value (never a server environment variable). */
const HEADER: JsonSchema = {
  type: "object",
  properties: { name: { type: "string", minLength: 1 }, value: { type: "string" } },
  required: ["name", "value"],
  additionalProperties: false,
};

const HTTP_ARGUMENTS = deriveArguments<"http/request", HttpArgs>("http/request", {
  method: "take",
  url: "take",
  headers: { schema: { type: "array", items: HEADER }, description: "Request headers, in order." },
  bodyBase64: {
    as: "body",
    schema: { type: "string" },
    description: `The request body (at most ${MAX_HTTP_BODY_BYTES} bytes).`,
    to: (value, args) => {
      const bytes = contentBytes(value as string, args.bodyEncoding ?? "text", "body");
      checkSize(bytes.length, MAX_HTTP_BODY_BYTES, "body");
      return bytes.toBase64();
    },
  },
  timeoutMs: {
    schema: {
      type: "integer",
      minimum: 1,
      maximum: MAX_HTTP_TIMEOUT_MS,
      default: DEFAULT_HTTP_TIMEOUT_MS,
    },
  },
  redirectPolicy: "take",
  requestId: "omit",
  streamResponse: "omit",
});

const httpRequest: ToolDefinition = {
  name: "http_request",
  title: "HTTP request from the server",
  description:
    `Makes an HTTP request from the server and returns the status, the headers and the body (at most ${MAX_HTTP_RESPONSE_BYTES} bytes, the size is stated; text, or base64 when not UTF-8). Gives up after timeoutMs (default ${DEFAULT_HTTP_TIMEOUT_MS}, at most ${MAX_HTTP_TIMEOUT_MS}).`,
  inputSchema: inputSchema({
    derived: HTTP_ARGUMENTS,
    extra: {
      bodyEncoding: encodingArgument("body"),
      responseEncoding: encodingArgument("the response body is returned"),
    },
  }),
  annotations: { openWorldHint: true },
  async run(raw, context) {
    const args = raw as unknown as HttpArgs;
    const response = await callMethod(context, HTTP_ARGUMENTS, args, {
      timeoutMs: args.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS,
      requestId: crypto.randomUUID(),
    });
    const body = Uint8Array.fromBase64(response.bodyBase64);
    let kept = body.subarray(0, MAX_HTTP_RESPONSE_BYTES);
    const wanted = args.responseEncoding ?? "text";
    if (wanted === "text" && kept.length < body.length) {
      kept = kept.subarray(0, wholeCharacters(kept));
    }
    const { content, encoding } = contentOf(kept, wanted);
    const truncated = kept.length < body.length;
    const structured = {
      status: response.status,
      headers: response.headers,
      body: content,
      bodyEncoding: encoding,
      bodyBytes: body.length,
      truncated,
    };
    const head = [
      `HTTP ${response.status}`,
      ...response.headers.map((h) => `${h.name}: ${h.value}`),
    ]
      .join("\n");
    const note = truncated ? [`[body truncated: ${body.length} bytes, ${kept.length} shown]`] : [];
    return { structured, text: [head, content, ...note] };
  },
};

/** The HTTP tool. */
export const HTTP_TOOL: ToolDefinition = httpRequest;
