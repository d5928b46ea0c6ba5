import assert from "node:assert/strict";
import { SHARED_DECODE_BYTES } from "../lib/protocol/base64.ts";
import { decodeJson } from "../lib/protocol/json_decode.ts";
import { lookupMethod, METHODS, type RequestSpec } from "../lib/protocol/methods.ts";
import {
  array,
  boolean,
  bytes,
  describeValue,
  literal,
  object,
  optional,
  parseParams,
  record,
  SchemaError,
  signed,
  string,
  unit,
  unsigned,
} from "../lib/protocol/schema.ts";

function spec(method: string): RequestSpec<unknown, unknown> {
  const found = lookupMethod(method);
  assert.ok(found && found.kind === "request", `${method} is a request`);
  return found as RequestSpec<unknown, unknown>;
}

/** Decodes `paramsJson` as the wire would and returns the params error message. */
function paramsError(method: string, paramsJson: string | undefined): string {
  const params = paramsJson === undefined ? undefined : decodeJson(paramsJson);
  try {
    parseParams(spec(method).params, params);
  } catch (err) {
    assert.ok(err instanceof SchemaError, `expected SchemaError, got ${err}`);
    return err.message;
  }
  assert.fail(`${method} accepted ${paramsJson}`);
}

function parsesOk(method: string, paramsJson: string | undefined): unknown {
  const params = paramsJson === undefined ? undefined : decodeJson(paramsJson);
  return parseParams(spec(method).params, params);
}

const START = '"processId":"p","argv":["/bin/true"],"cwd":"file:///tmp","env":{},"tty":false';

Deno.test("schema reports missing fields in declaration order", async (t) => {
  await t.step("an empty object reports the first declared field", () => {
    assert.equal(paramsError("process/read", "{}"), "missing field `processId`");
    assert.equal(paramsError("initialize", "{}"), "missing field `clientName`");
    assert.equal(paramsError("process/start", "{}"), "missing field `processId`");
  });
  await t.step("the first missing field in declaration order, not input order", () => {
    assert.equal(
      paramsError(
        "process/start",
        '{"tty":false,"cwd":"file:///tmp","argv":["/bin/true"],"processId":"p7"}',
      ),
      "missing field `env`",
    );
    assert.equal(
      paramsError("process/start", '{"processId":"p7","argv":["/bin/true"],"cwd":"file:///tmp"}'),
      "missing field `env`",
    );
    assert.equal(
      paramsError("fs/walk", '{"path":"file:///tmp/es-fixture","options":{"maxDepth":1}}'),
      "missing field `maxDirectories`",
    );
    assert.equal(
      paramsError("http/request", '{"method":"GET","url":"http://127.0.0.1/"}'),
      "missing field `requestId`",
    );
    assert.equal(
      paramsError(
        "fs/copy",
        '{"sourcePath":"file:///tmp/a","destinationPath":"file:///tmp/b"}',
      ),
      "missing field `recursive`",
    );
  });
  await t.step("type errors of present members come first, in input order", () => {
    assert.equal(
      paramsError("process/start", '{"tty":"yes","processId":5}'),
      'invalid type: string "yes", expected a boolean',
    );
    assert.equal(
      paramsError("process/start", '{"processId":5,"tty":"yes"}'),
      "invalid type: number, expected a string",
    );
    assert.equal(
      paramsError("process/read", '{"waitMs":"x"}'),
      'invalid type: string "x", expected u64',
    );
  });
  await t.step("all five envPolicy members are required", () => {
    assert.equal(
      paramsError("process/start", `{${START},"envPolicy":{"inherit":"all"}}`),
      "missing field `ignoreDefaultExcludes`",
    );
  });
  await t.step("a custom struct checks members in input order then missing ones", () => {
    const schema = object({ a: string(), b: string(), c: boolean() }, { name: "Abc" });
    assert.throws(() => schema.parse({ c: "x" }), {
      message: 'invalid type: string "x", expected a boolean',
    });
    assert.throws(() => schema.parse({ c: true }), { message: "missing field `a`" });
    assert.throws(() => schema.parse({ a: "", c: true }), { message: "missing field `b`" });
    assert.deepEqual(schema.parse({ a: "", b: "", c: true, extra: 1 }), { a: "", b: "", c: true });
  });
});

