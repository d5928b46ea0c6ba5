/**
 * `exec-server mcp` under the MCP Inspector's CLI (`mcp-inspector --cli`,
 * `@modelcontextprotocol/inspector` 2.x from npm, installed outside the
 * repository by `.ci/run`): it lists the tools (with its `--strict` schema
 * portability check) and calls each one, every call against a freshly
 * started `exec-server mcp`, in the in-process form and the `--url` form;
 * and a sandboxed one refuses writes outside its writable root.
 *
 * The inspector is found at `$MCP_INSPECTOR_BIN`, else where `.ci/run`
 * installs it; without it the tests are ignored, saying so.
 */

import assert from "node:assert/strict";
import { defaultServerEnv, MAIN_TS, SERVER_PERMISSIONS } from "./helpers/server_harness.ts";
import { serveWebSocket } from "../lib/server/listen/listen.ts";
import { sandboxAvailable } from "../lib/server/sandbox/availability.ts";
import { TOOLS } from "../lib/mcp/tools.ts";

const INSPECTOR_VERSION = "2.12.0";
const INSPECTOR = Deno.env.get("MCP_INSPECTOR_BIN") ??
  `${
    Deno.env.get("HOME")
  }/.cache/exec-server/mcp-inspector-${INSPECTOR_VERSION}/node_modules/.bin/mcp-inspector`;

function installed(): boolean {
  try {
    return Deno.statSync(INSPECTOR).isFile;
  } catch {
    return false;
  }
}

const HAVE_INSPECTOR = installed();
const INSPECTOR_SKIP = HAVE_INSPECTOR
  ? ""
  : ` (skipped: no MCP Inspector at ${INSPECTOR}; .ci/run installs @modelcontextprotocol/inspector@${INSPECTOR_VERSION} there)`;
const sandbox = sandboxAvailable();

type Json = Record<string, unknown>;

/** Variables the spawned `deno` needs that the inspector does not pass on by itself. */
const PASSED_ENV = ["DENO_DIR", "DENO_CERT", "DENO_TLS_CA_STORE", "SSL_CERT_FILE", "SSL_CERT_DIR"];

/** One inspector run against a fresh `exec-server mcp MCP_ARGS`. */
async function inspect(
  home: string,
  mcpArgs: string[],
  method: string[],
): Promise<{ code: number; result: Json; stderr: string }> {
  const env: string[] = [];
  for (const name of PASSED_ENV) {
    const value = Deno.env.get(name);
    if (value !== undefined) env.push("-e", `${name}=${value}`);
  }
  const out = await new Deno.Command(INSPECTOR, {
    args: [
      "--cli",
      "--format",
      "json",
      ...env,
      ...method,
      "--",
      Deno.execPath(),
      "run",
      ...SERVER_PERMISSIONS,
      MAIN_TS,
      "mcp",
      ...mcpArgs,
    ],
    env: {
      ...defaultServerEnv(),
      // The inspector's own files (catalog, client settings) stay in the test's directory.
      MCP_CATALOG_PATH: `${home}/mcp.json`,
      MCP_CLIENT_CONFIG_PATH: `${home}/client.json`,
    },
    stdin: "null",
  }).output();
  const decoder = new TextDecoder();
  const stdout = decoder.decode(out.stdout);
  const stderr = decoder.decode(out.stderr);
  let parsed: Json;
  try {
    parsed = JSON.parse(stdout) as Json;
  } catch {
    throw new Error(`inspector printed no JSON (exit ${out.code}): ${stdout}\n${stderr}`);
  }
  assert.ok("result" in parsed, `no result (exit ${out.code}): ${stdout}\n${stderr}`);
  return { code: out.code, result: parsed.result as Json, stderr };
}

function call(name: string, args: Json): string[] {
  return ["--method", "tools/call", "--tool-name", name, "--tool-args-json", JSON.stringify(args)];
}

/** A tool call and what its result must show. */
interface Case {
  args: Json;
  check(structured: Json, isError: boolean): void;
}

function succeeds(check: (structured: Json) => void): (s: Json, isError: boolean) => void {
  return (structured, isError) => {
    assert.equal(isError, false, JSON.stringify(structured));
    check(structured);
  };
}

function failsWith(kind: string): (s: Json, isError: boolean) => void {
  return (structured, isError) => {
    assert.equal(isError, true, JSON.stringify(structured));
    assert.equal((structured.error as Json).kind, kind, JSON.stringify(structured));
  };
}

