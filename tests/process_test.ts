import assert from "node:assert/strict";
import {
  eventually,
  handshake,
  type Json,
  pidsMatching,
  startStdio,
  type StdioClient,
} from "./helpers/server_harness.ts";
import { InProcessServer, inProcessSession } from "./helpers/in_process_server.ts";
import {
  call,
  callError,
  nextRequestId,
  PROCESS_ENV,
  sh,
  startParams,
  startProcess as start,
} from "./helpers/rpc.ts";

const decoder = new TextDecoder();

interface Chunk {
  seq: number;
  stream: string;
  chunk: string;
}

function readResult(result: Json) {
  return result as unknown as {
    chunks: Chunk[];
    nextSeq: number;
    exited: boolean;
    exitCode: number | null;
    closed: boolean;
    failure: unknown;
    sandboxDenied: boolean;
  };
}

function text(chunks: Chunk[], stream?: string): string {
  return decoder.decode(
    Uint8Array.from(
      chunks.filter((c) => stream === undefined || c.stream === stream)
        .flatMap((c) => [...Uint8Array.fromBase64(c.chunk)]),
    ),
  );
}

function unique(): string {
  return String(Math.floor(Math.random() * 1e9));
}

Deno.test("process seq numbers cover output, exited and closed in strictly increasing order", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "p", sh("for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; exit 4"));
  const events = await client.log.processClosed("p");
  const seqs = events.map((m) => (m.params as { seq: number }).seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "arrival order is seq order");
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), "no gaps from 1");
  const last = events[events.length - 1]!;
  assert.equal(last.method, "process/closed");
  const exited = events.filter((m) => m.method === "process/exited");
  assert.equal(exited.length, 1);
  assert.equal((exited[0]!.params as { exitCode: number }).exitCode, 4);
  assert.equal((exited[0]!.params as { sandboxDenied: boolean }).sandboxDenied, false);
  assert.equal(client.log.outputText("p"), "out1\nout2\nout3\nout4\nout5\n");
  assert.equal(client.log.outputText("p", "stderr"), "err1\nerr2\nerr3\nerr4\nerr5\n");
  const read = readResult(await call(client, "process/read", { processId: "p" }));
  assert.equal(read.nextSeq, seqs.length + 1, "nextSeq is one past closed");
  assert.equal(read.exitCode, 4);
  assert.equal(read.closed, true);
  assert.equal(read.failure, null);
  assert.deepEqual(
    read.chunks.map((c) => c.seq),
    events.filter((m) => m.method === "process/output").map((m) => (m.params as Chunk).seq),
  );
});

Deno.test("process that prints nothing gets exited seq 1 and closed seq 2", async () => {
  await using server = await inProcessSession();
  await start(server.stdio, "quiet", ["/bin/true"]);
  const events = await server.stdio.log.processClosed("quiet");
  assert.deepEqual(events.map((m) => [m.method, (m.params as { seq: number }).seq]), [
    ["process/exited", 1],
    ["process/closed", 2],
  ]);
});

/** The spec's paging rule (§8.5), as a model to check the server against. */
function modelRead(chunks: Chunk[], processNextSeq: number, afterSeq: number, maxBytes?: number) {
  const after = chunks.filter((c) => c.seq > afterSeq);
  if (maxBytes === undefined) return { seqs: after.map((c) => c.seq), nextSeq: processNextSeq };
  const picked: Chunk[] = [];
  let total = 0;
  for (const chunk of after) {
    const size = Uint8Array.fromBase64(chunk.chunk).length;
    if (picked.length > 0 && total + size > maxBytes) break;
    picked.push(chunk);
    total += size;
    if (total >= maxBytes) break;
  }
  const last = picked[picked.length - 1];
  return { seqs: picked.map((c) => c.seq), nextSeq: last ? last.seq + 1 : processNextSeq };
}

Deno.test("process/read pages with maxBytes and reports nextSeq like the reference", async (t) => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "r1", sh("printf aaaa; sleep 0.3; printf bbbbbb; sleep 0.3; printf cc"));
  const events = await client.log.processClosed("r1");
  const chunks = events.filter((m) => m.method === "process/output").map((m) => m.params as Chunk);
  assert.equal(text(chunks), "aaaabbbbbbcc");
  const processNextSeq = events.length + 1;
  const cases: [number | undefined, number | undefined][] = [
    [undefined, undefined],
    [undefined, 0],
    [undefined, 1],
    [undefined, 5],
    [undefined, 10],
    [undefined, 1000],
    [1, 6],
    [1, undefined],
    [chunks[chunks.length - 1]!.seq, undefined],
    [chunks[chunks.length - 1]!.seq, 1000],
    [100, undefined],
  ];
  for (const [afterSeq, maxBytes] of cases) {
    await t.step(`afterSeq ${afterSeq} maxBytes ${maxBytes}`, async () => {
      const read = readResult(
        await call(client, "process/read", { processId: "r1", afterSeq, maxBytes }),
      );
      const want = modelRead(chunks, processNextSeq, afterSeq ?? 0, maxBytes);
      assert.deepEqual({ seqs: read.chunks.map((c) => c.seq), nextSeq: read.nextSeq }, want);
      assert.equal(read.exited, true);
      assert.equal(read.closed, true);
    });
  }
  await t.step("with the reference's chunking the recorded numbers come out", async () => {
    if (chunks.length !== 3) return; // Chunking is implementation-defined; checked by the model above.
    const read = async (p: Json) => {
      const r = readResult(await call(client, "process/read", { processId: "r1", ...p }));
      return [r.chunks.map((c) => c.seq), r.nextSeq];
    };
    assert.deepEqual(await read({}), [[1, 2, 3], 6]);
    assert.deepEqual(await read({ maxBytes: 1 }), [[1], 2]);
    assert.deepEqual(await read({ maxBytes: 10 }), [[1, 2], 3]);
    assert.deepEqual(await read({ maxBytes: 1000 }), [[1, 2, 3], 4]);
    assert.deepEqual(await read({ afterSeq: 3, maxBytes: 1000 }), [[], 6]);
    assert.deepEqual(await read({ afterSeq: null, maxBytes: null, waitMs: null }), [[1, 2, 3], 6]);
  });
});

