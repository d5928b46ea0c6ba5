/**
 * An MCP session in the test's own process: the SDK's client, over the SDK's
 * in-memory transport, talking to `exec-server mcp`'s server, whose
 * exec-server is in this process too (as without `--url`). Disposing it
 * closes both and waits until the exec-server has stopped.
 *
 * @module
 */

// The SDK version lib/mcp/sdk.ts pins, by the same full specifiers.
// deno-lint-ignore no-import-prefix
import { Client } from "npm:@modelcontextprotocol/sdk@1.32.2/client/index.js";
// deno-lint-ignore no-import-prefix
import { InMemoryTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/inMemory.js";
import { createClient } from "../../lib/client/client.ts";
import type { ListenOptions } from "../../lib/server/listen/listen.ts";
import { startInProcessServer } from "../../lib/mcp/in_process.ts";
import { McpToolServer } from "../../lib/mcp/mcp_server.ts";

export { Client };

/** A connected MCP client and what it talks to. */
export interface McpSession extends AsyncDisposable {
  /** The SDK's MCP client, initialized. */
  readonly client: Client;
  /** The MCP server. */
  readonly mcp: McpToolServer;
  /** Calls a tool; the result as the SDK returns it. */
  call(name: string, args: Record<string, unknown>): Promise<ToolResult>;
}

/** A tools/call result. */
export interface ToolResult {
  isError?: boolean;
  content: { type: string; text?: string }[];
  structuredContent?: Record<string, unknown>;
}

/** Opens an MCP session on an in-process exec-server. */
export async function mcpSession(
  options: { listen?: ListenOptions; clientName?: string } = {},
): Promise<McpSession> {
  const { server, target } = startInProcessServer(options.listen);
  const mcp = new McpToolServer({
    openClient: (clientName) => createClient(target, { clientName }),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await mcp.connect(serverSide);
  const client = new Client({ name: options.clientName ?? "mcp-test", version: "1.0.0" });
  await client.connect(clientSide);
  return {
    client,
    mcp,
    call: async (name, args) =>
      await client.callTool({ name, arguments: args }, undefined, {
        timeout: 120_000,
      }) as ToolResult,
    async [Symbol.asyncDispose]() {
      await client.close();
      await mcp.close();
      await server.shutdown();
    },
  };
}

/** An MCP server on an in-process exec-server, driven by raw JSON-RPC messages (initialized). */
export interface RawMcpSession extends AsyncDisposable {
  /** Sends a request with this id and resolves with the message that answers it. */
  request(id: number, method: string, params?: unknown): Promise<Record<string, unknown>>;
}

/** Opens a {@linkcode RawMcpSession}: what a client the SDK would not let send reaches the server. */
export async function rawMcpSession(): Promise<RawMcpSession> {
  const { server, target } = startInProcessServer();
  const mcp = new McpToolServer({
    openClient: (clientName) => createClient(target, { clientName }),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const waiting = new Map<unknown, (message: Record<string, unknown>) => void>();
  clientSide.onmessage = (message: unknown) => {
    const answer = message as Record<string, unknown>;
    waiting.get(answer.id)?.(answer);
  };
  await mcp.connect(serverSide);
  await clientSide.start();
  const request = (id: number, method: string, params?: unknown) => {
    const { promise, resolve } = Promise.withResolvers<Record<string, unknown>>();
    waiting.set(id, resolve);
    clientSide.send(
      { jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) } as never,
    );
    return promise;
  };
  await request(0, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw", version: "1" },
  });
  await clientSide.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  return {
    request,
    async [Symbol.asyncDispose]() {
      await clientSide.close();
      await mcp.close();
      await server.shutdown();
    },
  };
}
