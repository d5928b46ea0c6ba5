/**
 * Tests for the interop harness's own parts (they run without the Codex CLI).
 *
 * @module
 */

import assert from "node:assert/strict";
import { findCodexBin, foreignConnects, shellQuote, summarizeMethods } from "./harness.ts";
import { startMockModel } from "./mock_model.ts";
import { startOutboundGuard } from "./outbound_guard.ts";
import { startWsProxy } from "./ws_proxy.ts";

Deno.test("foreignConnects() reports every non-loopback connect and nothing else", () => {
  const trace = [
    `12 connect(7, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT`,
    `12 connect(8, {sa_family=AF_INET, sin_port=htons(41553), sin_addr=inet_addr("127.0.0.1")}, 16) = 0`,
    `13 connect(9, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = -1 ENETUNREACH`,
    `14 connect(9, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), ` +
    `inet_pton(AF_INET6, "2606:4700::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH`,
    `14 connect(9, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), ` +
    `inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0`,
  ].join("\n");
  assert.deepEqual(foreignConnects(trace), ["10.255.255.53:53", "[2606:4700::1]:443"]);
});

Deno.test("findCodexBin() prefers CODEX_BIN and skips when nothing is installed", () => {
  assert.equal(findCodexBin({ codexBin: "/opt/codex", defaultPath: "/nowhere" }), "/opt/codex");
  assert.equal(findCodexBin({ codexBin: undefined, defaultPath: "/nowhere/codex" }), undefined);
  assert.equal(findCodexBin({ codexBin: "", defaultPath: Deno.execPath() }), Deno.execPath());
});

Deno.test("shellQuote() leaves plain words alone and quotes everything else", () => {
  assert.equal(shellQuote("/usr/bin/deno"), "/usr/bin/deno");
  assert.equal(shellQuote("/a b/it's"), `'/a b/it'\\''s'`);
});

Deno.test("summarizeMethods() counts requests and pushes in first-use order", () => {
  const summary = summarizeMethods([
    { direction: "client", kind: "request", method: "initialize", id: 1 },
    { direction: "server", kind: "response", method: "initialize", id: 1 },
    { direction: "client", kind: "request", method: "fs/getMetadata", id: 2 },
    { direction: "client", kind: "request", method: "fs/getMetadata", id: 3 },
    { direction: "server", kind: "notification", method: "process/output" },
  ]);
  assert.equal(summary, "initialize, fs/getMetadata×2, ← process/output");
});

Deno.test("startMockModel() asks for the tool call, then answers the tool output with a message", async () => {
  await using model = startMockModel({
    toolCalls: [{ arguments: { cmd: "echo hi" } }],
    callIdPrefix: "call",
  });
  const first = await fetch(`${model.baseUrl}/responses`, {
    method: "POST",
    body: JSON.stringify({ input: [{ type: "message", role: "user", content: [] }] }),
  });
  assert.equal(first.headers.get("content-type"), "text/event-stream");
  const firstEvents = parseSse(await first.text());
  assert.deepEqual(firstEvents.map((event) => event.type), [
    "response.created",
    "response.output_item.done",
    "response.completed",
  ]);
  const call = firstEvents[1]?.item as Record<string, unknown>;
  assert.equal(call.type, "function_call");
  assert.equal(call.name, "exec_command");
  assert.equal(call.call_id, "call_1");
  assert.deepEqual(JSON.parse(call.arguments as string), { cmd: "echo hi" });
  const completed = firstEvents[2]?.response as Record<string, unknown>;
  assert.ok(completed.usage, "response.completed carries usage");

  const second = await fetch(`${model.baseUrl}/responses`, {
    method: "POST",
    body: JSON.stringify({
      input: [{ type: "function_call_output", call_id: "call_1", output: "hi\n" }],
    }),
  });
  const message = parseSse(await second.text())[1]?.item as Record<string, unknown>;
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.deepEqual(model.toolOutputs(), ["hi\n"]);
  assert.deepEqual(model.requests.map((request) => request.path), [
    "/v1/responses",
    "/v1/responses",
  ]);
});