Deno.test("process/read long poll", async (t) => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await t.step("waitMs 0 returns at once with nothing for a quiet running process", async () => {
    await start(client, "idle", ["/bin/sleep", "30"]);
    const read = readResult(await call(client, "process/read", { processId: "idle", waitMs: 0 }));
    assert.deepEqual(read.chunks, []);
    assert.equal(read.nextSeq, 1);
    assert.equal(read.exited, false);
    assert.equal(read.exitCode, null);
    await call(client, "process/terminate", { processId: "idle" });
  });
  await t.step("a long poll is woken by output", async () => {
    await start(client, "late", sh("sleep 0.3; echo woke; sleep 30"));
    const read = readResult(
      await call(client, "process/read", { processId: "late", afterSeq: 0, waitMs: 600_000 }),
    );
    assert.equal(text(read.chunks), "woke\n");
    assert.equal(read.exited, false);
    await call(client, "process/terminate", { processId: "late" });
  });
  await t.step("a long poll is woken by an exit without output", async () => {
    await start(client, "silent", sh("sleep 0.3; exit 5"));
    const read = readResult(
      await call(client, "process/read", { processId: "silent", waitMs: 600_000 }),
    );
    assert.equal(read.exited, true);
    assert.equal(read.exitCode, 5);
  });
  await t.step("a poll past every event returns once the process is closed", async () => {
    await client.log.processClosed("silent");
    const read = readResult(
      await call(client, "process/read", { processId: "silent", afterSeq: 100, waitMs: 600_000 }),
    );
    assert.deepEqual(read.chunks, []);
    assert.equal(read.closed, true);
  });
  await t.step("unknown processes are an error", async () => {
    assert.deepEqual(await callError(client, "process/read", { processId: "nope" }), {
      code: -32600,
      message: "unknown process id nope",
    });
  });
});

Deno.test("process/write delivers a repeated writeId once", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "cat", ["/bin/cat"], { pipeStdin: true });
  const write = (chunk: string, writeId: string) =>
    call(client, "process/write", { processId: "cat", chunk: btoa(chunk), writeId });
  assert.deepEqual(await write("abc\n", "w1"), { status: "accepted" });
  await client.log.waitUntil(() => client.log.outputText("cat") === "abc\n", "abc echoed");
  assert.deepEqual(await write("abc\n", "w1"), { status: "accepted" });
  assert.deepEqual(await write("def\n", "w2"), { status: "accepted" });
  await client.log.waitUntil(() => client.log.outputText("cat").includes("def"), "def echoed");
  assert.equal(client.log.outputText("cat"), "abc\ndef\n");
  assert.deepEqual(await write("", "w3"), { status: "accepted" }, "an empty chunk is accepted");
  assert.deepEqual(await write("ghi\n", "w4"), { status: "accepted" });
  await client.log.waitUntil(() => client.log.outputText("cat").includes("ghi"), "ghi echoed");
  assert.equal(client.log.outputText("cat"), "abc\ndef\nghi\n", "empty chunks do not close stdin");
  await call(client, "process/terminate", { processId: "cat" });
});

Deno.test("process/write remembers the last 4096 writeIds per process", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "cat", ["/bin/cat"], { pipeStdin: true });
  let lastId = 0;
  const send = (chunk: string, writeId: string) =>
    client.send({
      id: lastId = nextRequestId(),
      method: "process/write",
      params: { processId: "cat", chunk: btoa(chunk), writeId },
    });
  await send("A", "w0");
  for (let i = 1; i <= 4095; i++) await send(".", `w${i}`);
  await send("A", "w0"); // still remembered: not written
  await send(".", "w4096"); // the 4097th distinct id evicts w0
  await send("A", "w0"); // forgotten: written again
  await send("A", "w4096"); // remembered: not written
  const last = await client.log.response(lastId, 60_000);
  assert.deepEqual(last.result, { status: "accepted" });
  const statuses = client.log.received.map((r) => r.msg).filter((m) =>
    typeof m.id === "number" && m.id > lastId - 4100 && !("method" in m)
  );
  assert.ok(statuses.every((m) => (m.result as { status: string }).status === "accepted"));
  await client.log.waitUntil(
    () => client.log.outputText("cat").length >= 4096 + 2,
    "all bytes echoed",
    60_000,
  );
  const out = client.log.outputText("cat");
  assert.equal(out.replaceAll(".", "").length, 2, "A written exactly twice");
  assert.equal(out.replaceAll("A", "").length, 4096, "every distinct id written once");
  assert.ok(out.startsWith("A") && out.endsWith("A"));
  await call(client, "process/terminate", { processId: "cat" });
});

