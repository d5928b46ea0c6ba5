import assert from "node:assert/strict";
import { type Json, type StdioClient, toJson } from "./helpers/server_harness.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { call, callError, PROCESS_ENV as ENV, sh, startProcess as start } from "./helpers/rpc.ts";
import { collectText } from "./fixtures/client_server.ts";
import { connect } from "../lib/client/client.ts";
import { type ProcessHost, TrackedProcess } from "../lib/client/process_handle.ts";
import { protocolJsonSchema } from "../lib/protocol/json_schema.ts";
import { EXTENSIONS } from "../lib/protocol/methods.ts";

const ALL = Object.keys(EXTENSIONS);
const decoder = new TextDecoder();

type Session = InProcessServer & { stdio: StdioClient };

/** Starts a server and initializes it, asking for `extensions` (none: a reference client). */
async function session(extensions?: string[]): Promise<Session & { init: Json }> {
  const server = InProcessServer.stdio();
  const response = await server.stdio.request(0, "initialize", {
    clientName: "extensions-test",
    ...(extensions ? { extensions } : {}),
  });
  assert.ok(response.result, JSON.stringify(response));
  await server.stdio.send({ method: "initialized", params: {} });
  return Object.assign(server, { init: response.result as Json });
}

function exitedParams(events: Json[]): Json {
  return events.find((m) => m.method === "process/exited")!.params as Json;
}

function waitForText(client: StdioClient, processId: string, text: string, stream = "stdout") {
  return client.log.waitUntil(
    () => client.log.outputText(processId, stream).includes(text),
    `"${text}" from ${processId}`,
  );
}

function b64(text: string): string {
  return new TextEncoder().encode(text).toBase64();
}

/** The exact output of `seq 1 n`. */
function seqOutput(n: number): string {
  let text = "";
  for (let i = 1; i <= n; i++) text += `${i}\n`;
  return text;
}

Deno.test("initialize grants the requested extensions that environmentInfo announces", async () => {
  await using server = await session([...ALL, "noSuchExtension"]);
  const capabilities = (server.init.environmentInfo as Json).capabilities as Json;
  const announced = ALL.filter((name) => capabilities[name] === true);
  assert.ok(announced.includes("processSignals"));
  assert.ok(announced.includes("protocolDescribe"));
  assert.deepEqual(server.init.extensions, announced, "unknown names are not granted");
  await using plain = await session();
  assert.ok(!("extensions" in plain.init), "a reference client gets the reference's result");
});

Deno.test("a client that did not opt in sees the reference shapes and behaviour", async (t) => {
  await using server = await session();
  const client = server.stdio;
  await t.step("process/exited and process/read carry no extension members", async () => {
    await start(client, "sig", sh("kill -TERM $$"));
    const exited = exitedParams(await client.log.processClosed("sig"));
    assert.deepEqual(Object.keys(exited), ["processId", "seq", "exitCode", "sandboxDenied"]);
    assert.equal(exited.exitCode, 143);
    const read = await call(client, "process/read", { processId: "sig" });
    assert.deepEqual(Object.keys(read), [
      "chunks",
      "nextSeq",
      "exited",
      "exitCode",
      "closed",
      "failure",
      "sandboxDenied",
    ]);
  });
  await t.step("signal names beyond interrupt get the reference's error", async () => {
    await start(client, "idle", ["/bin/sleep", "30"]);
    const error = await callError(client, "process/signal", { processId: "idle", signal: "kill" });
    assert.equal(error.code, -32602);
    assert.equal(error.message, "unknown variant `kill`, expected `interrupt`");
    assert.deepEqual(error.data, { field: "signal" }, "the same shape as a params error");
  });
  await t.step("graceMs is ignored: terminate is SIGKILL at once", async () => {
    await start(client, "trap", sh("trap 'echo term' TERM; echo ready; while :; do sleep 1; done"));
    await waitForText(client, "trap", "ready");
    await call(client, "process/terminate", { processId: "trap", graceMs: 60_000 });
    const exited = exitedParams(await client.log.processClosed("trap"));
    assert.equal(exited.exitCode, 137);
    assert.ok(!client.log.outputText("trap").includes("term"), "no SIGTERM was sent");
    await call(client, "process/terminate", { processId: "idle" });
  });
  await t.step("closeStdin is ignored: stdin stays open", async () => {
    await start(client, "cat", ["/bin/cat"], { pipeStdin: true });
    const write = { processId: "cat", chunk: b64("a\n"), writeId: "w1", closeStdin: true };
    assert.deepEqual(await call(client, "process/write", write), { status: "accepted" });
    assert.deepEqual(
      await call(client, "process/write", { ...write, writeId: "w2" }),
      { status: "accepted" },
    );
    await waitForText(client, "cat", "a\na\n");
    await call(client, "process/terminate", { processId: "cat" });
  });
  await t.step("size is ignored, also on a pipe process", async () => {
    await start(client, "sized", ["/bin/true"], { size: { rows: 10, cols: 10 } });
    await client.log.processClosed("sized");
  });
});

