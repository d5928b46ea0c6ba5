import assert from "node:assert/strict";
import { collectText, startCutProxy, STDIO_SERVER } from "./fixtures/client_server.ts";
import {
  FAKE_ENVIRONMENT_INFO,
  type ScriptedAnswer,
  startScriptedServer,
} from "./fixtures/scripted_server.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { connect, createClient, type ExecClient } from "../lib/client/client.ts";
import { ConnectError, SessionLostError } from "../lib/client/errors.ts";
import { capabilityTokenAuth, tokenFileDigest } from "../lib/server/listen/auth.ts";
import type { ProcessEvent } from "../lib/client/process_handle.ts";
import { METHODS } from "../lib/protocol/methods.ts";
import { serveStdio, serveWebSocket } from "../lib/server/listen/listen.ts";
import { selfSignedCertificate } from "./helpers/tls.ts";
import { AtCapacityError, ClosedError, RemoteError, TimedOutError } from "../lib/rpc/connection.ts";

const SH = "/bin/sh";

async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  errorClass: new (...args: any[]) => E = Error as any,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof errorClass, `expected ${errorClass.name}, got ${err}`);
    if (includes !== undefined) assert.ok(err.message.includes(includes), err.message);
    return err;
  }
  throw new assert.AssertionError({ message: "expected a rejection" });
}
const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };

function lines(count: number, prefix = ""): string {
  let text = "";
  for (let i = 1; i <= count; i++) text += `${prefix}${i}\n`;
  return text;
}

Deno.test("client connect over WebSocket initializes and exposes environmentInfo", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  assert.ok(client.connected);
  assert.ok(typeof client.sessionId === "string");
  assert.deepEqual(typeof client.environmentInfo.shell.path, "string");
  assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  const info = await client.request("environment/info");
  assert.deepEqual(info.platformOs, client.environmentInfo.platformOs);
});

Deno.test("client connect over stdio spawns the server and talks over its pipes", async () => {
  await using client = await connect(STDIO_SERVER);
  assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  const proc = await client.startProcess({ argv: ["/bin/echo", "over stdio"] });
  assert.deepEqual(await collectText(proc), "over stdio\n");
  assert.deepEqual(await proc.exited, 0);
});

Deno.test("client connect over a pair of streams talks to a server in the same process, once", async () => {
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const server = serveStdio({}, toServer.readable, fromServer.writable);
  const streams = { readable: fromServer.readable, writable: toServer.writable, label: "here" };
  const client = await connect(streams);
  const proc = await client.startProcess({
    argv: ["/bin/sh", "-c", "echo over streams; sleep 30"],
  });
  assert.deepEqual(await proc.text()[Symbol.asyncIterator]().next(), {
    done: false,
    value: "over streams\n",
  });
  await client.close();
  // The server saw its input end: the session ended and killed its process.
  await server.finished;
  assert.equal(server.sessions.list().length, 0);
  await assertRejects(() => connect(streams), ConnectError, "already carried a connection");
});

Deno.test("client methods cover every client request of the method table", () => {
  const client = createClient("ws://127.0.0.1:1");
  const expected = Object.entries(METHODS)
    .filter(([name, spec]) =>
      spec.kind === "request" && spec.direction === "clientToServer" && name !== "initialize"
    )
    .map(([name]) => name)
    .sort();
  assert.deepEqual(Object.keys(client.methods).sort(), expected);
});

Deno.test("client startProcess streams output in seq order and resolves exited", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const proc = await client.startProcess({
    argv: [
      SH,
      "-c",
      "i=1; while [ $i -le 2000 ]; do echo $i; i=$((i+1)); done; echo oops >&2; exit 3",
    ],
    env: ENV,
  });
  const seqs: number[] = [];
  let stdout = "";
  let stderr = "";
  const decoder = new TextDecoder();
  for await (const event of proc) {
    assert.ok(event.kind === "output", "no gap expected");
    seqs.push(event.seq);
    if (event.stream === "stdout") stdout += decoder.decode(event.data);
    else stderr += decoder.decode(event.data);
  }
  assert.deepEqual(stdout, lines(2000));
  assert.deepEqual(stderr, "oops\n");
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
  assert.deepEqual(await proc.exited, 3);
  assert.deepEqual(proc.exitCode, 3);
});

