/**
 * The MCP server of `exec-server mcp`: the SDK's `Server` with the tool
 * table behind `tools/list` and `tools/call`. The exec-server is reached
 * only through the client library: one client per MCP connection, opened
 * after the MCP client's `initialize` so that the exec-server session bears
 * the MCP client's name, and closed (its started processes terminated first)
 * when the MCP connection ends.
 *
 * A call's arguments are checked against the tool's input schema; any
 * failure comes back as an `isError` result with `structuredContent.error`
 * (see `tool_errors.ts`). `notifications/cancelled` (or the connection's end)
 * aborts the call, which kills its process.
 *
 * @module
 */

import type { ExecClient } from "../client/client.ts";
import { fromPathUri, toPathUri } from "../client/paths.ts";
import { logEvent } from "../server/host/log.ts";
import { VERSION } from "../server/session/environment.ts";
import { checkArguments } from "./argument_check.ts";
import { OutputStore } from "./output_capture.ts";
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type RequestHandlerExtra,
  Server,
  type ServerNotification,
  type ServerRequest,
  type Transport,
} from "./sdk.ts";
import type { ConnectionState, ToolDefinition, ToolOutput } from "./tool.ts";
import { errorInfo, ToolError } from "./tool_errors.ts";
import { allowedTools, TOOLS } from "./tools.ts";

/**
 * `tools/call` as the SDK declares it, except that params it refuses still reach the SDK's
 * own `tools/call` check, which answers -32602 naming each field; with the plain schema the
 * request's parse fails first and the SDK answers -32603.
 */
const LenientCallToolRequestSchema = CallToolRequestSchema.extend({
  params: CallToolRequestSchema.shape.params.catch(({ input }: { input: unknown }) =>
    input as CallToolRequest["params"]
  ),
});

/** How long closing waits for the started processes to be terminated: 2 s. */
const CLOSE_TERMINATE_MS = 2000;

/** Options of {@linkcode McpToolServer}. */
export interface McpToolServerOptions {
  /**
   * Creates the exec-server client (without connecting) for the MCP client
   * named `clientName`; called once per MCP connection, after its `initialize`.
   */
  openClient(clientName: string): ExecClient;
}

const INSTRUCTIONS =
  "Tools act on one machine, the exec-server's: run_command runs a command to completion; start_process and the *_process tools drive long-running ones; read_file, write_file, edit_file, list_directory, get_file_info, create_directory and remove_path work on its files (absolute paths, or relative to its working directory). Failures are results with isError and structuredContent.error.kind.";

/**
 * One MCP connection's server.
 *
 * @example An MCP client calls a tool on an exec-server in this process
 * ```ts
 * import { Client } from "npm:@modelcontextprotocol/sdk@1.32.2/client/index.js";
 * import { InMemoryTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/inMemory.js";
 * import { createClient } from "../client/client.ts";
 * import { startInProcessServer } from "./in_process.ts";
 * import { McpToolServer } from "./mcp_server.ts";
 * const { server, target } = startInProcessServer();
 * const mcp = new McpToolServer({ openClient: (clientName) => createClient(target, { clientName }) });
 * const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
 * await mcp.connect(serverSide);
 * const client = new Client({ name: "example", version: "1.0.0" });
 * await client.connect(clientSide);
 * const result = await client.callTool({ name: "run_command", arguments: { argv: ["echo", "hi"] } });
 * console.log(result.structuredContent); // { exitCode: 0, ..., stdout: "hi\n", ... }
 * await client.close();
 * await mcp.close();
 * await server.finished;
 * ```
 */
export class McpToolServer {
  /** The SDK server. */
  readonly server: Server;
  /** Resolves when the MCP connection has ended and the exec-server client is closed. */
  readonly closed: Promise<void>;
  #options: McpToolServerOptions;
  #client: ExecClient | undefined;
  #tools: Promise<readonly ToolDefinition[]> | undefined;
  #outputs = new OutputStore();
  #state: ConnectionState = { runningCommands: 0, startedProcesses: new Set() };
  #closing: Promise<void> | undefined;
  #markClosed: () => void;

