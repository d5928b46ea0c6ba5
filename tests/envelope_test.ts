import assert from "node:assert/strict";
import {
  classifyMessage,
  decodeMessage,
  encodeId,
  encodeMessage,
  EnvelopeError,
  idKey,
  type Message,
} from "../lib/protocol/envelope.ts";
import { RpcError } from "../lib/protocol/errors.ts";

function envelopeError(text: string): string {
  try {
    decodeMessage(text);
  } catch (err) {
    assert.ok(err instanceof EnvelopeError, `expected EnvelopeError, got ${err}`);
    return err.message;
  }
  assert.fail(`accepted ${text}`);
}

const BAD_ID = "data did not match any variant of untagged enum RequestId";

Deno.test("decodeMessage() classifies by the members present (docs/protocol.md §2.2)", async (t) => {
  const cases: [string, Message["kind"]][] = [
    ['{"id":1,"method":"m"}', "request"],
    ['{"method":"m","id":1}', "request"],
    ['{"id":5,"method":"environment/status","result":{}}', "request"],
    ['{"id":5,"method":"m","error":{"code":1,"message":"x"}}', "request"],
    ['{"id":5,"method":"m","result":1,"error":{}}', "request"],
    ['{"method":"m"}', "notification"],
    ['{"method":"m","params":[1],"result":1}', "notification"],
    ['{"id":1,"result":null}', "response"],
    ['{"id":1,"result":1,"error":{"code":1,"message":"x"}}', "response"],
    ['{"id":1,"error":{"code":-1,"message":"nope"}}', "error"],
    ['{"jsonrpc":"2.0","id":1,"method":"m"}', "request"],
  ];
  for (const [text, kind] of cases) {
    await t.step(`${text} is a ${kind}`, () => {
      assert.equal(decodeMessage(text).kind, kind);
    });
  }
});

Deno.test("decodeMessage() reports the reference's envelope errors", async (t) => {
  const cases: [string, string][] = [
    ["[]", "expected a JSON-RPC object"],
    ["42", "expected a JSON-RPC object"],
    ["null", "expected a JSON-RPC object"],
    ['"s"', "expected a JSON-RPC object"],
    ['[{"id":1,"method":"m"}]', "expected a JSON-RPC object"],
    ["{}", "missing field `error`"],
    ['{"foo":1}', "missing field `error`"],
    ['{"id":1}', "missing field `error`"],
    ['{"result":{}}', "missing field `id`"],
    ['{"error":{"code":1,"message":"m"}}', "missing field `id`"],
    ['{"id":1,"error":{"message":"m"}}', "missing field `code`"],
    ['{"id":1,"error":{"code":1}}', "missing field `message`"],
    ['{"id":1,"error":{"code":1.5,"message":"m"}}', "invalid type: number, expected i64"],
    ['{"id":1,"error":{"code":"1","message":"m"}}', 'invalid type: string "1", expected i64'],
    ['{"id":28,"method":5}', "invalid type: number, expected a string"],
    ['{"method":null}', "invalid type: null, expected a string"],
    [
      '{"id":30,"method":"environment/status","trace":"garbage"}',
      'invalid type: string "garbage", expected struct W3cTraceContext',
    ],
    ['{"id":1,"method":"m","trace":{"traceparent":5}}', "invalid type: number, expected a string"],
  ];
  for (const [text, message] of cases) {
    await t.step(`${text} → ${message}`, () => {
      assert.equal(envelopeError(text), message);
    });
  }
  await t.step("decoder failures surface as EnvelopeError with the decoder's text", () => {
    assert.match(envelopeError("not json"), /^expected ident at line 1 column \d+$/);
    assert.match(envelopeError('{"id":1,"id":2}'), /^duplicate JSON object key `id`/);
  });
});

Deno.test("decodeMessage() accepts the trace member leniently where the spec says so", () => {
  const request = decodeMessage(
    '{"id":29,"method":"environment/status","trace":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","x":1}}',
  );
  assert.equal(request.kind, "request");
  assert.equal(decodeMessage('{"id":1,"method":"m","trace":null}').kind, "request");
  assert.equal(decodeMessage('{"method":"m","trace":"garbage"}').kind, "notification");
  assert.equal(decodeMessage('{"method":"m","trace":[1]}').kind, "notification");
});

