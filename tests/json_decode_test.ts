import assert from "node:assert/strict";
import { decodeJson, JsonDecodeError, JsonFloat } from "../lib/protocol/json_decode.ts";

// Expected messages with exact columns were produced by the reference server
// (codex-cli 0.171.0 exec-server) for the same input, or come from transcript 03.

/** Decodes `text` and returns the error message, failing the test if it decodes. */
function decodeError(text: string, options?: Parameters<typeof decodeJson>[1]): string {
  try {
    decodeJson(text, options);
  } catch (err) {
    assert.ok(err instanceof JsonDecodeError, `expected JsonDecodeError, got ${err}`);
    return err.message;
  }
  assert.fail(`expected ${JSON.stringify(text.slice(0, 80))} to be rejected`);
}

/** The spec's budget example: `{"id":1,"method":"m","x":[0,…]}` with `elements` zeros. */
function requestWithZeros(elements: number): string {
  return `{"id":1,"method":"m","x":[${new Array(elements).fill("0").join(",")}]}`;
}

const A100 = "A".repeat(100);

Deno.test("decodeJson() accepts exactly 262144 values and rejects the 262145th", async (t) => {
  await t.step("the spec's request with 262140 elements (1 + 3 + 262140 values) decodes", () => {
    const value = decodeJson(requestWithZeros(262_140)) as { x: number[] };
    assert.equal(value.x.length, 262_140);
  });
  await t.step("the same request with 262141 elements is rejected", () => {
    assert.equal(
      decodeError(requestWithZeros(262_141)),
      "JSON-RPC message exceeds the limit of 262144 JSON values at line 1 column 524306",
    );
  });
  await t.step("a top-level array of 262143 zeros (262144 values) decodes", () => {
    const text = `[${new Array(262_143).fill("0").join(",")}]`;
    assert.equal((decodeJson(text) as unknown[]).length, 262_143);
  });
});

Deno.test("decodeJson() rejects a compact array of 300000 zeros by the value budget", () => {
  const text = `[${new Array(300_000).fill("0").join(",")}]`;
  assert.equal(
    decodeError(text),
    "JSON-RPC message exceeds the limit of 262144 JSON values at line 1 column 524287",
  );
});

Deno.test("decodeJson() positions the budget error just before the value that overflows", () => {
  // Reference: whitespace before the value is consumed first (column 786430 is the space).
  const text = `[${new Array(300_000).fill("0").join(", ")}]`;
  assert.equal(
    decodeError(text),
    "JSON-RPC message exceeds the limit of 262144 JSON values at line 1 column 786430",
  );
});

Deno.test("decodeJson() counts member values and containers but not object keys", () => {
  // 1 object + 3 member values = 4 values.
  assert.deepEqual(decodeJson('{"a":1,"b":2,"c":3}', { maxValues: 4 }), { a: 1, b: 2, c: 3 });
  assert.equal(
    decodeError('{"a":1,"b":2,"c":3,"d":4}', { maxValues: 4 }),
    "JSON-RPC message exceeds the limit of 4 JSON values at line 1 column 23",
  );
  // [ [ [] ] ] = 3 values, the scalar inside would be the 4th.
  assert.deepEqual(decodeJson("[[[]]]", { maxValues: 3 }), [[[]]]);
  assert.match(
    decodeError("[[[0]]]", { maxValues: 3 }),
    /^JSON-RPC message exceeds the limit of 3/,
  );
});

Deno.test("decodeJson() counts a multi-MiB string as one value and returns it intact", () => {
  const chunk = "QUJD".repeat(1024 * 1024);
  const value = decodeJson(`{"chunk":"${chunk}"}`, { maxValues: 2 }) as { chunk: string };
  assert.equal(value.chunk, chunk);
});