Deno.test("schema uses serde's invalid type wording", async (t) => {
  const cases: [string, string, string][] = [
    ["process/read", '{"processId":1}', "invalid type: number, expected a string"],
    ["process/read", '{"processId":1.5}', "invalid type: number, expected a string"],
    ["process/read", '{"processId":true}', "invalid type: boolean `true`, expected a string"],
    ["process/read", '{"processId":[]}', "invalid type: sequence, expected a string"],
    ["process/read", '{"processId":{}}', "invalid type: map, expected a string"],
    ["process/read", '{"processId":"p","afterSeq":"1"}', 'invalid type: string "1", expected u64'],
    [
      "process/start",
      `{${START.replace('"env":{}', '"env":null')}}`,
      "invalid type: null, expected a map",
    ],
    [
      "process/start",
      `{${START.replace('"tty":false', '"tty":"yes"')}}`,
      'invalid type: string "yes", expected a boolean',
    ],
    [
      "process/start",
      `{${START.replace('["/bin/true"]', '"ls"')}}`,
      'invalid type: string "ls", expected a sequence',
    ],
    [
      "process/start",
      `{${START.replace('"env":{}', '"env":{"A":1}')}}`,
      "invalid type: number, expected a string",
    ],
    ["process/read", "null", "invalid type: null, expected struct ReadParams"],
    ["process/start", "5", "invalid type: number, expected struct WireExecParams"],
    ["fs/readFile", '"x"', 'invalid type: string "x", expected struct WireFsReadFileParams'],
    ["initialize", "[]", "invalid type: sequence, expected struct InitializeParams"],
  ];
  for (const [method, params, message] of cases) {
    await t.step(`${method} ${params} → ${message}`, () => {
      assert.equal(paramsError(method, params), message);
    });
  }
  await t.step("absent params count as null", () => {
    assert.equal(
      paramsError("process/read", undefined),
      "invalid type: null, expected struct ReadParams",
    );
    assert.equal(
      paramsError("initialize", undefined),
      "invalid type: null, expected struct InitializeParams",
    );
  });
  await t.step("describeValue names values as serde does", () => {
    assert.equal(describeValue(null), "null");
    assert.equal(describeValue(undefined), "null");
    assert.equal(describeValue(false), "boolean `false`");
    assert.equal(describeValue(3), "number");
    assert.equal(describeValue(2n ** 70n), "number");
    assert.equal(describeValue(decodeJson("1.5")), "number");
    assert.equal(describeValue("s"), 'string "s"');
    assert.equal(describeValue([1]), "sequence");
    assert.equal(describeValue({}), "map");
  });
});

