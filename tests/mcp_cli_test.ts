/**
 * `exec-server mcp` as a program: its command line, the sandboxed
 * in-process form refusing writes outside its writable root through the
 * file tool and the run tool, the `--url` form, and its exit when the MCP
 * client closes stdin. MCP is spoken by the SDK's own client over the
 * program's stdio.
 */

import assert from "node:assert/strict";
// The SDK version lib/mcp/sdk.ts pins, by the same full specifiers.
// deno-lint-ignore no-import-prefix
import { StdioClientTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/client/stdio.js";
import { Client, type ToolResult } from "./helpers/mcp_session.ts";
import {
  defaultServerEnv,
  MAIN_TS,
  pidAlive,
  SERVER_PERMISSIONS,
} from "./helpers/server_harness.ts";
import { nextFeedMessage } from "./helpers/observe.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { capabilityTokenAuth, tokenFileDigest } from "../lib/server/listen/auth.ts";
import { type AuditEvent, onAudit } from "../lib/server/observe/audit.ts";
import { serveWebSocket } from "../lib/server/listen/listen.ts";
import { sandboxAvailable } from "../lib/server/sandbox/availability.ts";
import { MCP_SDK_VERSION } from "../lib/mcp/sdk.ts";
import { MCP_MAX_MESSAGE_BYTES } from "../lib/mcp/stdio_transport.ts";

const availability = sandboxAvailable();
const SKIP_REASON = availability.ok ? "" : ` (skipped: ${availability.reason})`;

type Json = Record<string, unknown>;

async function runMcp(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "mcp", ...args],
    env: defaultServerEnv(),
    clearEnv: true,
    stdin: "null",
  }).output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/** `exec-server mcp ARGS` spawned by the SDK's stdio client, initialized. */
async function spawnMcp(
  args: string[],
  env: Record<string, string> = {},
  clientName = "mcp-cli-test",
) {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "mcp", ...args],
    env: { ...defaultServerEnv(), ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => (stderr += new TextDecoder().decode(chunk)));
  const client = new Client({ name: clientName, version: "2.0.0" });
  await client.connect(transport);
  return {
    client,
    pid: transport.pid!,
    stderr: () => stderr,
    call: async (name: string, args: Json) =>
      await client.callTool({ name, arguments: args }) as ToolResult,
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  };
}

/** An MCP initialize request, for the tests that speak the wire themselves. */
const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw", version: "0" },
  },
};

function structured(result: ToolResult): Json {
  assert.ok(result.structuredContent, JSON.stringify(result));
  return result.structuredContent;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("exec-server mcp --help lists the connection and the server flags", async () => {
  const { code, stdout } = await runMcp(["--help"]);
  assert.equal(code, 0);
  for (
    const flag of [
      "--url",
      "--token-file",
      "--cacert",
      "--sandbox",
      "--writable-root",
      "--log-format",
    ]
  ) {
    assert.ok(stdout.includes(flag), flag);
  }
  assert.ok(!stdout.includes("--listen"), "no listener flags");
});

Deno.test("exec-server mcp under deno run without read access to its modules names the --allow-read it needs", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read=/tmp", "--allow-env", MAIN_TS, "mcp", "--help"],
    env: defaultServerEnv(),
    clearEnv: true,
    stdin: "null",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 2, stderr);
  const root = new URL("../", import.meta.url).pathname;
  assert.equal(
    stderr,
    `error: exec-server mcp loads its modules when it starts: start it with --allow-read=${root}\n`,
  );
});

