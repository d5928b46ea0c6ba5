/**
 * The command line as a user meets it: flags, the printed URL, HTTP routes,
 * authentication, TLS, and permission scoping with narrow `deno run` flags.
 */

import assert from "node:assert/strict";
import {
  handshake,
  type Json,
  MAIN_TS,
  SERVER_PERMISSIONS,
  ServerProcess,
} from "./helpers/server_harness.ts";
import { nextRequestId } from "./helpers/rpc.ts";

const decoder = new TextDecoder();

async function runCli(args: string[], permissions = SERVER_PERMISSIONS) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...permissions, MAIN_TS, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

function openSocket(
  url: string,
  options?: { headers?: Record<string, string>; protocols?: string[] },
): Promise<WebSocket> {
  const socket = options?.headers
    ? new WebSocket(url, { headers: options.headers })
    : new WebSocket(url, options?.protocols);
  return new Promise((resolve, reject) => {
    socket.onopen = () => resolve(socket);
    socket.onerror = () => reject(new Error("upgrade refused"));
  });
}

async function initialize(socket: WebSocket): Promise<Record<string, unknown>> {
  const reply = new Promise<string>((resolve) => {
    socket.onmessage = (event) => resolve(String(event.data));
  });
  socket.send(JSON.stringify({ id: 1, method: "initialize", params: { clientName: "cli-test" } }));
  const message = JSON.parse(await reply);
  const closed = new Promise((resolve) => (socket.onclose = resolve));
  socket.close();
  await closed;
  return message;
}

/** Sends one request after the handshake over stdio to a server started with `permissions`. */
async function stdioExchange(permissions: string[], method: string, params: Json): Promise<Json> {
  await using server = await ServerProcess.start({ permissions });
  await handshake(server.stdio!);
  return await server.stdio!.request(nextRequestId(), method, params);
}

Deno.test("exec-server --help prints the usage and exits 0", async () => {
  const { code, stdout } = await runCli(["--help"]);
  assert.equal(code, 0);
  assert.match(stdout, /Usage:/);
  assert.match(stdout, /--listen URL/);
});

Deno.test("exec-server --version prints the version and exits 0", async () => {
  const { code, stdout } = await runCli(["--version"]);
  assert.equal(code, 0);
  assert.match(stdout, /^exec-server \d+\.\d+\.\d+\n$/);
});

Deno.test("exec-server rejects bad flags with one line naming the flag and exit code 2", async (t) => {
  const cases: [string[], RegExp][] = [
    [["--bogus"], /--bogus/],
    [["--concurrent-requests", "0"], /--concurrent-requests/],
    [["--session-ttl", "soon"], /--session-ttl/],
    [["--listen", "bogus"], /unsupported --listen URL `bogus`/],
    [["--log-level", "loud"], /--log-level/],
    [["--ws-auth", "jwt"], /--ws-auth/],
    [["--tls-cert", "/nonexistent"], /--tls-cert and --tls-key/],
  ];
  for (const [args, pattern] of cases) {
    await t.step(args.join(" "), async () => {
      const { code, stdout, stderr } = await runCli(args);
      assert.equal(code, 2);
      assert.equal(stdout, "");
      assert.equal(stderr.trim().split("\n").length, 1, stderr);
      assert.match(stderr, pattern);
    });
  }
});

Deno.test("exec-server refuses a non-loopback address without authentication", async () => {
  const { code, stderr } = await runCli(["--listen", "ws://0.0.0.0:0"]);
  assert.equal(code, 2);
  assert.match(stderr, /--insecure-no-auth/);
  await using server = await ServerProcess.start({
    listen: "ws://0.0.0.0:0",
    args: ["--insecure-no-auth"],
  });
  assert.match(server.url, /^ws:\/\/0\.0\.0\.0:\d+$/);
});

Deno.test("websocket mode prints the bound URL and serves /readyz, / and 404", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  assert.match(server.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
  const http = server.url.replace("ws://", "http://");
  const ready = await fetch(`${http}/readyz`);
  assert.equal(ready.status, 200);
  assert.equal(await ready.text(), "");
  const plain = await fetch(`${http}/`);
  assert.equal(plain.status, 400);
  assert.equal(await plain.text(), "Connection header did not include 'upgrade'");
  const other = await fetch(`${http}/nope`);
  assert.equal(other.status, 404);
  await other.body?.cancel();
});