Deno.test("process/write reports statuses in the spec's order", async (t) => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await t.step(
    "an empty writeId is an invalid-params error even for unknown processes",
    async () => {
      assert.deepEqual(
        await callError(client, "process/write", { processId: "nope", chunk: "", writeId: "" }),
        { code: -32602, message: "writeId must not be empty" },
      );
    },
  );
  await t.step("unknown process", async () => {
    assert.deepEqual(
      await call(client, "process/write", { processId: "nope", chunk: "aGk=", writeId: "w" }),
      { status: "unknownProcess" },
    );
  });
  await t.step("a pipe process without pipeStdin has stdin closed", async () => {
    await start(client, "nostdin", ["/bin/sleep", "30"]);
    assert.deepEqual(
      await call(client, "process/write", { processId: "nostdin", chunk: "eA==", writeId: "w" }),
      { status: "stdinClosed" },
    );
    await call(client, "process/terminate", { processId: "nostdin" });
  });
  await t.step("writing after the process closed fails", async () => {
    await start(client, "gone", ["/bin/cat"], { pipeStdin: true });
    await call(client, "process/terminate", { processId: "gone" });
    await client.log.processClosed("gone");
    assert.deepEqual(
      await callError(client, "process/write", { processId: "gone", chunk: "eA==", writeId: "w" }),
      { code: -32603, message: "failed to write to process stdin" },
    );
  });
  await t.step("writing after the process exited on its own fails too", async () => {
    // The reference answers `accepted` here and drops the bytes (docs/protocol.md §14).
    await start(client, "done", ["/bin/true"], { pipeStdin: true });
    await client.log.processClosed("done");
    assert.deepEqual(
      await callError(client, "process/write", { processId: "done", chunk: "eA==", writeId: "w" }),
      { code: -32603, message: "failed to write to process stdin" },
    );
  });
  await t.step("invalid base64 is an invalid-params error", async () => {
    const error = await callError(client, "process/write", {
      processId: "gone",
      chunk: "!!",
      writeId: "w9",
    });
    assert.equal(error.code, -32602);
    assert.equal(error.message, "Invalid symbol 33, offset 0.");
  });
});

Deno.test("process/signal interrupt exits an untrapped child with 130", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "s1", ["/bin/sleep", "30"]);
  assert.deepEqual(
    await call(client, "process/signal", { processId: "s1", signal: "interrupt" }),
    {},
  );
  const events = await client.log.processClosed("s1");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 130);
  assert.deepEqual(
    await call(client, "process/signal", { processId: "s1", signal: "interrupt" }),
    {},
    "signalling an exited process is fine",
  );
  assert.deepEqual(
    await call(client, "process/signal", { processId: "nope", signal: "interrupt" }),
    {},
  );
  const bad = await callError(client, "process/signal", { processId: "s1", signal: "kill" });
  assert.equal(bad.message, "unknown variant `kill`, expected `interrupt`");
});

Deno.test("process/signal interrupt reaches a trapping shell", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(
    client,
    "s2",
    sh("trap 'echo caught; exit 7' INT; echo armed; while :; do sleep 0.1; done"),
  );
  await client.log.waitUntil(() => client.log.outputText("s2") === "armed\n", "armed");
  await call(client, "process/signal", { processId: "s2", signal: "interrupt" });
  const events = await client.log.processClosed("s2");
  assert.equal(client.log.outputText("s2"), "armed\ncaught\n");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 7);
});

Deno.test("process/start beyond --max-processes live processes of the whole server fails with limitReached until one has ended", async () => {
  await using server = await InProcessServer.websocket({ maxProcesses: 2 });
  await using first = await server.connect();
  await using second = await server.connect();
  await handshake(first);
  await handshake(second);
  await start(first, "a", ["/bin/sleep", "30"]);
  await start(second, "b", ["/bin/sleep", "30"]);
  const refusal = {
    code: -32603,
    message: "Cannot spawn a process: the limit of 2 live processes (--max-processes) is reached",
    data: { kind: "limitReached" },
  };
  assert.deepEqual(
    await callError(first, "process/start", startParams("c", ["/bin/true"])),
    refusal,
  );
  assert.deepEqual(
    await callError(second, "process/start", startParams("c", ["/bin/true"])),
    refusal,
  );
  // A refused start leaves no entry behind; the process counts until it has exited and closed.
  assert.equal(
    (await callError(first, "process/read", { processId: "c" })).message,
    "unknown process id c",
  );
  await call(second, "process/terminate", { processId: "b" });
  await second.log.processClosed("b");
  await start(first, "c", ["/bin/true"]);
  await first.log.processClosed("c");
  await call(first, "process/terminate", { processId: "a" });
  await first.log.processClosed("a");
});

