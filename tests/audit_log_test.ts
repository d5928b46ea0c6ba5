/**
 * The audit log: `--log-format json` writes one JSON object per line with
 * `ts`, `level`, `event` and the event's fields; the events say what ran,
 * what was written, and which credentials were refused, and never a secret.
 *
 * @module
 */

import assert from "node:assert/strict";
import { setLogFormat, setLogLevel, setLogSink } from "../lib/server/host/log.ts";
import { MAX_CLIENT_NAME_CHARS } from "../lib/server/session/registry.ts";
import { readUntilClosed, tokenAuth } from "./helpers/observe.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { call, callError, sh, startProcess } from "./helpers/rpc.ts";
import { handshake, type Json, ServerProcess } from "./helpers/server_harness.ts";

const TOKEN = "audit-token-0123456789";

/** Collects the JSON log lines written while `body` runs. */
async function capturedLog(
  body: (events: () => Json[]) => Promise<void>,
): Promise<{ lines: string[]; events: Json[] }> {
  const lines: string[] = [];
  setLogSink((line) => lines.push(line));
  setLogLevel("info");
  setLogFormat("json");
  try {
    await body(() => lines.map((line) => JSON.parse(line)));
  } finally {
    setLogSink(undefined);
    setLogLevel("warn");
    setLogFormat("text");
  }
  return { lines, events: lines.map((line) => JSON.parse(line)) };
}

function only(events: Json[], event: string): Json[] {
  return events.filter((e) => e.event === event);
}

Deno.test("audit log: every line is one JSON object with ts, level and event first", async () => {
  const { lines } = await capturedLog(async () => {
    await using server = await InProcessServer.websocket();
    await using client = await server.connect();
    await handshake(client);
  });
  assert.ok(lines.length >= 1, "at least connection.open");
  for (const line of lines) {
    assert.ok(line.endsWith("\n") && !line.slice(0, -1).includes("\n"), line);
    const parsed = JSON.parse(line);
    assert.deepEqual(Object.keys(parsed).slice(0, 3), ["ts", "level", "event"]);
    assert.equal(new Date(parsed.ts).toISOString(), parsed.ts);
  }
});

Deno.test("audit log: connection, process.start and fs events name the session, argv, cwd and paths; env values never appear", async () => {
  const dir = await Deno.makeTempDir();
  let sessionId = "";
  const { lines, events } = await capturedLog(async (events) => {
    await using server = await InProcessServer.websocket();
    await using client = await server.connect();
    sessionId = await handshake(client);
    await startProcess(client, "p1", sh("printf abcde; exit 3"), {
      env: { PATH: "/usr/bin:/bin", API_SECRET: "hunter2-value" },
    });
    await readUntilClosed(client, "p1");
    await startProcess(client, "killed", sh("sleep 30"));
    await call(client, "process/terminate", { processId: "killed" });
    while (!only(events(), "process.exit").some((e) => e.processId === "killed")) {
      await call(client, "process/read", { processId: "killed", afterSeq: 0, waitMs: 1000 });
    }
    await call(client, "fs/writeFile", { path: `file://${dir}/a.txt`, dataBase64: "aGk=" });
    await call(client, "fs/copy", {
      sourcePath: `file://${dir}/a.txt`,
      destinationPath: `file://${dir}/b.txt`,
      recursive: false,
    });
    await call(client, "fs/remove", { path: `file://${dir}/b.txt` });
    await client.close();
    await server.stop();
  });
  await Deno.remove(dir, { recursive: true });
  const [open] = only(events, "connection.open");
  assert.equal(open?.level, "info");
  assert.match(String(open?.remoteAddress), /^127\.0\.0\.1:\d+$/);
  const [close] = only(events, "connection.close");
  assert.equal(close?.session, sessionId);
  assert.equal(close?.connection, open?.connection);
  const [start] = only(events, "process.start");
  assert.deepEqual(
    { ...start, ts: undefined },
    {
      ts: undefined,
      level: "info",
      event: "process.start",
      session: sessionId,
      processId: "p1",
      argv: ["/bin/sh", "-c", "printf abcde; exit 3"],
      cwd: "/tmp",
      tty: false,
      sandboxType: "none",
      sandboxLayer: null,
      envNames: ["PATH", "API_SECRET"],
    },
  );
  const exits = only(events, "process.exit");
  assert.deepEqual(exits.map((e) => [e.level, e.session, e.processId, e.exitCode, e.signal]), [
    ["info", sessionId, "p1", 3, null],
    ["info", sessionId, "killed", 137, "SIGKILL"],
  ]);
  assert.equal(exits[0]!.outputBytes, 5);
  assert.equal(typeof exits[0]!.durationMs, "number");
  assert.deepEqual(only(events, "fs.write").map((e) => [e.method, e.path]), [
    ["fs/writeFile", `${dir}/a.txt`],
  ]);
  assert.deepEqual(only(events, "fs.copy").map((e) => [e.sourcePath, e.destinationPath]), [
    [`${dir}/a.txt`, `${dir}/b.txt`],
  ]);
  assert.deepEqual(only(events, "fs.remove").map((e) => e.path), [`${dir}/b.txt`]);
  assert.ok(!lines.join("").includes("hunter2-value"), "an env value was logged");
});