Deno.test("client on() delivers typed notifications until unsubscribed", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const seen: string[] = [];
  const off = client.on(
    "process/exited",
    (params) => seen.push(`${params.processId}:${params.exitCode}`),
  );
  const closed = Promise.withResolvers<number>();
  const offClosed = client.on("process/closed", (params) => closed.resolve(params.seq));
  const proc = await client.startProcess({ processId: "p-on", argv: [SH, "-c", "exit 4"] });
  await collectText(proc);
  assert.ok(await closed.promise >= 2);
  off();
  offClosed();
  const second = await client.startProcess({ processId: "p-off", argv: [SH, "-c", "exit 5"] });
  await collectText(second);
  assert.deepEqual(seen, ["p-on:4"]);
});

Deno.test("client process write sends stdin with the handle's writeIds", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const proc = await client.startProcess({ argv: ["head", "-n", "3"], env: ENV, pipeStdin: true });
  await proc.write("one\n");
  await proc.write(new TextEncoder().encode("two\n"));
  await proc.write("three\n");
  assert.deepEqual(await collectText(proc), "one\ntwo\nthree\n");
  assert.deepEqual(await proc.exited, 0);
  await assertRejects(() => proc.write("late\n"));
});

Deno.test("client write without pipeStdin is refused", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const proc = await client.startProcess({ argv: ["/bin/sleep", "5"] });
  await assertRejects(() => proc.write("x"), Error, "stdin is closed");
  assert.deepEqual(await proc.terminate(), true);
  assert.deepEqual(await proc.exited, 137);
  await collectText(proc);
});

Deno.test("client interrupt sends SIGINT to the process", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const proc = await client.startProcess({
    argv: [SH, "-c", "echo ready; exec sleep 30"],
    env: ENV,
  });
  const iterator = proc[Symbol.asyncIterator]();
  const first = await iterator.next();
  assert.ok(!first.done && first.value.kind === "output");
  await proc.interrupt();
  assert.deepEqual(await proc.exited, 130);
  while (!(await iterator.next()).done) { /* drain */ }
});

Deno.test("client slow consumer catches up from the retained output", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url, { maxBufferedBytes: 16 });
  const proc = await client.startProcess({
    argv: [SH, "-c", "i=1; while [ $i -le 3000 ]; do echo $i; i=$((i+1)); done"],
    env: ENV,
  });
  await proc.exited; // Do not read until the process is done: everything comes from process/read.
  assert.deepEqual(await collectText(proc), lines(3000));
});

Deno.test("client reports output evicted on the server as a gap", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url, { maxBufferedBytes: 1 });
  const proc = await client.startProcess({
    argv: [
      SH,
      "-c",
      "i=1; while [ $i -le 300 ]; do head -c 10000 /dev/zero | tr '\\0' x; i=$((i+1)); done",
    ],
    env: ENV,
  });
  await proc.exited;
  const events: ProcessEvent[] = [];
  for await (const event of proc) events.push(event);
  const gaps = events.filter((event) => event.kind === "gap");
  assert.ok(gaps.length >= 1, "expected a gap marker");
  let bytes = 0;
  for (const event of events) if (event.kind === "output") bytes += event.data.length;
  assert.ok(bytes < 3_000_000 && bytes > 0);
  // Every seq is accounted for exactly once, by a chunk or a gap.
  let next = 1;
  for (const event of events) {
    if (event.kind === "gap") {
      assert.ok(event.fromSeq >= next);
      next = event.toSeq + 1;
    } else {
      assert.ok(event.seq >= next);
      next = event.seq + 1;
    }
  }
});