Deno.test("process/terminate kills the whole process group with SIGKILL (137)", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const tag = unique();
  const needle = `sleep 1000.${tag}`;
  await start(client, "grp", sh(`trap '' TERM; sleep 1000.${tag} & sleep 1000.${tag}; echo never`));
  assert.ok(await eventually(() => pidsMatching(needle).length >= 2), "both sleeps are running");
  assert.deepEqual(await call(client, "process/terminate", { processId: "grp" }), {
    running: true,
  });
  const events = await client.log.processClosed("grp");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 137);
  assert.ok(
    await eventually(() => pidsMatching(needle).length === 0),
    `group members left: ${pidsMatching(needle)}`,
  );
  assert.deepEqual(await call(client, "process/terminate", { processId: "grp" }), {
    running: false,
  });
  assert.deepEqual(await call(client, "process/terminate", { processId: "nope" }), {
    running: false,
  });
  const read = readResult(await call(client, "process/read", { processId: "grp" }));
  assert.equal(read.exitCode, 137, "terminate does not remove the entry");
});

Deno.test("process/exited for a child a signal killed is 128 + signal on pipes and 1 on a tty, as the reference sends", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  // Asked of the reference (`sh -c 'kill -9 $$'`, `kill -TERM $$`): 137 and 143 with pipes, 1 and 1
  // with a tty.
  const cases = [
    { id: "kill9-pipe", signal: "KILL", tty: false, exitCode: 137 },
    { id: "term-pipe", signal: "TERM", tty: false, exitCode: 143 },
    { id: "kill9-tty", signal: "KILL", tty: true, exitCode: 1 },
    { id: "term-tty", signal: "TERM", tty: true, exitCode: 1 },
  ];
  for (const { id, signal, tty } of cases) {
    await start(client, id, sh(`kill -${signal} $$`), { tty });
  }
  for (const { id, exitCode } of cases) {
    const exited = (await client.log.processClosed(id)).find((m) => m.method === "process/exited")!;
    assert.equal((exited.params as { exitCode: number }).exitCode, exitCode, id);
  }
});

Deno.test("process output ring keeps at most 1 MiB, evicting the oldest whole chunks", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const total = 3 * 1024 * 1024 / 2;
  await start(client, "big", sh(`head -c ${total} /dev/zero | tr '\\0' x`));
  const events = await client.log.processClosed("big", 60_000);
  const outputs = events.filter((m) => m.method === "process/output").map((m) => m.params as Chunk);
  const sizes = new Map(outputs.map((c) => [c.seq, Uint8Array.fromBase64(c.chunk).length]));
  assert.equal([...sizes.values()].reduce((a, b) => a + b, 0), total, "notifications carry all");
  const read = readResult(await call(client, "process/read", { processId: "big" }));
  const retained = read.chunks.reduce((n, c) => n + Uint8Array.fromBase64(c.chunk).length, 0);
  assert.ok(retained <= 1024 * 1024, `retained ${retained} bytes`);
  const firstEvicted = read.chunks[0]!.seq - 1;
  assert.ok(firstEvicted >= 1, "the oldest chunks were evicted");
  assert.ok(
    retained + sizes.get(firstEvicted)! > 1024 * 1024,
    "only as many chunks as needed are evicted",
  );
  const seqs = read.chunks.map((c) => c.seq);
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0]! + i));
  assert.equal(seqs[seqs.length - 1], outputs[outputs.length - 1]!.seq, "the newest chunk is kept");
  const paged = readResult(
    await call(client, "process/read", { processId: "big", afterSeq: 0, maxBytes: 1 }),
  );
  assert.equal(paged.chunks[0]!.seq, seqs[0], "paging starts at the oldest retained chunk");
});

