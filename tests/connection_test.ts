import assert from "node:assert/strict";
import { RpcError } from "../lib/protocol/errors.ts";
import { decodeJson } from "../lib/protocol/json_decode.ts";
import {
  AtCapacityError,
  ClosedError,
  Connection,
  type ConnectionHandlers,
  INBOUND_QUEUE_LIMIT,
  MessageTooLargeError,
  RemoteError,
  TimedOutError,
} from "../lib/rpc/connection.ts";
import { Semaphore } from "../lib/rpc/semaphore.ts";
import { stdioTransport } from "../lib/rpc/stdio_transport.ts";
import {
  type Inbound,
  outboundString,
  type OutboundText,
  type Transport,
} from "../lib/rpc/transport.ts";
import { websocketTransport } from "../lib/rpc/websocket_transport.ts";
import { serveUpgrades } from "./helpers/upgrade_server.ts";

type Json = Record<string, unknown>;

/** A message-level transport the test drives by hand: inject inbound items, inspect sent text. */
class MemoryTransport implements Transport {
  readonly readable: ReadableStream<Inbound>;
  readonly parseErrorPrefix = "failed to parse JSON-RPC message from memory";
  readonly label = "memory";
  readonly sent: string[] = [];
  /** The `alone` hint of each send, in order. */
  readonly alone: boolean[] = [];
  closed = false;
  #controller!: ReadableStreamDefaultController<Inbound>;
  #onSend: (() => void)[] = [];

  constructor(readable?: ReadableStream<Inbound>) {
    this.readable = readable ?? new ReadableStream<Inbound>({
      start: (controller) => {
        this.#controller = controller;
      },
    });
  }

  inject(...items: (Inbound | Json)[]): void {
    for (const item of items) {
      this.#controller.enqueue(
        typeof item === "string" || "fault" in item ? item as Inbound : JSON.stringify(item),
      );
    }
  }

  end(): void {
    try {
      this.#controller.close();
    } catch {
      // Already closed.
    }
  }

  send(text: OutboundText, alone = false): Promise<void> {
    this.sent.push(outboundString(text));
    this.alone.push(alone);
    for (const wake of this.#onSend.splice(0)) wake();
    return Promise.resolve();
  }

  close(): void {
    this.closed = true;
    this.end();
  }

  /** Parsed sent messages. */
  messages(): Json[] {
    return this.sent.map((text) => decodeJson(text) as Json);
  }

  /** Waits until at least `count` messages were sent and returns them parsed. */
  async waitSent(count: number): Promise<Json[]> {
    while (this.sent.length < count) {
      await new Promise<void>((resolve) => this.#onSend.push(resolve));
    }
    return this.messages();
  }
}

/** Lets queued microtasks and stream reads run. */
async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

function pipePair(): [Transport, Transport] {
  const ab = new TransformStream<Uint8Array, Uint8Array>();
  const ba = new TransformStream<Uint8Array, Uint8Array>();
  return [stdioTransport(ba.readable, ab.writable), stdioTransport(ab.readable, ba.writable)];
}

const echo: ConnectionHandlers = {
  request: (method, params) => ({ method, params }),
};

Deno.test("Connection matches out-of-order responses by id", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  const first = conn.call("a", { n: 1 });
  const second = conn.call("b");
  const third = conn.call("c");
  const sent = await transport.waitSent(3);
  assert.deepEqual(sent.map((m) => m.method), ["a", "b", "c"]);
  assert.deepEqual(sent[0], { id: 1, method: "a", params: { n: 1 } });
  assert.deepEqual(sent[1], { id: 2, method: "b" }, "undefined params are omitted");
  transport.inject(
    { id: 3, result: "third" },
    { id: 1, result: "first" },
    { id: 2, error: { code: -32004, message: "gone", data: { x: 1 } } },
  );
  assert.equal(await third, "third");
  assert.equal(await first, "first");
  const err = await second.catch((e) => e);
  assert.ok(err instanceof RemoteError);
  assert.equal(err.code, -32004);
  assert.equal(err.message, "gone");
  assert.deepEqual(err.data, { x: 1 });
  assert.equal(conn.pendingCalls, 0);
  conn.close();
  await conn.closed;
});