Deno.test("client attachProcess after a resume reads output it never saw", async () => {
  await using server = await InProcessServer.websocket();
  const first = await connect(server.url);
  const proc = await first.startProcess({
    processId: "late",
    argv: [SH, "-c", "sleep 0.2; echo late output"],
    env: ENV,
  });
  const sessionId = first.sessionId!;
  assert.deepEqual(proc.processId, "late");
  await first.close();
  await using second = await connect(server.url, { resumeSessionId: sessionId });
  assert.deepEqual(second.sessionId, sessionId);
  const attached = second.attachProcess("late");
  assert.deepEqual(await collectText(attached), "late output\n");
  assert.deepEqual(await attached.exited, 0);
});

Deno.test("client errors are distinct classes", async (t) => {
  await using server = await InProcessServer.websocket();
  const client: ExecClient = await connect(server.url);
  await t.step("a remote error carries its code", async () => {
    const err = await assertRejects(
      () => client.methods["process/read"]({ processId: "nope" }),
      RemoteError,
      "unknown process id nope",
    );
    assert.deepEqual(err.code, -32600);
  });
  await t.step("a call past its timeout fails with TimedOutError", async () => {
    const proc = await client.startProcess({ argv: ["/bin/sleep", "5"] });
    await assertRejects(
      () =>
        client.request("process/read", { processId: proc.processId, afterSeq: 0, waitMs: 300 }, {
          timeoutMs: 20,
        }),
      TimedOutError,
    );
    await proc.terminate();
    await collectText(proc);
  });
  await t.step("calls beyond the in-flight limit fail with AtCapacityError", async () => {
    const calls = Array.from({ length: 1100 }, () => client.methods["environment/status"]());
    const results = await Promise.allSettled(calls);
    const refused = results.filter((r) => r.status === "rejected");
    assert.ok(refused.length > 0);
    for (const r of refused) {
      assert.ok((r as PromiseRejectedResult).reason instanceof AtCapacityError);
    }
  });
  await t.step("a call after close() fails fast with ClosedError", async () => {
    await client.close();
    await assertRejects(() => client.methods["environment/status"](), ClosedError);
    await assertRejects(() => client.startProcess({ argv: ["/bin/true"] }), ClosedError);
  });
});

Deno.test("client connect to an unreachable URL fails with ConnectError", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const err = await assertRejects(() => connect(`ws://127.0.0.1:${port}`), ConnectError);
  assert.deepEqual(err.status, undefined);
});