async function envOf(
  client: StdioClient,
  processId: string,
  env: Record<string, string>,
  envPolicy?: Json,
): Promise<Record<string, string>> {
  await call(client, "process/start", {
    processId,
    argv: ["/usr/bin/env", "-0"],
    cwd: "file:///tmp",
    env,
    tty: false,
    ...(envPolicy ? { envPolicy } : {}),
  });
  await client.log.processClosed(processId);
  const out: Record<string, string> = {};
  for (const entry of client.log.outputText(processId).split("\0")) {
    if (!entry) continue;
    const eq = entry.indexOf("=");
    out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

function policy(overrides: Json): Json {
  return {
    inherit: "none",
    ignoreDefaultExcludes: false,
    exclude: [],
    set: {},
    includeOnly: [],
    ...overrides,
  };
}

Deno.test("process/start envPolicy builds the child environment (docs/protocol.md §8.2)", async (t) => {
  // The server's own environment matters here: a subprocess with exactly this one.
  await using server = await startStdio({
    env: {
      PATH: "/usr/bin:/bin",
      HOME: "/root",
      LANG: "C.UTF-8",
      USER: "root",
      FOO: "bar",
      TERM: "xterm",
      USERNAME: "u",
      LC_MESSAGES: "m",
      MY_SECRET_TOKEN: "s",
      API_KEY: "k",
      CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE: "1",
    },
  });
  await handshake(server.stdio);
  const client = server.stdio;
  await t.step("without envPolicy the environment is exactly env", async () => {
    assert.deepEqual(await envOf(client, "e0", { ONLY_THIS: "1" }), { ONLY_THIS: "1" });
  });
  await t.step(
    "inherit all drops *KEY*, *SECRET*, *TOKEN* and the server-only variable",
    async () => {
      const env = await envOf(client, "e1", {}, policy({ inherit: "all" }));
      assert.equal(env.FOO, "bar");
      assert.equal(env.PATH, "/usr/bin:/bin");
      assert.equal(env.TERM, "xterm");
      assert.equal(env.MY_SECRET_TOKEN, undefined);
      assert.equal(env.API_KEY, undefined);
      assert.equal(env.CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE, undefined);
    },
  );
  await t.step("ignoreDefaultExcludes keeps them", async () => {
    const env = await envOf(
      client,
      "e2",
      {},
      policy({ inherit: "all", ignoreDefaultExcludes: true }),
    );
    assert.equal(env.MY_SECRET_TOKEN, "s");
    assert.equal(env.API_KEY, "k");
  });
  await t.step("inherit core keeps only the core variables", async () => {
    const env = await envOf(client, "e3", {}, policy({ inherit: "core" }));
    assert.deepEqual(Object.keys(env).sort(), ["HOME", "LANG", "PATH", "USER"]);
  });
  await t.step("inherit none starts empty and set inserts", async () => {
    assert.deepEqual(await envOf(client, "e4", {}, policy({ set: { A: "1" } })), { A: "1" });
  });
  await t.step("exclude globs are case-insensitive", async () => {
    const env = await envOf(
      client,
      "e5",
      {},
      policy({ inherit: "all", exclude: ["foo*", "t?rm"] }),
    );
    assert.equal(env.FOO, undefined);
    assert.equal(env.TERM, undefined);
    assert.equal(env.HOME, "/root");
  });
  await t.step("set is inserted after the excludes", async () => {
    const env = await envOf(client, "e6", {}, policy({ exclude: ["*"], set: { KEEP_KEY: "v" } }));
    assert.deepEqual(env, { KEEP_KEY: "v" });
  });
  await t.step(
    "includeOnly keeps matching names (case-insensitive), env is overlaid after",
    async () => {
      const env = await envOf(
        client,
        "e7",
        { Z: "1" },
        policy({ inherit: "all", includeOnly: ["p*", "HOME"], set: { X: "set" } }),
      );
      assert.deepEqual(env, { PATH: "/usr/bin:/bin", HOME: "/root", Z: "1" });
    },
  );
  await t.step("env beats set", async () => {
    const env = await envOf(client, "e8", { X: "env" }, policy({ set: { X: "set", Y: "y" } }));
    assert.deepEqual(env, { X: "env", Y: "y" });
  });
  await t.step("envPolicy requires all five members", async () => {
    const error = await callError(client, "process/start", {
      processId: "e9",
      argv: ["/usr/bin/env"],
      cwd: "file:///tmp",
      env: {},
      tty: false,
      envPolicy: { inherit: "all" },
    });
    assert.equal(error.code, -32602);
    assert.equal(error.message, "missing field `ignoreDefaultExcludes`");
  });
});

Deno.test("process/start with tty runs on a 24x80 pty and reports one pty stream with CRLF", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "t1", sh("printf 'a\\nb\\n'; stty size"), { tty: true });
  const events = await client.log.processClosed("t1");
  const streams = new Set(
    events.filter((m) => m.method === "process/output").map((m) => (m.params as Chunk).stream),
  );
  assert.deepEqual([...streams], ["pty"]);
  assert.equal(client.log.outputText("t1", "pty"), "a\r\nb\r\n24 80\r\n");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 0);
});

Deno.test("process/start with tty takes stdin writes and exits 1 on terminate", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "t2", sh("stty -echo; echo ready; read x; echo got:$x; sleep 30"), {
    tty: true,
  });
  await client.log.waitUntil(() => client.log.outputText("t2", "pty") === "ready\r\n", "ready");
  assert.deepEqual(
    await call(client, "process/write", { processId: "t2", chunk: btoa("hello\n"), writeId: "w1" }),
    { status: "accepted" },
  );
  await client.log.waitUntil(
    () => client.log.outputText("t2", "pty").includes("got:hello\r\n"),
    "got:hello",
  );
  assert.deepEqual(await call(client, "process/terminate", { processId: "t2" }), { running: true });
  const events = await client.log.processClosed("t2");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 1, "tty signal deaths report 1");
});

