/**
 * Benchmarks of the bounded decoder ({@linkcode decodeJson}) against `JSON.parse`.
 *
 * Each group has `decodeJson` as the baseline, so `deno bench` prints how many
 * times faster or slower `JSON.parse` is on the same input.
 *
 * Run with `deno bench bench/json_decode_bench.ts`.
 *
 * @module
 */

import { decodeJson } from "../lib/protocol/json_decode.ts";

/** A typical small request. */
const SMALL_REQUEST =
  '{"id":42,"method":"process/read","params":{"processId":"p1","afterSeq":17,"maxBytes":65536,"waitMs":1000}}';

/** Deterministic pseudo-random bytes (xorshift32), so the base64 text looks like real data. */
function pseudoRandomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let state = 0x9e3779b9;
  for (let i = 0; i < length; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[i] = state & 0xff;
  }
  return bytes;
}

/** 3 MiB of bytes: exactly 4 MiB of base64 text. */
const BASE64_4MIB = pseudoRandomBytes(3 * 1024 * 1024).toBase64();
const PROCESS_WRITE =
  `{"id":7,"method":"process/write","params":{"processId":"p1","chunk":"${BASE64_4MIB}"}}`;

/** 300,000 values: over the 262,144-value budget. */
const ZEROS_300K = `[${new Array(300_000).fill("0").join(",")}]`;

/** A request whose params nest objects and arrays 120 levels deep (the limit is 127). */
function nestedRequest(levels: number): string {
  let inner = '{"leaf":true,"n":1}';
  for (let i = 0; i < levels; i++) {
    inner = i % 2 === 0 ? `{"level":${i},"child":${inner}}` : `[${inner},"s${i}"]`;
  }
  return `{"id":3,"method":"fs/writeFile","params":${inner}}`;
}
const NESTED_REQUEST = nestedRequest(120);

/** An object of about `bytes` bytes with many distinct keys and mixed member values. */
function objectOfSize(bytes: number): string {
  const members: Record<string, unknown> = {};
  let i = 0;
  while (JSON.stringify(members).length < bytes) {
    members[`key_${i}`] = { n: i, s: `value ${i} \u00e9\n`, b: i % 2 === 0, a: [i, null, 1.5] };
    i++;
  }
  return JSON.stringify(members);
}
const OBJECT_64KIB = objectOfSize(64 * 1024);

/** Sub-microsecond cases get a long warm-up so both sides are measured fully optimized. */
const SMALL_RUNS = { warmup: 100_000, n: 1_000_000 };

Deno.bench("decodeJson small request", { group: "small", baseline: true, ...SMALL_RUNS }, () => {
  decodeJson(SMALL_REQUEST);
});
Deno.bench("JSON.parse small request", { group: "small", ...SMALL_RUNS }, () => {
  JSON.parse(SMALL_REQUEST);
});

Deno.bench("decodeJson 4 MiB base64 process/write", { group: "write4m", baseline: true }, () => {
  decodeJson(PROCESS_WRITE);
});
Deno.bench("JSON.parse 4 MiB base64 process/write", { group: "write4m" }, () => {
  JSON.parse(PROCESS_WRITE);
});

Deno.bench("decodeJson 300k zeros (rejected by the budget)", {
  group: "zeros",
  baseline: true,
}, () => {
  try {
    decodeJson(ZEROS_300K);
  } catch {
    // Expected: over the 262144-value budget.
  }
});
Deno.bench("decodeJson 300k zeros (budget raised, accepted)", { group: "zeros" }, () => {
  decodeJson(ZEROS_300K, { maxValues: 300_001 });
});
Deno.bench("JSON.parse 300k zeros", { group: "zeros" }, () => {
  JSON.parse(ZEROS_300K);
});

Deno.bench("decodeJson 120-deep params", { group: "nested", baseline: true }, () => {
  decodeJson(NESTED_REQUEST);
});
Deno.bench("JSON.parse 120-deep params", { group: "nested" }, () => {
  JSON.parse(NESTED_REQUEST);
});

Deno.bench("decodeJson 64 KiB object", { group: "object64k", baseline: true }, () => {
  decodeJson(OBJECT_64KIB);
});
Deno.bench("JSON.parse 64 KiB object", { group: "object64k" }, () => {
  JSON.parse(OBJECT_64KIB);
});
