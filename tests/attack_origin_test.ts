/**
 * Attack: a web page drives the server. A browser attaches an `Origin`
 * header to every WebSocket upgrade it makes; a page the user happens to open
 * can otherwise connect to a loopback exec-server and run commands. The
 * reference answers every request that carries an `Origin` header (any value,
 * even an empty one or the server's own address) with `403` and an empty body,
 * and upgrades requests without one. `--allow-origin ORIGIN` (repeatable)
 * admits exactly the listed origins.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startParams } from "./helpers/rpc.ts";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";

async function answerTo(
  server: ServerProcess,
  options: { path?: string; headers?: Record<string, string>; noUpgrade?: boolean },
): Promise<{ status: number; body: string }> {
  await using raw = await RawWebSocket.connect(server.port, options);
  return { status: raw.answer.status, body: raw.answer.body };
}

/** The refused origins probed against the reference (`codex exec-server --listen ws://127.0.0.1:0`). */
function foreignOrigins(port: number): string[] {
  return [
    "https://evil.example",
    "null",
    `http://localhost:${port}`,
    `http://127.0.0.1:${port}`,
    `http://[::1]:${port}`,
    "http://localhost",
    `HTTP://LOCALHOST:${port}`,
    "vscode-webview://abc",
    "",
  ];
}

async function stillServes(server: ServerProcess): Promise<void> {
  await using client = await server.connect();
  await handshake(client);
  const started = await client.request(2, "process/start", startParams("after", ["true"]));
  assert.ok(started.result, `process/start failed: ${JSON.stringify(started)}`);
}

Deno.test("an upgrade carrying any Origin header gets 403 with an empty body and no upgrade", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  for (const origin of foreignOrigins(server.port)) {
    const answer = await answerTo(server, { headers: { Origin: origin } });
    assert.deepEqual(answer, { status: 403, body: "" }, `Origin: ${JSON.stringify(origin)}`);
  }
  await stillServes(server);
});

Deno.test("a request carrying an Origin header gets 403 on every path, as the reference answers", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  const headers = { Origin: "https://evil.example" };
  assert.equal((await answerTo(server, { path: "/readyz", headers, noUpgrade: true })).status, 403);
  assert.equal((await answerTo(server, { path: "/other", headers, noUpgrade: true })).status, 403);
  assert.equal((await answerTo(server, { path: "/", headers, noUpgrade: true })).status, 403);
  assert.equal((await answerTo(server, { path: "/readyz", noUpgrade: true })).status, 200);
});

Deno.test("an upgrade without an Origin header (a non-browser client) is unaffected", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  assert.equal((await answerTo(server, {})).status, 101);
  await stillServes(server);
});

Deno.test("--allow-origin admits exactly each listed origin and no other", async () => {
  await using server = await ServerProcess.start({
    listen: "ws",
    args: ["--allow-origin", "https://app.example", "--allow-origin", "http://localhost:3000"],
  });
  for (const origin of ["https://app.example", "http://localhost:3000"]) {
    const answer = await answerTo(server, { headers: { Origin: origin } });
    assert.equal(answer.status, 101, `Origin: ${origin}`);
  }
  for (
    const origin of [
      "https://app.example.evil",
      "https://app.example:443",
      "http://app.example",
      "https://APP.example",
      "http://localhost:3001",
      "https://evil.example",
      "null",
    ]
  ) {
    const answer = await answerTo(server, { headers: { Origin: origin } });
    assert.equal(answer.status, 403, `Origin: ${origin}`);
  }
  await stillServes(server);
});