Deno.test("client connect with a refused token fails with ConnectError status 401", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/token`, "right-token\n");
    await using server = await InProcessServer.websocket({
      authorize: capabilityTokenAuth(await tokenFileDigest(`${dir}/token`)),
    });
    const err = await assertRejects(() => connect(server.url, { token: "wrong" }), ConnectError);
    assert.deepEqual(err.status, 401);
    await using client = await connect(server.url, { token: "right-token" });
    assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client survives cut sockets: every output line and every written line arrives exactly once", async () => {
  await using server = await InProcessServer.websocket();
  await using proxy = startCutProxy(server.url);
  await using client = await connect(proxy.url, { reconnectTimeoutMs: 30_000 });
  const total = 20_000;
  const writes = 3_000;
  const printer = await client.startProcess({
    argv: [
      SH,
      "-c",
      `i=1; while [ $i -le ${total} ]; do echo $i; if [ $((i % 1000)) -eq 0 ]; then sleep 0.05; fi; i=$((i+1)); done`,
    ],
    env: ENV,
  });
  const echo = await client.startProcess({
    argv: ["head", "-n", String(writes)],
    env: ENV,
    pipeStdin: true,
  });
  const cuts = new Set<number>();
  let cutting = Promise.resolve();
  const cutOnce = (mark: number) => {
    if (cuts.has(mark)) return;
    cuts.add(mark);
    cutting = cutting.then(() => proxy.cut());
  };
  const readPrinter = (async () => {
    const decoder = new TextDecoder();
    let text = "";
    let count = 0;
    for await (const event of printer) {
      assert.ok(event.kind === "output", `unexpected gap ${JSON.stringify(event)}`);
      const piece = decoder.decode(event.data, { stream: true });
      text += piece;
      count += piece.split("\n").length - 1;
      if (count >= 4_000) cutOnce(1);
      if (count >= 12_000) cutOnce(2);
    }
    return text;
  })();
  const writer = (async () => {
    for (let i = 1; i <= writes; i++) {
      await echo.write(`w${i}\n`);
      if (i === 1_000) cutOnce(3);
      if (i === 2_000) cutOnce(4);
    }
  })();
  const echoed = collectText(echo);
  await writer;
  assert.deepEqual(await readPrinter, lines(total));
  assert.deepEqual(await echoed, lines(writes, "w"));
  assert.deepEqual(await printer.exited, 0);
  assert.deepEqual(await echo.exited, 0);
  await cutting;
  assert.deepEqual(cuts.size, 4);
  assert.ok(proxy.connections >= 2, `expected reconnects, saw ${proxy.connections} connections`);
});

Deno.test("client connects lazily and concurrent callers share one connection attempt", async () => {
  // A listener that accepts TCP connections and drops them: every attempt fails.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const accepting = (async () => {
    for await (const conn of listener) {
      accepted++;
      conn.close();
    }
  })();
  const client = createClient(`ws://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`);
  assert.equal(accepted, 0);
  assert.equal(client.connected, false);
  const results = await Promise.allSettled(
    Array.from({ length: 5 }, () => client.methods["environment/status"]()),
  );
  const reasons = results.map((r) => (r as PromiseRejectedResult).reason);
  assert.ok(reasons[0] instanceof ConnectError);
  for (const reason of reasons) assert.equal(reason, reasons[0]);
  assert.equal(accepted, 1);
  await client.close();
  listener.close();
  await accepting.catch(() => {});
});

Deno.test("client retried calls during an outage wait for the reconnect and resume the session", async () => {
  await using server = await InProcessServer.websocket();
  await using proxy = startCutProxy(server.url);
  await using client = await connect(proxy.url);
  const sessionId = client.sessionId;
  await proxy.cut();
  const results = await Promise.all(
    Array.from({ length: 5 }, () => client.request("environment/status", null, { retry: true })),
  );
  assert.deepEqual(results, Array(5).fill({ status: "ready" }));
  assert.equal(client.sessionId, sessionId);
  assert.ok(client.connected);
});

/** A server that loses session "s1" after its first connection drops, refusing the resume with `refusal`. */
function sessionLosingServer(refusal: ScriptedAnswer) {
  return startScriptedServer((connection, request) => {
    if (request.method === "initialize") {
      if (connection === 0) {
        return { result: { sessionId: "s1", environmentInfo: FAKE_ENVIRONMENT_INFO } };
      }
      if (request.params.resumeSessionId !== undefined) return refusal;
      return { result: { sessionId: "s2", environmentInfo: FAKE_ENVIRONMENT_INFO } };
    }
    return connection === 0 ? "drop" : "ignore";
  });
}

Deno.test("client recognises a lost session by data.kind unknownSession, not by the message", async (t) => {
  await t.step("data.kind unknownSession with any message: SessionLostError", async () => {
    await using server = sessionLosingServer({
      error: { code: -32600, data: { kind: "unknownSession" }, message: "gone" },
    });
    await using client = await connect(server.url);
    const proc = client.attachProcess("p");
    const err = await assertRejects(() => proc.exited, SessionLostError);
    assert.equal(err.sessionId, "s1");
    await client.ready();
    assert.equal(client.sessionId, "s2", "the client continues in a new session");
  });
  await t.step(
    "the reference's message without data.kind: not taken as a lost session",
    async () => {
      await using server = sessionLosingServer({
        error: { code: -32600, message: "unknown session id s1" },
      });
      await using client = await connect(server.url);
      const proc = client.attachProcess("p");
      const err = await assertRejects(() => proc.exited, RemoteError);
      assert.equal(err.message, "unknown session id s1");
    },
  );
});