Deno.test("process/resize sets a tty process's size and the child gets SIGWINCH", async (t) => {
  await using server = await session(ALL);
  const client = server.stdio;
  if (!(server.init.extensions as string[]).includes("processResize")) {
    t.step({ name: "skipped: no pseudo-terminals here", ignore: true, fn() {} });
    return;
  }
  await start(
    client,
    "t",
    sh("trap 'stty size; exit 0' WINCH; stty size; echo ready; while :; do sleep 0.05; done"),
    { tty: true, size: { rows: 30, cols: 100 } },
  );
  await waitForText(client, "t", "30 100\r\nready\r\n", "pty");
  assert.deepEqual(
    await call(client, "process/resize", { processId: "t", cols: 120, rows: 40 }),
    {},
  );
  const events = await client.log.processClosed("t");
  assert.equal(client.log.outputText("t", "pty"), "30 100\r\nready\r\n40 120\r\n");
  assert.equal(exitedParams(events).exitCode, 0);
});

Deno.test("process/resize and size are refused for pipe processes", async () => {
  await using server = await session(ALL);
  const client = server.stdio;
  await start(client, "p", ["/bin/sleep", "30"]);
  const resize = await callError(client, "process/resize", { processId: "p", cols: 80, rows: 24 });
  assert.equal(resize.code, -32600);
  assert.equal(resize.message, "process p is not a tty process: only tty processes can be resized");
  const unknown = await callError(client, "process/resize", { processId: "x", cols: 1, rows: 1 });
  assert.equal(unknown.code, -32600);
  assert.equal(unknown.message, "unknown process id x");
  const sized = await callError(client, "process/start", {
    processId: "q",
    argv: ["/bin/true"],
    cwd: "file:///tmp",
    env: ENV,
    tty: false,
    size: { rows: 24, cols: 80 },
  });
  assert.equal(sized.code, -32602);
  assert.match(sized.message, /size is only valid for tty processes/);
  await call(client, "process/terminate", { processId: "p" });
});

Deno.test("process/signal sends named signals and process/exited says which one ended it", async () => {
  await using server = await session(ALL);
  const client = server.stdio;
  await start(
    client,
    "s",
    sh("trap 'echo hup' HUP; trap 'echo usr1' USR1; echo ready; while :; do sleep 0.05; done"),
  );
  await waitForText(client, "s", "ready\n");
  assert.deepEqual(await call(client, "process/signal", { processId: "s", signal: "hangup" }), {});
  await waitForText(client, "s", "hup\n");
  await call(client, "process/signal", { processId: "s", signal: "user1" });
  await waitForText(client, "s", "usr1\n");
  await call(client, "process/signal", { processId: "s", signal: "terminate" });
  const exited = exitedParams(await client.log.processClosed("s"));
  assert.equal(exited.exitCode, 143);
  assert.equal(exited.signal, "SIGTERM");
  const read = await call(client, "process/read", { processId: "s" });
  assert.equal(read.signal, "SIGTERM");
  await start(client, "ok", sh("exit 3"));
  const normal = exitedParams(await client.log.processClosed("ok"));
  assert.equal(normal.signal, null, "a normal exit has signal null");
  const bogus = await callError(client, "process/signal", { processId: "ok", signal: "bogus" });
  assert.equal(bogus.message, "unknown variant `bogus`, expected `interrupt`");
  if ((server.init.extensions as string[]).includes("processResize")) {
    await start(client, "tty", ["/bin/sleep", "30"], { tty: true });
    await call(client, "process/signal", { processId: "tty", signal: "kill" });
    const tty = exitedParams(await client.log.processClosed("tty"));
    assert.deepEqual([tty.exitCode, tty.signal], [1, "SIGKILL"], "tty signal deaths report 1");
  }
});