Deno.test('Connection keeps ids 1 and "1" apart when matching responses', async () => {
  const transport = new MemoryTransport();
  const unmatched: unknown[] = [];
  const conn = new Connection(transport, { handlers: { unmatched: (m) => unmatched.push(m) } });
  const call = conn.call("m");
  await transport.waitSent(1);
  transport.inject({ id: "1", result: "wrong" });
  await settle();
  assert.equal(conn.pendingCalls, 1, "a string id must not answer integer id 1");
  assert.equal(unmatched.length, 1);
  transport.inject({ id: 1, result: "right" });
  assert.equal(await call, "right");
  conn.close();
});

Deno.test("Connection per-call timeout fails the call and removes its pending entry", async () => {
  const transport = new MemoryTransport();
  const unmatched: unknown[] = [];
  const conn = new Connection(transport, { handlers: { unmatched: (m) => unmatched.push(m) } });
  const slow = conn.call("slow", undefined, { timeoutMs: 5 });
  const kept = conn.call("kept", undefined, { timeoutMs: 60_000 });
  assert.equal(conn.pendingCalls, 2);
  const err = await slow.catch((e) => e);
  assert.ok(err instanceof TimedOutError);
  assert.match(err.message, /"slow"/);
  assert.equal(conn.pendingCalls, 1);
  transport.inject({ id: 1, result: "late" });
  transport.inject({ id: 2, result: "ok" });
  assert.equal(await kept, "ok", "answering the kept call clears its timer");
  assert.equal(conn.pendingCalls, 0);
  assert.equal(unmatched.length, 1, "the late response matches nothing");
  conn.close();
});

Deno.test("Connection close drains responses already read, then fails pending calls with ClosedError", async () => {
  const transport = new MemoryTransport();
  const gate = Promise.withResolvers<void>();
  const handled: string[] = [];
  const conn = new Connection(transport, {
    handlers: {
      request: async (method) => {
        handled.push(method);
        await gate.promise;
        return "late";
      },
      schedule: () => "inline",
    },
  });
  const answered = conn.call("answered");
  const unanswered = conn.call("unanswered");
  await transport.waitSent(2);
  // The inline request blocks processing, so everything after it stays queued until EOF.
  transport.inject(
    { id: 100, method: "blocker" },
    { id: 1, result: "done" },
    { id: 101, method: "queued" },
  );
  await settle();
  assert.deepEqual(handled, ["blocker"]);
  transport.end();
  assert.equal(await answered, "done");
  const err = await unanswered.catch((e) => e);
  assert.ok(err instanceof ClosedError, `expected ClosedError, got ${err}`);
  assert.ok(!(err instanceof RemoteError));
  await conn.closed;
  assert.equal(conn.isClosed, true);
  gate.resolve();
  await settle();
  assert.deepEqual(handled, ["blocker"], "queued requests are dropped");
  assert.equal(transport.sent.length, 2, "no reply is sent after the connection ended");
});

Deno.test("Connection close() rejects pending calls and later calls fail fast", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  const pending = conn.call("m", undefined, { timeoutMs: 60_000 });
  conn.close();
  await assert.rejects(pending, ClosedError);
  assert.equal(conn.pendingCalls, 0);
  assert.equal(transport.closed, true);
  await assert.rejects(conn.call("after"), ClosedError);
  await conn.notify("after");
  await conn.sendRaw("{}");
  assert.equal(transport.sent.length, 1, "nothing is sent after close");
  await conn.closed;
  conn.close();
});

Deno.test("Connection allows 1024 regular calls in flight plus one reserved cleanup call", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < 1024; i++) calls.push(conn.call("regular"));
  assert.equal(conn.pendingCalls, 1024);
  await assert.rejects(conn.call("regular"), AtCapacityError);
  const cleanup = conn.call("process/terminate", { processId: "p" }, { cleanup: true });
  assert.equal(conn.pendingCalls, 1025);
  await assert.rejects(conn.call("fs/close", {}, { cleanup: true }), AtCapacityError);
  await settle();
  assert.equal(transport.sent.length, 1025, "refused calls never reach the wire");
  // Answer the cleanup call: the reserved slot frees up again.
  transport.inject({ id: 1025, result: { running: false } });
  assert.deepEqual(await cleanup, { running: false });
  const cleanup2 = conn.call("fs/close", {}, { cleanup: true });
  assert.equal(conn.pendingCalls, 1025);
  // Answer a regular call: a regular slot frees up.
  transport.inject({ id: 1, result: 1 });
  assert.equal(await calls[0], 1);
  const another = conn.call("regular");
  assert.equal(conn.pendingCalls, 1025);
  await assert.rejects(conn.call("regular"), AtCapacityError);
  conn.close();
  const results = await Promise.allSettled([...calls.slice(1), cleanup2, another]);
  assert.ok(results.every((r) => r.status === "rejected" && r.reason instanceof ClosedError));
});

