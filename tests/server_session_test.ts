import assert from "node:assert/strict";
import {
  delay,
  eventually,
  handshake,
  type Json,
  pidAlive,
  pidsMatching,
  type ProtocolClient,
  ServerProcess,
  startStdio,
  type WsClient,
} from "./helpers/server_harness.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { call, callError, nextRequestId, sh, startProcess } from "./helpers/rpc.ts";

/** Starts `/bin/sh -c script` as a pipe process. */
function start(client: ProtocolClient, processId: string, script: string, extra: Json = {}) {
  return startProcess(client, processId, sh(script), extra);
}

/** Resumes `sessionId` on a new connection, retrying while the old one is still attached. */
async function resume(
  server: { connect(): Promise<WsClient> },
  sessionId: string,
): Promise<WsClient> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const client = await server.connect();
    const response = await client.request(nextRequestId(), "initialize", {
      clientName: "resumer",
      resumeSessionId: sessionId,
    });
    if (response.result) {
      await client.send({ method: "initialized", params: {} });
      return client;
    }
    await client.close();
    assert.equal(
      (response.error as Json).code,
      -32010,
      `resume failed: ${JSON.stringify(response)}`,
    );
    await delay(20);
  }
  throw new Error("the old connection never detached");
}

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ dir: "/tmp", prefix: "es-session-" });
}

function seqsOf(events: Json[]): number[] {
  return events.map((m) => (m.params as { seq: number }).seq);
}

