/**
 * A minimal MCP server over streamable HTTP on 127.0.0.1: it answers `initialize` and
 * `tools/list` (one tool) with JSON, accepts notifications with 202, and records the method of
 * every JSON-RPC message it receives. It stands for an HTTP MCP server configured in the
 * executor's own Codex config, which Codex reaches through the exec-server's `http/request`.
 *
 * @module
 */

/** A running mock MCP server; dispose it to stop it. */
export interface MockMcp extends AsyncDisposable {
  /** The server's URL, e.g. `http://127.0.0.1:41234/mcp`. */
  readonly url: string;
  /** The JSON-RPC methods received so far, in arrival order. */
  readonly methods: readonly string[];
}

/** The one tool the mock offers. */
export const MOCK_MCP_TOOL = "executor_lookup";

function answer(message: { id?: unknown; method?: string; params?: Record<string, unknown> }) {
  switch (message.method) {
    case "initialize":
      return {
        protocolVersion: message.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "executor-mock", version: "1.0.0" },
      };
    case "tools/list":
      return {
        tools: [{
          name: MOCK_MCP_TOOL,
          description: "Looks something up on the executor.",
          inputSchema: { type: "object", properties: {} },
        }],
      };
    default:
      return undefined;
  }
}

/** Starts the mock on an ephemeral 127.0.0.1 port. */
export function startMockMcp(): MockMcp {
  const methods: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    if (req.method !== "POST") return new Response(null, { status: 405 });
    let message: { id?: unknown; method?: string; params?: Record<string, unknown> };
    try {
      message = await req.json();
    } catch {
      return new Response(null, { status: 400 });
    }
    methods.push(String(message.method));
    if (message.id === undefined) return new Response(null, { status: 202 });
    const result = answer(message);
    const body = result === undefined
      ? { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "method not found" } }
      : { jsonrpc: "2.0", id: message.id, result };
    return Response.json(body);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/mcp`,
    methods,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}
