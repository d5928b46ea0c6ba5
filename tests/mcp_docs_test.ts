/**
 * docs/guide/mcp.md is what `exec-server mcp` does: its command lines run,
 * its client configurations start the same command, and its tables of
 * tools, limits and error kinds are the code's.
 */

import assert from "node:assert/strict";
// The SDK version lib/mcp/sdk.ts pins, by the same full specifiers.
// deno-lint-ignore no-import-prefix
import { StdioClientTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/client/stdio.js";
import { docBlock } from "./helpers/doc_blocks.ts";
import { Client, type ToolResult } from "./helpers/mcp_session.ts";
import { defaultServerEnv, MAIN_TS, SERVER_PERMISSIONS } from "./helpers/server_harness.ts";
import { capabilityTokenAuth, tokenFileDigest } from "../lib/server/listen/auth.ts";
import { serveWebSocket } from "../lib/server/listen/listen.ts";
import { sandboxAvailable } from "../lib/server/sandbox/availability.ts";
import { MCP_CONCURRENT_REQUESTS } from "../lib/cli/mcp_command.ts";
import { MCP_MAX_MESSAGE_BYTES } from "../lib/mcp/stdio_transport.ts";
import * as files from "../lib/mcp/file_tools.ts";
import * as http from "../lib/mcp/http_tool.ts";
import * as output from "../lib/mcp/output_capture.ts";
import * as processes from "../lib/mcp/process_tools.ts";
import { MCP_ERROR_KINDS } from "../lib/mcp/tool_errors.ts";
import { TOOLS } from "../lib/mcp/tools.ts";

const GUIDE = await Deno.readTextFile(new URL("../docs/guide/mcp.md", import.meta.url));
const sandbox = sandboxAvailable();

type Json = Record<string, unknown>;

/** The rows of the Markdown table under a heading: its cells, header and rule left out. */
function tableRows(heading: string): string[][] {
  const section = GUIDE.split(/^## /m).find((part) => part.startsWith(`${heading}\n`));
  assert.ok(section, `no section ${heading}`);
  return section.split("\n").filter((line) => line.startsWith("|")).slice(2).map((line) =>
    line.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim())
  );
}

/**
 * A doc block run by sh in `cwd`, with an `exec-server` on the PATH that is this repository's
 * main.ts (as an installed binary would be).
 */
async function spawnBlock(block: string, cwd: string) {
  const bin = await Deno.makeTempDir({ prefix: "mcp-docs-bin-" });
  await Deno.writeTextFile(
    `${bin}/exec-server`,
    `#!/bin/sh\nexec "${Deno.execPath()}" run ${SERVER_PERMISSIONS.join(" ")} "${MAIN_TS}" "$@"\n`,
    { mode: 0o755 },
  );
  const env = defaultServerEnv();
  const transport = new StdioClientTransport({
    command: "sh",
    args: ["-c", block],
    cwd,
    env: { ...env, PATH: `${bin}:${env.PATH}` },
    stderr: "pipe",
  });
  const client = new Client({ name: "docs-test", version: "1.0.0" });
  await client.connect(transport);
  return {
    client,
    call: async (name: string, args: Json) =>
      await client.callTool({ name, arguments: args }) as ToolResult,
    async [Symbol.asyncDispose]() {
      await client.close();
      await Deno.remove(bin, { recursive: true });
    },
  };
}

Deno.test({
  name: `docs: the sandboxed command line is an MCP server confined to the directory it runs in${
    sandbox.ok ? "" : ` (skipped: ${sandbox.reason})`
  }`,
  ignore: !sandbox.ok,
  fn: async () => {
    const root = await Deno.makeTempDir({ prefix: "mcp-docs-" });
    const outside = await Deno.makeTempDir({ dir: Deno.env.get("HOME"), prefix: ".mcp-docs-" });
    try {
      await using mcp = await spawnBlock(docBlock("mcp-sandboxed"), root);
      const inside = await mcp.call("write_file", { path: "notes.txt", content: "in the root" });
      assert.ok(!inside.isError, JSON.stringify(inside));
      assert.equal(await Deno.readTextFile(`${root}/notes.txt`), "in the root");
      const refused = await mcp.call("write_file", { path: `${outside}/x`, content: "no" });
      assert.equal((refused.structuredContent!.error as Json).kind, "permissionDenied");
    } finally {
      await Deno.remove(root, { recursive: true });
      await Deno.remove(outside, { recursive: true });
    }
  },
});

Deno.test("docs: the --url command line drives a remote server with a token file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mcp-docs-url-" });
  await Deno.writeTextFile(`${dir}/token`, "docs-token\n");
  const server = await serveWebSocket({
    authorize: capabilityTokenAuth(await tokenFileDigest(`${dir}/token`)),
  });
  try {
    // The block's URL and token path, replaced by this test's server and token file.
    const block = docBlock("mcp-remote");
    assert.ok(
      block.includes("ws://127.0.0.1:8765") && block.includes("~/.config/exec-server/token"),
    );
    const script = block.replace("ws://127.0.0.1:8765", server.url).replace(
      "~/.config/exec-server/token",
      `${dir}/token`,
    );
    await using mcp = await spawnBlock(script, dir);
    const ran = await mcp.call("run_command", { argv: ["echo", "remote"] });
    assert.equal(ran.structuredContent!.stdout, "remote\n");
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("docs: the mcpServers entry and Codex's [mcp_servers] run the documented command line", () => {
  const shell = docBlock("mcp-sandboxed").trim().split(/\s+/).slice(1); // After `exec-server`.
  const json = /```json\n([\s\S]*?)```/.exec(GUIDE)![1]!;
  const entry =
    (JSON.parse(json).mcpServers as Record<string, { command: string; args: string[] }>)[
      "exec-server"
    ]!;
  assert.equal(entry.command, "exec-server");
  const toml = /```toml\n([\s\S]*?)```/.exec(GUIDE)![1]!;
  assert.match(toml, /^\[mcp_servers\.exec-server\]$/m);
  assert.match(toml, /^command = "exec-server"$/m);
  const tomlArgs = JSON.parse(/^args = (\[.*\])$/m.exec(toml)![1]!) as string[];
  for (const args of [entry.args, tomlArgs]) {
    assert.deepEqual(args, shell.map((arg) => arg === '"$PWD"' ? "/home/me/project" : arg));
  }
  assert.match(toml, /^startup_timeout_sec = \d+$/m);
  assert.match(toml, /^tool_timeout_sec = \d+$/m);
});

Deno.test("docs: the README's MCP recipe is the guide's mcpServers entry and [mcp_servers] table", async () => {
  const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
  const section = readme.split(/^## /m).find((part) =>
    part.startsWith("Other agents, through MCP\n")
  );
  assert.ok(section, "README has no MCP section");
  const json = (text: string) => JSON.parse(/```json\n([\s\S]*?)```/.exec(text)![1]!);
  assert.deepEqual(json(section), json(GUIDE));
  const tomlLines = (text: string) => /```toml\n([\s\S]*?)```/.exec(text)![1]!.split("\n");
  const guideToml = new Set(tomlLines(GUIDE));
  const readmeToml = tomlLines(section).filter((line) => line !== "");
  assert.ok(readmeToml.length >= 3);
  for (const line of readmeToml) assert.ok(guideToml.has(line), `not in the guide: ${line}`);
});

Deno.test("docs: the tools table lists every tool, in order", () => {
  const names = tableRows("The tools").map((row) => row[0]!.replaceAll("`", ""));
  assert.deepEqual(names, TOOLS.map((tool) => tool.name));
});

Deno.test("docs: the limits table states every bound with the code's number", () => {
  const stated = new Map(tableRows("Limits").map(([what, bound]) => [what!, Number(bound)]));
  const bounds: Record<string, number> = {
    "`run_command`: bytes of a stream shown in the result": output.INLINE_OUTPUT_BYTES,
    "`run_command`: bytes of a stream kept for `read_output`": output.KEPT_STREAM_BYTES,
    "`read_output`: truncated outputs kept per connection (newest)": output.MAX_KEPT_OUTPUTS,
    "`run_command`: default `timeoutMs`": processes.DEFAULT_COMMAND_TIMEOUT_MS,
    "`run_command`: largest `timeoutMs`": processes.MAX_COMMAND_TIMEOUT_MS,
    "`run_command`: commands running at once per connection": processes.MAX_RUNNING_COMMANDS,
    "`run_command` `stdin`, `write_process_stdin` `input`: bytes": processes.MAX_INPUT_BYTES,
    "`read_output`, `read_process_output`: default `maxBytes`": processes.DEFAULT_READ_BYTES,
    "`read_output`, `read_process_output`: largest `maxBytes`": processes.MAX_READ_BYTES,
    "`read_process_output`: largest `waitMs`": processes.MAX_WAIT_MS,
    "`read_file`: default `maxBytes`": files.DEFAULT_READ_FILE_BYTES,
    "`read_file`: largest `maxBytes`": files.MAX_READ_FILE_BYTES,
    "`write_file` content, `edit_file` file: bytes": files.MAX_WRITE_FILE_BYTES,
    "`edit_file`: edits per call": files.MAX_EDITS,
    "`list_directory`: entries returned": files.MAX_LIST_ENTRIES,
    "`http_request`: request body bytes": http.MAX_HTTP_BODY_BYTES,
    "`http_request`: response body bytes returned": http.MAX_HTTP_RESPONSE_BYTES,
    "`http_request`: default `timeoutMs`": http.DEFAULT_HTTP_TIMEOUT_MS,
    "`http_request`: largest `timeoutMs`": http.MAX_HTTP_TIMEOUT_MS,
    "largest MCP message read from stdin (a longer one is answered with -32700)":
      MCP_MAX_MESSAGE_BYTES,
  };
  assert.deepEqual(Object.fromEntries(stated), bounds);
  assert.ok(GUIDE.includes(`(${MCP_CONCURRENT_REQUESTS} by default here`));
});

Deno.test("docs: the error kinds table is MCP_ERROR_KINDS", () => {
  const stated = Object.fromEntries(
    tableRows("Errors").map(([kind, meaning]) => [kind!.replaceAll("`", ""), meaning]),
  );
  assert.deepEqual(stated, MCP_ERROR_KINDS);
});
