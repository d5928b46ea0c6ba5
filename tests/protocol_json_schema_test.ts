/**
 * `schema/protocol.json` as a client author in another language uses it:
 * compiled by a JSON Schema validator in strict mode, then checked against
 * the reference server's recorded messages and this server's own.
 */

import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { METHODS } from "../lib/protocol/methods.ts";

type Json = Record<string, unknown>;

const SCHEMA = JSON.parse(
  await Deno.readTextFile(new URL("../schema/protocol.json", import.meta.url)),
) as Json;
const DEFS = SCHEMA.$defs as Record<string, Json>;
const TRANSCRIPTS = new URL("./fixtures/transcripts/", import.meta.url);

function validator() {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addSchema(SCHEMA, "protocol");
  const check = (def: string | undefined, value: unknown) => {
    const ref = def === undefined ? "protocol" : `protocol#/$defs/${def.replaceAll("/", "~1")}`;
    const validate = ajv.getSchema(ref);
    assert.ok(validate, `no schema ${ref}`);
    return validate(value) ? [] : validate.errors ?? [];
  };
  return check;
}

/** The value at a JSON pointer of `value`. */
function at(value: unknown, pointer: string): unknown {
  let current = value;
  for (const part of pointer.split("/").slice(1)) {
    current = (current as Record<string, unknown> | undefined)?.[part.replaceAll("~1", "/")];
  }
  return current;
}

/** Errors, minus those about a transcript's placeholders (`"<TIME>"` where a number was). */
function real(errors: { instancePath: string; message?: string }[], message: unknown) {
  return errors.filter((e) => {
    const value = at(message, e.instancePath);
    return !(typeof value === "string" && /<[A-Z_]+>/.test(value));
  });
}

Deno.test("schema/protocol.json compiles under ajv's strict mode (draft 2020-12)", () => {
  const ajv = new Ajv2020({ strict: true });
  assert.equal(typeof ajv.compile(SCHEMA), "function");
});

Deno.test("schema/protocol.json has request/result or notification definitions for every method", () => {
  for (const [name, spec] of Object.entries(METHODS)) {
    if (spec.kind === "request") {
      assert.ok(DEFS[`request:${name}`], name);
      assert.ok(DEFS[`result:${name}`], name);
      assert.ok(String(DEFS[`request:${name}`]!.description).startsWith(spec.doc), name);
    } else {
      assert.ok(DEFS[`notification:${name}`], name);
    }
  }
});