Deno.test("Connection honours a custom maxInFlight", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport, { maxInFlight: 2 });
  const a = conn.call("a");
  const b = conn.call("b");
  await assert.rejects(conn.call("c"), AtCapacityError);
  conn.close();
  await assert.rejects(a, ClosedError);
  await assert.rejects(b, ClosedError);
});

Deno.test("Connection answers malformed input with -32600 id -1 and keeps reading", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport, { handlers: echo });
  transport.inject(
    "not json",
    "[]",
    '{"id":1,"id":2}',
    { fault: "message exceeds the limit of 10 bytes" },
    { id: 7, method: "still/alive" },
  );
  const sent = await transport.waitSent(5);
  const prefix = "failed to parse JSON-RPC message from memory: ";
  assert.deepEqual(sent.slice(0, 4).map((m) => m.id), [-1, -1, -1, -1]);
  const errors = sent.slice(0, 4).map((m) => m.error as { code: number; message: string });
  assert.ok(errors.every((e) => e.code === -32600 && e.message.startsWith(prefix)));
  assert.match(errors[0]!.message, /expected ident at line 1/);
  assert.equal(errors[1]!.message, `${prefix}expected a JSON-RPC object`);
  assert.match(errors[2]!.message, /duplicate JSON object key `id`/);
  assert.equal(errors[3]!.message, `${prefix}message exceeds the limit of 10 bytes`);
  assert.deepEqual(sent[4], { id: 7, result: { method: "still/alive" } });
  conn.close();
});

Deno.test("Connection fails the call whose answer passed the size limit with MessageTooLargeError and keeps the connection", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  const big = conn.call("fs/readFile", { path: "file:///big" });
  const next = conn.call("environment/status");
  transport.inject(
    { fault: "message exceeds the limit of 10 bytes", limit: 10, responseId: 1 },
    { id: 2, result: { status: "ready" } },
  );
  const err = await big.then(() => assert.fail("expected a rejection"), (e) => e);
  assert.ok(err instanceof MessageTooLargeError, String(err));
  assert.equal(err.limit, 10);
  assert.equal(err.method, "fs/readFile");
  assert.deepEqual(await next, { status: "ready" });
  assert.equal(conn.pendingCalls, 0);
  assert.equal(conn.isClosed, false);
  await settle();
  assert.deepEqual(transport.messages().map((m) => m.method), [
    "fs/readFile",
    "environment/status",
  ]);
  conn.close();
});

Deno.test("Connection closes and fails every pending call with MessageTooLargeError when an over-limit message names no pending call", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  const calls = [conn.call("a"), conn.call("b")].map((call) => call.catch((e) => e));
  transport.inject({ fault: "message exceeds the limit of 10 bytes", limit: 10 });
  for (const err of await Promise.all(calls)) {
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.limit, 10);
    assert.equal(err.method, undefined);
  }
  await conn.closed;
  assert.equal(transport.closed, true);
});

Deno.test("Connection answers an over-limit message that answers none of its calls as malformed", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport, { handlers: echo });
  transport.inject(
    { fault: "message exceeds the limit of 10 bytes", limit: 10, responseId: 99 },
    { fault: "message exceeds the limit of 10 bytes", limit: 10 },
  );
  const sent = await transport.waitSent(2);
  assert.deepEqual(sent.map((m) => m.id), [-1, -1]);
  assert.equal(conn.isClosed, false);
  conn.close();
});