Deno.test("startMockModel() builds a later call's arguments from earlier tool outputs", async () => {
  await using model = startMockModel({
    toolCalls: [
      { arguments: { cmd: "cat" } },
      {
        name: "write_stdin",
        arguments: (previous) => ({ "session_id": Number(previous[0]?.match(/\d+/)?.[0]) }),
      },
    ],
  });
  async function post(input: unknown[]): Promise<Record<string, unknown>> {
    const response = await fetch(`${model.baseUrl}/responses`, {
      method: "POST",
      body: JSON.stringify({ input }),
    });
    return parseSse(await response.text())[1]?.item as Record<string, unknown>;
  }
  const first = await post([]);
  assert.equal(first.call_id, "call_interop_1");
  const afterFirst = [{ type: "function_call_output", call_id: "call_interop_1", output: "ID 42" }];
  const second = await post(afterFirst);
  assert.equal(second.name, "write_stdin");
  assert.equal(second.call_id, "call_interop_2");
  assert.deepEqual(JSON.parse(second.arguments as string), { "session_id": 42 });
  const third = await post([
    ...afterFirst,
    { type: "function_call_output", call_id: "call_interop_2", output: "bye" },
  ]);
  assert.equal(third.type, "message");
  assert.deepEqual(model.toolOutputs(), ["ID 42", "bye"]);
});

Deno.test("startWsProxy() forwards both ways and logs methods, results and errors", async () => {
  const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.onmessage = (event: MessageEvent<string>) => {
      const message = JSON.parse(event.data);
      if (message.method === "ping") {
        socket.send(JSON.stringify({ method: "pushed", params: { n: 1 } }));
        socket.send(JSON.stringify({ id: message.id, result: { pong: true } }));
      } else {
        socket.send(JSON.stringify({ id: message.id, error: { code: -32601, message: "nope" } }));
      }
    };
    return response;
  });
  try {
    await using proxy = startWsProxy(`ws://127.0.0.1:${upstream.addr.port}`);
    const client = new WebSocket(proxy.url);
    const received: unknown[] = [];
    const done = Promise.withResolvers<void>();
    client.onmessage = (event: MessageEvent<string>) => {
      received.push(JSON.parse(event.data));
      if (received.length === 3) done.resolve();
    };
    await new Promise((resolve) => client.onopen = resolve);
    client.send(JSON.stringify({ id: 1, method: "ping", params: {} }));
    client.send(JSON.stringify({ id: 2, method: "missing" }));
    await done.promise;
    const closed = new Promise((resolve) => client.onclose = resolve);
    client.close();
    await closed;

    assert.equal(received.length, 3);
    const seen = (direction: string) =>
      proxy.log.filter((entry) => entry.direction === direction)
        .map((entry) => [entry.kind, entry.method]);
    assert.deepEqual(seen("client"), [["request", "ping"], ["request", "missing"]]);
    assert.deepEqual(seen("server"), [
      ["notification", "pushed"],
      ["response", "ping"],
      ["error", "missing"],
    ]);
    const error = proxy.log.find((entry) => entry.kind === "error")?.error;
    assert.deepEqual(error, { code: -32601, message: "nope" });
    assert.equal(proxy.connections, 1);
  } finally {
    await upstream.shutdown();
  }
});

Deno.test("startOutboundGuard() records the request line of a proxied request", async () => {
  await using guard = startOutboundGuard();
  const port = Number(new URL(guard.proxyUrl).port);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode("CONNECT example.invalid:443 HTTP/1.1\r\n\r\n"));
  // The guard closes the connection after reading the request line.
  const buffer = new Uint8Array(16);
  while ((await conn.read(buffer)) !== null) { /* drain until closed */ }
  conn.close();
  await guard.close();
  assert.deepEqual(guard.attempts, ["CONNECT example.invalid:443 HTTP/1.1"]);
  assert.equal(guard.proxyEnv().NO_PROXY, "127.0.0.1,localhost,::1");
});

/** Splits an SSE body into its `data:` payloads. */
function parseSse(body: string): Record<string, unknown>[] {
  return body.split("\n\n").filter((block) => block.trim() !== "").map((block) => {
    const data = block.split("\n").find((line) => line.startsWith("data: "));
    return JSON.parse(data?.slice("data: ".length) ?? "null");
  });
}