Deno.test("schema/protocol.json shares named types in $defs instead of inlining copies", () => {
  const inlined: string[] = [];
  const walk = (value: unknown, path: string, top: boolean): void => {
    if (value === null || typeof value !== "object") return;
    if (!top && !Array.isArray(value) && typeof (value as Json).title === "string") {
      inlined.push(`${path} (${(value as Json).title})`);
    }
    for (const [key, member] of Object.entries(value)) walk(member, `${path}/${key}`, false);
  };
  for (const [name, def] of Object.entries(DEFS)) walk(def, name, true);
  assert.deepEqual(inlined, []);
  const text = JSON.stringify(SCHEMA);
  assert.ok(!text.includes('"format"'), "no formats a strict validator does not know");
  assert.ok(!/"additionalProperties":\{\}|"params":\{\},"/.test(JSON.stringify(DEFS.ErrorData)));
});

Deno.test("schema/protocol.json marks file: URIs and byte fields the same way everywhere", () => {
  const named = (ref: unknown) => DEFS[String(ref).split("/").pop()!]!;
  const params = (def: string) =>
    named(((DEFS[def]!.properties as Record<string, Json>).params!).$ref).properties as Record<
      string,
      Json
    >;
  assert.deepEqual(params("request:fs/readFile").path, { $ref: "#/$defs/PathUri" });
  assert.equal(DEFS.PathUri!.pattern, "^file:");
  assert.deepEqual(params("request:process/start").cwd, {
    $ref: "#/$defs/PathUri",
    description: "The working directory.",
  });
  assert.deepEqual(params("request:process/write").chunk, { $ref: "#/$defs/Base64" });
  assert.deepEqual(params("request:fs/writeFile").dataBase64, { $ref: "#/$defs/Base64" });
  const results = (def: string) =>
    named((DEFS[def]!.allOf as Json[])[0]!.$ref).properties as Record<string, Json>;
  assert.deepEqual(results("result:fs/readFile").dataBase64, { $ref: "#/$defs/Base64" });
  assert.deepEqual(results("result:fs/readBlock").chunk, { $ref: "#/$defs/Base64" });
  assert.equal(DEFS.Base64!.contentEncoding, "base64");
  const sandbox = params("request:fs/readFile").sandbox as Json;
  assert.deepEqual(sandbox.anyOf, [{ $ref: "#/$defs/FileSystemSandboxContext" }, { type: "null" }]);
  assert.ok((DEFS.FileSystemSandboxContext!.required as string[]).includes("permissions"));
});

Deno.test("schema/protocol.json states exact integer bounds", async () => {
  const text = await Deno.readTextFile(new URL("../schema/protocol.json", import.meta.url));
  assert.ok(text.includes('"maximum": 18446744073709551615'), "u64, every digit");
  assert.ok(text.includes('"maximum": 9223372036854775807'), "request ids, i64");
  assert.ok(!text.includes("18446744073709552000"), "no rounded bound");
  const read = DEFS.ReadResponse!.properties as Record<string, Json>;
  assert.deepEqual((read.exitCode!.anyOf as Json[])[0], {
    type: "integer",
    minimum: -2147483648,
    maximum: 2147483647,
  });
  const size = DEFS.TerminalSize!.properties as Record<string, Json>;
  assert.equal(size.rows!.maximum, 65535);
});

Deno.test("schema/protocol.json describes the error envelope and every data.kind", () => {
  const check = validator();
  const typed = { code: -32600, data: { kind: "unknownSession" }, message: "unknown session id x" };
  assert.deepEqual(check("ErrorResponse", { id: 1, error: typed }), []);
  const osError = { code: -32004, data: { kind: "osError", errno: "ENOENT" }, message: "m" };
  assert.deepEqual(check(undefined, { id: 1, error: osError }), []);
  const field = { code: -32602, data: { field: "argv" }, message: "m" };
  assert.deepEqual(check(undefined, { id: -1, error: field }), []);
  assert.notDeepEqual(check("Error", { code: -32600, data: { kind: "madeUp" }, message: "m" }), []);
  assert.notDeepEqual(check(undefined, { id: 1, error: { code: -32600 } }), [], "message required");
  assert.notDeepEqual(
    check(undefined, { id: 1, method: "process/start", params: { processId: "p" } }),
    [],
    "a process/start without argv is refused",
  );
});

Deno.test("every message of the reference's recorded transcripts validates against schema/protocol.json", async () => {
  const check = validator();
  let checked = 0;
  for await (const entry of Deno.readDir(TRANSCRIPTS)) {
    if (!entry.name.endsWith(".jsonl")) continue;
    const lines = (await Deno.readTextFile(new URL(entry.name, TRANSCRIPTS))).split("\n")
      .filter((line) => line.trim() !== "").map((line) => JSON.parse(line) as Json);
    // Requests the reference accepted (only those are valid by definition), by connection and id.
    const answered = new Map<string, Json>();
    for (const line of lines) {
      const msg = line.msg as Json | undefined;
      if (line.dir === "recv" && msg && "result" in msg) {
        answered.set(`${line.conn}:${msg.id}`, msg);
      }
    }
    const methods = new Map<string, string[]>(); // Pending requests by id, oldest first.
    for (const line of lines) {
      const msg = line.msg as Json | undefined;
      if (msg === undefined) continue; // Raw bytes (malformed on purpose).
      const where = `${entry.name}: ${JSON.stringify(msg).slice(0, 200)}`;
      const key = `${line.conn}:${msg.id}`;
      if (line.dir === "send") {
        if ("id" in msg && !answered.has(key)) continue; // Refused: invalid on purpose.
        if (!("id" in msg) && !Object.hasOwn(METHODS, msg.method as string)) continue; // Fatal on purpose.
        if ("id" in msg) methods.set(key, [...(methods.get(key) ?? []), msg.method as string]);
        assert.deepEqual(real(check(undefined, msg), msg), [], where);
      } else {
        assert.deepEqual(real(check(undefined, msg), msg), [], where);
        const method = "id" in msg ? methods.get(key)?.shift() : undefined;
        if ("result" in msg && method !== undefined && Object.hasOwn(METHODS, method)) {
          assert.deepEqual(real(check(`result:${method}`, msg.result), msg.result), [], where);
        }
      }
      checked++;
    }
  }
  for (
    const name of [
      "25_codex_client_process_start_workspace_write.json",
      "26_codex_client_process_start_read_only.json",
    ]
  ) {
    const msg = JSON.parse(await Deno.readTextFile(new URL(name, TRANSCRIPTS)));
    assert.deepEqual(real(check("request:process/start", msg), msg), [], name);
    checked++;
  }
  assert.ok(checked > 300, `only ${checked} messages checked`);
});

Deno.test("this server's own messages, typed errors included, validate against schema/protocol.json", async () => {
  const check = validator();
  await using server = InProcessServer.stdio();
  const client = server.stdio;
  const dir = await Deno.makeTempDir();
  try {
    const exchanges: [string, unknown][] = [
      ["initialize", { clientName: "schema", resumeSessionId: "gone" }],
      ["initialize", { clientName: "schema", extensions: ["processSignals", "processStdinClose"] }],
      ["environment/info", undefined],
      ["process/start", {
        processId: "p",
        argv: ["/bin/echo", "hi"],
        cwd: `file://${dir}`,
        env: {},
        tty: false,
      }],
      ["process/start", {
        processId: "p",
        argv: ["/bin/true"],
        cwd: `file://${dir}`,
        env: {},
        tty: false,
      }],
      ["process/start", { processId: "q", argv: [], cwd: `file://${dir}`, env: {}, tty: false }],
      ["process/start", {
        processId: "r",
        argv: ["/nonexistent"],
        cwd: `file://${dir}`,
        env: {},
        tty: false,
      }],
      ["process/read", { processId: "p", waitMs: 2000 }],
      ["fs/writeFile", { path: `file://${dir}/f`, dataBase64: "aGk=" }],
      ["fs/readFile", { path: `file://${dir}/f` }],
      ["fs/getMetadata", { path: `file://${dir}/f` }],
      ["fs/readDirectory", { path: `file://${dir}` }],
      ["fs/readFile", { path: `file://${dir}/missing` }],
      ["fs/createDirectory", { path: `file://${dir}/f/sub` }],
      ["fs/walk", {
        path: `file://${dir}`,
        options: { maxDepth: 2, maxDirectories: 5, maxEntries: 5, followDirectorySymlinks: false },
      }],
      ["process/read", { processId: "p", afterSeq: "x" }],
    ];
    const received: Json[] = [];
    let id = 1;
    for (const [method, params] of exchanges) {
      const response = await client.request(id++, method, params) as Json;
      received.push(response);
      if (method === "initialize" && response.result) {
        await client.send({ method: "initialized", params: {} });
      }
    }
    for (const msg of received) {
      assert.deepEqual(check(undefined, msg), [], JSON.stringify(msg));
      const method = exchanges[(msg.id as number) - 1]![0];
      if ("result" in msg) assert.deepEqual(check(`result:${method}`, msg.result), [], method);
    }
    const kinds = received.map((m) =>
      ((m.error as Json | undefined)?.data as Json | undefined)?.kind
    );
    for (const kind of ["unknownSession", "processExists", "spawnNotFound", "osError"]) {
      assert.ok(kinds.includes(kind), `${kind} was exercised`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
