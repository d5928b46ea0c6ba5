/**
 * Attacks from inside a sandboxed process, on each sandbox layer (`--sandbox-layer`): reaching a host socket although
 * the network is `restricted`, obtaining an unsandboxed process through the
 * server's own WebSocket port, and a tty start that skips `--allow-run`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type Json, ServerProcess, WsClient } from "./helpers/server_harness.ts";
import {
  attackLayout,
  listNames,
  pathExists,
  PYTHON3,
  PYTHON_SKIP,
  sandboxValue,
  uri,
} from "./helpers/attack.ts";
import { TEST_LAYERS } from "./helpers/sandbox_layers.ts";

let nextId = 1;

for (const t of TEST_LAYERS) {
  const SKIP = t.skip || PYTHON_SKIP;

  /** A python program that receives datagrams on a unix socket until it gets `end`. */
  const RECEIVER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("ready", flush=True)
while True:
    data = s.recv(100)
    print(data.decode(), flush=True)
    if data == b"end":
        break
`;

  /** Every way python has to send a datagram to a unix socket path. */
  const SENDER = `
import socket, sys
path = sys.argv[1]
for name, send in [
    ("sendmsg", lambda s: s.sendmsg([b"pwned-sendmsg"], [], 0, path)),
    ("sendto", lambda s: s.sendto(b"pwned-sendto", path)),
    ("connect", lambda s: (s.connect(path), s.send(b"pwned-connect"))),
]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        send(s)
        print(name, "sent")
    except OSError as err:
        print(name, "refused", err.errno)
