import assert from "node:assert/strict";
import { protocolJsonSchema, protocolJsonSchemaText } from "../lib/protocol/json_schema.ts";
import { METHODS } from "../lib/protocol/methods.ts";

const SCHEMA_FILE = new URL("../schema/protocol.json", import.meta.url);

Deno.test("schema/protocol.json is up to date (run `deno task schema` when this fails)", async () => {
  let committed: string;
  try {
    committed = await Deno.readTextFile(SCHEMA_FILE);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      assert.fail("schema/protocol.json is missing: run `deno task schema` and commit it");
    }
    throw err;
  }
  assert.equal(committed, protocolJsonSchemaText());
});

Deno.test("protocolJsonSchema() lists every METHODS entry with its kind and direction", () => {
  const schema = protocolJsonSchema();
  const methods = schema.methods as Record<string, Record<string, unknown>>;
  assert.deepEqual(Object.keys(methods), Object.keys(METHODS));
  for (const [name, spec] of Object.entries(METHODS)) {
    const entry = methods[name]!;
    assert.equal(entry.kind, spec.kind, name);
    assert.equal(entry.direction, spec.direction, name);
    assert.equal(typeof entry.description, "string", name);
    assert.ok(entry.params !== undefined, `${name} has params`);
    if (spec.kind === "request") {
      assert.ok(entry.result !== undefined, `${name} has a result`);
      if (spec.family) assert.equal(entry.family, spec.family, name);
    } else {
      assert.equal(entry.result, undefined, `${name} is a notification without result`);
    }
  }
});

Deno.test("protocolJsonSchema() covers the whole method catalogue of the spec", () => {
  const methods = protocolJsonSchema().methods as Record<string, unknown>;
  const expected = [
    "initialize",
    "initialized",
    "environment/info",
    "environment/status",
    "process/start",
    "process/read",
    "process/write",
    "process/signal",
    "process/terminate",
    "fs/readFile",
    "fs/writeFile",
    "fs/createDirectory",
    "fs/getMetadata",
    "fs/canonicalize",
    "fs/readDirectory",
    "fs/walk",
    "fs/remove",
    "fs/copy",
    "fs/open",
    "fs/readBlock",
    "fs/writeBlock",
    "fs/close",
    "fs/watchMissing",
    "http/request",
    "capabilityRoots/discoverV1",
    "capabilities/discoverV2",
    "environmentConfig/read",
    "process/output",
    "process/exited",
    "process/closed",
    "http/request/bodyDelta",
    "fs/missingChanged",
  ];
  for (const name of expected) assert.ok(name in methods, `${name} is in the schema`);
});

Deno.test("protocolJsonSchema() describes params with required members in declaration order", () => {
  const methods = protocolJsonSchema().methods as Record<
    string,
    { params: Record<string, unknown> }
  >;
  const start = methods["process/start"]!.params;
  assert.equal(start.type, "object");
  assert.deepEqual(start.required, ["processId", "argv", "cwd", "env", "tty"]);
  assert.equal(start.title, "WireExecParams");
  const write = methods["process/write"]!.params as { properties: Record<string, unknown> };
  assert.deepEqual(write.properties.chunk, { type: "string", contentEncoding: "base64" });
  assert.deepEqual(methods["environment/status"]!.params, { type: "null" });
  const text = protocolJsonSchemaText();
  assert.ok(text.endsWith("}\n"));
  assert.deepEqual(JSON.parse(text), protocolJsonSchema());
});
