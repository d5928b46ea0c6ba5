/**
 * Fuzzing the decoder and the router over stdio and WebSocket.
 *
 * A seeded generator (tests/helpers/reliability_fuzz.ts) produces random
 * JSON, truncated JSON, deep nesting, huge arrays, duplicate keys, wrong
 * types in every params member of every method, random bytes, oversized
 * messages, invalid UTF-8, blank messages and connection-ending messages,
 * each with the outcome the spec prescribes. Messages go in batches; every
 * batch ends with a sentinel request, and the replies before the sentinel
 * must be exactly the expected ones, in order (the server runs requests
 * inline), each a well-formed envelope with a spec'd code. Fatal messages
 * (§4.5) must end the connection without a reply; the fuzzer then
 * reconnects and counts them.
 *
 * Size and seed: `EXEC_SERVER_FUZZ_MESSAGES` per transport (default 5 000;
 * 100 000 with `EXEC_SERVER_LONG_TESTS=1`, as `deno task test:fuzz` runs it)
 * and `EXEC_SERVER_FUZZ_SEED`. A failure message names the seed and the
 * message number, so it reproduces.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  handshake,
  type Json,
  type ProtocolClient,
  ServerProcess,
  type StdioClient,
  type WsClient,
} from "./helpers/server_harness.ts";
import {
  type Expect,
  type FuzzCase,
  FuzzGenerator,
  idKeyOf,
  SPEC_ERROR_CODES,
} from "./helpers/reliability_fuzz.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { Rng } from "./helpers/reliability_fuzz.ts";

const LONG = Deno.env.get("EXEC_SERVER_LONG_TESTS") === "1";
const MESSAGES = Number(Deno.env.get("EXEC_SERVER_FUZZ_MESSAGES") ?? (LONG ? "100000" : "5000"));
const SEED = Number(Deno.env.get("EXEC_SERVER_FUZZ_SEED") ?? "20250601");
/** Messages per batch before the sentinel request. */
const BATCH = 64;
/** One connection-ending message every this many messages. */
const FATAL_EVERY = 1000;
const MAX_MESSAGE_BYTES = 1 << 20;

function fuzzPermissions(dir: string): string[] {
  // Confined: one directory, no programs, loopback network only.
  return [
    `--allow-read=${dir}`,
    `--allow-write=${dir}`,
    "--allow-env",
    "--allow-sys",
    "--allow-net=127.0.0.1",
  ];
}

/** Statistics of one run, printed for docs/contributing/testing.md (Suites). */
interface FuzzStats {
  transport: string;
  messages: number;
  replies: number;
  malformed: number;
  fatal: number;
  reconnects: number;
  categories: Record<string, number>;
  /** Replies by outcome: `result` or the error code. */
  outcomes: Record<string, number>;
  mutationsCovered: number;
  mutations: number;
  ms: number;
}

/** Checks the envelope shape of a server message; returns a problem or undefined. */
function envelopeProblem(msg: Json): string | undefined {
  const keys = Object.keys(msg);
  if ("method" in msg) {
    if (keys.join() !== "method,params") return `notification keys ${keys.join()}`;
    if (typeof msg.params !== "object" || msg.params === null || Array.isArray(msg.params)) {
      return "notification params is not an object";
    }
    return undefined;
  }
  if (keys.join() === "id,result") return undefined;
  if (keys.join() !== "error,id") return `response keys ${keys.join()}`;
  const error = msg.error as Json;
  if (typeof error !== "object" || error === null) return "error is not an object";
  const errorKeys = Object.keys(error).join();
  if (errorKeys !== "code,message" && errorKeys !== "code,data,message") {
    return `error keys ${errorKeys}`;
  }
  if (typeof error.code !== "number" || !Number.isInteger(error.code)) return "code not an integer";
  if (!SPEC_ERROR_CODES.has(error.code)) return `code ${error.code} is not a spec'd code`;
  if (typeof error.message !== "string") return "message is not a string";
  return undefined;
}