Deno.test("capability-token auth refuses missing, wrong and query-string tokens with 401", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/token`, "s3cret-token\n");
    await using server = await ServerProcess.start({
      listen: "ws",
      args: [
        "--ws-auth",
        "capability-token",
        "--ws-token-file",
        `${dir}/token`,
      ],
    });
    const http = server.url.replace("ws://", "http://");
    const upgrade = { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13" };
    const key = { "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" };
    const missing = await fetch(`${http}/`, { headers: { ...upgrade, ...key } });
    assert.equal(missing.status, 401);
    assert.equal(await missing.text(), "missing websocket bearer token");
    const wrong = await fetch(`${http}/`, {
      headers: { ...upgrade, ...key, authorization: "Bearer s3cret-tokeN" },
    });
    assert.equal(wrong.status, 401);
    assert.equal(await wrong.text(), "invalid websocket bearer token");
    const query = await fetch(`${http}/?token=s3cret-token`, { headers: { ...upgrade, ...key } });
    assert.equal(query.status, 401);
    await query.body?.cancel();
    const ready = await fetch(`${http}/readyz`);
    assert.equal(ready.status, 200);
    await ready.body?.cancel();
    await assert.rejects(openSocket(server.url));
    const ok = await openSocket(server.url, { headers: { authorization: "Bearer s3cret-token" } });
    const reply = await initialize(ok);
    assert.ok((reply.result as Record<string, unknown>).sessionId);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("capability-token auth accepts the token's SHA-256 and the browser subprotocol", async () => {
  const token = "abc123def456";
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)),
  ).toHex();
  await using server = await ServerProcess.start({
    listen: "ws",
    args: [
      "--ws-auth",
      "capability-token",
      "--ws-token-sha256",
      digest,
    ],
  });
  const socket = await openSocket(server.url, {
    protocols: ["exec-server", `exec-server.bearer.${token}`],
  });
  assert.equal(socket.protocol, "exec-server");
  const reply = await initialize(socket);
  assert.ok((reply.result as Record<string, unknown>).sessionId);
  await assert.rejects(
    openSocket(server.url, { protocols: ["exec-server", "exec-server.bearer.wrong"] }),
  );
});

Deno.test("--tls-cert serves wss:// and the client library connects with the CA", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const openssl = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-keyout",
        `${dir}/key.pem`,
        "-out",
        `${dir}/cert.pem`,
      ],
      stdout: "null",
      stderr: "null",
    }).output();
    assert.equal(openssl.code, 0, "openssl could not make a certificate");
    await using server = await ServerProcess.start({
      listen: "ws",
      args: [
        "--tls-cert",
        `${dir}/cert.pem`,
        "--tls-key",
        `${dir}/key.pem`,
      ],
    });
    assert.match(server.url, /^wss:\/\/127\.0\.0\.1:\d+$/);
    const script = `${dir}/client.ts`;
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      script,
      `import { connect } from ${JSON.stringify(mod)};
const client = await connect(${JSON.stringify(server.url)});
console.log(client.environmentInfo.platformOs);
await client.close();`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--cert", `${dir}/cert.pem`, script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, decoder.decode(out.stderr));
    assert.equal(
      decoder.decode(out.stdout).trim(),
      Deno.build.os === "darwin" ? "macos" : Deno.build.os,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a process/start outside --allow-run gets a typed error naming the binary", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const narrow = [
      "--allow-run=/bin/echo",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      "--allow-env",
      "--allow-sys",
    ];
    const denied = await stdioExchange(narrow, "process/start", {
      processId: "p",
      argv: ["/bin/sh", "-c", "id"],
      cwd: `file://${dir}`,
      env: {},
      tty: false,
    });
    const error = denied.error as { code: number; message: string; data: Record<string, string> };
    assert.equal(error.code, -32600);
    assert.match(error.message, /"\/bin\/sh"/);
    assert.match(error.message, /--allow-run/);
    assert.deepEqual(
      { kind: error.data.kind, permission: error.data.permission, resource: error.data.resource },
      { kind: "permissionDenied", permission: "run", resource: "/bin/sh" },
    );
    const allowed = await stdioExchange(narrow, "process/start", {
      processId: "p",
      argv: ["/bin/echo", "hi"],
      cwd: `file://${dir}`,
      env: {},
      tty: false,
    });
    assert.deepEqual(allowed.result, { processId: "p", sandboxType: "none" });
    const unreadable = await stdioExchange(narrow, "fs/readFile", { path: "file:///etc/passwd" });
    const readError = unreadable.error as { code: number; message: string };
    assert.equal(readError.code, -32600);
    assert.match(readError.message, /"\/etc\/passwd"/);
    assert.match(readError.message, /--allow-read/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Deno's --deny-run under an unscoped --allow-run refuses that program on the FFI spawn path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const flags = [
      "--allow-run",
      "--deny-run=/bin/sh",
      "--allow-ffi",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      "--allow-env",
      "--allow-sys",
    ];
    const start = (argv: string[]) =>
      stdioExchange(flags, "process/start", {
        processId: "p",
        argv,
        cwd: `file://${dir}`,
        env: {},
        tty: false,
      });
    const denied = await start(["/bin/sh", "-c", "id"]);
    const error = denied.error as { code: number; data: Record<string, string> };
    assert.equal(error.code, -32600);
    assert.deepEqual(
      { kind: error.data.kind, permission: error.data.permission, resource: error.data.resource },
      { kind: "permissionDenied", permission: "run", resource: "/bin/sh" },
    );
    const allowed = await start(["/bin/echo", "hi"]);
    assert.deepEqual(allowed.result, { processId: "p", sandboxType: "none" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a server whose file scope is not race-free says so at start: scoped --allow-read/--allow-write without --allow-ffi", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const scoped = [`--allow-read=${dir}`, `--allow-write=${dir}`, "--allow-env", "--allow-sys"];
    const warned = await runCli(["--listen", "stdio"], scoped);
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(warned.stderr, /without --allow-ffi/);
    for (const permissions of [[...scoped, "--allow-ffi"], SERVER_PERMISSIONS]) {
      const quiet = await runCli(["--listen", "stdio"], permissions);
      assert.equal(quiet.code, 0, quiet.stderr);
      assert.doesNotMatch(quiet.stderr, /without --allow-ffi/, permissions.join(" "));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-server names the address it cannot listen on and exits 1", async () => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `ws://127.0.0.1:${taken.addr.port}`;
  const result = await runCli(["--listen", url]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, new RegExp(`cannot listen on ${url}: `));
});