Deno.test("process/terminate with graceMs sends SIGTERM, then SIGKILL after the grace", async () => {
  await using server = await session(ALL);
  const client = server.stdio;
  await start(
    client,
    "stubborn",
    sh("trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done"),
  );
  await waitForText(client, "stubborn", "ready\n");
  assert.deepEqual(
    await call(client, "process/terminate", { processId: "stubborn", graceMs: 200 }),
    { running: true },
  );
  const exited = exitedParams(await client.log.processClosed("stubborn"));
  assert.ok(client.log.outputText("stubborn").includes("term\n"), "SIGTERM came first");
  assert.equal(exited.exitCode, 137);
  assert.equal(exited.signal, "SIGKILL");
  await start(client, "polite", ["/bin/sleep", "30"]);
  await call(client, "process/terminate", { processId: "polite", graceMs: 60_000 });
  const polite = exitedParams(await client.log.processClosed("polite"));
  assert.equal(polite.signal, "SIGTERM", "a process that ends on SIGTERM is not killed");
});

Deno.test("process/write closeStdin sends EOF and the writeId rules still hold", async (t) => {
  await using server = await session(ALL);
  const client = server.stdio;
  await t.step("with a chunk, on a pipe", async () => {
    await start(client, "cat", ["/bin/cat"], { pipeStdin: true });
    const write = { processId: "cat", chunk: b64("last\n"), writeId: "w1", closeStdin: true };
    assert.deepEqual(await call(client, "process/write", write), { status: "accepted" });
    const events = await client.log.processClosed("cat");
    assert.equal(exitedParams(events).exitCode, 0);
    assert.equal(client.log.outputText("cat"), "last\n");
    assert.deepEqual(await call(client, "process/write", write), { status: "accepted" });
    assert.deepEqual(
      await call(client, "process/write", { ...write, writeId: "w2" }),
      { status: "stdinClosed" },
    );
  });
  await t.step("with an empty chunk, after earlier writes", async () => {
    await start(client, "wc", ["/usr/bin/wc", "-c"], { pipeStdin: true });
    await call(client, "process/write", { processId: "wc", chunk: b64("abc"), writeId: "a" });
    await call(client, "process/write", {
      processId: "wc",
      chunk: "",
      writeId: "b",
      closeStdin: true,
    });
    await client.log.processClosed("wc");
    assert.equal(client.log.outputText("wc").trim(), "3");
  });
  await t.step("on a tty, after a partial line", async (t) => {
    if (!(server.init.extensions as string[]).includes("processResize")) {
      await t.step({ name: "skipped: no pseudo-terminals here", ignore: true, fn() {} });
      return;
    }
    await start(client, "tty", sh("stty -echo; echo ready; cat; echo end:$?"), {
      tty: true,
    });
    await waitForText(client, "tty", "ready\r\n", "pty");
    await call(client, "process/write", {
      processId: "tty",
      chunk: b64("partial"),
      writeId: "p",
      closeStdin: true,
    });
    const events = await client.log.processClosed("tty");
    assert.equal(client.log.outputText("tty", "pty"), "ready\r\npartialend:0\r\n");
    assert.equal(exitedParams(events).exitCode, 0);
  });
});

Deno.test("output block keeps unread output and the child waits for reads", async () => {
  await using server = await session(ALL);
  const client = server.stdio;
  const count = 300_000; // about 2 MB, twice the retained output
  await start(client, "big", ["/usr/bin/seq", "1", String(count)], { output: "block" });
  // Wait until the server has retained a full ring (every chunk is also notified).
  await client.log.waitUntil(
    () => client.log.output("big").length > 1024 * 1024,
    "a full ring of output",
  );
  assert.equal(
    client.log.notifications("process/exited").length,
    0,
    "the child cannot finish while its output is unread",
  );
  let afterSeq = 0;
  const parts: Uint8Array[] = [];
  while (true) {
    const read = await call(client, "process/read", { processId: "big", afterSeq, waitMs: 5000 });
    assert.equal(read.evictedBytes, 0, "nothing was evicted before it was read");
    for (const chunk of read.chunks as { chunk: string }[]) {
      parts.push(Uint8Array.fromBase64(chunk.chunk));
    }
    afterSeq = (read.nextSeq as number) - 1;
    if (read.closed) {
      assert.equal(read.exitCode, 0);
      break;
    }
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    all.set(part, at);
    at += part.length;
  }
  assert.equal(decoder.decode(all), seqOutput(count));
});

