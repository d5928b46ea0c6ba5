import assert from "node:assert/strict";
import {
  connect,
  type ExecClient,
  ExecOutputLimitError,
  ExecOutputLostError,
  ExecTimeoutError,
  RemoteError,
} from "../mod.ts";
import { DEFAULT_MAX_OUTPUT_BYTES } from "../lib/client/exec.ts";
import { serveWebSocket } from "../lib/server/listen/listen.ts";
import { FAKE_ENVIRONMENT_INFO, startScriptedServer } from "./fixtures/scripted_server.ts";

/** Runs `fn` with a client of a server in this process; both are stopped afterwards. */
async function withClient(fn: (client: ExecClient) => Promise<void>): Promise<void> {
  const server = await serveWebSocket();
  try {
    await using client = await connect(server.url);
    await fn(client);
  } finally {
    await server.shutdown();
  }
}

function pidAlive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

Deno.test("client.exec resolves with the exit code and stdout and stderr as text", async () => {
  await withClient(async (client) => {
    const result = await client.exec(["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert.deepEqual(result, { exitCode: 3, stdout: "out\n", stderr: "err\n" });
  });
});

Deno.test("client.exec never splits a UTF-8 character written in two pieces", async () => {
  await withClient(async (client) => {
    const { stdout } = await client.exec([
      "sh",
      "-c",
      "printf '\\342\\202'; sleep 0.2; printf '\\254\\n'",
    ]);
    assert.equal(stdout, "€\n");
  });
});

Deno.test("client.exec with encoding bytes returns every byte value exactly", async () => {
  await withClient(async (client) => {
    const all = new Uint8Array(256).map((_, i) => i);
    const { stdout, stderr } = await client.exec(["cat"], { stdin: all, encoding: "bytes" });
    assert.ok(stdout instanceof Uint8Array);
    assert.deepEqual(stdout, all);
    assert.deepEqual(stderr, new Uint8Array());
  });
});

Deno.test("client.exec stdin may be a string, bytes or a ReadableStream, then ends", async (t) => {
  await withClient(async (client) => {
    await t.step("string", async () => {
      assert.equal((await client.exec(["cat"], { stdin: "héllo" })).stdout, "héllo");
    });
    await t.step("bytes", async () => {
      const stdin = new TextEncoder().encode("bytes");
      assert.equal((await client.exec(["cat"], { stdin })).stdout, "bytes");
    });
    await t.step("stream", async () => {
      const stdin = ReadableStream.from(["a", "b", "c"].map((s) => new TextEncoder().encode(s)));
      assert.equal((await client.exec(["wc", "-c"], { stdin })).stdout.trim(), "3");
    });
    await t.step("none: stdin is empty", async () => {
      assert.equal((await client.exec(["cat"])).stdout, "");
    });
  });
});

Deno.test("client.exec cwd takes a plain absolute path or a file: URL, not a relative path", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es exec %#" });
  try {
    await withClient(async (client) => {
      assert.equal((await client.exec(["pwd"], { cwd: dir })).stdout, `${dir}\n`);
      const url = new URL(`file://${encodeURI(dir).replaceAll("#", "%23").replaceAll("?", "%3F")}`);
      assert.equal((await client.exec(["pwd"], { cwd: url })).stdout, `${dir}\n`);
      await assert.rejects(() => client.exec(["pwd"], { cwd: "tmp" }), TypeError);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client.exec past timeoutMs kills the process group and rejects with ExecTimeoutError", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await withClient(async (client) => {
      // 3 s: time enough for the shell to print and write the pid under any load (the
      // output before the timeout is part of what this pins).
      const err = await client.exec(
        ["sh", "-c", `sleep 30 & echo $! > ${dir}/pid; echo started; wait`],
        { timeoutMs: 3000 },
      ).then(() => undefined, (e) => e);
      assert.ok(err instanceof ExecTimeoutError, String(err));
      assert.equal(err.timeoutMs, 3000);
      assert.equal(err.partial.stdout, "started\n");
      const pid = Number(await Deno.readTextFile(`${dir}/pid`));
      for (let i = 0; i < 100 && pidAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(!pidAlive(pid), "the background job of the group was killed");
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client.exec aborted by its signal rejects with the signal's reason", async () => {
  await withClient(async (client) => {
    const controller = new AbortController();
    const running = client.exec(["sleep", "30"], { signal: controller.signal });
    const reason = new Error("stop");
    setTimeout(() => controller.abort(reason), 100);
    await assert.rejects(running, (err) => err === reason);
    await assert.rejects(
      () => client.exec(["true"], { signal: AbortSignal.abort(reason) }),
      (err) => err === reason,
    );
  });
});

Deno.test("client.exec aborted while its process is starting terminates it and rejects with the reason", async () => {
  await withClient(async (client) => {
    const controller = new AbortController();
    const reason = new Error("stop");
    const running = client.exec(["sleep", "30"], { signal: controller.signal });
    controller.abort(reason); // Before process/start has replied.
    await assert.rejects(running, (err) => err === reason);
  });
});

Deno.test("client.exec collects maxOutputBytes per stream and rejects one byte beyond", async () => {
  // The default (64 MiB) goes through the same check; 10 bytes keeps the test small.
  assert.equal(DEFAULT_MAX_OUTPUT_BYTES, 64 * 1024 * 1024);
  await withClient(async (client) => {
    const atLimit = await client.exec(["printf", "1234567890"], { maxOutputBytes: 10 });
    assert.equal(atLimit.stdout, "1234567890");
    await assert.rejects(
      () => client.exec(["printf", "12345678901"], { maxOutputBytes: 10 }),
      ExecOutputLimitError,
    );
  });
});

Deno.test("client.exec environment: the server's minus *TOKEN*-like names, env on top; inheritEnv false gives only env", async () => {
  Deno.env.set("EXEC_TEST_TOKEN", "hidden");
  Deno.env.set("EXEC_TEST_PLAIN", "seen");
  try {
    await withClient(async (client) => {
      const script = 'echo "$EXEC_TEST_PLAIN|$EXEC_TEST_TOKEN|$EXTRA|$HOME"';
      const inherited = await client.exec(["/bin/sh", "-c", script], { env: { EXTRA: "x" } });
      assert.equal(inherited.stdout, `seen||x|${Deno.env.get("HOME")}\n`);
      const bare = await client.exec(["/bin/sh", "-c", script], {
        env: { EXTRA: "y" },
        inheritEnv: false,
      });
      assert.equal(bare.stdout, "||y|\n");
      const proc = await client.startProcess({ argv: ["/bin/sh", "-c", script] });
      let text = "";
      for await (const chunk of proc.text()) text += chunk;
      assert.equal(text, inherited.stdout.replace("|x|", "||"), "startProcess has the same rule");
    });
  } finally {
    Deno.env.delete("EXEC_TEST_TOKEN");
    Deno.env.delete("EXEC_TEST_PLAIN");
  }
});

Deno.test("client.exec of a missing program rejects with data.kind spawnNotFound", async () => {
  await withClient(async (client) => {
    const err = await client.exec(["/nonexistent/program"]).then(() => undefined, (e) => e);
    assert.ok(err instanceof RemoteError);
    assert.deepEqual(err.data, { kind: "spawnNotFound" });
  });
});

Deno.test("client.exec with tty runs on a terminal and returns its output as stdout", async () => {
  await withClient(async (client) => {
    const { exitCode, stdout, stderr } = await client.exec(["sh", "-c", "tty; echo e >&2"], {
      tty: true,
    });
    assert.equal(exitCode, 0);
    assert.match(stdout, /^\/dev\/pts\/\d+\r\ne\r\n$/);
    assert.equal(stderr, "");
  });
});

Deno.test("process handles expose stdin as a WritableStream and stdout/stderr as ReadableStreams", async () => {
  await withClient(async (client) => {
    const proc = await client.startProcess({
      argv: ["sh", "-c", "tr a-z A-Z; echo done >&2"],
      pipeStdin: true,
    });
    const stdout = new Response(proc.stdout).text();
    const stderr = new Response(proc.stderr).text();
    await ReadableStream.from(["hello ", "streams\n"]).pipeThrough(new TextEncoderStream())
      .pipeTo(proc.stdin);
    assert.equal(await stdout, "HELLO STREAMS\n");
    assert.equal(await stderr, "done\n");
    assert.equal(await proc.exited, 0);
  });
});

Deno.test("a process handle's stdout keeps flowing when its stderr is cancelled", async () => {
  await withClient(async (client) => {
    const proc = await client.startProcess({
      argv: ["sh", "-c", "head -c 3000000 /dev/zero >&2; echo end"],
    });
    await proc.stderr.cancel();
    assert.equal(await new Response(proc.stdout).text(), "end\n");
    assert.equal(await proc.exited, 0);
  });
});

Deno.test("a script importing mod.ts by URL, with no config or import map, runs a command and uses files in one call each", async () => {
  const dir = await Deno.makeTempDir();
  const server = await serveWebSocket();
  try {
    const mod = new URL("../mod.ts", import.meta.url).href;
    const script = `${dir}/script.ts`;
    await Deno.writeTextFile(
      script,
      `import { connect } from ${JSON.stringify(mod)};
await using client = await connect(${JSON.stringify(server.url)});
const { exitCode, stdout } = await client.exec(["sh", "-c", "cat; pwd; exit 4"], {
  stdin: "in\\n", cwd: ${JSON.stringify(dir)}, timeoutMs: 30_000,
});
await client.fs.writeTextFile(${JSON.stringify(`${dir}/f.txt`)}, "file");
const names = [];
for await (const entry of client.fs.readDir(${JSON.stringify(dir)})) names.push(entry.name);
const { size } = await client.fs.stat(${JSON.stringify(`${dir}/f.txt`)});
const text = await client.fs.readTextFile(${JSON.stringify(`${dir}/f.txt`)});
await client.fs.remove(${JSON.stringify(`${dir}/f.txt`)});
console.log(JSON.stringify({ exitCode, stdout, names: names.sort(), size, text }));
`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-config",
        "--allow-net=127.0.0.1",
        `--allow-read=${mod.replace("file://", "").replace(/mod\.ts$/, "")}`,
        script,
      ],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(out.stdout)), {
      exitCode: 4,
      stdout: `in\n${dir}\n`,
      names: ["f.txt", "script.ts"],
      size: 4,
      text: "file",
    });
    await assert.rejects(() => Deno.stat(`${dir}/f.txt`), Deno.errors.NotFound);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client.exec reports the signal that ended the process", async () => {
  await withClient(async (client) => {
    const result = await client.exec(["sh", "-c", "echo before; kill -TERM $$"]);
    assert.equal(result.signal, "SIGTERM");
    assert.equal(result.stdout, "before\n");
  });
});

Deno.test("client.exec rejects with ExecOutputLostError when the server evicted output before it was read", async () => {
  await using server = startScriptedServer((_connection, request) => {
    switch (request.method) {
      case "initialize":
        return { result: { sessionId: "s", environmentInfo: FAKE_ENVIRONMENT_INFO } };
      case "process/start": {
        const processId = request.params.processId;
        return {
          result: { processId, sandboxType: "none" },
          // Seqs 1 and 2 were evicted: the first notification the client sees is seq 3.
          then: [{
            method: "process/output",
            params: { processId, seq: 3, stream: "stdout", chunk: "aGkK" },
          }],
        };
      }
      case "process/read":
        return {
          result: {
            chunks: [{ seq: 3, stream: "stdout", chunk: "aGkK" }],
            nextSeq: 6,
            exited: true,
            exitCode: 0,
            closed: true,
            failure: null,
            sandboxDenied: false,
          },
        };
      default:
        return "ignore";
    }
  });
  await using client = await connect(server.url);
  await assert.rejects(() => client.exec(["x"]), ExecOutputLostError);
});