  /**
   * Creates the server; {@linkcode McpToolServer.connect} starts it.
   *
   * @param options Where the exec-server is.
   */
  constructor(options: McpToolServerOptions) {
    this.#options = options;
    const { promise, resolve } = Promise.withResolvers<void>();
    this.closed = promise;
    this.#markClosed = resolve;
    this.server = new Server({ name: "exec-server", title: "exec-server", version: VERSION }, {
      capabilities: { tools: { listChanged: false } },
      instructions: INSTRUCTIONS,
    });
    this.server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: (await this.#allowed()).map((tool) => ({
        name: tool.name,
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema,
        annotations: { title: tool.title, ...tool.annotations },
      })),
    }));
    this.server.setRequestHandler(LenientCallToolRequestSchema, async (
      request: CallToolRequest,
      extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
    ): Promise<CallToolResult> => {
      const tools = await this.#allowed();
      const tool = tools.find((t) => t.name === request.params.name);
      if (tool === undefined) {
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
      }
      const token = request.params._meta?.progressToken;
      const client = this.#exec();
      try {
        const args = request.params.arguments ?? {};
        checkArguments(tool.inputSchema, args);
        await client.ready();
        return toResult(
          await tool.run(args, {
            client,
            signal: extra.signal,
            progress: (progress, message) => {
              if (token === undefined) return;
              extra.sendNotification({
                method: "notifications/progress",
                params: { progressToken: token, progress, message },
              }).catch(() => {});
            },
            resolvePath: (path) => resolvePath(client, path),
            outputs: this.#outputs,
            connection: this.#state,
          }),
        );
      } catch (err) {
        return errorResult(err);
      }
    });
    this.server.onclose = () => {
      this.close().catch(() => {});
    };
  }

  /**
   * Serves MCP on a transport (`McpStdioTransport`, or the SDK's in-memory one).
   *
   * @param transport The MCP transport.
   */
  connect(transport: Transport): Promise<void> {
    return this.server.connect(transport);
  }

  /** Terminates the processes this connection started, closes the exec-server client and the MCP server. */
  close(): Promise<void> {
    return this.#closing ??= (async () => {
      const client = this.#client;
      if (client?.connected) {
        const terminations = [...this.#state.startedProcesses].map((processId) =>
          client.request("process/terminate", { processId }).catch(() => {})
        );
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          Promise.all(terminations),
          new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_TERMINATE_MS))),
        ]);
        clearTimeout(timer);
      }
      await client?.close();
      await this.server.close().catch(() => {});
      this.#markClosed();
    })();
  }

  /** The exec-server client, created for the MCP client that initialized. */
  #exec(): ExecClient {
    if (this.#client !== undefined) return this.#client;
    const info = this.server.getClientVersion();
    const name = info?.name || "unnamed MCP client";
    const client = this.#client = this.#options.openClient(`${name} (MCP)`);
    client.ready().then(() => {
      logEvent("info", "mcp.session", {
        session: client.sessionId,
        client: name,
        clientVersion: info?.version ?? null,
      });
    }, () => {});
    return client;
  }

  /** The tools the server allows, asked once per connection; all of them until it answers. */
  #allowed(): Promise<readonly ToolDefinition[]> {
    this.#tools ??= allowedTools(this.#exec()).catch(() => {
      this.#tools = undefined; // Ask again once the server is reachable.
      return TOOLS;
    });
    return this.#tools;
  }
}

/** A path argument as a `file:` URI: relative paths start at the server's working directory. */
function resolvePath(client: ExecClient, path: string): string {
  try {
    if (path.startsWith("/") || /^file:/i.test(path)) return toPathUri(path);
    const info = client.environmentInfo;
    const base = fromPathUri(info.cwd ?? info.tempDir).replace(/\/+$/, "");
    return toPathUri(`${base}/${path}`);
  } catch (err) {
    throw new ToolError("invalidArguments", (err as Error).message);
  }
}

function toResult(output: ToolOutput): CallToolResult {
  const text = output.text ?? [JSON.stringify(output.structured, null, 2)];
  return {
    content: text.map((item) => ({ type: "text" as const, text: item })),
    structuredContent: output.structured,
  };
}

function errorResult(err: unknown): CallToolResult {
  const error = errorInfo(err);
  const details = err instanceof ToolError ? err.details : undefined;
  const detail = [
    `kind ${error.kind}`,
    ...["errno", "permission", "resource", "flag", "field"].flatMap((key) =>
      typeof error[key] === "string" ? [`${key} ${error[key]}`] : []
    ),
  ].join(", ");
  return {
    isError: true,
    content: [{ type: "text", text: `${error.message} (${detail})` }],
    structuredContent: { ...details, error },
  };
}
