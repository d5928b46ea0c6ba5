import assert from "node:assert/strict";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { selfSignedCertificate } from "./helpers/tls.ts";
import { MAIN_TS as MAIN } from "./helpers/server_harness.ts";
import { capabilityTokenAuth, tokenFileDigest } from "../lib/server/listen/auth.ts";

interface RunResult {
  code: number;
  stdout: Uint8Array;
  stderr: string;
}

/** Runs `main.ts run ARGS` as a subprocess, feeding `input` on stdin (then keeping it open briefly or closing it). */
async function run(
  args: string[],
  input?: Uint8Array,
  env?: Record<string, string>,
): Promise<RunResult> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "run", ...args],
    env,
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (input !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(input);
    await writer.close();
  }
  const { code, stdout, stderr } = await child.output();
  return { code, stdout, stderr: new TextDecoder().decode(stderr) };
}

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** `exec-server run` arguments: the server, `flags`, then `/bin/sh -c script`. */
function remoteSh(url: string, script: string, ...flags: string[]): string[] {
  return ["--url", url, ...flags, "--", "/bin/sh", "-c", script];
}

/** A child's stdout, read as text up to a marker or to its end. */
class Output {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Everything read so far. */
  seen = "";

  constructor(stdout: ReadableStream<Uint8Array>) {
    this.#reader = stdout.getReader();
  }

  /** Reads until the text contains `marker`; fails if the output ends first. */
  async until(marker: string): Promise<void> {
    while (!this.seen.includes(marker)) {
      const { value, done } = await this.#reader.read();
      assert.ok(!done, `the output ended before ${JSON.stringify(marker)}: ${this.seen}`);
      this.seen += text(value);
    }
  }

  /** Reads to the end of the output. */
  async end(): Promise<string> {
    while (true) {
      const { value, done } = await this.#reader.read();
      if (done) return this.seen;
      this.seen += text(value);
    }
  }
}

/** Starts `main.ts run ARGS` with its stdout (and, if asked, stderr) piped; stdin is /dev/null. */
function spawnRun(
  args: string[],
  stderr: "inherit" | "piped" = "inherit",
): { child: Deno.ChildProcess; output: Output } {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "run", ...args],
    stdin: "null",
    stdout: "piped",
    stderr,
  }).spawn();
  return { child, output: new Output(child.stdout) };
}