Deno.test("audit log: session.open names each session's client, a resume's the resuming one, cut to MAX_CLIENT_NAME_CHARS", async () => {
  const long = "é".repeat(MAX_CLIENT_NAME_CHARS - 1) + "😀" + "tail";
  let sessionId = "";
  const { events } = await capturedLog(async () => {
    await using server = await InProcessServer.websocket();
    await using first = await server.connect();
    sessionId = await handshake(first, { clientName: "agent α\u001b[31m" });
    await first.close();
    await using second = await server.connect();
    await handshake(second, { clientName: long, resumeSessionId: sessionId });
    await using third = await server.connect();
    await handshake(third, { clientName: "x".repeat(MAX_CLIENT_NAME_CHARS) });
  });
  const opened = only(events, "session.open");
  assert.deepEqual(opened.map((e) => [e.level, e.session === sessionId, e.resumed]), [
    ["info", true, false],
    ["info", true, true],
    ["info", false, false],
  ]);
  assert.equal(opened[0]!.clientName, "agent α\u001b[31m");
  // The cut falls inside the emoji's surrogate pair: the half is dropped, not kept.
  assert.equal(opened[1]!.clientName, `${"é".repeat(MAX_CLIENT_NAME_CHARS - 1)}…`);
  assert.equal(
    opened[2]!.clientName,
    "x".repeat(MAX_CLIENT_NAME_CHARS),
    "at the bound: kept whole",
  );
});

Deno.test("audit log: a refused token is auth.refused with the reason and without the token", async () => {
  const { lines, events } = await capturedLog(async () => {
    await using server = await InProcessServer.websocket({
      authorize: await tokenAuth(TOKEN),
    });
    const port = Number(new URL(server.url).port);
    await using refused = await RawWebSocket.connect(port, {
      headers: { Authorization: `Bearer ${TOKEN}-wrong` },
    });
    assert.equal(refused.answer.status, 401);
  });
  const [refusal] = only(events, "auth.refused");
  assert.equal(refusal?.level, "warn");
  assert.equal(refusal?.reason, "invalid websocket bearer token");
  assert.equal(refusal?.path, "/");
  assert.ok(!lines.join("").includes(TOKEN), "the token was logged");
});

Deno.test("audit log: a request outside the server's permissions is permission.denied naming the resource", async () => {
  await using server = await ServerProcess.start({
    listen: "stdio",
    args: ["--log-level", "info", "--log-format", "json"],
    permissions: [
      "--allow-read",
      "--allow-write=/nonexistent-dir",
      "--allow-env",
      "--allow-run",
      "--allow-sys",
      "--allow-ffi",
    ],
  });
  await handshake(server.stdio!);
  const error = await callError(server.stdio!, "fs/writeFile", {
    path: "file:///tmp/exec-server-audit-denied.txt",
    dataBase64: "",
  });
  assert.equal(error.data?.kind, "permissionDenied");
  await server.stop();
  const events = (await server.stderr).trim().split("\n").map((line) => JSON.parse(line));
  const [denied] = only(events, "permission.denied");
  assert.deepEqual(
    [denied?.level, denied?.method, denied?.permission, denied?.resource],
    ["warn", "fs/writeFile", "write", "/tmp/exec-server-audit-denied.txt"],
  );
});

Deno.test("audit log: --log-format text (the default) writes the event and its fields on one line", async () => {
  const lines: string[] = [];
  setLogSink((line) => lines.push(line));
  setLogLevel("info");
  try {
    await using server = await InProcessServer.websocket();
    await using client = await server.connect();
    await handshake(client);
  } finally {
    setLogSink(undefined);
    setLogLevel("warn");
  }
  assert.match(
    lines[0]!,
    /^\S+Z INFO connection\.open connection=\d+ remoteAddress=127\.0\.0\.1:\d+\n$/,
  );
});

/** The `http.request` events of one `http/request` (GET `path`) to a local server answering `response`. */
async function auditedGet(response: () => Response, path = "/") {
  await using target = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, response);
  const origin = `http://127.0.0.1:${target.addr.port}`;
  const { events } = await capturedLog(async () => {
    await using server = await InProcessServer.websocket();
    await using client = await server.connect();
    await handshake(client);
    await call(client, "http/request", { method: "GET", url: `${origin}${path}`, requestId: "r1" });
  });
  return { origin, requests: only(events, "http.request") };
}

Deno.test("audit log: http/request is http.request with the method, the origin (no path or query) and the status", async () => {
  const { origin, requests: [request] } = await auditedGet(
    () => new Response("teapot", { status: 418 }),
    "/secret/path?key=value",
  );
  assert.deepEqual(
    [request?.level, request?.method, request?.origin, request?.status],
    ["info", "GET", origin, 418],
  );
});

Deno.test("audit log: an http/request whose body is streamed into the reply is audited with its status", async () => {
  const { requests } = await auditedGet(() =>
    new Response(new Uint8Array(1 << 20), { status: 203 })
  );
  assert.equal(requests[0]?.status, 203);
});

Deno.test("audit log: consecutive http/requests to different origins each name their own origin", async () => {
  await using first = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("a"),
  );
  await using second = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("b"),
  );
  const origins = [first, second, first].map((target) => `http://127.0.0.1:${target.addr.port}`);
  const { events } = await capturedLog(async () => {
    await using server = await InProcessServer.websocket();
    await using client = await server.connect();
    await handshake(client);
    for (const [i, origin] of origins.entries()) {
      await call(client, "http/request", { method: "GET", url: `${origin}/p`, requestId: `r${i}` });
    }
  });
  assert.deepEqual(only(events, "http.request").map((event) => event.origin), origins);
});