Deno.test("decodeJson() accepts 127 nested containers and rejects 128", async (t) => {
  await t.step("127 nested arrays decode", () => {
    const value = decodeJson("[".repeat(127) + "]".repeat(127));
    assert.ok(Array.isArray(value));
  });
  await t.step("128 nested arrays fail at the 128th bracket", () => {
    assert.equal(
      decodeError("[".repeat(128) + "]".repeat(128)),
      "recursion limit exceeded at line 1 column 128",
    );
  });
  await t.step("transcript 03: the top-level object counts as level 1", () => {
    const prefix = '{"id":35,"method":"environment/status","params":null,"x":';
    assert.doesNotThrow(() => decodeJson(`${prefix}${"[".repeat(126)}${"]".repeat(126)}}`));
    assert.equal(
      decodeError(`${prefix}${"[".repeat(127)}${"]".repeat(127)}}`),
      "recursion limit exceeded at line 1 column 184",
    );
  });
  await t.step("objects and arrays count alike", () => {
    let nested = "0";
    for (let i = 0; i < 127; i++) nested = i % 2 ? `[${nested}]` : `{"k":${nested}}`;
    assert.doesNotThrow(() => decodeJson(nested));
    const tooDeep = `[${nested}]`;
    assert.equal(
      decodeError(tooDeep),
      `recursion limit exceeded at line 1 column ${tooDeep.indexOf('{"k":0}') + 1}`,
    );
  });
  await t.step("closed containers release their depth", () => {
    const sibling = "[".repeat(126) + "]".repeat(126);
    assert.doesNotThrow(() => decodeJson(`[${sibling},${sibling},${sibling}]`));
  });
  await t.step("maxDepth configures the limit", () => {
    assert.deepEqual(decodeJson("[[1]]", { maxDepth: 2 }), [[1]]);
    assert.equal(
      decodeError("[[[1]]]", { maxDepth: 2 }),
      "recursion limit exceeded at line 1 column 3",
    );
  });
});

Deno.test("decodeJson() rejects a duplicate key in the top-level object", () => {
  assert.equal(
    decodeError('{"id":25,"method":"environment/status","id":26}'),
    "duplicate JSON object key `id` at line 1 column 43",
  );
});

Deno.test("decodeJson() rejects duplicate keys in nested objects", () => {
  assert.equal(
    decodeError('{"id":27,"method":"process/read","params":{"processId":"a","processId":"b"}}'),
    "duplicate JSON object key `processId` at line 1 column 70",
  );
  const cases: [string, string][] = [
    ['{"a":[{"x":1},{"y":1,"y":2}]}', "y"],
    ['{"a":{"b":{"c":{"d":{"e":1,"e":1}}}}}', "e"],
    ['[{"k":null,"k":null}]', "k"],
    ['{"":1,"":2}', ""],
    ['{"a":1,"\\u0061":2}', "a"],
    ['{"toString":1,"toString":2}', "toString"],
  ];
  for (const [text, key] of cases) {
    assert.ok(
      decodeError(text).startsWith(`duplicate JSON object key \`${key}\` at line 1 `),
      text,
    );
  }
  assert.deepEqual(decodeJson('[{"a":1},{"a":2}]'), [{ a: 1 }, { a: 2 }]);
});