/** A stdio client whose line limit is `limit`, fed by hand: the bytes the server would send. */
function limitedStdioClient(limit: number): {
  conn: Connection;
  write(text: string): Promise<void>;
  dispose(): Promise<void>;
} {
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const drained = toServer.readable.pipeTo(new WritableStream());
  const conn = new Connection(
    stdioTransport(fromServer.readable, toServer.writable, { maxLineBytes: limit }),
  );
  const writer = fromServer.writable.getWriter();
  return {
    conn,
    write: (text) => writer.write(new TextEncoder().encode(text)),
    async dispose() {
      conn.close();
      await writer.close().catch(() => {});
      await drained.catch(() => {});
    },
  };
}

Deno.test("Connection over stdio fails a call as soon as its answer's line passes the limit, before the line ends", async () => {
  const client = limitedStdioClient(64);
  try {
    const big = client.conn.call("fs/readFile", null, { timeoutMs: 5000 });
    await client.write(`{"id":1,"result":{"dataBase64":"${"A".repeat(100)}`);
    const err = await big.then(() => assert.fail("expected a rejection"), (e) => e);
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.limit, 64);
    assert.equal(err.method, "fs/readFile");
    // The rest of the line is skipped; the next line is read as usual.
    const next = client.conn.call("environment/status", null, { timeoutMs: 5000 });
    await client.write(`${"A".repeat(100)}"}}\n{"id":2,"result":{"status":"ready"}}\n`);
    assert.deepEqual(await next, { status: "ready" });
  } finally {
    await client.dispose();
  }
});

Deno.test("Connection pair over stdio: a reply over the client's line limit fails its call with MessageTooLargeError instead of hanging", async () => {
  const ab = new TransformStream<Uint8Array, Uint8Array>();
  const ba = new TransformStream<Uint8Array, Uint8Array>();
  const server = new Connection(stdioTransport(ba.readable, ab.writable), {
    handlers: { request: (method) => method === "big" ? "x".repeat(1000) : "small" },
  });
  const client = new Connection(stdioTransport(ab.readable, ba.writable, { maxLineBytes: 256 }));
  try {
    const err = await client.call("big", null, { timeoutMs: 5000 }).catch((e) => e);
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.method, "big");
    assert.equal(await client.call("after", null, { timeoutMs: 5000 }), "small");
  } finally {
    client.close();
    await server.closed;
  }
});

Deno.test("Connection pair over a WebSocket: a reply over the client's message limit fails its call with MessageTooLargeError instead of hanging", async () => {
  const serverSide = Promise.withResolvers<Connection>();
  await using endpoint = await serveUpgrades((socket) =>
    serverSide.resolve(
      new Connection(websocketTransport(socket), {
        handlers: { request: (method) => method === "big" ? "x".repeat(1000) : "small" },
      }),
    )
  );
  const socket = new WebSocket(endpoint.url);
  const client = new Connection(websocketTransport(socket, { maxMessageBytes: 256 }));
  try {
    const err = await client.call("big", null, { timeoutMs: 5000 }).catch((e) => e);
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.limit, 256);
    assert.equal(err.method, "big");
    assert.equal(await client.call("after", null, { timeoutMs: 5000 }), "small");
    client.close();
    await (await serverSide.promise).closed;
  } finally {
    client.close();
  }
});

Deno.test("Connection turns handler errors into error responses without leaking internals", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport, {
    handlers: {
      request(method) {
        if (method === "rpc") throw new RpcError(-32004, "not here", { data: { kind: "k" } });
        if (method === "async") return Promise.reject(new RpcError(-32602, "bad params"));
        throw new TypeError("secret internal detail");
      },
    },
  });
  transport.inject({ id: 1, method: "rpc" }, { id: 2, method: "async" }, { id: 3, method: "boom" });
  const sent = await transport.waitSent(3);
  const byId = new Map(sent.map((m) => [m.id, m]));
  assert.deepEqual(byId.get(1), {
    error: { code: -32004, data: { kind: "k" }, message: "not here" },
    id: 1,
  });
  assert.deepEqual(byId.get(2), { error: { code: -32602, message: "bad params" }, id: 2 });
  assert.deepEqual(byId.get(3), { error: { code: -32603, message: "internal error" }, id: 3 });
  assert.ok(!transport.sent.join("").includes("secret"));
  conn.close();
});

Deno.test("Connection without a request handler answers -32601", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport);
  transport.inject({ id: "x", method: "anything" });
  const [reply] = await transport.waitSent(1);
  assert.equal((reply!.error as { code: number }).code, -32601);
  assert.equal(reply!.id, "x");
  conn.close();
});