/** Checks one reply against its expectation; returns a problem or undefined. */
function replyProblem(msg: Json, expect: Expect, parsePrefix: string): string | undefined {
  const shape = envelopeProblem(msg);
  if (shape) return shape;
  const error = msg.error as
    | { code: number; message: string; data?: { field?: string } }
    | undefined;
  if (expect.kind === "malformed") {
    if (msg.id !== -1) return `expected id -1, got ${String(msg.id)}`;
    if (!error || error.code !== -32600) return "expected a -32600 error";
    if (!error.message.startsWith(`${parsePrefix}: `)) return `unexpected prefix: ${error.message}`;
    return undefined;
  }
  if (expect.kind !== "reply") return `expected no reply (${expect.kind})`;
  if (idKeyOf(msg.id) !== expect.id) return `expected id ${expect.id}, got ${idKeyOf(msg.id)}`;
  if (!error) return expect.result ? undefined : "unexpected success";
  if (expect.codes && !expect.codes.includes(error.code)) {
    return `code ${error.code} not in [${expect.codes}] (${error.message})`;
  }
  if (expect.field !== undefined && error.data?.field !== expect.field) {
    return `error names member ${error.data?.field}, expected ${expect.field} (${error.message})`;
  }
  return undefined;
}

function show(payload: string | Uint8Array): string {
  const text = typeof payload === "string" ? payload : `bytes ${payload.slice(0, 120).toHex()}`;
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} chars)` : text;
}

/** One transport under fuzz: a way to (re)connect and send payloads. */
interface Target {
  name: "stdio" | "ws";
  connect(): Promise<ProtocolClient>;
  /** Sends a batch of payloads on the client. */
  sendAll(client: ProtocolClient, payloads: (string | Uint8Array)[]): Promise<void>;
  /** After a fatal message: checks the connection ended as the spec says, cleans up. */
  afterFatal(client: ProtocolClient): Promise<void>;
  parsePrefix(client: ProtocolClient): string;
  close(client: ProtocolClient): Promise<void>;
}

async function fuzz(target: Target, dir: string, httpPort?: number): Promise<FuzzStats> {
  const started = performance.now();
  const gen = new FuzzGenerator({ seed: SEED, dir, maxMessageBytes: MAX_MESSAGE_BYTES, httpPort });
  const expectOf = (c: FuzzCase) => (target.name === "stdio" ? c.stdio : c.ws);
  let client = await target.connect();
  let sent = 0;
  let replies = 0;
  let malformed = 0;
  let fatal = 0;
  let reconnects = 0;
  let sentinel = 0;
  const outcomes = new Map<string, number>();
  let nextFatal = FATAL_EVERY;
  const where = (index: number, c: FuzzCase) =>
    `seed ${SEED}, ${target.name} message #${index} (${c.category}): ${show(c.payload)}`;

  while (sent < MESSAGES) {
    const fatalNow = sent + BATCH >= nextFatal;
    const batch: { index: number; c: FuzzCase }[] = [];
    while (batch.length < BATCH && sent < MESSAGES - (fatalNow ? 1 : 0)) {
      batch.push({ index: sent, c: gen.next() });
      sent++;
    }
    const sentinelId = `sentinel-${sentinel++}`;
    const from = client.log.received.length;
    await target.sendAll(client, [
      ...batch.map((b) => b.c.payload),
      `{"id":"${sentinelId}","method":"environment/status"}`,
    ]);
    await client.log.waitUntil(
      () =>
        client.log.eof ||
        client.log.received.slice(from).some((r) => r.msg.id === sentinelId),
      `the sentinel ${sentinelId} (seed ${SEED}, ${target.name} messages #${batch[0]?.index}…)`,
      60_000,
    );
    const window = client.log.received.slice(from);
    const responses = window.filter((r) => !("method" in r.msg));
    for (const notification of window.filter((r) => "method" in r.msg)) {
      assert.equal(envelopeProblem(notification.msg), undefined, notification.text);
    }
    const expected = batch.filter((b) => {
      const kind = expectOf(b.c).kind;
      return kind === "reply" || kind === "malformed";
    });
    if (client.log.eof) {
      const lastReplied = expected[Math.min(responses.length, expected.length - 1)];
      assert.fail(
        `the server closed the connection; around ${
          lastReplied ? where(lastReplied.index, lastReplied.c) : "the batch"
        }`,
      );
    }
    for (let i = 0; i < expected.length; i++) {
      const got = responses[i];
      const { index, c } = expected[i]!;
      assert.ok(got, `no reply for ${where(index, c)}`);
      const problem = replyProblem(got.msg, expectOf(c), target.parsePrefix(client));
      assert.equal(
        problem,
        undefined,
        `${problem}: ${where(index, c)}\n  reply: ${got.text.slice(0, 400)}`,
      );
      replies++;
      const outcome = "result" in got.msg ? "result" : String((got.msg.error as Json).code);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      if (expectOf(c).kind === "malformed") malformed++;
    }
    const extra = responses.slice(expected.length);
    assert.equal(
      extra.length,
      1,
      `unexpected replies in batch: ${extra.map((r) => r.text).join("\n")}`,
    );
    assert.deepEqual(extra[0]!.msg, { id: sentinelId, result: { status: "ready" } });

    if (fatalNow && sent < MESSAGES) {
      const c = gen.nextFatal();
      const index = sent++;
      const before = client.log.received.length;
      await target.sendAll(client, [c.payload]);
      await client.log.waitEof(15_000).catch(() => {
        assert.fail(`the connection stayed open after ${where(index, c)}`);
      });
      const after = client.log.received.slice(before).filter((r) => !("method" in r.msg));
      assert.deepEqual(
        after.map((r) => r.text),
        [],
        `a fatal message got a reply: ${where(index, c)}`,
      );
      await target.afterFatal(client);
      fatal++;
      nextFatal += FATAL_EVERY;
      client = await target.connect();
      reconnects++;
    }
  }
  await target.close(client);
  return {
    transport: target.name,
    messages: sent,
    replies,
    malformed,
    fatal,
    reconnects,
    categories: Object.fromEntries([...gen.counts].sort()),
    outcomes: Object.fromEntries([...outcomes].sort()),
    mutationsCovered: gen.mutationsCovered.size,
    mutations: gen.mutationCount,
    ms: Math.round(performance.now() - started),
  };
}