/** A server that drops the connection on the first process/start and answers the retry with `retry`. */
function startLosingServer(retry: ScriptedAnswer) {
  let starts = 0;
  return startScriptedServer((_connection, request) => {
    switch (request.method) {
      case "initialize":
        return { result: { sessionId: "s1", environmentInfo: FAKE_ENVIRONMENT_INFO } };
      case "process/start":
        return starts++ === 0 ? "drop" : retry;
      case "process/read":
        return {
          result: {
            chunks: [],
            nextSeq: 3,
            exited: true,
            exitCode: 7,
            closed: true,
            failure: null,
            sandboxDenied: false,
          },
        };
      default:
        return "ignore";
    }
  });
}

Deno.test("client startProcess retried after a lost answer takes data.kind processExists as started", async (t) => {
  await t.step(
    "data.kind processExists with any message: the handle follows the process",
    async () => {
      await using server = startLosingServer({
        error: { code: -32600, data: { kind: "processExists" }, message: "taken" },
      });
      await using client = await connect(server.url);
      const proc = await client.startProcess({ processId: "p", argv: ["/bin/true"] });
      assert.equal(await proc.exited, 7);
    },
  );
  await t.step("the reference's message without data.kind: the start fails", async () => {
    await using server = startLosingServer({
      error: { code: -32600, message: "process p already exists" },
    });
    await using client = await connect(server.url);
    await assertRejects(
      () => client.startProcess({ processId: "p", argv: ["/bin/true"] }),
      RemoteError,
      "process p already exists",
    );
  });
});

Deno.test("client connect over wss:// trusts the caCerts it is given, and no others", async () => {
  const dir = await Deno.makeTempDir();
  const { cert, key } = await selfSignedCertificate(dir);
  const tls = { cert, key };
  const server = await serveWebSocket({ tls });
  try {
    assert.match(server.url, /^wss:/);
    await assertRejects(() => connect(server.url), ConnectError, "UnknownIssuer");
    await using client = await connect(server.url, { caCerts: [tls.cert] });
    assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client token source is asked again before every dial", async () => {
  let asked = 0;
  await using server = startScriptedServer((_connection, request) => {
    if (request.method === "initialize") {
      return { result: { sessionId: "s1", environmentInfo: FAKE_ENVIRONMENT_INFO } };
    }
    return request.method === "environment/status" && asked === 1
      ? "drop"
      : { result: { status: "ready" } };
  });
  await using client = await connect(server.url, { token: () => `token-${++asked}` });
  await assertRejects(() => client.methods["environment/status"](), ClosedError);
  await client.methods["environment/status"]();
  assert.equal(asked, 2);
});

Deno.test("client methods take a Uint8Array or base64 text for every byte member (type-checked)", async () => {
  const dir = await Deno.makeTempDir();
  const server = await serveWebSocket();
  try {
    await using client = await connect(server.url);
    await client.methods["fs/writeFile"]({
      path: `file://${dir}/a`,
      dataBase64: new TextEncoder().encode("bytes"),
    });
    assert.equal(await Deno.readTextFile(`${dir}/a`), "bytes");
    await client.methods["fs/writeFile"]({ path: `file://${dir}/b`, dataBase64: "dGV4dA==" });
    assert.equal(await Deno.readTextFile(`${dir}/b`), "text");
    const proc = await client.startProcess({ argv: ["/bin/cat"], pipeStdin: true });
    await client.methods["process/write"]({
      processId: proc.processId,
      chunk: "aGkK", // base64 text where the table decodes bytes
      writeId: "w1",
    });
    await proc.closeStdin();
    assert.equal(await collectText(proc), "hi\n");
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