Deno.test("Connection echoes 64-bit request ids exactly", async () => {
  const transport = new MemoryTransport();
  const conn = new Connection(transport, { handlers: echo });
  transport.inject(
    '{"id":9223372036854775807,"method":"a"}',
    '{"id":-9223372036854775808,"method":"b"}',
  );
  await transport.waitSent(2);
  assert.deepEqual(transport.sent.sort(), [
    '{"id":-9223372036854775808,"result":{"method":"b"}}',
    '{"id":9223372036854775807,"result":{"method":"a"}}',
  ]);
  conn.close();
});

Deno.test("Connection delivers notifications to the handler in order", async () => {
  const transport = new MemoryTransport();
  const seen: unknown[] = [];
  const conn = new Connection(transport, {
    handlers: { notification: (method, params) => seen.push([method, params]) },
  });
  transport.inject({ method: "a", params: 1 }, { method: "b" }, { method: "c", params: [2] });
  await settle();
  assert.deepEqual(seen, [["a", 1], ["b", undefined], ["c", [2]]]);
  assert.equal(transport.sent.length, 0, "notifications get no reply");
  conn.close();
});

Deno.test("Connection admits incoming requests like a client with trackIncomingIds", async (t) => {
  const gates = new Map<string, PromiseWithResolvers<void>>();
  const transport = new MemoryTransport();
  const conn = new Connection(transport, {
    trackIncomingIds: true,
    maxIncoming: 2,
    handlers: {
      async request(method) {
        const gate = gates.get(method);
        if (gate) await gate.promise;
        return method;
      },
    },
  });
  const refusal = (m: Json) => (m.error as { code: number; message: string } | undefined);

  await t.step("negative and string ids are refused", async () => {
    transport.inject({ id: -1, method: "neg" }, { id: "a", method: "str" });
    const sent = await transport.waitSent(2);
    assert.deepEqual(sent.map((m) => m.id), [-1, "a"]);
    for (const m of sent) {
      assert.equal(refusal(m)?.code, -32600);
      assert.equal(
        refusal(m)?.message,
        "request ids from the server must be non-negative integers",
      );
    }
  });
  await t.step("a duplicate id in flight is refused, and reusable once answered", async () => {
    gates.set("slow", Promise.withResolvers());
    transport.inject({ id: 7, method: "slow" });
    await settle();
    transport.inject({ id: 7, method: "dup" });
    const sent = await transport.waitSent(3);
    assert.deepEqual(sent[2], {
      error: { code: -32600, message: "request id 7 is already in flight" },
      id: 7,
    });
    gates.get("slow")!.resolve();
    const afterSlow = await transport.waitSent(4);
    assert.deepEqual(afterSlow[3], { id: 7, result: "slow" });
    transport.inject({ id: 7, method: "again" });
    const again = await transport.waitSent(5);
    assert.deepEqual(again[4], { id: 7, result: "again" });
  });
  await t.step("at most maxIncoming requests run at once", async () => {
    gates.set("hold1", Promise.withResolvers());
    gates.set("hold2", Promise.withResolvers());
    transport.inject({ id: 10, method: "hold1" }, { id: 11, method: "hold2" });
    await settle();
    transport.inject({ id: 12, method: "third" });
    const sent = await transport.waitSent(6);
    assert.equal(sent[5]!.id, 12);
    assert.equal(refusal(sent[5]!)?.message, "at most 2 requests may run at once");
    gates.get("hold1")!.resolve();
    gates.get("hold2")!.resolve();
    const done = await transport.waitSent(8);
    assert.deepEqual(done.slice(6).map((m) => m.result).sort(), ["hold1", "hold2"]);
  });
  await t.step("zero and large non-negative integer ids are admitted", async () => {
    transport.inject({ id: 0, method: "zero" }, '{"id":9223372036854775807,"method":"big"}');
    await transport.waitSent(10);
    assert.ok(transport.sent.includes('{"id":0,"result":"zero"}'));
    assert.ok(transport.sent.includes('{"id":9223372036854775807,"result":"big"}'));
  });
  conn.close();
});

