/**
 * The tool table: every tool `exec-server mcp` offers, in the order
 * `tools/list` shows them, and which of them a given server allows.
 *
 * @module
 */

import type { ExecClient } from "../client/client.ts";
import { FILE_TOOLS } from "./file_tools.ts";
import { HTTP_TOOL } from "./http_tool.ts";
import { PROCESS_TOOLS } from "./process_tools.ts";
import type { ToolDefinition } from "./tool.ts";

/** Every tool. */
export const TOOLS: readonly ToolDefinition[] = [...PROCESS_TOOLS, ...FILE_TOOLS, HTTP_TOOL];

/**
 * The tools the connected server allows: all of them, except `http_request`
 * when the server's own sandbox keeps its processes off the network (as
 * `protocol/describe` reports it): a sandboxed server's agent gets no
 * network through the MCP layer either.
 *
 * @param client The connected client.
 */
export async function allowedTools(client: ExecClient): Promise<readonly ToolDefinition[]> {
  await client.ready();
  if (!client.extensions.has("protocolDescribe")) return TOOLS;
  const { sandbox } = await client.request("protocol/describe");
  return sandbox.networkAccess ? TOOLS : TOOLS.filter((tool) => tool !== HTTP_TOOL);
}