Deno.test("process/read reports how many bytes were evicted before the first chunk", async () => {
  await using server = await session(ALL);
  const client = server.stdio;
  const count = 300_000;
  await start(client, "drop", ["/usr/bin/seq", "1", String(count)]);
  await client.log.processClosed("drop", 30_000);
  const total = new TextEncoder().encode(seqOutput(count)).length;
  const read = await call(client, "process/read", { processId: "drop" });
  const chunks = read.chunks as { seq: number; chunk: string }[];
  const retained = chunks.reduce((n, c) => n + Uint8Array.fromBase64(c.chunk).length, 0);
  assert.ok((read.evictedBytes as number) > 0);
  assert.equal(read.evictedBytes, total - retained);
  const fromFirst = await call(client, "process/read", {
    processId: "drop",
    afterSeq: chunks[0]!.seq - 1,
  });
  assert.equal(fromFirst.evictedBytes, 0, "a reader at the oldest retained chunk missed nothing");
  const partway = await call(client, "process/read", { processId: "drop", afterSeq: 3 });
  const first3 = client.log.processEvents("drop").filter((m) => m.method === "process/output")
    .slice(0, 3).reduce(
      (n, m) => n + Uint8Array.fromBase64((m.params as { chunk: string }).chunk).length,
      0,
    );
  assert.equal(partway.evictedBytes, total - retained - first3);
});

Deno.test("protocol/describe returns the version, the extensions and the JSON Schema", async () => {
  await using server = await session();
  const client = server.stdio;
  const described = await call(client, "protocol/describe");
  assert.equal(described.version, (server.init.environmentInfo as Json).executorVersion);
  const capabilities = (server.init.environmentInfo as Json).capabilities as Json;
  assert.deepEqual(described.extensions, ALL.filter((name) => capabilities[name] === true));
  // (Compared as text: the harness decodes integers above 2^53 as bigints.)
  assert.equal(toJson(described.schema), JSON.stringify(protocolJsonSchema()));
  await using fresh = InProcessServer.stdio();
  const gated = await fresh.stdio.request(1, "protocol/describe");
  assert.deepEqual(gated.error, {
    code: -32600,
    message: "client must call initialize before using environment info methods",
  });
});

function fakeHost(): ProcessHost {
  return {
    read: () => Promise.reject(new Error("not expected")),
    write: () => Promise.reject(new Error("not expected")),
    closeStdin: () => Promise.reject(new Error("not expected")),
    signal: () => Promise.reject(new Error("not expected")),
    terminate: () => Promise.reject(new Error("not expected")),
    resize: () => Promise.reject(new Error("not expected")),
    release: () => {},
  };
}

Deno.test("ProcessHandle text() never splits a multi-byte character across chunks", async () => {
  const handle = new TrackedProcess("p", fakeHost());
  const output = (seq: number, stream: "stdout" | "stderr", bytes: number[]) =>
    handle.notify({
      method: "process/output",
      params: { processId: "p", seq, stream, chunk: Uint8Array.from(bytes).toBase64() },
    });
  output(1, "stdout", [0x61, 0xc3]); // "a" and the first byte of "é"
  output(2, "stderr", [0xe2, 0x82]); // two bytes of "€"
  output(3, "stdout", [0xa9, 0xf0, 0x9f]); // the rest of "é", half of "😀"
  output(4, "stderr", [0xac]);
  output(5, "stdout", [0x98, 0x80, 0x0a]);
  handle.notify({
    method: "process/exited",
    params: { processId: "p", seq: 6, exitCode: 0, sandboxDenied: false },
  });
  handle.notify({ method: "process/closed", params: { processId: "p", seq: 7 } });
  const pieces: string[] = [];
  for await (const piece of handle.text()) pieces.push(piece);
  assert.ok(pieces.every((piece) => !piece.includes("\uFFFD")), JSON.stringify(pieces));
  assert.deepEqual(pieces, ["a", "é", "€", "😀\n"]);
});

Deno.test("ProcessHandle text() can keep one stream and flushes a truncated character", async () => {
  const handle = new TrackedProcess("p", fakeHost());
  handle.notify({
    method: "process/output",
    params: { processId: "p", seq: 1, stream: "stderr", chunk: btoa("err") },
  });
  handle.notify({
    method: "process/output",
    params: {
      processId: "p",
      seq: 2,
      stream: "stdout",
      chunk: Uint8Array.of(0x6f, 0xe2).toBase64(),
    },
  });
  handle.notify({
    method: "process/exited",
    params: { processId: "p", seq: 3, exitCode: 0, sandboxDenied: false },
  });
  handle.notify({ method: "process/closed", params: { processId: "p", seq: 4 } });
  const pieces: string[] = [];
  for await (const piece of handle.text({ stream: "stdout" })) pieces.push(piece);
  assert.deepEqual(pieces, ["o", "\uFFFD"]);
});