Deno.test("Connection without trackIncomingIds accepts any id, even duplicates in flight", async () => {
  const gate = Promise.withResolvers<void>();
  const transport = new MemoryTransport();
  const conn = new Connection(transport, {
    handlers: {
      async request(method) {
        if (method === "slow") await gate.promise;
        return method;
      },
    },
  });
  transport.inject({ id: -5, method: "slow" }, { id: -5, method: "fast" }, {
    id: "s",
    method: "x",
  });
  await transport.waitSent(2);
  gate.resolve();
  const sent = await transport.waitSent(3);
  assert.deepEqual(sent.map((m) => [m.id, m.result]), [[-5, "fast"], ["s", "x"], [-5, "slow"]]);
  conn.close();
});

Deno.test("Connection runs inline requests strictly in order and semaphore requests concurrently", async () => {
  const order: string[] = [];
  const gate = Promise.withResolvers<void>();
  const lane = new Semaphore(2);
  const transport = new MemoryTransport();
  const conn = new Connection(transport, {
    handlers: {
      async request(method) {
        order.push(`start ${method}`);
        if (method === "block") await gate.promise;
        order.push(`end ${method}`);
        return method;
      },
      schedule: (method) => (method.startsWith("lane") ? lane : "inline"),
    },
  });
  transport.inject(
    { id: 1, method: "lane-block" },
    { id: 2, method: "lane-free" },
    { id: 3, method: "block" },
    { id: 4, method: "after" },
  );
  await settle();
  assert.deepEqual(order, [
    "start lane-block",
    "end lane-block",
    "start lane-free",
    "end lane-free",
    "start block",
  ]);
  gate.resolve();
  await transport.waitSent(4);
  assert.deepEqual(order.slice(5), ["end block", "start after", "end after"]);
  conn.close();
});

Deno.test("Connection marks an answer alone only when no other request is queued or running", async () => {
  const gates = new Map<string, PromiseWithResolvers<void>>();
  const lane = new Semaphore(4);
  const transport = new MemoryTransport();
  const conn = new Connection(transport, {
    handlers: {
      async request(method) {
        const gate = Promise.withResolvers<void>();
        gates.set(method, gate);
        await gate.promise;
        return method;
      },
      schedule: (method) => (method.startsWith("lane") ? lane : "inline"),
    },
  });
  // Two requests running at once: the first answer has company, the second is alone.
  transport.inject({ id: 1, method: "lane-a" }, { id: 2, method: "lane-b" });
  await settle();
  gates.get("lane-a")!.resolve();
  await transport.waitSent(1);
  await settle();
  gates.get("lane-b")!.resolve();
  await transport.waitSent(2);
  // Inline: the first answer while the second request waits in the queue, then the second.
  transport.inject({ id: 3, method: "first" }, { id: 4, method: "second" });
  await settle();
  gates.get("first")!.resolve();
  await transport.waitSent(3);
  await settle();
  gates.get("second")!.resolve();
  await transport.waitSent(4);
  // Malformed input is answered, never as a call's answer.
  transport.inject("{");
  await transport.waitSent(5);
  assert.deepEqual(transport.messages().map((m) => m.id), [1, 2, 3, 4, -1]);
  assert.deepEqual(transport.alone, [false, true, false, true, false]);
  conn.close();
});

Deno.test("Connection reads through receive when the transport offers it, answers in order and ends at null", async () => {
  const transport = new MemoryTransport(
    new ReadableStream({
      pull: () => {
        throw new Error("the stream is not read when receive is offered");
      },
    }),
  );
  const inbound: (string | null | Promise<string | null>)[] = [
    JSON.stringify({ id: 1, method: "now" }),
    Promise.resolve(JSON.stringify({ id: 2, method: "later" })),
    JSON.stringify({ id: 3, method: "now again" }),
    new Promise((resolve) => setTimeout(() => resolve(null), 10)),
  ];
  const offered = Object.assign(transport, { receive: () => inbound.shift() ?? null });
  const conn = new Connection(offered, { handlers: echo });
  await conn.closed;
  assert.deepEqual(transport.messages().map((m) => m.id), [1, 2, 3]);
});