`;

  Deno.test({
    name:
      `a network-restricted sandbox cannot send to a unix socket on the host${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      await using l = await attackLayout("es-attack-seccomp-");
      const socketPath = `${l.outside}/host.sock`;
      const receiver = new Deno.Command(PYTHON3!, {
        args: ["-c", RECEIVER, socketPath],
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      const received = new Response(receiver.stdout).text();
      try {
        while (!listNames(l.outside).includes("host.sock")) {
          await new Promise((r) => setTimeout(r, 10));
        }
        await using server = await ServerProcess.start({
          listen: "stdio",
          args: [...t.serverArgs],
        });
        const client = server.stdio!;
        await handshake(client);
        const start = await client.request(nextId++, "process/start", {
          processId: "sender",
          argv: [PYTHON3!, "-c", SENDER, socketPath],
          cwd: uri(l.ws),
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
          sandbox: sandboxValue([l.ws], "restricted"),
        });
        assert.ok(start.result, JSON.stringify(start));
        await client.log.processClosed("sender");
        const report = client.log.outputText("sender");
        for (const name of ["sendmsg", "sendto", "connect"]) {
          assert.match(report, new RegExp(`^${name} refused 1$`, "m"), report);
        }
      } finally {
        await new Deno.Command(PYTHON3!, {
          args: [
            "-c",
            "import socket,sys;socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)" +
            ".sendto(b'end',sys.argv[1])",
            socketPath,
          ],
        }).output();
        await receiver.status;
      }
      const lines = (await received).trim().split("\n");
      assert.deepEqual(
        lines,
        ["ready", "end"],
        "the host socket received datagrams from the sandbox",
      );
    },
  });

  /** A WebSocket client in python: upgrades, starts an unsandboxed process, prints what it got. */
  const WS_CLIENT = `
import base64, json, os, socket, sys
port, marker = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
head = ("GET / HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n"
        "Sec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\n") % (port, base64.b64encode(os.urandom(16)).decode())
if os.environ.get("TOKEN"):
    head += "Authorization: Bearer %s\\r\\n" % os.environ["TOKEN"]
s.sendall((head + "\\r\\n").encode())
answer = s.recv(65536)
print("status", answer.split(b"\\r\\n")[0].decode(), flush=True)
if b" 101 " not in answer.split(b"\\r\\n")[0]:
    sys.exit(0)
def send(message):
    data = json.dumps(message).encode()
    mask = os.urandom(4)
    n = len(data)
    header = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0xFE]) + n.to_bytes(2, "big")
    s.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
send({"id": 1, "method": "initialize", "params": {"clientName": "escape"}})
send({"method": "initialized", "params": {}})
send({"id": 2, "method": "process/start", "params": {"processId": "escape", "argv": ["/bin/sh", "-c", "echo pwned > " + marker],
      "cwd": "file:///", "env": {}, "tty": False}})
buffer = b""
try:
    while b"process/closed" not in buffer and b'"error"' not in buffer:
        chunk = s.recv(65536)
        if not chunk:
            break
        buffer += chunk
except socket.timeout:
    pass
print("received", buffer[-300:], flush=True)
`;

  for (const auth of [false, true]) {
    Deno.test({
      name: `a sandboxed process with network cannot get an unsandboxed one through the server${
        auth ? " (--ws-auth, token known to the attacker)" : ""
      }${SKIP} [${t.layer}]`,
      ignore: SKIP !== "",
      async fn() {
        await using l = await attackLayout("es-attack-self-");
        const token = crypto.getRandomValues(new Uint8Array(32)).toHex();
        const tokenFile = `${l.base}/token`;
        await Deno.writeTextFile(tokenFile, token);
        await using server = await ServerProcess.start({
          listen: "ws",
          args: [
            ...t.serverArgs,
            ...(auth ? ["--ws-auth", "capability-token", "--ws-token-file", tokenFile] : []),
          ],
        });
        await using client = await WsClient.connect(
          server.url,
          auth ? ["exec-server", `exec-server.bearer.${token}`] : undefined,
        );
        await handshake(client);
        const marker = `${l.outside}/PWNED`;
        const start = await client.request(nextId++, "process/start", {
          processId: "attacker",
          argv: [PYTHON3!, "-c", WS_CLIENT, String(server.port), marker],
          cwd: uri(l.ws),
          env: { PATH: "/usr/bin:/bin", ...(auth ? { TOKEN: token } : {}) },
          tty: false,
          sandbox: sandboxValue([l.ws], "enabled"),
        });
        assert.ok(start.result, JSON.stringify(start));
        await client.log.processClosed("attacker", 30_000);
        const report = client.log.outputText("attacker");
        assert.match(
          report,
          /^status HTTP\/1\.1 \d+/m,
          report + client.log.outputText("attacker", "stderr"),
        );
        assert.match(report, /status HTTP\/1\.1 403/, report);
        assert.deepEqual(listNames(l.outside), [], "an unsandboxed process ran");
        // A client that is not one of the server's sandboxed processes still connects while a
        // sandbox with network runs.
        await client.request(nextId++, "process/start", {
          processId: "sleeper",
          argv: ["/bin/sleep", "1000"],
          cwd: uri(l.ws),
          env: {},
          tty: false,
          sandbox: sandboxValue([l.ws], "enabled"),
        });
        await using other = await WsClient.connect(
          server.url,
          auth ? ["exec-server", `exec-server.bearer.${token}`] : undefined,
        );
        await handshake(other);
        await client.request(nextId++, "process/terminate", { processId: "sleeper" });
        await client.log.processClosed("sleeper");
      },
    });
  }

  Deno.test({
    name: `--allow-run is checked on argv[0] of a sandboxed tty start${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      await using l = await attackLayout("es-attack-run-");
      await using server = await ServerProcess.start({
        listen: "stdio",
        args: [...t.serverArgs],
        permissions: [
          `--allow-run=/bin/sh,/usr/bin/bwrap,${Deno.execPath()}`,
          "--allow-ffi",
          "--allow-read",
          "--allow-write",
          "--allow-env",
          "--allow-sys",
        ],
      });
      const client = server.stdio!;
      await handshake(client);
      for (const tty of [false, true]) {
        const response = await client.request(nextId++, "process/start", {
          processId: `id-${tty}`,
          argv: ["/usr/bin/id"],
          cwd: uri(l.ws),
          env: { PATH: "/usr/bin:/bin" },
          tty,
          sandbox: sandboxValue([l.ws], "restricted"),
        });
        const error = response.error as Json | undefined;
        assert.ok(
          error,
          `tty ${tty}: /usr/bin/id ran outside --allow-run: ${JSON.stringify(response)}`,
        );
        assert.equal(
          (error.data as Json | undefined)?.kind,
          "permissionDenied",
          JSON.stringify(error),
        );
      }
    },
  });

  Deno.test({
    name:
      `a read-only cover another server created holds while that server's sandbox ends${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      await using l = await attackLayout("es-attack-cover-");
      const codex = `${l.ws}/.codex`;
      const go = `${l.ws}/go`;
      await using first = await ServerProcess.start({ listen: "stdio", args: [...t.serverArgs] });
      await using second = await ServerProcess.start({ listen: "stdio", args: [...t.serverArgs] });
      const [a, b] = [first.stdio!, second.stdio!];
      await handshake(a);
      await handshake(b);
      const start = (client: typeof a, processId: string, script: string) =>
        client.request(nextId++, "process/start", {
          processId,
          argv: ["/bin/sh", "-c", script],
          cwd: uri(l.ws),
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
          sandbox: sandboxValue([l.ws], "restricted"),
        });
      // The first server's sandbox creates the mount point .codex on the host to cover it.
      assert.ok((await start(a, "holder", "echo up; exec sleep 600")).result);
      await a.log.waitUntil(() => a.log.outputText("holder").includes("up"), "the first sandbox");
      // Landlock creates no mount point: .codex cannot be created at all (landlock.ts).
      assert.equal(pathExists(codex), t.layer !== "landlock", "the first sandbox's mount point");
      // The second server's sandbox covers the same .codex, then waits.
      const probe = `while [ ! -e ${go} ]; do sleep 0.05; done; ` +
        `mkdir -p ${codex}/planted 2>/dev/null && echo WROTE || echo REFUSED`;
      assert.ok((await start(b, "prober", `echo up; ${probe}`)).result);
      await b.log.waitUntil(() => b.log.outputText("prober").includes("up"), "the second sandbox");
      // The first sandbox ends (and releases its mount point) while the second one runs.
      await a.request(nextId++, "process/terminate", { processId: "holder" });
      await a.log.processClosed("holder");
      await Deno.writeTextFile(go, "");
      await b.log.processClosed("prober");
      assert.match(b.log.outputText("prober"), /REFUSED/, "the cover of .codex was dropped");
      assert.equal(pathExists(`${codex}/planted`), false);
    },
  });
}