function report(stats: FuzzStats): void {
  console.log(`fuzz ${JSON.stringify(stats)}`);
}

function assertCoverage(stats: FuzzStats): void {
  if (stats.messages >= 4000) {
    assert.equal(
      stats.mutationsCovered,
      stats.mutations,
      "every wrong-typed member of every method was sent at least once",
    );
  }
}

function assertCleanStderr(stderr: string): void {
  assert.doesNotMatch(
    stderr,
    /panic|Uncaught|RUST_BACKTRACE|stack overflow/i,
    stderr.slice(0, 2000),
  );
}

const encoder = new TextEncoder();

Deno.test("fuzzed messages over stdio get spec'd replies and only fatal ones end the connection", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-fuzz-" });
  const servers: ServerProcess[] = [];
  try {
    const target: Target = {
      name: "stdio",
      async connect() {
        const server = await ServerProcess.start({
          listen: "stdio",
          permissions: fuzzPermissions(dir),
          args: ["--max-message-bytes", String(MAX_MESSAGE_BYTES)],
        });
        servers.push(server);
        await handshake(server.stdio!);
        return server.stdio!;
      },
      async sendAll(client, payloads) {
        const parts = payloads.map((p) => (typeof p === "string" ? encoder.encode(p) : p));
        const size = parts.reduce((n, p) => n + p.length + 1, 0);
        const bytes = new Uint8Array(size);
        let at = 0;
        for (const part of parts) {
          bytes.set(part, at);
          at += part.length;
          bytes[at++] = 10;
        }
        await (client as StdioClient).sendBytes(bytes);
      },
      async afterFatal() {
        // §1.1: after a fatal error the server SHOULD exit 0.
        const server = servers[servers.length - 1]!;
        const status = await server.stop();
        assert.equal(status.code, 0, "the stdio server exits 0 after a fatal message");
        assertCleanStderr(await server.stderr);
      },
      parsePrefix: () => "failed to parse JSON-RPC message from exec-server stdio",
      async close() {
        const server = servers[servers.length - 1]!;
        const status = await server.stop();
        assert.equal(status.code, 0);
        assertCleanStderr(await server.stderr);
      },
    };
    const stats = await fuzz(target, dir);
    report(stats);
    assertCoverage(stats);
  } finally {
    for (const server of servers) await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fuzzed messages over WebSocket get spec'd replies and only fatal ones end the connection", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-fuzz-" });
  await using server = await ServerProcess.start({
    listen: "ws",
    permissions: fuzzPermissions(dir),
    args: ["--max-message-bytes", String(MAX_MESSAGE_BYTES)],
  });
  // The parse-error prefix names the client's own address: learn it per connection.
  const prefixes = new WeakMap<ProtocolClient, string>();
  try {
    const target: Target = {
      name: "ws",
      async connect() {
        const client = await server.connect();
        await handshake(client);
        client.sendRaw("{");
        const fault = await client.log.waitFor((m) => m.id === -1, "the probe's parse error");
        const message = (fault.error as { message: string }).message;
        const prefix = message.slice(0, message.indexOf(": "));
        assert.match(
          prefix,
          /^failed to parse websocket JSON-RPC message from exec-server websocket 127\.0\.0\.1:\d+$/,
        );
        prefixes.set(client, prefix);
        return client;
      },
      sendAll(client, payloads) {
        for (const payload of payloads) {
          if (typeof payload === "string") client.sendRaw(payload);
          else (client as WsClient).sendBinary(payload);
        }
        return Promise.resolve();
      },
      async afterFatal(client) {
        await client.close();
        // The server itself keeps running and serving.
        const probe = await fetch(`http://127.0.0.1:${server.port}/readyz`);
        await probe.body?.cancel();
        assert.equal(probe.status, 200, "the WebSocket server survives a fatal message");
      },
      parsePrefix: (client) => prefixes.get(client)!,
      close: (client) => client.close(),
    };
    const stats = await fuzz(target, dir, server.port);
    report(stats);
    assertCoverage(stats);
    assert.equal((await server.stop()).code, 0, "the server was alive until stopped");
  } finally {
    await server.stop();
    assertCleanStderr(await server.stderr);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("raw WebSocket frames: fragments and pings are served, invalid UTF-8 text ends only its connection", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-fuzz-" });
  await using server = await ServerProcess.start({
    listen: "ws",
    permissions: fuzzPermissions(dir),
  });
  const rng = new Rng(SEED);
  const rounds = Math.max(20, Math.round(MESSAGES / 250));
  let dropped = 0;
  try {
    const watcher = await server.connect();
    await handshake(watcher);
    for (let round = 0; round < rounds; round++) {
      await using raw = await RawWebSocket.connect(server.port);
      assert.equal(raw.answer.status, 101);
      // A request split into random fragments, with a ping in between.
      const text = `{"id":${round},"method":"initialize","params":{"clientName":"raw${round}"}}`;
      const bytes = encoder.encode(text);
      const cuts = [
        0,
        ...Array.from({ length: rng.range(1, 4) }, () => rng.range(1, bytes.length - 1)),
      ]
        .sort((a, b) => a - b);
      cuts.push(bytes.length);
      for (let i = 0; i + 1 < cuts.length; i++) {
        const opcode = i === 0 ? 0x1 : 0x0;
        await raw.sendFrame(opcode, bytes.subarray(cuts[i], cuts[i + 1]), i + 2 === cuts.length);
        if (i === 0) await raw.sendFrame(0x9, encoder.encode("ping"));
      }
      const reply = JSON.parse((await raw.readMessage())!);
      assert.equal(reply.id, round);
      assert.ok(reply.result?.sessionId, JSON.stringify(reply));
      // Invalid UTF-8 in a text frame is a transport error: the connection ends, no reply.
      const bad = rng.pick([[0xc3, 0x28], [0xff], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98]]);
      await raw.sendTextBytes(
        Uint8Array.from([...encoder.encode('{"id":1,"method":"'), ...bad, 0x22, 0x7d]),
      );
      const after = await raw.readMessage();
      assert.equal(after, null, `the connection stayed open and answered ${after}`);
      dropped++;
      // Other connections are unaffected.
      const status = await watcher.request(`w${round}`, "environment/status");
      assert.deepEqual(status.result, { status: "ready" });
    }
    await watcher.close();
    console.log(`fuzz ${JSON.stringify({ transport: "ws raw frames", rounds, dropped })}`);
    assert.equal((await server.stop()).code, 0, "the server was alive until stopped");
  } finally {
    await server.stop();
    assertCleanStderr(await server.stderr);
    await Deno.remove(dir, { recursive: true });
  }
});