Deno.test("Connection stops reading when 128 inbound messages wait", async () => {
  const gate = Promise.withResolvers<void>();
  let pulled = 0;
  const readable = new ReadableStream<Inbound>({
    pull(controller) {
      // Stop producing after 1000 messages without ending the stream (EOF would drop the queue).
      if (pulled === 1000) return;
      pulled++;
      controller.enqueue(JSON.stringify({ id: pulled, method: pulled === 1 ? "block" : "m" }));
    },
  }, { highWaterMark: 0 });
  const transport = new MemoryTransport(readable);
  const conn = new Connection(transport, {
    handlers: {
      async request(method) {
        if (method === "block") await gate.promise;
        return null;
      },
      schedule: () => "inline",
    },
  });
  await settle(20);
  assert.ok(pulled <= 128 + 3, `read ${pulled} messages while blocked`);
  assert.ok(pulled >= 128, `read only ${pulled} messages`);
  gate.resolve();
  await transport.waitSent(1000);
  assert.equal(pulled, 1000);
  conn.close();
  await conn.closed;
});

/**
 * A connection over requests of the given texts (offered one at a time, never ending) whose
 * handlers run concurrently without bound and each wait for the test to answer them, so every
 * admitted request has started: `events` records each start and answer in order.
 */
function heldRequests(texts: string[], maxHeldUnits?: number) {
  const events: string[] = [];
  const gates = new Map<number, PromiseWithResolvers<void>>();
  let pulled = 0;
  const readable = new ReadableStream<Inbound>({
    pull(controller) {
      // Stop producing without ending the stream (EOF would drop the queue).
      if (pulled < texts.length) controller.enqueue(texts[pulled++]!);
    },
  }, { highWaterMark: 0 });
  const transport = new MemoryTransport(readable);
  const lane = new Semaphore(texts.length);
  const conn = new Connection(transport, {
    maxHeldUnits,
    handlers: {
      async request(_method, _params, id) {
        const gate = Promise.withResolvers<void>();
        gates.set(Number(id), gate);
        events.push(`start ${id}`);
        await gate.promise;
        events.push(`end ${id}`);
        return null;
      },
      schedule: () => lane,
    },
  });
  return {
    conn,
    events,
    started: () => events.filter((e) => e.startsWith("start")).length,
    /** Answers request `id` and waits until request `next` has started. */
    async answerThenAwaitStart(id: number, next: number): Promise<void> {
      gates.get(id)!.resolve();
      while (!events.includes(`start ${next}`)) await settle(1);
    },
    async close(): Promise<void> {
      for (const gate of gates.values()) gate.resolve();
      conn.close();
      await conn.closed;
    },
  };
}

/** A request of exactly `length` characters of JSON text. */
function requestOfLength(id: number, length: number): string {
  const bare = JSON.stringify({ id, method: "m", params: "" });
  assert.ok(length >= bare.length);
  return JSON.stringify({ id, method: "m", params: "p".repeat(length - bare.length) });
}

/**
 * Offers the requests to {@linkcode heldRequests}: the first `admitted` start, the next one only
 * once the first is answered.
 */
async function assertAdmitsThenHoldsBack(
  texts: string[],
  maxHeldUnits: number | undefined,
  admitted: number,
): Promise<void> {
  const held = heldRequests(texts, maxHeldUnits);
  try {
    await settle(20);
    assert.equal(held.started(), admitted);
    await held.answerThenAwaitStart(1, admitted + 1);
    assert.ok(held.events.indexOf("end 1") < held.events.indexOf(`start ${admitted + 1}`));
  } finally {
    await held.close();
  }
}

Deno.test("Connection holds exactly 128 unanswered requests; the 129th starts only after one is answered", async () => {
  const texts = Array.from({ length: 200 }, (_, i) => JSON.stringify({ id: i + 1, method: "m" }));
  await assertAdmitsThenHoldsBack(texts, undefined, INBOUND_QUEUE_LIMIT);
});

Deno.test("Connection admits requests whose text totals exactly maxHeldUnits", async () => {
  // Four requests of 250 characters fill a bound of 1000 exactly; the fifth waits for an answer.
  const texts = Array.from({ length: 5 }, (_, i) => requestOfLength(i + 1, 250));
  await assertAdmitsThenHoldsBack(texts, 1000, 4);
});