Deno.test("process/start rejects bad requests with the reference's errors", async (t) => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const startError = (processId: string, argv: string[], extra: Json = {}) =>
    callError(client, "process/start", startParams(processId, argv, extra));
  await t.step("empty argv", async () => {
    assert.deepEqual(await startError("a", []), {
      code: -32602,
      message: "argv must not be empty",
    });
  });
  await t.step("missing program", async () => {
    assert.deepEqual(await startError("b", ["/nonexistent/bin"]), {
      code: -32603,
      data: { kind: "spawnNotFound" },
      message: "No such file or directory (os error 2)",
    });
  });
  await t.step("a directory as program", async () => {
    assert.deepEqual(await startError("c", ["/tmp"]), {
      code: -32603,
      data: { kind: "spawnPermissionDenied" },
      message: "Permission denied (os error 13)",
    });
  });
  await t.step("a program not on the child's PATH", async () => {
    const error = await startError("d", ["ls"], { env: { PATH: "/nonexistent" } });
    assert.equal((error.data as { kind: string }).kind, "spawnNotFound");
  });
  await t.step("empty program", async () => {
    assert.deepEqual(await startError("e", [""]), {
      code: -32603,
      data: { kind: "spawnFailed" },
      message: "missing program for pipe spawn",
    });
  });
  await t.step("a native path as cwd", async () => {
    const error = await startError("f", ["/bin/true"], { cwd: "/tmp" });
    assert.equal(error.code, -32602);
    assert.equal(error.message, "invalid URI: relative URL without a base");
  });
  await t.step("a cwd on another host or a drive is invalid params naming the cwd", async () => {
    assert.deepEqual(await startError("h", ["/bin/true"], { cwd: "file://OtherHost/tmp/../x" }), {
      code: -32602,
      message: "cwd URI `file://otherhost/x` is not valid on this exec-server host: " +
        "'file://otherhost/x' is invalid on 'linux'",
    });
    assert.deepEqual(await startError("h", ["/bin/true"], { cwd: "file:///C:/x" }), {
      code: -32602,
      message: "cwd URI `file:///C:/x` is not valid on this exec-server host: " +
        "'file:///C:/x' is invalid on 'linux'",
    });
  });
  await t.step("a missing cwd", async () => {
    assert.deepEqual(
      await startError("g", ["/bin/true"], { cwd: "file:///tmp/does-not-exist-x" }),
      {
        code: -32603,
        data: { kind: "spawnNotFound" },
        message: "No such file or directory (os error 2)",
      },
    );
  });
  await t.step("a duplicate id, and the id is free again after a failed start", async () => {
    await start(client, "dup", ["/bin/sleep", "30"]);
    assert.deepEqual(await startError("dup", ["/bin/true"]), {
      code: -32600,
      data: { kind: "processExists" },
      message: "process dup already exists",
    });
    await call(client, "process/terminate", { processId: "dup" });
    await start(client, "b", ["/bin/true"]);
    await client.log.processClosed("b");
  });
  await t.step("arg0 is what the program sees as $0", async () => {
    await start(client, "argv0", sh("echo $0"), { arg0: "custom-argv0" });
    await client.log.processClosed("argv0");
    assert.equal(client.log.outputText("argv0"), "custom-argv0\n");
  });
});

Deno.test("process output delivered after exit keeps closed last (background child holds stdout)", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(
    client,
    "o1",
    sh("echo first; (sleep 0.5; echo late-from-background-child) & exit 0"),
  );
  const events = await client.log.processClosed("o1");
  assert.equal(client.log.outputText("o1"), "first\nlate-from-background-child\n");
  const kinds = events.map((m) => m.method);
  assert.ok(kinds.indexOf("process/exited") < kinds.lastIndexOf("process/output"));
  assert.equal(kinds[kinds.length - 1], "process/closed");
});

Deno.test("process/start answers before the process's first notification, with pipes and with a tty", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const pipes = ["a", "b", "c", "d", "e"];
  const ttys = ["ta", "tb", "tc", "td", "te"];
  for (const id of pipes) await start(client, id, ["/bin/echo", id]);
  // A tty child that dies at once: its output and exit were sent before the answer.
  for (const id of ttys) await start(client, id, sh(`echo ${id}; kill -9 $$`), { tty: true });
  for (const id of [...pipes, ...ttys]) await client.log.processClosed(id);
  const received = client.log.received.map((r) => r.msg);
  for (const id of [...pipes, ...ttys]) {
    const response = received.findIndex((m) =>
      !("method" in m) && (m.result as { processId?: string } | undefined)?.processId === id
    );
    const first = received.findIndex((m) =>
      typeof m.method === "string" && (m.params as { processId?: string }).processId === id
    );
    assert.ok(response !== -1 && response < first, `${id}: response ${response}, first ${first}`);
  }
});

Deno.test("process entry is removed after the retention time and the id can be reused", async () => {
  await using server = await inProcessSession({ processRetentionMs: 1000 });
  const client = server.stdio;
  await start(client, "p", ["/bin/echo", "first"]);
  await client.log.processClosed("p");
  assert.equal(readResult(await call(client, "process/read", { processId: "p" })).closed, true);
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    const response = await client.request(nextRequestId(), "process/read", { processId: "p" });
    gone = (response.error as { message?: string } | undefined)?.message === "unknown process id p";
    if (!gone) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(gone, "the closed process was forgotten");
  assert.deepEqual(
    await call(client, "process/write", { processId: "p", chunk: "", writeId: "w" }),
    { status: "unknownProcess" },
  );
  await start(client, "p", ["/bin/echo", "second"]);
  await client.log.waitUntil(
    () => client.log.processEvents("p").filter((m) => m.method === "process/closed").length === 2,
    "the second process/closed of p",
  );
  const events = client.log.processEvents("p");
  assert.equal(events.length, 6, "the new process numbers its events from 1 again");
  assert.deepEqual(
    events.slice(3).map((m) => (m.params as { seq: number }).seq),
    [1, 2, 3],
  );
});