Deno.test("schema reports invalid number for negative or fractional unsigned integers", async (t) => {
  const cases: [string, string][] = [
    ["process/read", '{"processId":"x","afterSeq":-1}'],
    ["process/read", '{"processId":"x","afterSeq":1.0}'],
    ["process/read", '{"processId":"x","waitMs":1e3}'],
    ["process/read", '{"processId":"x","maxBytes":-9223372036854775808}'],
    ["fs/readBlock", '{"handleId":"h","offset":-1,"len":1}'],
    ["fs/watchMissing", '{"watchId":-1,"missing":[]}'],
  ];
  for (const [method, params] of cases) {
    await t.step(`${method} ${params}`, () => {
      assert.equal(paramsError(method, params), "invalid number");
    });
  }
  await t.step("zero and large safe values are accepted", () => {
    assert.deepEqual(parsesOk("process/read", '{"processId":"x","afterSeq":0}'), {
      processId: "x",
      afterSeq: 0,
    });
    assert.equal(unsigned().parse(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
  });
  await t.step("values beyond the type's range are refused", () => {
    assert.throws(() => unsigned().parse(2n ** 64n), SchemaError);
    assert.throws(() => unsigned("u16", { max: 65535n }).parse(65536), SchemaError);
  });
  await t.step("signed integers accept negatives but not fractions", () => {
    assert.equal(signed().parse(-5), -5);
    assert.throws(() => signed().parse(decodeJson("1.0")), { message: "invalid number" });
    assert.throws(() => signed().parse("1"), { message: 'invalid type: string "1", expected i64' });
  });
});

Deno.test("schema accepts the whole u64 range for u64 members", async (t) => {
  await t.step(
    "fs/writeBlock offset i64::MAX decodes so the handler can report the range (T:15)",
    () => {
      assert.doesNotThrow(() =>
        parsesOk("fs/writeBlock", '{"handleId":"w1","offset":9223372036854775807,"chunk":"eA=="}')
      );
    },
  );
  await t.step("process/read afterSeq u64::MAX decodes", () => {
    assert.doesNotThrow(() =>
      parsesOk("process/read", '{"processId":"p","afterSeq":18446744073709551615}')
    );
  });
  await t.step("u64::MAX + 1 is out of range", () => {
    assert.throws(
      () => parsesOk("process/read", '{"processId":"p","afterSeq":18446744073709551616}'),
      SchemaError,
    );
  });
});

Deno.test("schema reports unknown enum variants like serde", async (t) => {
  await t.step("one variant", () => {
    assert.equal(
      paramsError("process/signal", '{"processId":"p","signal":"bogus"}'),
      "unknown variant `bogus`, expected `interrupt`",
    );
  });
  await t.step("two variants", () => {
    assert.equal(
      paramsError(
        "http/request",
        '{"method":"GET","url":"http://x/","requestId":"r","redirectPolicy":"never"}',
      ),
      "unknown variant `never`, expected `follow` or `stop`",
    );
    assert.equal(
      paramsError("fs/open", '{"handleId":"h","path":"file:///tmp/x","mode":"append"}'),
      "unknown variant `append`, expected `read` or `replace`",
    );
  });
  await t.step("three or more variants, in the reference's order", () => {
    assert.equal(
      paramsError(
        "process/start",
        `{${START},"envPolicy":{"inherit":"some","ignoreDefaultExcludes":false,"exclude":[],"set":{},"includeOnly":[]}}`,
      ),
      "unknown variant `some`, expected one of `core`, `all`, `none`",
    );
  });
  await t.step('the map form {"variant": null} is accepted', () => {
    assert.equal(literal("read", "replace").parse({ replace: null }), "replace");
  });
  await t.step("a non-string enum value is a type error", () => {
    assert.equal(
      paramsError("process/signal", '{"processId":"p","signal":2}'),
      "invalid type: number, expected string or map",
    );
  });
});

Deno.test("schema treats members with a default differently from Option members", async (t) => {
  await t.step("optional members accept null like absence", () => {
    assert.deepEqual(
      parsesOk("process/read", '{"processId":"p","afterSeq":null,"maxBytes":null,"waitMs":null}'),
      { processId: "p", afterSeq: undefined, maxBytes: undefined, waitMs: undefined },
    );
    assert.doesNotThrow(() => parsesOk("initialize", '{"clientName":"c","resumeSessionId":null}'));
  });
  await t.step("fs/open mode: null is a type error (docs/protocol.md §10.12)", () => {
    assert.equal(
      paramsError("fs/open", '{"handleId":"h","path":"file:///tmp/x","mode":null}'),
      "invalid type: null, expected string or map",
    );
  });
  await t.step("booleans with a default: null is a type error, as the reference's", async (t) => {
    const cases: [string, string][] = [
      ["process/start", `{${START},"pipeStdin":null}`],
      ["process/start", `{${START},"enforceManagedNetwork":null}`],
      ["http/request", '{"method":"GET","url":"http://x/","requestId":"r","streamResponse":null}'],
      [
        "fs/walk",
        '{"path":"file:///tmp","options":{"maxDepth":1,"maxDirectories":1,"maxEntries":1,' +
        '"followDirectorySymlinks":false,"pruneHiddenDirectories":null}}',
      ],
    ];
    for (const [method, params] of cases) {
      await t.step(`${method} ${params}`, () => {
        assert.equal(paramsError(method, params), "invalid type: null, expected a boolean");
      });
    }
  });
  await t.step("http/request headers: null is a type error (docs/protocol.md §11.1)", () => {
    assert.equal(
      paramsError(
        "http/request",
        '{"method":"GET","url":"http://x/","requestId":"r","headers":null}',
      ),
      "invalid type: null, expected a sequence",
    );
  });
});

Deno.test("schema decodes unit params like the reference", async (t) => {
  for (const method of ["environment/status", "environment/info"]) {
    await t.step(`${method} accepts absent, null and {}`, () => {
      assert.equal(parsesOk(method, undefined), null);
      assert.equal(parsesOk(method, "null"), null);
      assert.equal(parsesOk(method, "{}"), null);
    });
    await t.step(`${method} rejects anything else with expected unit`, () => {
      assert.equal(paramsError(method, "[]"), "invalid type: sequence, expected unit");
      assert.equal(paramsError(method, '{"a":1}'), "invalid type: map, expected unit");
      assert.equal(paramsError(method, "0"), "invalid type: number, expected unit");
      assert.equal(paramsError(method, '""'), 'invalid type: string "", expected unit');
      assert.equal(paramsError(method, "false"), "invalid type: boolean `false`, expected unit");
    });
  }
  await t.step("unit() alone refuses {}; parseParams retries {} as null", () => {
    assert.throws(() => unit().parse({}), { message: "invalid type: map, expected unit" });
    assert.equal(parseParams(unit(), {}), null);
  });
  await t.step("{} for a struct reports the first error, not the null retry's", () => {
    assert.equal(paramsError("process/terminate", "{}"), "missing field `processId`");
  });
});

Deno.test("schema decodes ByteChunk base64 with the reference's errors", async (t) => {
  const errors: [string, string][] = [
    ["!", "Invalid symbol 33, offset 0."],
    ["aGk!", "Invalid symbol 33, offset 3."],
    ["aG k", "Invalid symbol 32, offset 2."],
    ["aGk=\n", "Invalid symbol 10, offset 4."],
    ["a-_=", "Invalid symbol 45, offset 1."],
    ["a", "Invalid input length: 1"],
    ["aGVsbG8", "Invalid padding"],
    ["aGk", "Invalid padding"],
    ["aGl=", "Invalid last symbol 108, offset 2."],
  ];
  for (const [text, message] of errors) {
    await t.step(`${JSON.stringify(text)} → ${message}`, () => {
      assert.throws(() => bytes().parse(text), { name: "SchemaError", message });
    });
  }
  await t.step("valid padded base64 decodes, including the empty string", () => {
    assert.deepEqual(bytes().parse(""), new Uint8Array());
    assert.deepEqual(bytes().parse("aGk="), new TextEncoder().encode("hi"));
    assert.deepEqual(bytes().parse("aGVsbG8="), new TextEncoder().encode("hello"));
    assert.deepEqual(bytes().parse("/+8="), new Uint8Array([0xff, 0xef]));
  });
  await t.step("process/write chunk errors surface unprefixed", () => {
    assert.equal(
      paramsError("process/write", '{"processId":"p","chunk":"!!!!","writeId":"w"}'),
      "Invalid symbol 33, offset 0.",
    );
    assert.equal(
      paramsError("process/write", '{"processId":"p","chunk":5,"writeId":"w"}'),
      "invalid type: number, expected a string",
    );
  });
  await t.step("bytes() yields a Uint8Array", () => {
    assert.deepEqual(bytes().parse("AAE="), new Uint8Array([0, 1]));
  });
  await t.step("decoded chunks that share a slab keep their own bytes", () => {
    const sources = Array.from(
      { length: 40 },
      (_, i) => new Uint8Array(i === 39 ? SHARED_DECODE_BYTES + 1 : 4096 - i).fill(i),
    );
    const decoded = sources.map((source) => bytes().parse(source.toBase64()));
    for (const chunk of decoded) chunk.fill(0xff, 0, 1);
    decoded.forEach((chunk, i) => {
      assert.equal(chunk.length, sources[i]!.length);
      assert.equal(chunk[0], 0xff);
      assert.deepEqual(chunk.subarray(1), sources[i]!.subarray(1), `chunk ${i}`);
    });
  });
  await t.step("a long chunk with whitespace is refused like a short one", () => {
    const text = new Uint8Array(4096).toBase64();
    const spaced = text.slice(0, 1000) + " " + text.slice(1001);
    assert.throws(() => bytes().parse(spaced), { message: "Invalid symbol 32, offset 1000." });
  });
});

Deno.test("schema errors carry the member path", () => {
  const schema = object({ list: array(object({ n: unsigned() })), map: record(string()) });
  try {
    schema.parse({ list: [{ n: 1 }, { n: -1 }], map: {} });
    assert.fail("accepted");
  } catch (err) {
    assert.ok(err instanceof SchemaError);
    assert.equal(err.path, "list.1.n");
  }
  try {
    schema.parse({ list: [], map: { k: 1 } });
    assert.fail("accepted");
  } catch (err) {
    assert.ok(err instanceof SchemaError);
    assert.equal(err.path, "map.k");
  }
});

Deno.test("schema keeps a __proto__ key of a record as an own property", () => {
  const env = record(string()).parse(decodeJson('{"__proto__":"x","A":"1"}'));
  assert.ok(Object.hasOwn(env, "__proto__"));
  assert.equal(Object.getPrototypeOf(env), Object.prototype);
  assert.deepEqual(Object.keys(env), ["__proto__", "A"]);
});

Deno.test("schema validates process/start metadata.threadId as a UUID", () => {
  assert.equal(
    paramsError("process/start", `{${START},"metadata":{"threadId":"thread-1"}}`),
    "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `t` at 1",
  );
  assert.doesNotThrow(() =>
    parsesOk(
      "process/start",
      `{${START},"metadata":{"threadId":"0196c4d8-3b7e-7c11-8e5a-3f5b2a9c1d00"}}`,
    )
  );
});

Deno.test("schema ignores unknown members of params", () => {
  assert.deepEqual(parsesOk("process/terminate", '{"processId":"p","extra":[1,2]}'), {
    processId: "p",
  });
  assert.deepEqual(optional(string()).parse(null), undefined);
});

Deno.test("every request in METHODS has params and result schemas", () => {
  for (const [name, entry] of Object.entries(METHODS)) {
    assert.equal(typeof entry.params.parse, "function", name);
    if (entry.kind === "request") assert.equal(typeof entry.result.parse, "function", name);
  }
  assert.equal(lookupMethod("__proto__"), undefined);
  assert.equal(lookupMethod("toString"), undefined);
  assert.equal(lookupMethod("ENVIRONMENT/STATUS"), undefined);
});