Deno.test("client process handles resize, signal, close stdin and terminate with a grace", async (t) => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  for (const name of ["processSignals", "processStdinClose", "processLosslessOutput"]) {
    assert.ok(client.extensions.has(name), `${name} is granted by default`);
  }
  await t.step("closeStdin() ends the input after the writes before it", async () => {
    const proc = await client.startProcess({ argv: ["/bin/cat"], pipeStdin: true, env: ENV });
    const text = collectText(proc);
    await proc.write("one\n");
    await proc.closeStdin();
    assert.equal(await text, "one\n");
    assert.equal(await proc.exited, 0);
    assert.equal(proc.exitSignal, null);
  });
  await t.step("signal() and terminate({graceMs}) report the ending signal", async () => {
    const proc = await client.startProcess({
      argv: sh("trap 'echo hup' HUP; echo ready; while :; do sleep 0.05; done"),
      env: ENV,
    });
    const pieces = proc.text()[Symbol.asyncIterator]();
    let seen = "";
    while (!seen.includes("ready\n")) seen += (await pieces.next()).value;
    await proc.signal("hangup");
    while (!seen.includes("hup\n")) seen += (await pieces.next()).value;
    assert.equal(await proc.terminate({ graceMs: 60_000 }), true);
    assert.equal(await proc.exited, 143);
    assert.equal(proc.exitSignal, "SIGTERM");
    while (!(await pieces.next()).done) { /* drain */ }
  });
  await t.step("resize() reaches a tty process", async (t) => {
    if (!client.extensions.has("processResize")) {
      await t.step({ name: "skipped: no pseudo-terminals here", ignore: true, fn() {} });
      return;
    }
    const proc = await client.startProcess({
      argv: sh("trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done"),
      env: ENV,
      tty: true,
      size: { rows: 10, cols: 20 },
    });
    const pieces = proc.text()[Symbol.asyncIterator]();
    let seen = "";
    while (!seen.includes("ready")) seen += (await pieces.next()).value;
    await proc.resize(50, 60);
    while (true) {
      const next = await pieces.next();
      if (next.done) break;
      seen += next.value;
    }
    assert.equal(seen, "ready\r\n50 60\r\n");
  });
});

Deno.test("client output block loses nothing for a consumer that starts late", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url, { maxBufferedBytes: 1 });
  let notified = 0;
  const full = Promise.withResolvers<void>();
  client.on("process/output", ({ chunk }) => {
    notified += Uint8Array.fromBase64(chunk).length;
    if (notified > 1024 * 1024) full.resolve();
  });
  const count = 300_000;
  const proc = await client.startProcess({
    argv: ["/usr/bin/seq", "1", String(count)],
    env: ENV,
    output: "block",
  });
  await full.promise; // The server holds a full ring that nobody has read.
  assert.equal(proc.exitCode, undefined, "the process waits for its output to be read");
  let text = "";
  for await (const event of proc) {
    assert.equal(event.kind, "output", "no gaps");
    if (event.kind === "output") text += decoder.decode(event.data);
  }
  assert.equal(text, seqOutput(count));
  assert.equal(await proc.exited, 0);
});

Deno.test("client output block acknowledges taken output so the process runs to the end", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url);
  const count = 300_000; // more than the server retains: without acknowledgements it would stall
  const proc = await client.startProcess({
    argv: ["/usr/bin/seq", "1", String(count)],
    env: ENV,
    output: "block",
  });
  assert.equal(await collectText(proc), seqOutput(count));
  assert.equal(await proc.exited, 0);
});

Deno.test("client without extensions refuses extension calls with a clear error", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await connect(server.url, { extensions: [] });
  assert.equal(client.extensions.size, 0);
  const proc = await client.startProcess({ argv: ["/bin/cat"], pipeStdin: true, env: ENV });
  await assert.rejects(proc.closeStdin(), /did not grant the processStdinClose extension/);
  await assert.rejects(proc.signal("kill"), /did not grant the processSignals extension/);
  await assert.rejects(
    client.startProcess({ argv: ["/bin/true"], output: "block" }),
    /did not grant the processLosslessOutput extension/,
  );
  assert.equal(await proc.terminate(), true);
  await proc.exited;
});
