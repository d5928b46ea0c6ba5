/**
 * The MCP SDK (`@modelcontextprotocol/sdk` from npm), pinned here and only
 * here: the rest of `lib/mcp` imports it from this module. Full `npm:`
 * specifiers, so `main.ts` keeps working by URL without an import map; the
 * module is loaded only by `exec-server mcp`.
 *
 * @module
 */

export { Server } from "npm:@modelcontextprotocol/sdk@1.32.2/server/index.js";
export type { Transport } from "npm:@modelcontextprotocol/sdk@1.32.2/shared/transport.js";
export type { RequestHandlerExtra } from "npm:@modelcontextprotocol/sdk@1.32.2/shared/protocol.js";
export {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from "npm:@modelcontextprotocol/sdk@1.32.2/types.js";

/** The pinned SDK version (the one in every specifier above). */
export const MCP_SDK_VERSION = "1.32.2";