Deno.test("Connection holds back a request that would take the held text one unit over maxHeldUnits until one is answered", async () => {
  const texts = [250, 250, 250, 251].map((length, i) => requestOfLength(i + 1, length));
  await assertAdmitsThenHoldsBack(texts, 1000, 3);
});

Deno.test("Connection admits a request larger than maxHeldUnits when nothing else is held", async () => {
  await assertAdmitsThenHoldsBack([requestOfLength(1, 2000), requestOfLength(2, 100)], 1000, 1);
});

Deno.test("Connection pair talks over stdio framing in both directions", async () => {
  const [a, b] = pipePair();
  const notes: unknown[] = [];
  const server: Connection = new Connection(a, {
    handlers: {
      request: async (method, params): Promise<unknown> => {
        if (method === "ask-back") return await server.call("client/echo", params);
        return { method, params };
      },
      notification: (method, params) => notes.push({ method, params }),
    },
  });
  const client = new Connection(b, {
    handlers: { request: (method, params) => ({ from: "client", method, params }) },
  });
  assert.deepEqual(await client.call("hello", { s: "é\n\u2028" }), {
    method: "hello",
    params: { s: "é\n\u2028" },
  });
  assert.deepEqual(await server.call("srv", [1]), {
    from: "client",
    method: "srv",
    params: [1],
  });
  assert.deepEqual(await client.call("ask-back", 5), {
    from: "client",
    method: "client/echo",
    params: 5,
  });
  const many = await Promise.all(
    Array.from({ length: 200 }, (_, i) => client.call("n", i)),
  );
  assert.deepEqual(many.map((r) => (r as { params: number }).params), [...Array(200).keys()]);
  await client.notify("note", { x: 1 });
  await settle();
  assert.deepEqual(notes, [{ method: "note", params: { x: 1 } }]);
  const pending = server.call("never-answered-after-close");
  client.close();
  await assert.rejects(pending, ClosedError);
  await server.closed;
  await client.closed;
});

Deno.test("Connection pair talks over a real WebSocket on 127.0.0.1", async () => {
  const serverSide = Promise.withResolvers<Connection>();
  await using endpoint = await serveUpgrades((socket) =>
    serverSide.resolve(
      new Connection(websocketTransport(socket, { label: "ws test" }), {
        handlers: {
          request: (method, params) => {
            if (method === "big") return "x".repeat(1024 * 1024);
            return { method, params };
          },
        },
      }),
    )
  );
  const socket = new WebSocket(endpoint.url);
  const unmatched: unknown[] = [];
  const client = new Connection(websocketTransport(socket, { label: "client" }), {
    handlers: { unmatched: (m) => unmatched.push(m) },
  });
  try {
    assert.deepEqual(await client.call("hello", { n: 9223372036854775807n.toString() }), {
      method: "hello",
      params: { n: "9223372036854775807" },
    });
    assert.equal(((await client.call("big")) as string).length, 1024 * 1024);
    const server = await serverSide.promise;
    socket.send("not json");
    // The malformed reply carries the websocket prefix and the call afterwards still works.
    assert.deepEqual(await client.call("after"), { method: "after" });
    assert.equal(unmatched.length, 1);
    const fault = unmatched[0] as { id: number; error: { code: number; message: string } };
    assert.equal(fault.id, -1);
    assert.equal(fault.error.code, -32600);
    assert.match(
      fault.error.message,
      /^failed to parse websocket JSON-RPC message from ws test: expected ident/,
    );
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => client.call("n", i)));
    assert.equal(results.length, 50);
    const fromServer = server.call("server/asks", null);
    const err = await fromServer.catch((e) => e);
    assert.ok(err instanceof RemoteError, "the client has no handler: -32601");
    assert.equal(err.code, -32601);
    client.close();
    await client.closed;
    await server.closed;
  } finally {
    client.close();
  }
});

Deno.test("Semaphore hands out permits in FIFO order", async () => {
  const sem = new Semaphore(1);
  const order: number[] = [];
  const release = await sem.acquire();
  const waiters = [1, 2, 3].map((n) =>
    sem.acquire().then((r) => {
      order.push(n);
      r();
    })
  );
  assert.equal(sem.available, 0);
  release();
  release();
  await Promise.all(waiters);
  assert.deepEqual(order, [1, 2, 3]);
  assert.equal(sem.available, 1, "a double release does not mint a permit");
});
