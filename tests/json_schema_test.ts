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

const DEFS = protocolJsonSchema().$defs as Record<string, Record<string, unknown>>;

Deno.test("protocolJsonSchema() has one definition per METHODS entry, by kind and direction", () => {
  for (const [name, spec] of Object.entries(METHODS)) {
    const def = DEFS[spec.kind === "request" ? `request:${name}` : `notification:${name}`]!;
    assert.ok(def, name);
    const description = def.description as string;
    assert.ok(description.startsWith(spec.doc), name);
    if (spec.kind === "request") {
      assert.ok(DEFS[`result:${name}`], `${name} has a result`);
      if (spec.family) assert.ok(description.includes(`"${spec.family}"`), name);
    } else {
      assert.equal(DEFS[`result:${name}`], undefined, `${name} is a notification without result`);
      const direction = spec.direction === "serverToClient" ? "server → client" : "client → server";
      assert.ok(description.includes(direction), name);
    }
  }
});

Deno.test("protocolJsonSchema() covers the whole method catalogue of the spec", () => {
  const expected = [
    "initialize",
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
  ];
  for (const name of expected) assert.ok(`request:${name}` in DEFS, `${name} is in the schema`);
  const notifications = [
    "initialized",
    "process/output",
    "process/exited",
    "process/closed",
    "http/request/bodyDelta",
    "fs/missingChanged",
  ];
  for (const name of notifications) assert.ok(`notification:${name}` in DEFS, name);
});

Deno.test("protocolJsonSchema() describes params with required members in declaration order", () => {
  const params = (name: string) =>
    (DEFS[`request:${name}`]!.properties as Record<string, Record<string, unknown>>).params!;
  assert.deepEqual(params("process/start"), { $ref: "#/$defs/WireExecParams" });
  const start = DEFS.WireExecParams!;
  assert.equal(start.type, "object");
  assert.deepEqual(start.required, ["processId", "argv", "cwd", "env", "tty"]);
  const write = DEFS.WriteParams as { properties: Record<string, unknown> };
  assert.deepEqual(write.properties.chunk, { $ref: "#/$defs/Base64" });
  assert.deepEqual(params("environment/status"), {
    anyOf: [{ type: "null" }, { type: "object", maxProperties: 0 }],
  });
  assert.deepEqual(DEFS["request:environment/status"]!.required, ["id", "method"]);
  const text = protocolJsonSchemaText();
  assert.ok(text.endsWith("}\n"));
  assert.deepEqual(JSON.parse(text).$defs.WireExecParams, JSON.parse(JSON.stringify(start)));
});
