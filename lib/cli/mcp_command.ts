/**
 * `exec-server mcp`: an MCP server on stdio whose tools act on an
 * exec-server: a remote one (`--url`, with `exec-server run`'s connection
 * flags), or one in this process with the server's own sandbox flags. Its
 * flags come from those two tables.
 *
 * @module
 */

import { createClient } from "../client/client.ts";
import { log, setLogFormat, setLogLevel } from "../server/host/log.ts";
import { scopeRaceWarning } from "../server/host/permissions.ts";
import { setProcessNamespaces } from "../server/sandbox/pid_namespace.ts";
import { setServerSandbox } from "../server/sandbox/server_policy.ts";
import { startInProcessServer } from "../mcp/in_process.ts";
import { McpToolServer } from "../mcp/mcp_server.ts";
import { MCP_SDK_VERSION } from "../mcp/sdk.ts";
import { McpStdioTransport } from "../mcp/stdio_transport.ts";
import { CONNECT_FLAGS, remoteServerFromFlags } from "./connect_flags.ts";
import { defineFlags, FlagError, parseFlags, pickFlags, renderFlagHelp } from "./flags.ts";
import { sandboxFromFlags } from "./sandbox_flags.ts";
import { SERVER_FLAGS } from "./server_flags.ts";

/** Exit code for a bad command line. */
export const MCP_USAGE_EXIT = 2;
/** Default `--concurrent-requests` of the in-process server: 8 (a waiting read does not hold up other calls). */
export const MCP_CONCURRENT_REQUESTS = 8;

/** The flags of the in-process server: the server's own, from its table. */
const IN_PROCESS_FLAGS = {
  ...pickFlags(SERVER_FLAGS, [
    "sandbox",
    "writable-root",
    "deny-read",
    "network-access",
    "sandbox-layer",
    "sandbox-unix-sockets",
    "process-namespace",
    "process-retention",
    "max-processes",
  ]),
  "concurrent-requests": {
    ...SERVER_FLAGS["concurrent-requests"],
    default: MCP_CONCURRENT_REQUESTS,
  },
} as const;

/** Every flag of `exec-server mcp`. */
const MCP_FLAGS = defineFlags({
  ...CONNECT_FLAGS,
  ...IN_PROCESS_FLAGS,
  ...pickFlags(SERVER_FLAGS, ["log-level", "log-format"]),
  help: { kind: "boolean", short: "h", help: "print this help" },
});

/** The help text of `exec-server mcp`. */
export const MCP_HELP: string =
  `Usage: exec-server mcp [--url ws://HOST:PORT [connection options]] [server options]

An MCP server on stdin/stdout (Model Context Protocol, @modelcontextprotocol/sdk
${MCP_SDK_VERSION}) whose tools run commands, drive processes, use files and make HTTP
requests on an exec-server: with --url (or $EXEC_SERVER_URL) a remote one, else
one in this process, confined by the server options (e.g. --sandbox
workspace-write --writable-root DIR). Logs and audit events go to stderr.

Options:
${renderFlagHelp(MCP_FLAGS)}

The server options apply to the in-process server only; with --url the remote
server's own flags apply. Exit status: 0 when the MCP client closes stdin, ${MCP_USAGE_EXIT} for
a bad command line, 1 when the sandbox cannot be enforced here.
`;

class StartError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

/**
 * Runs `exec-server mcp ARGS` until the MCP client closes stdin (or SIGINT,
 * SIGTERM) and resolves with the exit code. Errors are printed as one line
 * on stderr.
 *
 * @example Print the help text
 * ```ts
 * import { mcpCommand } from "./mcp_command.ts";
 * console.log(await mcpCommand(["--help"])); // 0
 * ```
 *
 * @param args The arguments after `mcp`.
 */
export async function mcpCommand(args: string[]): Promise<number> {
  try {
    return await serve(args);
  } catch (err) {
    if (err instanceof StartError) {
      console.error(`exec-server mcp: ${err.message}`);
      if (err.code === MCP_USAGE_EXIT) console.error('Try "exec-server mcp --help".');
      return err.code;
    }
    throw err;
  }
}

async function serve(args: string[]): Promise<number> {
  const fail = (message: string, code: number = MCP_USAGE_EXIT): never => {
    throw new StartError(message, code);
  };
  let flags;
  let remote;
  try {
    flags = parseFlags(MCP_FLAGS, args).flags;
    if (flags.help) {
      console.log(MCP_HELP);
      return 0;
    }
    remote = await remoteServerFromFlags(flags);
  } catch (err) {
    if (err instanceof FlagError) fail(err.message);
    throw err;
  }
  setLogLevel(flags["log-level"]);
  setLogFormat(flags["log-format"]);
  let openClient;
  let stopServer = () => Promise.resolve();
  if (remote !== undefined) {
    const local = Object.keys(IN_PROCESS_FLAGS).filter((name) =>
      args.some((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`))
    );
    if (local.length > 0) {
      fail(
        `${
          local.map((name) => `--${name}`).join(", ")
        } apply to the in-process server, not with --url (or EXEC_SERVER_URL): the remote server's own flags apply`,
      );
    }
    openClient = (clientName: string) =>
      createClient(remote.url, {
        token: remote.token,
        caCerts: remote.caCerts,
        reconnectTimeoutMs: remote.reconnectTimeoutMs,
        clientName,
      });
  } else {
    const raceWarning = scopeRaceWarning();
    if (raceWarning) log("warn", raceWarning);
    setServerSandbox(sandboxFromFlags(flags, [], fail));
    setProcessNamespaces(flags["process-namespace"]);
    const { server, target } = startInProcessServer({
      concurrentRequests: flags["concurrent-requests"],
      processRetentionMs: flags["process-retention"] * 1000,
      maxProcesses: flags["max-processes"],
    });
    openClient = (clientName: string) => createClient(target, { clientName });
    stopServer = () => server.shutdown();
  }
  const mcp = new McpToolServer({ openClient });
  const stop = () => void mcp.close();
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  // Ends when the MCP client closes stdin (the transport tells the server, which closes).
  await mcp.connect(new McpStdioTransport());
  await mcp.closed;
  await stopServer();
  return 0;
}