Deno.test("decodeMessage() accepts string and i64 ids and rejects everything else", async (t) => {
  await t.step("valid ids keep their type and exact value", () => {
    const ids: [string, unknown][] = [
      ["1", 1],
      ['"1"', "1"],
      ['""', ""],
      ["-7", -7],
      ["-0", 0],
      ["9223372036854775807", 9223372036854775807n],
      ["-9223372036854775808", -9223372036854775808n],
      ["9007199254740993", 9007199254740993n],
    ];
    for (const [lexeme, id] of ids) {
      const message = decodeMessage(`{"id":${lexeme},"method":"m"}`);
      assert.equal(message.kind, "request");
      assert.equal((message as { id: unknown }).id, id, lexeme);
    }
  });
  await t.step("bad ids give the untagged-enum message", () => {
    for (
      const lexeme of [
        "null",
        "true",
        "false",
        '{"a":1}',
        "[1]",
        "1.5",
        "1.0",
        "1e3",
        "1E2",
        "9223372036854775808",
        "-9223372036854775809",
      ]
    ) {
      assert.equal(envelopeError(`{"id":${lexeme},"method":"environment/status"}`), BAD_ID, lexeme);
    }
  });
  await t.step("integers beyond u64 are rejected too", () => {
    assert.throws(
      () => decodeMessage('{"id":18446744073709551616,"method":"m"}'),
      EnvelopeError,
    );
  });
  await t.step("response and error ids are validated the same way", () => {
    assert.equal(envelopeError('{"id":1.5,"result":1}'), BAD_ID);
    assert.equal(envelopeError('{"id":null,"error":{"code":1,"message":"m"}}'), BAD_ID);
  });
});

Deno.test('idKey() keeps 1 and "1" apart', () => {
  assert.notEqual(idKey(1), idKey("1"));
  assert.equal(idKey(1), idKey(1));
  assert.equal(idKey(9223372036854775807n), idKey(9223372036854775807n));
  assert.notEqual(idKey("n1"), idKey(1));
  assert.notEqual(idKey(""), idKey(0));
});

Deno.test("encodeMessage() echoes 64-bit ids exactly", () => {
  for (const lexeme of ["9223372036854775807", "-9223372036854775808", "9007199254740993"]) {
    const request = decodeMessage(`{"id":${lexeme},"method":"environment/status"}`);
    assert.equal(request.kind, "request");
    const id = (request as { id: bigint }).id;
    assert.equal(encodeId(id), lexeme);
    assert.equal(
      encodeMessage({ kind: "response", id, result: { status: "ready" } }),
      `{"id":${lexeme},"result":{"status":"ready"}}`,
    );
  }
  assert.equal(encodeId("1"), '"1"');
  assert.equal(encodeId('a"b'), '"a\\"b"');
  assert.equal(encodeId(-1), "-1");
});

Deno.test("encodeMessage() uses the reference's key order", async (t) => {
  await t.step("request: id, method, params", () => {
    assert.equal(
      encodeMessage({ kind: "request", id: 1, method: "m", params: { a: 1 } }),
      '{"id":1,"method":"m","params":{"a":1}}',
    );
    assert.equal(
      encodeMessage({ kind: "request", id: "x", method: "m", params: undefined }),
      '{"id":"x","method":"m"}',
    );
  });
  await t.step("notification: method, params", () => {
    assert.equal(
      encodeMessage({ kind: "notification", method: "process/closed", params: { seq: 1 } }),
      '{"method":"process/closed","params":{"seq":1}}',
    );
    assert.equal(
      encodeMessage({ kind: "notification", method: "m", params: undefined }),
      '{"method":"m"}',
    );
  });
  await t.step("response: id, result (undefined result becomes null)", () => {
    assert.equal(encodeMessage({ kind: "response", id: 2, result: {} }), '{"id":2,"result":{}}');
    assert.equal(
      encodeMessage({ kind: "response", id: 2, result: undefined }),
      '{"id":2,"result":null}',
    );
  });
  await t.step("error: error{code, data, message}, then id", () => {
    assert.equal(
      encodeMessage({ kind: "error", id: -1, error: { code: -32600, message: "bad" } }),
      '{"error":{"code":-32600,"message":"bad"},"id":-1}',
    );
    const wire = new RpcError(-32603, "No such file or directory (os error 2)", {
      data: { kind: "spawnNotFound" },
    }).toWire();
    assert.equal(
      encodeMessage({ kind: "error", id: 3, error: wire }),
      '{"error":{"code":-32603,"data":{"kind":"spawnNotFound"},"message":"No such file or directory (os error 2)"},"id":3}',
    );
  });
  await t.step("error members are ordered code, data, message whatever the input order", () => {
    assert.equal(
      encodeMessage({
        kind: "error",
        id: 3,
        error: { message: "m", data: { kind: "x" }, code: -32603 },
      }),
      '{"error":{"code":-32603,"data":{"kind":"x"},"message":"m"},"id":3}',
    );
  });
  await t.step("a decoded error message re-encodes in reference order", () => {
    const decoded = classifyMessage({ id: 1, error: { message: "m", data: 1, code: 5 } });
    assert.equal(encodeMessage(decoded), '{"error":{"code":5,"data":1,"message":"m"},"id":1}');
  });
});

Deno.test("encodeMessage() output decodes back to the same message", () => {
  const messages: Message[] = [
    {
      kind: "request",
      id: 9223372036854775807n,
      method: "process/read",
      params: { processId: "p" },
    },
    { kind: "notification", method: "initialized", params: {} },
    { kind: "response", id: "abc", result: [1, "two", null, true] },
    { kind: "error", id: -1, error: { code: -32600, message: "m" } },
  ];
  for (const message of messages) {
    assert.deepEqual(decodeMessage(encodeMessage(message)), message);
  }
});