Deno.test("session resumed within the TTL keeps its processes and continues seq numbers", async () => {
  await using server = await InProcessServer.websocket();
  const dir = await tempDir();
  try {
    const a = await server.connect();
    const sessionId = await handshake(a);
    await start(
      a,
      "p",
      `echo one; while [ ! -e ${dir}/go ]; do sleep 0.02; done; echo two; touch ${dir}/ack; read x; echo three:$x`,
      { pipeStdin: true },
    );
    await a.log.waitUntil(() => a.log.outputText("p") === "one\n", "one");
    await a.close();
    // Output produced while detached is retained but its notification is dropped.
    await Deno.writeTextFile(`${dir}/go`, "");
    assert.ok(await eventually(() => existsSync(`${dir}/ack`)), "the child printed two");
    await delay(50);
    await using b = await resume(server, sessionId);
    const read = await call(b, "process/read", { processId: "p" });
    const chunks = read.chunks as { seq: number; chunk: string }[];
    assert.deepEqual(chunks.map((c) => [c.seq, atob(c.chunk)]), [[1, "one\n"], [2, "two\n"]]);
    assert.equal(read.nextSeq, 3);
    assert.deepEqual(
      b.log.processEvents("p"),
      [],
      "notifications from the detached time are dropped",
    );
    await call(b, "process/write", { processId: "p", chunk: btoa("x\n"), writeId: "w1" });
    const events = await b.log.processClosed("p");
    assert.deepEqual(seqsOf(events), [3, 4, 5], "seq continues after the resume");
    assert.equal(b.log.outputText("p"), "three:x\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function existsSync(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("session attached to a connection cannot be resumed (-32010)", async () => {
  await using server = await InProcessServer.websocket();
  await using a = await server.connect();
  const sessionId = await handshake(a);
  await using b = await server.connect();
  const response = await b.request(1, "initialize", {
    clientName: "thief",
    resumeSessionId: sessionId,
  });
  assert.deepEqual(response, {
    error: {
      code: -32010,
      message: `session ${sessionId} is already attached to another connection`,
    },
    id: 1,
  });
  assert.deepEqual(await b.request(2, "environment/status"), {
    error: {
      code: -32600,
      message: "client must call initialize before using environment status methods",
    },
    id: 2,
  }, "a failed initialize leaves the connection uninitialized");
  const fresh = await b.request(3, "initialize", { clientName: "own session" });
  assert.ok(fresh.result, "initialize may be retried after a failure");
  assert.notEqual((fresh.result as Json).sessionId, sessionId);
  assert.deepEqual(await call(a, "environment/status"), { status: "ready" }, "a is unaffected");
});

Deno.test("session resume of an unknown id fails with -32600 and data.kind unknownSession", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  assert.deepEqual(
    await client.request(1, "initialize", { clientName: "c", resumeSessionId: "does-not-exist" }),
    {
      error: {
        code: -32600,
        data: { kind: "unknownSession" },
        message: "unknown session id does-not-exist",
      },
      id: 1,
    },
  );
});

Deno.test("session resume over stdio always fails: one process, one session", async () => {
  await using server = InProcessServer.stdio();
  const sessionId = await handshake(server.stdio);
  const again = await server.stdio.request(1, "initialize", {
    clientName: "c",
    resumeSessionId: sessionId,
  });
  assert.deepEqual(again.error, {
    code: -32600,
    message: "initialize may only be sent once per connection",
  });
});

Deno.test("session expiry after the TTL kills its processes and forgets the id", async () => {
  await using server = await InProcessServer.websocket({ ttlMs: 1000 });
  const tag = String(Math.floor(Math.random() * 1e9));
  const needle = `sleep 1000.${tag}`;
  const a = await server.connect();
  const sessionId = await handshake(a);
  await start(a, "p", `sleep 1000.${tag} & sleep 1000.${tag}`);
  assert.ok(await eventually(() => pidsMatching(needle).length >= 2), "sleeps are running");
  const pids = pidsMatching(needle);
  await a.close();
  assert.ok(
    await eventually(() => pids.every((pid) => !pidAlive(pid)), 15_000),
    `still alive after the TTL: ${pids.filter(pidAlive)}`,
  );
  await using b = await server.connect();
  assert.deepEqual(
    await b.request(1, "initialize", { clientName: "late", resumeSessionId: sessionId }),
    {
      error: {
        code: -32600,
        data: { kind: "unknownSession" },
        message: `unknown session id ${sessionId}`,
      },
      id: 1,
    },
  );
});

Deno.test("session detached by a client close keeps processes running until the TTL", async () => {
  await using server = await InProcessServer.websocket();
  const tag = String(Math.floor(Math.random() * 1e9));
  const a = await server.connect();
  const sessionId = await handshake(a);
  await start(a, "p", `exec sleep 1000.${tag}`);
  assert.ok(await eventually(() => pidsMatching(`sleep 1000.${tag}`).length === 1));
  const [pid] = pidsMatching(`sleep 1000.${tag}`);
  await a.close();
  await using b = await resume(server, sessionId);
  assert.ok(pidAlive(pid!), "the process survived the detach");
  assert.deepEqual(await call(b, "process/terminate", { processId: "p" }), { running: true });
  await b.log.processClosed("p");
  assert.ok(await eventually(() => !pidAlive(pid!)));
});

Deno.test("session: file handles belong to the connection, processes to the session", async () => {
  await using server = await InProcessServer.websocket();
  const dir = await tempDir();
  try {
    await Deno.writeTextFile(`${dir}/a.txt`, "hello");
    const a = await server.connect();
    const sessionId = await handshake(a);
    await call(a, "fs/open", { handleId: "h1", path: `file://${dir}/a.txt` });
    await start(a, "p", "echo hi");
    await a.log.processClosed("p");
    await a.close();
    await using b = await resume(server, sessionId);
    assert.deepEqual(await callError(b, "fs/readBlock", { handleId: "h1", offset: 0, len: 5 }), {
      code: -32004,
      message: "unknown file handle `h1`",
    });
    const read = await call(b, "process/read", { processId: "p" });
    assert.equal(read.closed, true);
    await using c = await server.connect();
    await handshake(c);
    assert.deepEqual(await callError(c, "process/read", { processId: "p" }), {
      code: -32600,
      message: "unknown process id p",
    }, "another session does not see the process");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("concurrency: with --concurrent-requests 4 a status request overtakes a long poll", async () => {
  await using server = await InProcessServer.websocket({ concurrentRequests: 4 });
  await using client = await server.connect();
  await handshake(client);
  await start(client, "slow", "sleep 30");
  await client.send({
    id: 1,
    method: "process/read",
    params: { processId: "slow", waitMs: 600_000 },
  });
  await client.send({ id: 2, method: "environment/status" });
  await client.send({ id: 3, method: "environment/info" });
  await client.log.response(2);
  await client.log.response(3);
  assert.equal(
    client.log.received.some((r) => r.msg.id === 1 && !("method" in r.msg)),
    false,
    "the long poll is still pending",
  );
  // process/terminate runs on the control lane; the exit (an unseen terminal event) wakes the poll.
  await client.send({ id: 4, method: "process/terminate", params: { processId: "slow" } });
  const poll = await client.log.response(1);
  assert.equal((poll.result as Json).exited, true);
  assert.equal((poll.result as Json).exitCode, 137);
  const order = client.log.received.filter((r) => !("method" in r.msg)).map((r) => r.msg.id);
  assert.ok(order.indexOf(2) < order.indexOf(1) && order.indexOf(3) < order.indexOf(1));
});

Deno.test("concurrency: by default requests run strictly in arrival order", async () => {
  await using server = InProcessServer.stdio();
  const client = server.stdio;
  await handshake(client);
  await start(client, "slow", "sleep 30");
  await client.send({ id: 1, method: "process/read", params: { processId: "slow", waitMs: 300 } });
  await client.send({ id: 2, method: "environment/status" });
  await client.log.response(2);
  const order = client.log.received.filter((r) => !("method" in r.msg)).map((r) => r.msg.id);
  assert.ok(order.indexOf(1) !== -1 && order.indexOf(1) < order.indexOf(2), `order ${order}`);
  await call(client, "process/terminate", { processId: "slow" });
});

Deno.test("concurrency: requests before initialized run inline even with --concurrent-requests", async () => {
  await using server = await InProcessServer.websocket({ concurrentRequests: 4 });
  await using client = await server.connect();
  await client.send({ id: 1, method: "environment/status" });
  await client.send({ id: 2, method: "initialize", params: { clientName: "c" } });
  await client.send({ id: 3, method: "environment/status" });
  await client.log.response(3);
  const ids = client.log.received.map((r) => r.msg.id);
  assert.deepEqual(ids, [1, 2, 3]);
  assert.equal(
    (client.log.received[2]!.msg.error as Json).message,
    "client must send initialized before using environment status methods",
  );
});

Deno.test("stdio EOF kills every process group of the session and exits 0", async () => {
  await using server = await startStdio();
  const client = server.stdio;
  await handshake(client);
  const tag = String(Math.floor(Math.random() * 1e9));
  const needle = `sleep 1000.${tag}`;
  await start(client, "bg", `sleep 1000.${tag} & sleep 1000.${tag}`);
  await start(client, "tty", `sleep 1000.${tag}`, { tty: true });
  assert.ok(await eventually(() => pidsMatching(needle).length >= 3), "all sleeps are running");
  await client.close();
  assert.equal((await server.status).code, 0);
  assert.ok(
    await eventually(() => pidsMatching(needle).length === 0),
    `left behind: ${pidsMatching(needle)}`,
  );
});

Deno.test("stdio server drops requests still queued at EOF without replying", async () => {
  await using server = await startStdio();
  const client = server.stdio;
  await handshake(client);
  await start(client, "slow", "sleep 30");
  await client.send({ id: 1, method: "process/read", params: { processId: "slow", waitMs: 2000 } });
  await client.send({ id: 2, method: "environment/status" });
  await client.close();
  assert.equal((await server.status).code, 0);
  await client.log.waitEof();
  assert.deepEqual(
    client.log.received.filter((r) => r.msg.id === 1 || r.msg.id === 2),
    [],
    "EOF ends the connection immediately",
  );
});

Deno.test("fatal protocol errors end the connection without a reply", async (t) => {
  const fatal: [string, unknown][] = [
    ["an unknown notification", { method: "foo/bar", params: {} }],
    ["a request method sent as a notification", { method: "environment/status" }],
    ["a client response", { id: 99, result: {} }],
    ["a client error object", { id: 99, error: { code: -1, message: "nope" } }],
  ];
  for (const [what, message] of fatal) {
    await t.step(`over stdio: ${what}`, async () => {
      await using server = await startStdio();
      await handshake(server.stdio);
      await server.stdio.send(message);
      await server.stdio.send({ id: 2, method: "environment/status" }).catch(() => {});
      await server.stdio.log.waitEof();
      assert.equal(server.stdio.log.received.filter((r) => r.msg.id === 2).length, 0);
      assert.equal((await server.stop()).code, 0);
    });
  }
  await t.step("over WebSocket the session detaches and can be resumed", async () => {
    await using server = await InProcessServer.websocket();
    const a = await server.connect();
    const sessionId = await handshake(a);
    await a.send({ method: "foo/bar" });
    await a.log.waitEof();
    await using b = await resume(server, sessionId);
    assert.deepEqual(await call(b, "environment/status"), { status: "ready" });
  });
});

Deno.test("WebSocket listener routes HTTP like the reference", async (t) => {
  await using server = await InProcessServer.websocket();
  assert.match(server.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
  const http = server.url.replace(/^ws:/, "http:");
  await t.step("GET /readyz is 200 with an empty body", async () => {
    const response = await fetch(`${http}/readyz`);
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "");
  });
  await t.step("GET / without upgrade headers is 400 with the reference's text", async () => {
    const response = await fetch(`${http}/`);
    assert.equal(response.status, 400);
    assert.equal(response.headers.get("content-type"), "text/plain; charset=utf-8");
    assert.equal(await response.text(), "Connection header did not include 'upgrade'");
  });
  await t.step("other paths are 404", async () => {
    for (const path of ["/nope", "/readyz/x", "/ws"]) {
      const response = await fetch(`${http}${path}`);
      assert.equal(response.status, 404, path);
      await response.body?.cancel();
    }
  });
  await t.step("a WebSocket upgrade on another path is refused", async () => {
    const socket = new WebSocket(`${server.url}/other`);
    const outcome = await new Promise<string>((resolve) => {
      socket.onopen = () => resolve("open");
      socket.onerror = () => resolve("error");
    });
    if (socket.readyState !== WebSocket.CLOSED) {
      const closed = new Promise((resolve) => socket.addEventListener("close", resolve));
      socket.close();
      await closed;
    }
    assert.equal(outcome, "error");
  });
});

Deno.test("WebSocket malformed messages name the peer and empty frames are not ignored", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  await client.sendRaw("");
  await client.sendRaw("not json");
  client.sendBinary(
    new TextEncoder().encode('{"id":1,"method":"initialize","params":{"clientName":"b"}}'),
  );
  await client.log.response(1);
  const errors = client.log.received.slice(0, 2).map((r) => r.msg);
  for (const error of errors) {
    assert.equal(error.id, -1);
    assert.equal((error.error as Json).code, -32600);
    assert.match(
      String((error.error as Json).message),
      /^failed to parse websocket JSON-RPC message from exec-server websocket 127\.0\.0\.1:\d+: /,
    );
  }
  assert.match(String((errors[0]!.error as Json).message), /EOF while parsing a value/);
  assert.ok((client.log.received[2]!.msg.result as Json).sessionId, "binary frames are accepted");
});

Deno.test("stdio wire details match the reference", async (t) => {
  await using server = InProcessServer.stdio();
  const client = server.stdio;
  await t.step("-0 is accepted as an id and echoed as 0", async () => {
    await client.sendRaw('{"id":-0,"method":"environment/status"}');
    const reply = await client.log.waitUntil(
      () => client.log.received.find((r) => r.msg.id === 0),
      "the reply to id -0",
    );
    assert.equal(
      reply.text,
      '{"error":{"code":-32600,"message":"client must call initialize before using environment status methods"},"id":0}',
    );
    assert.deepEqual(reply.msg.error, {
      code: -32600,
      message: "client must call initialize before using environment status methods",
    });
  });
  await t.step("initialized ignores its params", async () => {
    await client.request(1, "initialize", { clientName: "wire" });
    await client.send({ method: "initialized", params: [1] });
    assert.deepEqual((await client.request(2, "environment/status")).result, { status: "ready" });
  });
  await t.step("a message over the value budget is malformed, and reading continues", async () => {
    const zeros = new Array(262_141).fill("0").join(",");
    await client.sendRaw(`{"id":3,"method":"environment/status","x":[${zeros}]}`);
    const fault = await client.log.waitFor((m) => m.id === -1, "the budget error");
    assert.match(
      String((fault.error as Json).message),
      /^failed to parse JSON-RPC message from exec-server stdio: JSON-RPC message exceeds the limit of 262144 JSON values at line 1 column \d+$/,
    );
    const ok = new Array(262_140).fill("0").join(",");
    await client.sendRaw(`{"id":5,"method":"environment/status","x":[${ok}]}`);
    assert.ok((await client.log.response(5)).result, "1 + 3 + 262140 = 262144 values pass");
  });
  await t.step("a 20 MiB line is accepted", async () => {
    await client.sendRaw(
      `{"id":6,"method":"environment/status","extra":"${"x".repeat(20 * 1024 * 1024)}"}`,
    );
    assert.deepEqual((await client.log.response(6, 60_000)).result, { status: "ready" });
  });
  await t.step("every stdout line is one compact JSON message", () => {
    for (const { text, msg } of client.log.received) {
      assert.ok(!("unparsable" in msg), text);
      assert.ok(!text.includes("\n") && !/^\s|\s$/.test(text), text);
    }
  });
});

Deno.test("WebSocket server sends one JSON message per text frame without a newline", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  await handshake(client);
  await client.request(1, "environment/status");
  for (const { text } of client.log.received) {
    assert.ok(!text.endsWith("\n"), JSON.stringify(text.slice(-20)));
    assert.doesNotThrow(() => JSON.parse(text));
  }
});

Deno.test("initialized after a failed initialize is fatal", async () => {
  await using server = InProcessServer.stdio();
  const client = server.stdio;
  const failed = await client.request(1, "initialize", {
    clientName: "c",
    resumeSessionId: "does-not-exist",
  });
  assert.equal((failed.error as Json).code, -32600);
  await client.send({ method: "initialized", params: {} });
  await client.send({ id: 2, method: "environment/status" }).catch(() => {});
  await client.log.waitEof();
  assert.equal(client.log.received.filter((r) => r.msg.id === 2).length, 0);
});

Deno.test("session resume delivers new notifications before initialized is sent", async () => {
  await using server = await InProcessServer.websocket();
  const a = await server.connect();
  const sessionId = await handshake(a);
  await start(a, "p", "read x; echo got:$x", { pipeStdin: true });
  await a.close();
  let b: WsClient | undefined;
  for (let attempt = 0; attempt < 100 && !b; attempt++) {
    const client = await server.connect();
    const response = await client.request(1, "initialize", {
      clientName: "b",
      resumeSessionId: sessionId,
    });
    if (response.result) b = client;
    else {
      await client.close();
      await delay(20);
    }
  }
  assert.ok(b, "resumed");
  await using resumed = b;
  // No `initialized` yet: requests are gated, but notifications flow.
  assert.equal(
    (await callError(resumed, "process/write", { processId: "p", chunk: "", writeId: "w" }))
      .message,
    "client must send initialized before using exec methods",
  );
  await resumed.send({ method: "initialized", params: {} });
  await call(resumed, "process/write", { processId: "p", chunk: btoa("1\n"), writeId: "w" });
  await resumed.log.processClosed("p");
  assert.equal(resumed.log.outputText("p"), "got:1\n");
});

Deno.test("concurrency lanes: control requests pass while the ordinary lane is full", async () => {
  await using server = await InProcessServer.websocket({ concurrentRequests: 2 });
  await using client = await server.connect();
  await handshake(client);
  await start(client, "slow", "sleep 30");
  const poll = { processId: "slow", waitMs: 600_000 };
  await client.send({ id: 1, method: "process/read", params: poll });
  await client.send({ id: 2, method: "process/read", params: poll });
  // Both ordinary permits are taken: this one has to wait for a poll to finish.
  await client.send({ id: 3, method: "process/read", params: { processId: "slow" } });
  await client.send({ id: 4, method: "environment/status" });
  await client.log.response(4);
  await client.send({ id: 5, method: "process/terminate", params: { processId: "slow" } });
  await client.log.response(3);
  const order = client.log.received.filter((r) => !("method" in r.msg)).map((r) => r.msg.id);
  assert.ok(order.indexOf(4) < order.indexOf(3), `status before the queued read: ${order}`);
  assert.ok(order.indexOf(5) < order.indexOf(3), `terminate (control lane) first: ${order}`);
  assert.ok(
    order.indexOf(3) > Math.min(order.indexOf(1), order.indexOf(2)),
    `the queued read ran after a poll finished: ${order}`,
  );
});

Deno.test("--exit-on-stdin-close makes a WebSocket server exit when stdin closes", async () => {
  await using server = await ServerProcess.start({
    listen: "ws",
    args: ["--exit-on-stdin-close"],
  });
  await server.child.stdin.close();
  assert.equal((await server.status).code, 0);
});

Deno.test("environmentInfo reports TMPDIR, HOME and the passwd shell like the reference", async () => {
  await using server = await startStdio({
    env: {
      PATH: "/usr/bin:/bin",
      HOME: "/root",
      TMPDIR: "/tmp/does-not-exist-es/",
      SHELL: "/bin/zsh-not-used",
    },
  });
  const client = server.stdio;
  const init = await client.request(1, "initialize", { clientName: "c" });
  const info = (init.result as Json).environmentInfo as Json;
  assert.equal(info.tempDir, "file:///tmp/does-not-exist-es");
  assert.deepEqual(info.temporaryDirectories, ["file:///tmp/does-not-exist-es"]);
  assert.equal(info.userHomeDir, "file:///root");
  assert.equal(info.cwd, "file:///tmp");
  assert.equal(info.platformOs, "linux");
  const uid = Deno.uid();
  const passwd = (await Deno.readTextFile("/etc/passwd")).split("\n")
    .map((line) => line.split(":")).find((f) => f[2] === String(uid));
  if (passwd?.[6]) {
    assert.deepEqual(info.shell, {
      name: passwd[6].slice(passwd[6].lastIndexOf("/") + 1),
      path: passwd[6],
    }, "the login shell comes from passwd, not $SHELL");
  }
  await client.send({ method: "initialized", params: {} });
  const again = await client.request(2, "environment/info");
  assert.deepEqual(again.result, info, "environment/info matches initialize");
  const caps = info.capabilities as Record<string, unknown>;
  for (const value of Object.values(caps)) assert.equal(typeof value, "boolean");
  for (
    const off of [
      "networkProxyLaunch",
      "credentialMasking",
      "shellSnapshotV2",
      "windowsMxc",
    ]
  ) {
    assert.notEqual(caps[off], true, `${off} is not implemented, so it must not be advertised`);
  }
});

Deno.test("environmentInfo without TMPDIR lists no temporary directories", async () => {
  await using server = await startStdio({ env: { PATH: "/usr/bin:/bin", HOME: "/root" } });
  const init = await server.stdio.request(1, "initialize", { clientName: "c" });
  const info = (init.result as Json).environmentInfo as Json;
  assert.deepEqual(info.temporaryDirectories, []);
  assert.equal(info.tempDir, "file:///tmp");
});