Deno.test("process/start with tty: interrupt exits 1 and writes after exit are accepted", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "t", ["/bin/sleep", "30"], { tty: true, env: {} });
  await call(client, "process/signal", { processId: "t", signal: "interrupt" });
  const events = await client.log.processClosed("t");
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 1);
  assert.deepEqual(
    await call(client, "process/write", { processId: "t", chunk: "eA==", writeId: "w" }),
    { status: "accepted" },
  );
});

Deno.test("process/signal interrupt on a tty signals the foreground group without echoing ^C", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "t", ["/bin/sleep", "30"], { tty: true, env: {} });
  await call(client, "process/signal", { processId: "t", signal: "interrupt" });
  await client.log.processClosed("t");
  assert.equal(client.log.outputText("t", "pty"), "", "the reference prints nothing either");
});

Deno.test("process/signal interrupt on a tty reaches a program that turned the terminal's signal keys off", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  // `stty raw` clears ISIG: a typed Ctrl-C would be read as the byte 3, not raise SIGINT.
  await start(
    client,
    "raw",
    sh("stty raw -echo; trap 'echo caught; exit 7' INT; echo armed; read line"),
    { tty: true },
  );
  await client.log.waitUntil(() => client.log.outputText("raw", "pty").includes("armed"), "armed");
  await call(client, "process/signal", { processId: "raw", signal: "interrupt" });
  const events = await client.log.processClosed("raw");
  assert.match(client.log.outputText("raw", "pty"), /caught/);
  const exited = events.find((m) => m.method === "process/exited")!;
  assert.equal((exited.params as { exitCode: number }).exitCode, 7);
});

Deno.test("process/signal interrupt on a tty stops an interactive shell's foreground job, not the shell", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  await start(client, "bash", ["/bin/bash", "--norc", "--noprofile", "-i"], {
    tty: true,
    env: { ...PROCESS_ENV, PS1: "$ ", TERM: "dumb" },
  });
  const output = () => client.log.outputText("bash", "pty");
  const write = (writeId: string, line: string) =>
    call(client, "process/write", {
      processId: "bash",
      chunk: new TextEncoder().encode(line).toBase64(),
      writeId,
    });
  await client.log.waitUntil(() => output().includes("$ "), "the first prompt");
  // Job control puts `sleep` in a group of its own, the terminal's foreground group.
  const needle = `sleep 30.${unique()}`;
  await write("w1", `${needle}; echo not-interrupted\n`);
  assert.ok(await eventually(() => pidsMatching(needle).length > 0), "sleep is running");
  await call(client, "process/signal", { processId: "bash", signal: "interrupt" });
  await write("w2", "echo still-$((40 + 2))\n");
  await client.log.waitUntil(() => output().includes("still-42"), "the shell answers again");
  assert.doesNotMatch(output(), /^not-interrupted\r$/m, "the rest of the command line did not run");
  await call(client, "process/terminate", { processId: "bash" });
  await client.log.processClosed("bash");
});
Deno.test("process/start with tty resolves argv[0] only through the child's PATH", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const startError = async (env: Record<string, string>) => {
    const error = await callError(client, "process/start", {
      processId: "t",
      argv: ["true"],
      cwd: "file:///tmp",
      env,
      tty: true,
    });
    assert.equal(error.code, -32603);
    assert.deepEqual(error.data, { kind: "spawnFailed" });
    return error.message;
  };
  assert.match(
    await startError({ PATH: "/nonexistent" }),
    /No viable candidates found in PATH "\/nonexistent"$/,
  );
  assert.match(await startError({}), /Unable to resolve the PATH$/);
  await start(client, "ok", ["true"], { tty: true, env: PROCESS_ENV });
  await client.log.processClosed("ok");
});