Deno.test("exec-server mcp refuses the in-process server's flags with --url, and a bad flag", async () => {
  const mixed = await runMcp(["--url", "ws://127.0.0.1:1", "--sandbox", "read-only"]);
  assert.equal(mixed.code, 2);
  assert.match(mixed.stderr, /--sandbox apply to the in-process server, not with --url/);
  const bad = await runMcp(["--url", "http://127.0.0.1:1"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--url must be a ws:\/\/ or wss:\/\/ URL/);
  const root = await runMcp([
    "--sandbox",
    "workspace-write",
    "--writable-root",
    "/nonexistent/dir",
  ]);
  assert.equal(root.code, 2);
  assert.match(root.stderr, /--writable-root \/nonexistent\/dir is not an existing directory/);
});

Deno.test({
  name:
    `a sandboxed exec-server mcp refuses writes outside its writable root, through write_file and run_command${SKIP_REASON}`,
  ignore: !availability.ok,
  fn: async () => {
    const root = await Deno.makeTempDir({ prefix: "mcp-root-" });
    // Outside /tmp: a sandboxed process has a private /tmp, where the directory would not exist.
    const outside = await Deno.makeTempDir({ dir: Deno.env.get("HOME"), prefix: ".mcp-outside-" });
    try {
      await using mcp = await spawnMcp(["--sandbox", "workspace-write", "--writable-root", root]);
      const inside = await mcp.call("write_file", { path: `${root}/in.txt`, content: "ok" });
      assert.ok(!inside.isError, JSON.stringify(inside));
      assert.equal(await Deno.readTextFile(`${root}/in.txt`), "ok");
      const refused = await mcp.call("write_file", { path: `${outside}/f.txt`, content: "no" });
      assert.equal(refused.isError, true);
      assert.equal((structured(refused).error as Json).kind, "permissionDenied");
      assert.equal(await exists(`${outside}/f.txt`), false);
      const ran = structured(
        await mcp.call("run_command", { command: `echo no > ${outside}/g.txt` }),
      );
      assert.notEqual(ran.exitCode, 0);
      assert.match(ran.stderr as string, /Read-only file system/);
      assert.equal(await exists(`${outside}/g.txt`), false);
      const allowed = structured(
        await mcp.call("run_command", { command: `echo yes > ${root}/h.txt` }),
      );
      assert.equal(allowed.exitCode, 0);
      assert.equal(await Deno.readTextFile(`${root}/h.txt`), "yes\n");
      const { tools } = await mcp.client.listTools();
      assert.ok(
        !tools.some((t: { name: string }) => t.name === "http_request"),
        "no network through the MCP layer",
      );
    } finally {
      await Deno.remove(root, { recursive: true });
      await Deno.remove(outside, { recursive: true });
    }
  },
});

Deno.test("exec-server mcp --url drives a remote server with a token, and its session bears the MCP client's name", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mcp-url-" });
  const tokenFile = `${dir}/token`;
  await Deno.writeTextFile(tokenFile, "mcp-secret-token\n");
  const server = await serveWebSocket({
    authorize: capabilityTokenAuth(await tokenFileDigest(tokenFile)),
  });
  try {
    await using mcp = await spawnMcp([
      "--url",
      server.url,
      "--token-file",
      tokenFile,
      "--log-level",
      "info",
    ]);
    const ran = structured(await mcp.call("run_command", { argv: ["echo", "remote"] }));
    assert.equal(ran.stdout, "remote\n");
    assert.equal(server.sessions.list().length, 1, "one session on the remote server");
    const sessionId = server.sessions.list()[0]!.id;
    assert.match(
      mcp.stderr(),
      new RegExp(`mcp\\.session session=${sessionId} client=mcp-cli-test clientVersion=2\\.0\\.0`),
    );
    const { tools } = await mcp.client.listTools();
    assert.ok(
      tools.some((t: { name: string }) => t.name === "http_request"),
      "unsandboxed: http_request",
    );
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

/** The JSON log lines of `stderr()` once one satisfies `done` (waits up to 10 s for them). */
async function jsonLog(stderr: () => string, done: (events: Json[]) => boolean): Promise<Json[]> {
  const deadline = Date.now() + 10_000;
  while (true) {
    const events = stderr().split("\n").filter((line) => line.startsWith("{")).map((line) =>
      JSON.parse(line) as Json
    );
    if (done(events)) return events;
    if (Date.now() > deadline) throw new Error(`not in the log:\n${stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

Deno.test("exec-server mcp: the audit log opens its session under the MCP client's name and audits its commands in that session", async () => {
  await using mcp = await spawnMcp(
    ["--log-level", "info", "--log-format", "json"],
    {},
    "audit-probe-agent",
  );
  const ran = structured(await mcp.call("run_command", { argv: ["echo", "audited"] }));
  assert.equal(ran.stdout, "audited\n");
  const events = await jsonLog(
    mcp.stderr,
    (events) => events.some((e) => e.event === "process.start"),
  );
  const opened = events.filter((e) => e.event === "session.open");
  assert.deepEqual(opened.map((e) => [e.clientName, e.resumed]), [
    ["audit-probe-agent (MCP)", false],
  ]);
  const started = events.find((e) => e.event === "process.start");
  assert.equal(started?.session, opened[0]!.session);
  assert.deepEqual(started?.argv, ["echo", "audited"]);
});

Deno.test("exec-server mcp --url: the remote server's audit log and console show the session under the MCP client's name", async () => {
  const server = await serveWebSocket({});
  const audited: AuditEvent[] = [];
  const stopAudit = onAudit((event) => audited.push(event));
  try {
    await using mcp = await spawnMcp(["--url", server.url], {}, "console-probe-agent");
    assert.equal(structured(await mcp.call("run_command", { argv: ["true"] })).exitCode, 0);
    const [session] = server.sessions.list();
    assert.ok(session, "a session on the remote server");
    const opened = audited.filter((e) => e.event === "session.open").map((e) => e.fields);
    assert.deepEqual(opened, [
      { session: session.id, clientName: "console-probe-agent (MCP)", resumed: false },
    ]);
    const started = audited.find((e) => e.event === "process.start");
    assert.equal(started?.fields.session, session.id);
    const port = Number(new URL(server.url).port);
    await using feed = await RawWebSocket.connect(port, {
      path: "/console/feed",
      headers: { Origin: `http://127.0.0.1:${port}` },
    });
    const listed = await nextFeedMessage(feed, (m) => m.type === "sessions");
    assert.deepEqual(
      (listed.sessions as Json[]).map((s) => [s.id, s.clientName]),
      [[session.id, "console-probe-agent (MCP)"]],
    );
  } finally {
    stopAudit();
    await server.shutdown();
  }
});

Deno.test("exec-server mcp --url with a refused token answers tool calls with kind connectFailed", async () => {
  const server = await serveWebSocket({ authorize: capabilityTokenAuth("0".repeat(64)) });
  try {
    await using mcp = await spawnMcp(["--url", server.url, "--token-env", "MCP_TEST_TOKEN"], {
      MCP_TEST_TOKEN: "wrong",
    });
    const result = await mcp.call("run_command", { command: "true" });
    assert.equal(result.isError, true);
    assert.equal((structured(result).error as Json).kind, "connectFailed");
    assert.equal(
      (await mcp.client.listTools()).tools.length > 0,
      true,
      "the tools are still listed",
    );
  } finally {
    await server.shutdown();
  }
});

Deno.test("exec-server mcp exits 0 when the MCP client closes stdin, killing the processes it started", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mcp-exit-" });
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "mcp"],
      env: defaultServerEnv(),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lines = [
      INITIALIZE,
      { jsonrpc: "2.0", method: "notifications/initialized" },
      {
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: {
          name: "start_process",
          arguments: { command: `echo $$ > ${dir}/pid; exec sleep 60` },
        },
      },
    ].map((message) => JSON.stringify(message) + "\n").join("");
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(lines));
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let answered = "";
    while (!answered.includes('"id":2')) answered += (await reader.read()).value ?? "";
    assert.ok(answered.includes("processId"), answered);
    let pidText = "";
    while (!pidText.endsWith("\n")) {
      pidText = await Deno.readTextFile(`${dir}/pid`).catch(() => "");
      await new Promise((r) => setTimeout(r, 20));
    }
    const pid = Number(pidText.trim());
    assert.ok(pidAlive(pid));
    await writer.close();
    const status = await child.status;
    await reader.cancel();
    await child.stderr.cancel();
    assert.equal(status.code, 0);
    assert.equal(pidAlive(pid), false, "the started process is gone");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("every specifier of the MCP SDK in the repository names the pinned version", async () => {
  const pinned = new Set<string>();
  for (const dir of ["lib/mcp", "tests", "tests/helpers"]) {
    for await (const entry of Deno.readDir(new URL(`../${dir}/`, import.meta.url))) {
      if (!entry.name.endsWith(".ts")) continue;
      const text = await Deno.readTextFile(new URL(`../${dir}/${entry.name}`, import.meta.url));
      for (const [, version] of text.matchAll(/npm:@modelcontextprotocol\/sdk@([^/"]+)\//g)) {
        pinned.add(version!);
      }
    }
  }
  assert.deepEqual([...pinned], [MCP_SDK_VERSION]);
});

Deno.test("exec-server mcp loads the MCP SDK with zod 4 (main.ts's own npm graph, not the test run's)", async () => {
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", MAIN_TS],
    stdout: "piped",
    stderr: "null",
  }).output();
  assert.ok(info.success);
  const packages = Object.keys(JSON.parse(new TextDecoder().decode(info.stdout)).npmPackages);
  const sdk = packages.filter((name) =>
    name.startsWith(`@modelcontextprotocol/sdk@${MCP_SDK_VERSION}`)
  );
  assert.equal(sdk.length, 1, packages.join(" "));
  assert.match(sdk[0]!, /_zod@4\./);
});

Deno.test("exec-server mcp reads a message up to its bound and answers a longer one, or a line that is not JSON-RPC, with -32700", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "mcp"],
    env: defaultServerEnv(),
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const encoder = new TextEncoder();
  const writer = child.stdin.getWriter();
  const send = (text: string) => writer.write(encoder.encode(text + "\n"));
  /** A tools/call of exactly `bytes` bytes (its stdin padded), or one byte more. */
  const sized = (id: number, bytes: number) => {
    const head =
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true","stdin":"`;
    const tail = `"}}}`;
    return head + "x".repeat(bytes - head.length - tail.length) + tail;
  };
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const next = async (): Promise<Json> => {
    while (!buffered.includes("\n")) buffered += (await lines.read()).value ?? "";
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return JSON.parse(line);
  };
  await send(JSON.stringify(INITIALIZE));
  assert.equal((await next()).id, 1);
  await send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
  await send(sized(2, MCP_MAX_MESSAGE_BYTES));
  const atBound = await next();
  assert.equal(atBound.id, 2);
  assert.equal(
    (((atBound.result as Json).structuredContent as Json).error as Json).kind,
    "tooLarge",
  );
  await send(sized(3, MCP_MAX_MESSAGE_BYTES + 1));
  const over = await next();
  assert.deepEqual([over.id, (over.error as Json).code], [null, -32700]);
  await send("not json");
  assert.equal(((await next()).error as Json).code, -32700);
  await send(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tools/list" }));
  assert.equal((await next()).id, 4, "the connection goes on");
  await writer.close();
  assert.equal((await child.status).code, 0);
  await lines.cancel();
});
