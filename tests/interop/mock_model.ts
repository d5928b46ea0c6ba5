/**
 * A scripted stand-in for the OpenAI Responses API, served on 127.0.0.1.
 *
 * Codex, configured with a custom `wire_api = "responses"` provider whose `base_url` points here,
 * sends `POST /v1/responses` and reads Server-Sent Events. The script is a list of tool calls:
 * each request of the turn is answered with the next `function_call` item (`exec_command` by
 * default) until every call has its `function_call_output`; then an assistant message ends the
 * turn. Every request is recorded so a test can read the tool output Codex reported.
 *
 * @module
 */

/** One HTTP request the mock received. */
export interface RecordedRequest {
  /** HTTP method, e.g. `POST`. */
  method: string;
  /** Path and query, e.g. `/v1/responses`. */
  path: string;
  /** The parsed JSON body, or `undefined` when the body was empty or not JSON. */
  body: unknown;
}

/** One scripted tool call. */
export interface ToolCall {
  /**
   * The tool the model calls.
   * @default {"exec_command"}
   */
  name?: string;
  /**
   * The call's arguments (serialized into the `arguments` JSON string), or a function that
   * builds them from the outputs of the earlier calls (e.g. to reuse a session id).
   */
  arguments: Record<string, unknown> | ((previousOutputs: string[]) => Record<string, unknown>);
}

/** Options for {@linkcode startMockModel}. */
export interface MockModelOptions {
  /** The tool calls the model makes, one per model request, in order. */
  toolCalls: ToolCall[];
  /**
   * The prefix of the `call_id`s; call `n` (from 1) gets `<prefix>_<n>`.
   * @default {"call_interop"}
   */
  callIdPrefix?: string;
  /**
   * The assistant's final message once the last tool output arrived.
   * @default {"Done."}
   */
  finalText?: string;
}

/** A running mock model server; dispose it to stop the server. */
export interface MockModel extends AsyncDisposable {
  /** The provider `base_url`, e.g. `http://127.0.0.1:41234/v1`. */
  readonly baseUrl: string;
  /** Every request received so far, in arrival order. */
  readonly requests: readonly RecordedRequest[];
  /**
   * The `output` of each scripted call's `function_call_output`, in call order, as found in
   * the latest request that carried it.
   */
  toolOutputs(): string[];
  /** Stops the server and waits until it has shut down. */
  close(): Promise<void>;
}

/** A Responses API item as found in a request's `input` array. */
interface InputItem {
  type?: unknown;
  "call_id"?: unknown;
  output?: unknown;
}

/**
 * Starts a mock Responses API server on an ephemeral 127.0.0.1 port.
 *
 * Each `POST /v1/responses` is answered by looking at which scripted calls already have a
 * `function_call_output` in the request's `input`: the next call is issued as a
 * `function_call` item, and once all are answered the assistant message ends the turn.
 *
 * @param options The script.
 * @returns The running server.
 */
export function startMockModel(options: MockModelOptions): MockModel {
  const prefix = options.callIdPrefix ?? "call_interop";
  const callIds = options.toolCalls.map((_, index) => `${prefix}_${index + 1}`);
  const finalText = options.finalText ?? "Done.";
  const requests: RecordedRequest[] = [];
  let responseCount = 0;

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      const url = new URL(request.url);
      const text = await request.text();
      const body = parseJson(text);
      requests.push({ method: request.method, path: url.pathname + url.search, body });

      if (request.method !== "POST" || url.pathname !== "/v1/responses") {
        return new Response("not found", { status: 404 });
      }
      responseCount += 1;
      const responseId = `resp_interop_${responseCount}`;
      const outputs = toolOutputsIn(body);
      const next = callIds.findIndex((id) => !outputs.has(id));
      let item: Record<string, unknown>;
      if (next === -1) {
        item = messageItem(`msg_interop_${responseCount}`, finalText);
      } else {
        const call = options.toolCalls[next]!;
        const previous = callIds.slice(0, next).map((id) => outputs.get(id) ?? "");
        const args = typeof call.arguments === "function"
          ? call.arguments(previous)
          : call.arguments;
        item = functionCallItem(
          `fc_interop_${responseCount}`,
          call.name ?? "exec_command",
          callIds[next]!,
          args,
        );
      }
      return new Response(sseBody(responseId, item), {
        headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
      });
    },
  );

  const baseUrl = `http://127.0.0.1:${server.addr.port}/v1`;

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= server.shutdown();
    return closing;
  }

  return {
    baseUrl,
    requests,
    toolOutputs(): string[] {
      const latest = new Map<string, string>();
      for (const recorded of requests) {
        for (const [id, output] of toolOutputsIn(recorded.body)) latest.set(id, output);
      }
      return callIds.filter((id) => latest.has(id)).map((id) => latest.get(id)!);
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Parses `text` as JSON, returning `undefined` when it is empty or malformed. */
function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Maps `call_id` → `output` for the `function_call_output` items in `body.input`. */
function toolOutputsIn(body: unknown): Map<string, string> {
  const outputs = new Map<string, string>();
  if (typeof body !== "object" || body === null) return outputs;
  const input = (body as { input?: unknown }).input;
  if (!Array.isArray(input)) return outputs;
  for (const item of input as InputItem[]) {
    if (item?.type !== "function_call_output" || typeof item.call_id !== "string") continue;
    outputs.set(
      item.call_id,
      typeof item.output === "string" ? item.output : JSON.stringify(item.output),
    );
  }
  return outputs;
}

function functionCallItem(
  id: string,
  name: string,
  callId: string,
  args: Record<string, unknown>,
): Record<string, unknown> {
  return {
    type: "function_call",
    id,
    status: "completed",
    name,
    "call_id": callId,
    arguments: JSON.stringify(args),
  };
}

function messageItem(id: string, text: string): Record<string, unknown> {
  return {
    type: "message",
    id,
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [] }],
  };
}

/** Builds the SSE stream of one complete response carrying a single output item. */
function sseBody(responseId: string, item: Record<string, unknown>): string {
  const usage = {
    "input_tokens": 10,
    "input_tokens_details": { "cached_tokens": 0 },
    "output_tokens": 5,
    "output_tokens_details": { "reasoning_tokens": 0 },
    "total_tokens": 15,
  };
  const events: [string, Record<string, unknown>][] = [
    ["response.created", { response: { id: responseId, status: "in_progress" } }],
    ["response.output_item.done", { "output_index": 0, item }],
    ["response.completed", { response: { id: responseId, status: "completed", usage } }],
  ];
  return events
    .map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
    .join("");
}