/** A call of every tool, against a directory of files and an HTTP server of the test's. */
function cases(dir: string, httpUrl: string): Record<string, Case> {
  return {
    run_command: {
      args: { argv: ["echo", "inspected"] },
      check: succeeds((s) => assert.deepEqual([s.exitCode, s.stdout], [0, "inspected\n"])),
    },
    // A fresh server keeps no output yet: the typed refusal.
    read_output: { args: { outputId: "none" }, check: failsWith("unknownOutput") },
    start_process: {
      args: { command: "sleep 30" },
      check: succeeds((s) => assert.equal(typeof s.processId, "string")),
    },
    read_process_output: { args: { processId: "none" }, check: failsWith("rpcError") },
    write_process_stdin: {
      args: { processId: "none", input: "x" },
      check: failsWith("processNotAccepted"),
    },
    signal_process: {
      args: { processId: "none", signal: "interrupt" },
      check: succeeds((s) => assert.equal(s.sent, "interrupt")),
    },
    terminate_process: {
      args: { processId: "none" },
      check: succeeds((s) => assert.equal(s.running, false)),
    },
    read_file: {
      args: { path: `${dir}/a.txt` },
      check: succeeds((s) => assert.deepEqual([s.content, s.size], ["alpha\n", 6])),
    },
    write_file: {
      args: { path: `${dir}/b.txt`, content: "beta\n" },
      check: succeeds((s) => {
        assert.equal(s.bytesWritten, 5);
        assert.equal(Deno.readTextFileSync(`${dir}/b.txt`), "beta\n");
      }),
    },
    edit_file: {
      args: { path: `${dir}/c.txt`, edits: [{ oldText: "gamma", newText: "GAMMA" }] },
      check: succeeds(() => assert.equal(Deno.readTextFileSync(`${dir}/c.txt`), "GAMMA\n")),
    },
    list_directory: {
      args: { path: dir },
      check: succeeds((s) =>
        assert.ok((s.entries as Json[]).some((e) => e.name === "a.txt" && e.type === "file"))
      ),
    },
    get_file_info: {
      args: { path: `${dir}/a.txt` },
      check: succeeds((s) => assert.deepEqual([s.type, s.size], ["file", 6])),
    },
    create_directory: {
      args: { path: `${dir}/made/deep` },
      check: succeeds(() => assert.ok(Deno.statSync(`${dir}/made/deep`).isDirectory)),
    },
    remove_path: {
      args: { path: `${dir}/gone.txt` },
      check: succeeds(() => assert.throws(() => Deno.statSync(`${dir}/gone.txt`))),
    },
    http_request: {
      args: { method: "GET", url: `${httpUrl}/hello` },
      check: succeeds((s) => assert.deepEqual([s.status, s.body], [200, "hello from the test"])),
    },
  };
}

async function exerciseEveryTool(mcpArgs: string[]): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "mcp-inspector-" });
  await using http = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("hello from the test"),
  );
  try {
    await Deno.writeTextFile(`${dir}/a.txt`, "alpha\n");
    await Deno.writeTextFile(`${dir}/c.txt`, "gamma\n");
    await Deno.writeTextFile(`${dir}/gone.txt`, "");
    const listed = await inspect(dir, mcpArgs, ["--strict", "--method", "tools/list"]);
    assert.equal(listed.code, 0, `--strict found schema problems: ${listed.stderr}`);
    const names = (listed.result.tools as Json[]).map((tool) => tool.name);
    assert.deepEqual(names, TOOLS.map((tool) => tool.name));
    const table = cases(dir, `http://127.0.0.1:${http.addr.port}`);
    assert.deepEqual(Object.keys(table).sort(), [...names].sort() as string[], "a case per tool");
    for (const [name, { args, check }] of Object.entries(table)) {
      const { code, result } = await inspect(dir, mcpArgs, call(name, args));
      const isError = result.isError === true;
      // The CLI exits 5 for a result with isError, 0 otherwise.
      assert.equal(code, isError ? 5 : 0, `${name}: exit ${code}`);
      check(result.structuredContent as Json, isError);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    `the MCP Inspector lists and calls every tool of an in-process exec-server mcp${INSPECTOR_SKIP}`,
  ignore: !HAVE_INSPECTOR,
  fn: () => exerciseEveryTool([]),
});

Deno.test({
  name: `the MCP Inspector lists and calls every tool of exec-server mcp --url${INSPECTOR_SKIP}`,
  ignore: !HAVE_INSPECTOR,
  fn: async () => {
    const server = await serveWebSocket();
    try {
      await exerciseEveryTool(["--url", server.url]);
    } finally {
      await server.shutdown();
    }
  },
});

Deno.test({
  name:
    `the MCP Inspector sees a sandboxed exec-server mcp refuse writes outside its writable root${
      INSPECTOR_SKIP || (sandbox.ok ? "" : ` (skipped: ${sandbox.reason})`)
    }`,
  ignore: !HAVE_INSPECTOR || !sandbox.ok,
  fn: async () => {
    const root = await Deno.makeTempDir({ prefix: "mcp-inspector-root-" });
    // Outside /tmp: a sandboxed process has a private /tmp, where the directory would not exist.
    const outside = await Deno.makeTempDir({ dir: Deno.env.get("HOME"), prefix: ".mcp-outside-" });
    const args = ["--sandbox", "workspace-write", "--writable-root", root];
    try {
      const file = await inspect(
        root,
        args,
        call("write_file", { path: `${outside}/f`, content: "x" }),
      );
      assert.equal(file.code, 5);
      assert.equal(
        ((file.result.structuredContent as Json).error as Json).kind,
        "permissionDenied",
      );
      const run = await inspect(
        root,
        args,
        call("run_command", { command: `echo x > ${outside}/g` }),
      );
      const ran = run.result.structuredContent as Json;
      assert.notEqual(ran.exitCode, 0);
      assert.match(ran.stderr as string, /Read-only file system/);
      assert.deepEqual(
        await Array.fromAsync(Deno.readDir(outside)),
        [],
        "nothing was written outside",
      );
      const inside = await inspect(
        root,
        args,
        call("write_file", { path: `${root}/in`, content: "x" }),
      );
      assert.equal(inside.code, 0);
    } finally {
      await Deno.remove(root, { recursive: true });
      await Deno.remove(outside, { recursive: true });
    }
  },
});