Deno.test("decodeJson() keeps a __proto__ key as an own property without pollution", () => {
  const value = decodeJson('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.deepEqual(Object.keys(value), ["__proto__", "a"]);
  assert.deepEqual(Object.getOwnPropertyDescriptor(value, "__proto__"), {
    value: { polluted: true },
    writable: true,
    enumerable: true,
    configurable: true,
  });
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(value.polluted, undefined);
  assert.deepEqual(value, JSON.parse('{"__proto__":{"polluted":true},"a":1}'));
  assert.equal(
    decodeError('{"__proto__":1,"__proto__":2}'),
    "duplicate JSON object key `__proto__` at line 1 column 26",
  );
});

Deno.test("decodeJson() keeps integer ids beyond 2^53 exact as bigint", () => {
  assert.equal(decodeJson("9007199254740991"), 9007199254740991);
  assert.equal(decodeJson("-9007199254740991"), -9007199254740991);
  assert.equal(decodeJson("9007199254740992"), 9007199254740992n);
  assert.equal(decodeJson("9007199254740993"), 9007199254740993n);
  assert.equal(decodeJson("-9007199254740993"), -9007199254740993n);
  assert.deepEqual(decodeJson('{"id":9223372036854775807,"method":"m"}'), {
    id: 9223372036854775807n,
    method: "m",
  });
  assert.deepEqual(decodeJson('{"id":-9223372036854775808}'), { id: -9223372036854775808n });
  assert.equal(decodeJson("18446744073709551616"), 18446744073709551616n);
  assert.equal(decodeJson("123456789012345"), 123456789012345);
  assert.equal(decodeJson("-1234567890123456"), -1234567890123456);
});

Deno.test("decodeJson() treats integers beyond the 128-bit range as floats like serde_json", () => {
  // The reference reports the first two as u128/i128 integers and the others as floats.
  const u128Max = "340282366920938463463374607431768211455";
  const i128Min = "-170141183460469231731687303715884105728";
  assert.equal(decodeJson(u128Max), BigInt(u128Max));
  assert.equal(decodeJson(i128Min), BigInt(i128Min));
  for (
    const text of [
      "340282366920938463463374607431768211456",
      "-170141183460469231731687303715884105729",
      "9".repeat(41),
    ]
  ) {
    const decoded = decodeJson(text);
    assert.ok(decoded instanceof JsonFloat, text);
    assert.equal(decoded.value, Number(text));
  }
  assert.deepEqual(decodeJson(`[${"7".repeat(400)}]`), [null], "overflows f64");
});

Deno.test("decodeJson() returns JsonFloat for numbers with a fraction or exponent", () => {
  const cases: [string, number][] = [
    ["1.0", 1],
    ["1e3", 1000],
    ["1E2", 100],
    ["-2.5e-1", -0.25],
    ["0.1", 0.1],
    ["1.5E+2", 150],
    ["1e-400", 0],
  ];
  for (const [text, value] of cases) {
    const decoded = decodeJson(text);
    assert.ok(decoded instanceof JsonFloat, `${text} should be a JsonFloat`);
    assert.equal(decoded.value, value, text);
  }
  assert.equal(JSON.stringify(decodeJson('{"a":1.0}')), '{"a":1}');
});

Deno.test("decodeJson() turns floats that overflow f64 into null", () => {
  assert.equal(decodeJson("1e400"), null);
  assert.equal(decodeJson("-1e400"), null);
  assert.deepEqual(decodeJson(`[1${"0".repeat(400)}.0]`), [null]);
});

Deno.test("decodeJson() decodes -0 as the integer 0", () => {
  assert.ok(Object.is(decodeJson("-0"), 0));
  assert.deepEqual(decodeJson('{"id":-0}'), { id: 0 });
});

Deno.test("decodeJson() rejects trailing characters after the document", () => {
  assert.equal(
    decodeError('{"id":31,"method":"environment/status"}{"id":32}'),
    "trailing characters at line 1 column 40",
  );
  assert.equal(decodeError("{} x"), "trailing characters at line 1 column 4");
  assert.equal(decodeError("1 2"), "trailing characters at line 1 column 3");
  assert.deepEqual(decodeJson(" \t{}\r\n "), {});
});

Deno.test("decodeJson() rejects a leading byte order mark", () => {
  assert.equal(decodeError('\uFEFF{"id":1}'), "expected value at line 1 column 1");
});

Deno.test("decodeJson() accepts only space, tab, LF and CR as whitespace", () => {
  assert.deepEqual(decodeJson('\t\n\r {\t"a"\n:\r1 }'), { a: 1 });
  assert.equal(decodeError('{"x":\f1}'), "expected value at line 1 column 6");
  assert.equal(decodeError("\u00a0{}"), "expected value at line 1 column 1");
  assert.equal(decodeError("\u2028{}"), "expected value at line 1 column 1");
});

Deno.test("decodeJson() rejects lone surrogate escapes with serde's wording", () => {
  const cases: [string, string][] = [
    ['{"id":1,"x":"\\ud800"}', "unexpected end of hex escape at line 1 column 20"],
    ['{"id":1,"x":"\\ud800x"}', "unexpected end of hex escape at line 1 column 20"],
    ['{"id":1,"x":"\\ud800\\n"}', "unexpected end of hex escape at line 1 column 21"],
    ['{"id":1,"x":"\\udc00"}', "lone leading surrogate in hex escape at line 1 column 19"],
    ['{"id":1,"x":"\\ud800\\u0041"}', "lone leading surrogate in hex escape at line 1 column 25"],
    ['{"a":"\\ud800\\ud800"}', "lone leading surrogate in hex escape at line 1 column 18"],
    // A long string with escapes goes through JSON.parse; the error must still be found.
    [
      `{"id":1,"x":"${A100}\\n${A100}\\ud800"}`,
      "unexpected end of hex escape at line 1 column 222",
    ],
    [
      `{"x":"${A100}\\n${A100}\\ud800 ${A100}","id":1}`,
      "unexpected end of hex escape at line 1 column 215",
    ],
  ];
  for (const [text, message] of cases) assert.equal(decodeError(text), message, text);
});

Deno.test("decodeJson() rejects raw control characters in strings", () => {
  assert.equal(
    decodeError('{"id":1,"x":"a\u0001"}'),
    "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 15",
  );
  assert.equal(
    decodeError('{"x":"\t"}'),
    "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 7",
  );
  assert.equal(
    decodeError(`{"id":1,"x":"${A100}\u0001"}`),
    "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 114",
  );
  assert.equal(
    decodeError(`{"id":1,"x":"\u00e9${A100}\\ud83d\\ude00${A100}\u001f"}`),
    "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 228",
  );
  for (let c = 0; c < 0x20; c++) {
    const ch = String.fromCharCode(c);
    for (const text of [`"a${ch}b"`, `"\\n${ch}"`, `"${A100}${ch}"`, `"${A100}\\n${ch}"`]) {
      assert.match(decodeError(text), /^control character/, `U+${c.toString(16)} in ${text}`);
    }
  }
  assert.equal(decodeJson('"\u007f"'), "\u007f", "DEL is not a control character in JSON");
});

Deno.test("decodeJson() passes raw lone surrogates already in the text through", () => {
  // Only escapes are checked: text decoded from UTF-8 cannot hold raw lone surrogates.
  assert.equal(decodeJson('"a\ud800b"'), "a\ud800b");
  assert.equal(decodeJson(`"${A100}\udc00"`), `${A100}\udc00`);
});

Deno.test("decodeJson() decodes escapes like JSON.parse", () => {
  const cases = [
    String.raw`"\" \\ \/ \b \f \n \r \t"`,
    String.raw`"\u0000\u001f\u0020\u007f\u00e9\u00E9\u20ac\uffff"`,
    String.raw`"\ud83d\ude00 \uD834\uDD1E"`,
    String.raw`"a\u0041b\"c"`,
    String.raw`"\\u0041"`,
    String.raw`"\\"`,
    '"plain text with unicode \u00e9\u4e2d\u{1F600}"',
    `"${A100}\\"${A100}\\"${A100}"`,
    `"${A100}\\\\"`,
    `"${A100}\\\\\\"${A100}"`,
    `"${A100}\\ud83d\\ude00${A100}"`,
    `"\\n${A100}\\u00e9${A100}\\t"`,
  ];
  for (const text of cases) assert.equal(decodeJson(text), JSON.parse(text), text);
});

Deno.test("decodeJson() reports malformed input with serde_json's wording", () => {
  const cases: [string, string][] = [
    ["not json", "expected ident at line 1 column 2"],
    ['{"id":1,"x":tru}', "expected ident at line 1 column 16"],
    ['{"x":t', "EOF while parsing a value at line 1 column 6"],
    ['{"id":1,"x":NaN}', "expected value at line 1 column 13"],
    ['{"x":+1}', "expected value at line 1 column 6"],
    ['{"x":.5}', "expected value at line 1 column 6"],
    ['{"id":1,"x":01}', "invalid number at line 1 column 14"],
    ['{"x":-01}', "invalid number at line 1 column 8"],
    ['{"id":1,"x":1.}', "invalid number at line 1 column 15"],
    ['{"id":1,"x":-}', "invalid number at line 1 column 14"],
    ['{"x":1.5e+}', "invalid number at line 1 column 11"],
    ['{"x":1e', "EOF while parsing a value at line 1 column 7"],
    ['{"x":1.', "EOF while parsing a value at line 1 column 7"],
    ['{"id":1 /*c*/}', "expected `,` or `}` at line 1 column 9"],
    ["// c\n{}", "expected value at line 1 column 1"],
    ['{"id" 1}', "expected `:` at line 1 column 7"],
    ["{1:2}", "key must be a string at line 1 column 2"],
    ["{'a':1}", "key must be a string at line 1 column 2"],
    ["[1 2]", "expected `,` or `]` at line 1 column 4"],
    ['{"x":[]]}', "expected `,` or `}` at line 1 column 8"],
    ['{"id":1,}', "trailing comma at line 1 column 9"],
    ['{"x":[1,]', "trailing comma at line 1 column 9"],
    ['{"id":1,"x":"\\q"}', "invalid escape at line 1 column 15"],
    ['{"x":"\\u00zz"}', "invalid escape at line 1 column 12"],
    ['{"a":', "EOF while parsing a value at line 1 column 5"],
    ['{"x":[1,', "EOF while parsing a value at line 1 column 8"],
    ['{"a":"abc', "EOF while parsing a string at line 1 column 9"],
    ['{"x":"\\ud800\\u', "EOF while parsing a string at line 1 column 14"],
    ['{"a"', "EOF while parsing an object at line 1 column 4"],
    ["{", "EOF while parsing an object at line 1 column 1"],
    ['{"a":[1', "EOF while parsing a list at line 1 column 7"],
    ["", "EOF while parsing a value at line 1 column 0"],
    ["   ", "EOF while parsing a value at line 1 column 3"],
  ];
  for (const [text, message] of cases) assert.equal(decodeError(text), message, text);
});

Deno.test("decodeJson() counts columns in UTF-8 bytes like serde_json", () => {
  assert.equal(
    decodeError('{"x":"\u00e9\\u0041","a":{"b":1,"b":2}}'),
    "duplicate JSON object key `b` at line 1 column 30",
  );
  assert.equal(
    decodeError('{"id":2,"method":"environment/status","x":"\u{1F600}\u00e9","x":1}'),
    "duplicate JSON object key `x` at line 1 column 54",
  );
  assert.equal(decodeError('{"x":tr\u00e9}'), "expected ident at line 1 column 8");
  assert.equal(decodeError('{"x":"abc\u00e9'), "EOF while parsing a string at line 1 column 11");
});

Deno.test("decodeJson() counts lines at LF and restarts the column", () => {
  assert.equal(
    decodeError('{\n"a":1,\n"a":2}'),
    "duplicate JSON object key `a` at line 3 column 3",
  );
  assert.equal(decodeError('{"a":1}\n\n  x'), "trailing characters at line 3 column 3");
});

Deno.test("decodeJson() refuses limits that are not non-negative integers", () => {
  assert.throws(() => decodeJson("{}", { maxValues: -1 }), RangeError);
  assert.throws(() => decodeJson("{}", { maxDepth: 1.5 }), RangeError);
  assert.throws(() => decodeJson("{}", { maxValues: Number.NaN }), RangeError);
});

/** Mulberry32: a small seeded PRNG so the random test is reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random string mixing ASCII, control characters, BMP, astral and quote/backslash characters. */
function randomString(rand: () => number): string {
  const length = rand() < 0.1 ? 60 + Math.floor(rand() * 200) : Math.floor(rand() * 12);
  let out = "";
  for (let i = 0; i < length; i++) {
    const pick = rand();
    if (pick < 0.5) out += String.fromCharCode(32 + Math.floor(rand() * 95));
    else if (pick < 0.6) out += String.fromCharCode(Math.floor(rand() * 32));
    else if (pick < 0.75) out += String.fromCharCode(0x80 + Math.floor(rand() * 0xd000));
    else if (pick < 0.85) out += String.fromCodePoint(0x10000 + Math.floor(rand() * 0xfffff));
    else out += ['"', "\\", "/", "\u2028", "__proto__"][Math.floor(rand() * 5)];
  }
  return out;
}

/** A random JSON value without floats (integers only) and, being built as objects, without duplicate keys. */
function randomValue(rand: () => number, depth: number): unknown {
  const pick = rand();
  if (depth > 4 || pick < 0.35) {
    const scalar = rand();
    if (scalar < 0.1) return null;
    if (scalar < 0.2) return rand() < 0.5;
    if (scalar < 0.45) return Math.floor((rand() - 0.5) * 2 ** (1 + Math.floor(rand() * 53)));
    return randomString(rand);
  }
  if (pick < 0.65) {
    return Array.from({ length: Math.floor(rand() * 7) }, () => randomValue(rand, depth + 1));
  }
  const out: Record<string, unknown> = {};
  const members = Math.floor(rand() * 7);
  for (let i = 0; i < members; i++) {
    const key = rand() < 0.05 ? "__proto__" : randomString(rand);
    Object.defineProperty(out, key, {
      value: randomValue(rand, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

Deno.test("decodeJson() agrees with JSON.parse on 2000 seeded random documents", () => {
  const rand = prng(0x5eed);
  for (let i = 0; i < 2000; i++) {
    const text = JSON.stringify(randomValue(rand, 0), null, i % 3 === 0 ? 2 : undefined);
    let decoded: unknown;
    try {
      decoded = decodeJson(text);
    } catch (err) {
      assert.fail(`document ${i} failed to decode: ${err}\n${text}`);
    }
    assert.deepEqual(decoded, JSON.parse(text), `document ${i}: ${text}`);
  }
});

Deno.test("decodeJson() decodes short compact documents (the JSON.parse path) as the full decoder does", () => {
  // A `maxDepth` of 3 keeps these texts (longer than 7 characters, at most 3 deep) off the
  // JSON.parse path, so the two results come from the two paths.
  const texts = [
    '{"id":1,"method":"fs/getMetadata","params":{"path":"file:///tmp"}}',
    '{"id":1,"id":2}',
    '{"a":1,"b":{"c":1,"c":22}}',
    '{"a":"x","a":"x"}',
    '{"":1,"":2,"b":3}',
    '[{"a":1},{"a":1,"a":1}]',
    '{"__proto__":{"polluted":1},"x":1}',
    '{"b":1,"2":2,"1":3}',
    '{"a":"x:y,\\"z\\"","b":[1,2]}',
    '{"id":1234567890123456,"m":"m"}',
    '{"id":123456789012345,"m":"m"}',
    '{"id":-0,"n":[0,-0,-1]}',
    '{"n":[01,2]}',
    '{"n":[1,2,]}',
    '{"a":1}{"b":2}',
    '{"a":truefalse}',
    '{"a" :1,"b":2}',
    '{"s":"\\ud800"}',
    '{"s":"\ud800","t":1}',
    '{"s":"\u{1F600}","t":1}',
    '{"s":"tab\there"}',
    '{"f":1.5,"e":1e3}',
    '["nested",[["x"]]]',
  ];
  for (const text of texts) {
    assert.ok(text.length > 7, text);
    const outcome = (options?: { maxDepth: number }) => {
      try {
        const value = decodeJson(text, options);
        return { value, negativeZero: JSON.stringify(value, (_, v) => Object.is(v, -0) || v) };
      } catch (err) {
        assert.ok(err instanceof JsonDecodeError, `${text}: ${err}`);
        return { error: err.message };
      }
    };
    assert.deepStrictEqual(outcome(), outcome({ maxDepth: 3 }), text);
  }
});