/** Runs shell `lines` under `script`, which gives them (and the CLI they start) a terminal. */
function spawnInTerminal(lines: string[]): { child: Deno.ChildProcess; output: Output } {
  const child = new Deno.Command("/usr/bin/script", {
    args: ["-qec", lines.join("\n"), "/dev/null"],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  return { child, output: new Output(child.stdout) };
}

Deno.test("exec-server run exits with the remote exit code and splits stdout from stderr", async () => {
  await using server = await InProcessServer.websocket();
  const result = await run(remoteSh(server.url, "echo out; echo err >&2; exit 7"));
  assert.equal(result.code, 7);
  assert.equal(text(result.stdout), "out\n");
  assert.equal(result.stderr, "err\n");
});

Deno.test("exec-server run streams binary output byte-exact", async () => {
  await using server = await InProcessServer.websocket();
  const dir = await Deno.makeTempDir();
  try {
    const bytes = new Uint8Array(256 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + (i >> 8)) & 0xff;
    await Deno.writeFile(`${dir}/blob`, bytes);
    const result = await run(["--url", server.url, "--", "/bin/cat", `${dir}/blob`]);
    assert.equal(result.code, 0);
    assert.deepEqual(result.stdout, bytes);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server run -i forwards local stdin to the remote command", async () => {
  await using server = await InProcessServer.websocket();
  const input = new TextEncoder().encode("first\nsecond\nthird\n");
  const result = await run(["--url", server.url, "-i", "--", "head", "-n", "3"], input);
  assert.equal(result.code, 0);
  assert.equal(text(result.stdout), "first\nsecond\nthird\n");
});

Deno.test("exec-server run -i closes the remote stdin when local stdin ends", async () => {
  await using server = await InProcessServer.websocket();
  const input = new TextEncoder().encode("one\ntwo\n");
  const result = await run(["--url", server.url, "--stdin", "--", "/bin/cat"], input);
  assert.equal(result.code, 0);
  assert.equal(text(result.stdout), "one\ntwo\n");
});

Deno.test("exec-server run without -i gives the remote command an empty stdin", async () => {
  await using server = await InProcessServer.websocket();
  const input = new TextEncoder().encode("not forwarded\n");
  const result = await run(["--url", server.url, "--", "/bin/cat"], input);
  assert.equal(result.code, 0);
  assert.equal(text(result.stdout), "");
});

Deno.test("exec-server run forwards SIGTERM to the remote command, which decides", async () => {
  await using server = await InProcessServer.websocket();
  const { child, output } = spawnRun(
    remoteSh(
      server.url,
      "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
    ),
  );
  await output.until("ready\n");
  child.kill("SIGTERM");
  assert.equal(await output.end(), "ready\ngot-term\n");
  const { code } = await child.status;
  assert.equal(code, 7, "the remote command's own exit code, not a kill");
});

Deno.test("exec-server run passes -e K=V, -e K (the local value) and -w to the remote command", async () => {
  await using server = await InProcessServer.websocket();
  const result = await run(
    remoteSh(
      server.url,
      'echo "$GREETING|$LOCAL_ONE|${UNSET_HERE-unset}"; pwd',
      "-e",
      "GREETING=hello there",
      "--env",
      "LOCAL_ONE",
      "-e",
      "UNSET_HERE",
      "-w",
      "/usr",
    ),
    undefined,
    { LOCAL_ONE: "from here" },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(text(result.stdout), "hello there|from here|unset\n/usr\n");
});

Deno.test("exec-server run --tty runs the command on a pseudo-terminal and passes TERM", async () => {
  await using server = await InProcessServer.websocket();
  const result = await run(remoteSh(server.url, 'tty; echo "$TERM"; exit 3', "-t"), undefined, {
    TERM: "vt100",
  });
  assert.equal(result.code, 3);
  assert.match(text(result.stdout), /^\/dev\/pts\/\d+\r\nvt100\r\n$/);
});

Deno.test("exec-server run -it with stdin not a terminal warns and runs without a terminal", async () => {
  await using server = await InProcessServer.websocket();
  const input = new TextEncoder().encode("piped\n");
  const result = await run(remoteSh(server.url, "tty; cat", "-it"), input);
  assert.equal(result.code, 0);
  assert.equal(text(result.stdout), "not a tty\npiped\n");
  assert.match(
    result.stderr,
    /^exec-server run: warning: stdin is not a terminal, so -t is ignored/,
  );
});

Deno.test("exec-server run exits 127 naming a missing program and 126 for a non-executable one", async () => {
  await using server = await InProcessServer.websocket();
  const missing = await run(["--url", server.url, "--", "no-such-program-here"]);
  assert.equal(missing.code, 127);
  assert.equal(
    missing.stderr,
    'exec-server run: "no-such-program-here": not found (no such program, or no such working directory)\n',
  );
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/script`, "#!/bin/sh\n", { mode: 0o644 });
    const notExecutable = await run(["--url", server.url, "--", `${dir}/script`]);
    assert.equal(notExecutable.code, 126);
    assert.match(
      notExecutable.stderr,
      /: permission denied \(not executable, or in a working directory the sandbox hides\)\n$/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server run takes the server from EXEC_SERVER_URL and the token from EXEC_SERVER_TOKEN_FILE", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/token`, "right\n");
    await using server = await InProcessServer.websocket({
      authorize: capabilityTokenAuth(await tokenFileDigest(`${dir}/token`)),
    });
    const env = { EXEC_SERVER_URL: server.url, EXEC_SERVER_TOKEN_FILE: `${dir}/token` };
    const result = await run(["--", "/bin/sh", "-c", "echo ok"], undefined, env);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(text(result.stdout), "ok\n");
    const refused = await run(["--", "/bin/true"], undefined, { EXEC_SERVER_URL: server.url });
    assert.equal(refused.code, 255);
    assert.match(refused.stderr, /refused the token \(HTTP 401\)/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server run --cacert trusts a wss:// server's own certificate", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { cert, key, certFile } = await selfSignedCertificate(dir);
    await using server = await InProcessServer.websocket({
      tls: { cert, key },
    });
    const untrusted = await run(["--url", server.url, "--", "/bin/true"]);
    assert.equal(untrusted.code, 255);
    const trusted = await run(remoteSh(server.url, "echo secure", "--cacert", certFile));
    assert.equal(trusted.code, 0, trusted.stderr);
    assert.equal(text(trusted.stdout), "secure\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server run prints one reconnecting line and exits when the server does not come back", async () => {
  const server = await InProcessServer.websocket();
  const { child, output } = spawnRun(
    remoteSh(server.url, "echo ready; exec sleep 30", "--reconnect-timeout", "1"),
    "piped",
  );
  try {
    const stderr = new Response(child.stderr).text();
    await output.until("ready\n");
    await server[Symbol.asyncDispose]();
    await output.end();
    const { code } = await child.status;
    const lines = (await stderr).trimEnd().split("\n");
    assert.equal(code, 255);
    assert.equal(lines.length, 2, lines.join("\n"));
    assert.match(lines[0]!, /^exec-server run: lost the connection to ws:\S+; reconnecting…$/);
    assert.match(lines[1]!, /^exec-server run: the server at ws:\S+ did not come back within 1 s/);
  } finally {
    await server[Symbol.asyncDispose]();
  }
});

Deno.test("exec-server run forwards Ctrl-C as an interrupt", async () => {
  await using server = await InProcessServer.websocket();
  const { child, output } = spawnRun(remoteSh(server.url, "echo ready; exec sleep 30"));
  await output.until("ready\n");
  child.kill("SIGINT");
  await output.end();
  const { code } = await child.status;
  assert.equal(code, 130);
});

Deno.test("exec-server run against an unreachable URL prints one line and exits non-zero", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const result = await run(["--url", `ws://127.0.0.1:${port}`, "--", "/bin/true"]);
  assert.equal(result.code, 255);
  assert.equal(result.stdout.length, 0);
  assert.equal(result.stderr.trimEnd().split("\n").length, 1);
  assert.match(result.stderr, /cannot connect to ws:\/\/127\.0\.0\.1:\d+/);
});

Deno.test("exec-server run takes --reconnect-timeout 3600 and refuses 3601 with exit code 2", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const withTimeout = (seconds: string) =>
    run(["--url", `ws://127.0.0.1:${port}`, "--reconnect-timeout", seconds, "--", "/bin/true"]);
  // Accepted: it goes on to connect (and finds nothing there).
  const atMost = await withTimeout("3600");
  assert.equal(atMost.code, 255);
  assert.match(atMost.stderr, /cannot connect to ws:\/\/127\.0\.0\.1:\d+/);
  const over = await withTimeout("3601");
  assert.equal(over.code, 2);
  assert.match(over.stderr, /--reconnect-timeout/);
  assert.match(over.stderr, /up to 3600/);
});

Deno.test("exec-server run with a refused token prints one line and exits non-zero", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/server-token`, "right\n");
    await Deno.writeTextFile(`${dir}/client-token`, "wrong\n");
    await using server = await InProcessServer.websocket({
      authorize: capabilityTokenAuth(await tokenFileDigest(`${dir}/server-token`)),
    });
    const refused = await run([
      "--url",
      server.url,
      "--token-file",
      `${dir}/client-token`,
      "--",
      "/bin/true",
    ]);
    assert.equal(refused.code, 255);
    assert.equal(refused.stderr.trimEnd().split("\n").length, 1);
    assert.match(refused.stderr, /refused the token \(HTTP 401\)/);
    const accepted = await run(
      remoteSh(server.url, "exit 0", "--token-file", `${dir}/server-token`),
    );
    assert.equal(accepted.code, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server run rejects a bad command line with exit code 2", async () => {
  const missingUrl = await run(["--", "/bin/true"]);
  assert.equal(missingUrl.code, 2);
  assert.match(missingUrl.stderr, /--url \(or EXEC_SERVER_URL\) is required/);
  const missingCommand = await run(["--url", "ws://127.0.0.1:1"]);
  assert.equal(missingCommand.code, 2);
  const help = await run(["--help"]);
  assert.equal(help.code, 0);
  assert.match(text(help.stdout), /Usage: exec-server run/);
});

const HAS_SCRIPT = (() => {
  try {
    return Deno.statSync("/usr/bin/script").isFile;
  } catch {
    return false;
  }
})();

/** A test of the CLI on a terminal (`script`), given a server's URL and a scratch directory. */
function terminalTest(name: string, fn: (url: string, dir: string) => Promise<void>): void {
  Deno.test({
    name: HAS_SCRIPT ? name : `${name} (skipped: no /usr/bin/script)`,
    ignore: !HAS_SCRIPT,
    async fn() {
      await using server = await InProcessServer.websocket();
      const dir = await Deno.makeTempDir();
      try {
        await fn(server.url, dir);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}

/** The shell line that runs `exec-server run -it -- /bin/sh -c SCRIPT` (no `'` in SCRIPT). */
function cliOnTty(url: string, script: string): string {
  return `'${Deno.execPath()}' run -A '${MAIN}' run --url ${url} -it -- /bin/sh -c '${script}'`;
}

terminalTest(
  "exec-server run --tty puts a local terminal in raw mode and restores it",
  async (url, dir) => {
    // `script` gives the CLI a terminal; a background job records `stty -g` while it runs.
    const { child, output } = spawnInTerminal([
      `stty -g > ${dir}/before`,
      `(while [ ! -e ${dir}/go ]; do sleep 0.02; done; stty -g < /dev/tty > ${dir}/during; touch ${dir}/done) &`,
      cliOnTty(url, "echo READY; read x; exit 5"),
      `echo "RC=$?" > ${dir}/rc`,
      `stty -g > ${dir}/after`,
      "wait",
    ]);
    await output.until("READY");
    assert.ok(
      !output.seen.includes("\r\r\n"),
      "the remote pty's output is passed through unchanged",
    );
    await Deno.writeTextFile(`${dir}/go`, "");
    while (true) {
      try {
        await Deno.stat(`${dir}/done`);
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode("x\r"));
    await output.end();
    await writer.close();
    await child.status;
    const before = await Deno.readTextFile(`${dir}/before`);
    assert.notEqual(await Deno.readTextFile(`${dir}/during`), before, "raw mode while running");
    assert.equal(await Deno.readTextFile(`${dir}/after`), before, "terminal restored");
    assert.equal((await Deno.readTextFile(`${dir}/rc`)).trim(), "RC=5");
  },
);

terminalTest(
  "exec-server run --tty resizes the remote terminal when the local one changes size",
  async (url, dir) => {
    // A background job of the session resizes its terminal: the CLI gets SIGWINCH.
    const { child, output } = spawnInTerminal([
      `(while [ ! -e ${dir}/go ]; do sleep 0.02; done; stty rows 33 cols 99 < /dev/tty) &`,
      cliOnTty(url, 'trap "stty size; exit 0" WINCH; echo READY; while :; do sleep 0.05; done'),
      `echo "RC=$?" > ${dir}/rc`,
      "wait",
    ]);
    await output.until("READY");
    await Deno.writeTextFile(`${dir}/go`, "");
    const seen = await output.end();
    await child.stdin.close();
    await child.status;
    assert.match(seen, /33 99/);
    assert.equal((await Deno.readTextFile(`${dir}/rc`)).trim(), "RC=0");
  },
);

terminalTest(
  "exec-server run -it -- bash is an interactive shell on the remote terminal",
  async (url, dir) => {
    const { child, output } = spawnInTerminal([
      `'${Deno.execPath()}' run -A '${MAIN}' run --url ${url} -it -e 'PS1=remote> ' -- bash --norc --noprofile -i`,
      `echo "RC=$?" > ${dir}/rc`,
    ]);
    await output.until("remote> ");
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode("echo $((6 * 7)); tty\r"));
    await output.until("/dev/pts/");
    await writer.write(new TextEncoder().encode("exit 3\r"));
    const seen = await output.end();
    await writer.close();
    await child.status;
    assert.match(seen, /remote> echo \$\(\(6 \* 7\)\); tty\r\n.*42\r\n\/dev\/pts\/\d+\r\n/s);
    assert.equal((await Deno.readTextFile(`${dir}/rc`)).trim(), "RC=3");
  },
);