/** A python program that accepts one connection on a unix stream socket and prints what it got. */
const STREAM_RECEIVER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
print("ready", flush=True)
conn, _ = s.accept()
print(conn.recv(100).decode(), flush=True)
`;

/** Connects to a unix socket path and sends a word; tries a socketpair too. */
const STREAM_SENDER = `
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.sendall(b"reached")
    print("connect sent")
except OSError as err:
    print("connect refused", err.errno)
a, b = socket.socketpair()
a.sendall(b"x")
print("socketpair", b.recv(1).decode())
`;

for (const t of TEST_LAYERS) {
  for (const allowed of [false, true]) {
    Deno.test({
      name: `a network-enabled sandbox ${
        allowed
          ? "reaches a host unix socket with --sandbox-unix-sockets"
          : "cannot connect to a host unix socket"
      }, and keeps socketpair${t.skip || PYTHON_SKIP} [${t.layer}]`,
      ignore: !t.availability.ok || PYTHON_SKIP !== "",
      async fn() {
        await using l = await attackLayout("es-attack-unix-");
        const socketPath = `${l.outside}/daemon.sock`;
        const receiver = new Deno.Command(PYTHON3!, {
          args: ["-c", STREAM_RECEIVER, socketPath],
          stdout: "piped",
          stderr: "inherit",
        }).spawn();
        const received = new Response(receiver.stdout).text();
        try {
          while (!listNames(l.outside).includes("daemon.sock")) {
            await new Promise((r) => setTimeout(r, 10));
          }
          await using server = await ServerProcess.start({
            listen: "stdio",
            args: [...t.serverArgs, ...(allowed ? ["--sandbox-unix-sockets"] : [])],
          });
          const client = server.stdio!;
          await handshake(client);
          const start = await client.request(nextId++, "process/start", {
            processId: "sender",
            argv: [PYTHON3!, "-c", STREAM_SENDER, socketPath],
            cwd: uri(l.ws),
            env: { PATH: "/usr/bin:/bin" },
            tty: false,
            sandbox: sandboxValue([l.ws], "enabled"),
          });
          assert.ok(start.result, JSON.stringify(start));
          await client.log.processClosed("sender");
          const report = client.log.outputText("sender");
          assert.match(report, allowed ? /^connect sent$/m : /^connect refused 1$/m, report);
          assert.match(report, /^socketpair x$/m, report);
        } finally {
          // Ends the receiver if the sandbox did not reach it.
          const end = new Deno.Command(PYTHON3!, {
            args: [
              "-c",
              "import socket,sys\ntry:\n s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);s.sendall(b'end')\nexcept OSError: pass",
              socketPath,
            ],
          });
          await end.output();
          await receiver.status;
        }
        const lines = (await received).trim().split("\n");
        assert.deepEqual(lines, ["ready", allowed ? "reached" : "end"]);
      },
    });
  }
}