Deno.test("process/start runs a relative argv[0] from cwd as the absolute path it checked", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const dir = await Deno.realPath(await Deno.makeTempDir());
  try {
    await Deno.writeTextFile(`${dir}/run.sh`, '#!/bin/sh\necho "ran $0"\n', { mode: 0o755 });
    // The reference executes `./run.sh` as given, so the script's $0 is `./run.sh` there
    // (docs/protocol.md §14).
    await start(client, "rel", ["./run.sh"], { cwd: `file://${dir}` });
    await client.log.processClosed("rel");
    assert.equal(client.log.outputText("rel"), `ran ${dir}/./run.sh\n`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("process output bytes pass through unmodified, and any string is a process id", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const longId = "x".repeat(1000);
  for (const id of ["", longId, "ü id/with spaces"]) {
    await start(client, id, ["/usr/bin/printf", "\\000\\377\\376\\r\\n"]);
    await client.log.processClosed(id);
    assert.deepEqual(client.log.output(id), new Uint8Array([0, 255, 254, 13, 10]));
  }
  const error = await callError(client, "process/start", {
    processId: 5,
    argv: ["/bin/true"],
    cwd: "file:///tmp",
    env: {},
    tty: false,
  });
  assert.equal(error.message, "invalid type: number, expected a string");
});

Deno.test("a fresh server's first pipe process/start keeps stdin writes sent with it in order and reports its output and exit", async () => {
  // A server process of its own: its first pipe start answers before the pipes' sockets exist.
  await using server = await startStdio();
  const client = server.stdio!;
  await handshake(client);
  const ids = [nextRequestId(), nextRequestId(), nextRequestId()];
  // Sent together, without waiting for the start's answer.
  await client.send({
    id: ids[0],
    method: "process/start",
    params: startParams("cat", ["/bin/cat"], { pipeStdin: true }),
  });
  await client.send({
    id: ids[1],
    method: "process/write",
    params: { processId: "cat", chunk: btoa("one\n"), writeId: "w1" },
  });
  await client.send({
    id: ids[2],
    method: "process/write",
    params: { processId: "cat", chunk: btoa("two\n"), writeId: "w2" },
  });
  for (const id of ids) {
    assert.equal((await client.log.response(id)).error, undefined, `request ${id}`);
  }
  await client.log.waitUntil(
    () => client.log.outputText("cat") === "one\ntwo\n",
    "one, two echoed",
  );
  await call(client, "process/terminate", { processId: "cat" });
  await start(client, "sh", sh("echo out; echo err >&2; exit 3"));
  const events = await client.log.processClosed("sh");
  assert.equal(client.log.outputText("sh"), "out\n");
  assert.equal(client.log.outputText("sh", "stderr"), "err\n");
  const exited = events.find((m) => m.method === "process/exited")?.params as { exitCode?: number };
  assert.equal(exited.exitCode, 3);
});

Deno.test("a pipe process without a stdin pipe reads end of file from /dev/null opened read-only, on a fresh server's first start and on a later one", async () => {
  // A server process of its own: its first pipe start collects the exit once the sockets exist.
  await using server = await startStdio();
  const client = server.stdio!;
  await handshake(client);
  const script = "readlink /proc/$$/fd/0; sed -n 's/^flags:[[:space:]]*//p' /proc/$$/fdinfo/0; " +
    "cat; echo end; exit 5";
  for (const id of ["first", "later"]) {
    await start(client, id, sh(script));
    const events = await client.log.processClosed(id);
    const [path, flags, end] = client.log.outputText(id).split("\n");
    assert.equal(path, "/dev/null", id);
    // Read-only, and not closed on exec.
    assert.equal(parseInt(flags!, 8) & 0o2000003, 0, `${id}: flags ${flags}`);
    assert.equal(end, "end", id);
    const exited = events.find((m) => m.method === "process/exited")?.params as {
      exitCode?: number;
    };
    assert.equal(exited.exitCode, 5, id);
  }
});

Deno.test("process/write bytes reach two children whose stdin pipes are full whole and in order, in shared bursts of requests", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const dir = await Deno.makeTempDir();
  try {
    const chunks: Uint8Array[] = [];
    let seed = 7;
    for (let i = 0; i < 400; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const chunk = new Uint8Array(1 + (seed % 20_000));
      for (let j = 0; j < chunk.length; j++) chunk[j] = (seed + i * 31 + j * 7) & 0xff;
      chunks.push(chunk);
    }
    // Each child reads nothing until its gate opens, so its pipe fills and the rest waits while
    // the other child's batches go through the server's shared write buffer.
    const children = { a: chunks, b: chunks.map((chunk) => chunk.toReversed()) };
    for (const [id, sent] of Object.entries(children)) {
      const made = await new Deno.Command("mkfifo", { args: [`${dir}/${id}`] }).output();
      assert.ok(made.success, "mkfifo");
      const total = sent.reduce((n, c) => n + c.length, 0);
      const script = `read _ < ${dir}/${id}; head -c ${total} | sha256sum`;
      await start(client, id, sh(script), { pipeStdin: true });
    }
    const write = (processId: string, chunk: Uint8Array, writeId: string) =>
      call(client, "process/write", { processId, chunk: chunk.toBase64(), writeId });
    for (let i = 0; i < chunks.length; i += 16) {
      const burst = Object.entries(children).flatMap(([id, sent]) =>
        sent.slice(i, i + 16).map((chunk, j) => write(id, chunk, `w${i + j}`))
      );
      for (const answer of await Promise.all(burst)) {
        assert.deepEqual(answer, { status: "accepted" });
      }
    }
    for (const [id, sent] of Object.entries(children)) {
      const gate = await Deno.open(`${dir}/${id}`, { write: true });
      await gate.write(new TextEncoder().encode("go\n"));
      gate.close();
      const all = new Uint8Array(sent.reduce((n, c) => n + c.length, 0));
      sent.reduce((offset, c) => (all.set(c, offset), offset + c.length), 0);
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
      const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
      await client.log.processClosed(id);
      assert.equal(client.log.outputText(id).split(" ")[0], hex, `the bytes ${id} read`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
