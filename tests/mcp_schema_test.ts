/**
 * The MCP tools' input schemas: valid JSON Schema under the strict check
 * `schema/protocol.json` passes (ajv 2020-12, strict mode), as a client sees
 * them on the wire, and derived from the method table where a tool maps to
 * one method.
 */

import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import { mcpSession } from "./helpers/mcp_session.ts";
import { METHODS, PROCESS_SIGNALS } from "../lib/protocol/methods.ts";
import { TOOLS } from "../lib/mcp/tools.ts";
import { deriveArguments } from "../lib/mcp/tool_schema.ts";

type Json = Record<string, unknown>;

function toolSchema(name: string): Json {
  const tool = TOOLS.find((t) => t.name === name);
  assert.ok(tool, name);
  return tool.inputSchema;
}

function member(name: string, argument: string): Json {
  return (toolSchema(name).properties as Record<string, Json>)[argument]!;
}

Deno.test("mcp tool schemas as tools/list sends them compile under ajv's strict mode (draft 2020-12)", async () => {
  await using session = await mcpSession();
  const { tools } = await session.client.listTools();
  assert.equal(tools.length, TOOLS.length);
  for (const tool of tools as { name: string; inputSchema: Json }[]) {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    assert.ok(ajv.validateSchema(tool.inputSchema), `${tool.name}: ${ajv.errorsText()}`);
    assert.equal(typeof ajv.compile(tool.inputSchema), "function", tool.name);
    assert.equal(tool.inputSchema.type, "object", tool.name);
    assert.equal(tool.inputSchema.additionalProperties, false, tool.name);
    assert.ok(!JSON.stringify(tool.inputSchema).includes('"format"'), tool.name);
  }
});

Deno.test("mcp tool schemas are the strict check's too: an argument that does not match is refused", () => {
  const ajv = new Ajv2020({ strict: true });
  const check = ajv.compile(toolSchema("read_file"));
  assert.ok(check({ path: "/etc/hostname", maxBytes: 10 }));
  assert.ok(!check({ path: "/etc/hostname", maxBytes: 0 }));
  assert.ok(!check({ path: 7 }));
  assert.ok(!check({}));
  assert.ok(!check({ path: "/x", other: true }));
});

Deno.test("mcp tool arguments that map to a method take its schema and description from the method table", () => {
  const start = METHODS["process/start"].params.jsonSchema().properties as Record<string, Json>;
  assert.deepEqual(member("run_command", "env").additionalProperties, { type: "string" });
  assert.equal(
    member("start_process", "arg0").description,
    "argv[0] as the program sees it.",
    "the method table's description",
  );
  assert.ok(start.arg0, "process/start has arg0");
  assert.deepEqual(member("signal_process", "signal").enum, Object.keys(PROCESS_SIGNALS));
  const pathArgument = member("list_directory", "path");
  assert.equal(pathArgument.type, "string", "a PathUri member becomes a plain path argument");
  assert.equal(
    member("create_directory", "recursive").description,
    "Create missing parents too (default true).",
  );
  assert.deepEqual(toolSchema("get_file_info").required, ["path"]);
  assert.deepEqual(toolSchema("signal_process").required, ["processId", "signal"]);
});

Deno.test("mcp deriveArguments converts path members to file: URIs and renames members", () => {
  const derived = deriveArguments("fs/writeFile", {
    path: "take",
    dataBase64: { as: "content", to: (value) => btoa(value as string) },
    sandbox: "omit",
  });
  assert.deepEqual(Object.keys(derived.properties), ["path", "content"]);
  assert.deepEqual(derived.required, ["path", "content"]);
  assert.deepEqual(
    derived.params({ path: "/tmp/a b", content: "hi" }, {
      resolvePath: (p) => `file://${encodeURI(p)}`,
    }),
    { path: "file:///tmp/a%20b", dataBase64: "aGk=" },
  );
  assert.throws(
    () => deriveArguments("fs/remove", { bogus: "take" } as never),
    /fs\/remove has no member bogus/,
  );
});
