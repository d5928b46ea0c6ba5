import assert from "node:assert/strict";
import type { StreamedString } from "../lib/protocol/streamed_json.ts";
import type { ParamsOf } from "../lib/protocol/methods.ts";
import { POOL_MAX_IDLE, POOL_MAX_IDLE_PER_ORIGIN } from "../lib/server/http/pool.ts";
import { proxyFor, proxySettings } from "../lib/server/http/proxy.ts";
import { HttpRequestTable } from "../lib/server/http/request.ts";
import { RpcError } from "../lib/protocol/errors.ts";

// Connection reuse and proxies of `http/request`, against loopback origins and a tiny forwarding
// proxy written here. The proxy rules pinned below are the reference's, observed by running the
// reference exec-server with these environments.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** What a loopback listener saw: one entry per accepted connection, its requests as text. */
interface Listener extends AsyncDisposable {
  port: number;
  /** Requests (or raw first bytes) per accepted connection, in accept order. */
  connections: string[][];
}

/**
 * A listener that reads HTTP/1.1 requests (head plus `content-length` body) from each connection
 * and answers each with `respond`'s text; `null` closes the connection without answering.
 */
function listen(
  respond: (request: string, index: { conn: number; onConn: number }, conn: Deno.Conn) =>
    | Promise<string | null>
    | string
    | null,
): Listener {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const connections: string[][] = [];
  const open = new Set<Deno.Conn>();
  const tasks = new Set<Promise<void>>();
  async function serve(conn: Deno.Conn, seen: string[], index: number): Promise<void> {
    const buffer = new Uint8Array(65536);
    let pending = "";
    try {
      while (true) {
        const end = pending.indexOf("\r\n\r\n");
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(pending)?.[1] ?? 0);
        if (end >= 0 && pending.length >= end + 4 + length) {
          const request = pending.slice(0, end + 4 + length);
          pending = pending.slice(end + 4 + length);
          seen.push(request);
          const answer = await respond(request, { conn: index, onConn: seen.length - 1 }, conn);
          if (answer === null) break;
          await conn.write(encoder.encode(answer));
          continue;
        }
        const n = await conn.read(buffer);
        if (n === null) break;
        pending += decoder.decode(buffer.subarray(0, n));
      }
    } catch {
      // The peer went away.
    }
    open.delete(conn);
    closeQuietly(conn);
  }
  const accepting = (async () => {
    try {
      for await (const conn of listener) {
        const seen: string[] = [];
        connections.push(seen);
        open.add(conn);
        const task = serve(conn, seen, connections.length - 1);
        tasks.add(task);
        task.finally(() => tasks.delete(task));
      }
    } catch {
      // Listener closed.
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    connections,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of open) closeQuietly(conn);
      await accepting;
      await Promise.all(tasks);
    },
  };
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

const OK = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

/** A keep-alive origin that answers `ok` to everything. */
function origin(): Listener {
  return listen(() => OK);
}

/**
 * A forwarding proxy: answers `CONNECT` with `connectStatus` and then pipes the tunnel to the
 * requested authority; for any other request it opens one upstream connection to the request's
 * absolute-form URL (the first request's) and pipes both ways.
 */
function forwardingProxy(connectStatus = 200): Listener {
  return listen(async (request, _index, conn) => {
    const [method, target] = request.split(" ", 2) as [string, string];
    const authority = method === "CONNECT" ? target : new URL(target).host;
    if (method === "CONNECT" && connectStatus !== 200) {
      return `HTTP/1.1 ${connectStatus} Refused\r\ncontent-length: 0\r\n\r\n`;
    }
    const [hostname, port] = authority.split(":") as [string, string];
    const upstream = await Deno.connect({ hostname, port: Number(port) });
    if (method === "CONNECT") await conn.write(encoder.encode("HTTP/1.1 200 OK\r\n\r\n"));
    else await upstream.write(encoder.encode(request));
    const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
      const buffer = new Uint8Array(65536);
      try {
        for (let n; (n = await from.read(buffer)) !== null;) await to.write(buffer.subarray(0, n));
      } catch {
        // One side went away.
      }
      closeQuietly(from);
      closeQuietly(to);
    };
    await Promise.all([pipe(upstream, conn), pipe(conn, upstream)]);
    return null;
  });
}

/** A table over the given environment; disposing it closes its connections. */
function table(env: Record<string, string | undefined> = {}): HttpRequestTable & Disposable {
  const deltas: ParamsOf<"http/request/bodyDelta">[] = [];
  const created = new HttpRequestTable((delta) => {
    deltas.push(delta);
  }, { proxies: proxySettings((name) => env[name]) });
  return Object.assign(created, { [Symbol.dispose]: () => created.closeAll() });
}

function get(http: HttpRequestTable, url: string, headers: { name: string; value: string }[] = []) {
  return http.request({ method: "GET", url, headers, requestId: "" });
}

/** A small body's text (a large one would be a streamed string). */
function text(base64: string | StreamedString): string {
  assert.ok(typeof base64 === "string", "a small body is one string");
  return decoder.decode(Uint8Array.fromBase64(base64));
}

Deno.test("http/request sends sequential requests to one origin over one reused connection", async () => {
  await using server = origin();
  using http = table();
  for (let i = 0; i < 5; i++) {
    const result = await get(http, `http://127.0.0.1:${server.port}/r${i}`);
    assert.equal(text(result.bodyBase64), "ok");
  }
  assert.equal(server.connections.length, 1);
  assert.deepEqual(server.connections[0]!.map((request) => request.split(" ")[1]), [
    "/r0",
    "/r1",
    "/r2",
    "/r3",
    "/r4",
  ]);
  assert.equal(http.idleConnections, 1);
});

Deno.test({
  name:
    "http/request asks --allow-net for a hop to another origin while one to an allowed origin is idle",
  permissions: { net: ["127.0.0.1"] },
  async fn() {
    await using server = origin();
    using http = table();
    await get(http, `http://127.0.0.1:${server.port}/`);
    assert.equal(http.idleConnections, 1);
    const refused = await get(http, `http://localhost:${server.port}/`).then(
      () => assert.fail("expected the policy to refuse localhost"),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof RpcError);
    assert.equal((refused.data as { kind?: string }).kind, "permissionDenied");
    assert.equal(refused.message.includes(`"localhost:${server.port}"`), true);
    assert.equal(server.connections.length, 1);
  },
});

Deno.test("http/request reuses a connection after a streamed body was read to its end", async () => {
  await using server = origin();
  const done = Promise.withResolvers<void>();
  const http = new HttpRequestTable((delta) => {
    if (delta.done) done.resolve();
  }, { proxies: proxySettings(() => undefined) });
  const url = `http://127.0.0.1:${server.port}/`;
  await http.request({ method: "GET", url, requestId: "s", streamResponse: true });
  await done.promise;
  await get(http, url);
  assert.equal(server.connections.length, 1);
  http.closeAll();
});

Deno.test("http/request does not reuse a connection after connection: close, HTTP/1.0 or an unframed body", async (t) => {
  const cases: [string, string][] = [
    ["connection: close", "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"],
    ["HTTP/1.0", "HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"],
    ["unframed body", "HTTP/1.1 200 OK\r\n\r\nok"],
  ];
  for (const [name, response] of cases) {
    await t.step(name, async () => {
      // A second request on a connection is left unanswered (and would be resent).
      await using server = listen(async (_request, index, conn) => {
        if (index.onConn > 0) return null;
        if (name !== "unframed body") return response;
        await conn.write(encoder.encode(response));
        return null;
      });
      using http = table();
      const url = `http://127.0.0.1:${server.port}/`;
      await get(http, url);
      await get(http, url);
      assert.deepEqual(server.connections.map((requests) => requests.length), [1, 1]);
      assert.equal(http.idleConnections, 0);
    });
  }
  await t.step("HTTP/1.0 with keep-alive is reused", async () => {
    await using server = listen(() =>
      "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok"
    );
    using http = table();
    await get(http, `http://127.0.0.1:${server.port}/`);
    await get(http, `http://127.0.0.1:${server.port}/`);
    assert.equal(server.connections.length, 1);
  });
  await t.step("a request with connection: close is not reused", async () => {
    await using server = origin();
    using http = table();
    const close = [{ name: "connection", value: "close" }];
    await get(http, `http://127.0.0.1:${server.port}/`, close);
    await get(http, `http://127.0.0.1:${server.port}/`, close);
    assert.equal(server.connections.length, 2);
  });
});

Deno.test("http/request resends on a new connection when the origin closed the idle one unanswered", async () => {
  // Each connection answers its first request and closes on the second without a byte.
  await using server = listen((_request, index) => index.onConn === 0 ? OK : null);
  using http = table();
  const url = `http://127.0.0.1:${server.port}/`;
  await get(http, url);
  const second = await get(http, url);
  assert.equal(text(second.bodyBase64), "ok");
  assert.ok(server.connections.length >= 2);
  assert.equal(server.connections.at(-1)!.length, 1);
});

Deno.test("http/request keeps at most POOL_MAX_IDLE_PER_ORIGIN idle connections per origin", async () => {
  const gate = Promise.withResolvers<void>();
  await using server = listen(async () => {
    await gate.promise;
    return OK;
  });
  using http = table();
  const url = `http://127.0.0.1:${server.port}/`;
  const concurrent = POOL_MAX_IDLE_PER_ORIGIN + 3;
  const all = Promise.all(Array.from({ length: concurrent }, () => get(http, url)));
  while (server.connections.length < concurrent) await new Promise((r) => setTimeout(r, 5));
  gate.resolve();
  await all;
  assert.equal(http.idleConnections, POOL_MAX_IDLE_PER_ORIGIN);
  http.closeAll();
  assert.equal(http.idleConnections, 0);
});

Deno.test("http/request keeps POOL_MAX_IDLE idle connections in all; one more closes the oldest", async () => {
  assert.equal(POOL_MAX_IDLE, 64);
  const origins = Array.from({ length: POOL_MAX_IDLE + 1 }, () => origin());
  try {
    using http = table();
    const url = (i: number) => `http://127.0.0.1:${origins[i]!.port}/`;
    for (let i = 0; i < POOL_MAX_IDLE; i++) await get(http, url(i));
    assert.equal(http.idleConnections, POOL_MAX_IDLE);
    await get(http, url(POOL_MAX_IDLE));
    assert.equal(http.idleConnections, POOL_MAX_IDLE);
    // The second origin's connection is still pooled: reused. The first one's was closed: a new one.
    await get(http, url(1));
    assert.equal(origins[1]!.connections.length, 1);
    await get(http, url(0));
    assert.equal(origins[0]!.connections.length, 2);
  } finally {
    for (const listener of origins) await listener[Symbol.asyncDispose]();
  }
});

Deno.test("http/request closes a connection once it was idle for the idle timeout", async () => {
  const closed = Promise.withResolvers<void>();
  await using server = listen(() => OK);
  const http = new HttpRequestTable(() => {}, {
    proxies: proxySettings(() => undefined),
    idleTimeoutMs: 20,
  });
  await get(http, `http://127.0.0.1:${server.port}/`);
  assert.equal(http.idleConnections, 1);
  // The pool's sweep closes it; waiting on the event keeps the test free of timing assumptions.
  const poll = setInterval(() => http.idleConnections === 0 && closed.resolve(), 5);
  await closed.promise;
  clearInterval(poll);
  await get(http, `http://127.0.0.1:${server.port}/`);
  assert.equal(server.connections.length, 2);
  http.closeAll();
});

Deno.test("http/request closeAll closes the idle connections", async () => {
  await using server = origin();
  const http = table();
  await get(http, `http://127.0.0.1:${server.port}/`);
  assert.equal(http.idleConnections, 1);
  http.closeAll();
  assert.equal(http.idleConnections, 0);
});

Deno.test("http/request sends http URLs through HTTP_PROXY in absolute form with proxy-authorization", async () => {
  await using server = origin();
  await using proxy = forwardingProxy();
  using http = table({ HTTP_PROXY: `http://us%40r:p%3Ass@127.0.0.1:${proxy.port}` });
  const url = `http://127.0.0.1:${server.port}/a?q=1#fragment`;
  const first = await get(http, url);
  await get(http, url);
  assert.equal(text(first.bodyBase64), "ok");
  assert.equal(proxy.connections.length, 1, "one reused connection to the proxy");
  assert.equal(
    proxy.connections[0]![0],
    `GET http://127.0.0.1:${server.port}/a?q=1 HTTP/1.1\r\naccept: */*\r\n` +
      `proxy-authorization: Basic ${encoder.encode("us@r:p:ss").toBase64()}\r\n` +
      `accept-encoding: zstd,gzip\r\nhost: 127.0.0.1:${server.port}\r\n\r\n`,
  );
  assert.equal(server.connections.flat().length, 2);
});

Deno.test("http/request connects directly to NO_PROXY hosts and ignores HTTPS_PROXY for http", async () => {
  await using server = origin();
  await using proxy = forwardingProxy();
  for (
    const env of [
      { HTTP_PROXY: `http://127.0.0.1:${proxy.port}`, NO_PROXY: "example.com, 127.0.0.1" },
      { HTTPS_PROXY: `http://127.0.0.1:${proxy.port}` },
    ]
  ) {
    using http = table(env);
    await get(http, `http://127.0.0.1:${server.port}/`);
  }
  assert.equal(proxy.connections.length, 0);
  assert.equal(server.connections.length, 2);
  assert.equal(server.connections[0]![0]!.split(" ")[1], "/");
});

Deno.test("http/request tunnels https URLs through HTTPS_PROXY with CONNECT", async () => {
  // The origin is plain TCP: it records that a TLS handshake arrived through the tunnel.
  const firstBytes: number[] = [];
  const tcp = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted = (async () => {
    const conn = await tcp.accept();
    const buffer = new Uint8Array(1024);
    const n = await conn.read(buffer);
    firstBytes.push(...buffer.subarray(0, Math.min(n ?? 0, 1)));
    conn.close();
  })();
  const port = (tcp.addr as Deno.NetAddr).port;
  await using proxy = forwardingProxy();
  using http = table({ HTTPS_PROXY: `http://u:p@127.0.0.1:${proxy.port}` });
  const err = await get(http, `https://127.0.0.1:${port}/`).catch((err: unknown) => err);
  await accepted;
  tcp.close();
  assert.ok(err instanceof RpcError);
  assert.equal(
    err.message,
    `http/request failed: error sending request for url (https://127.0.0.1:${port}/)`,
  );
  assert.equal(
    proxy.connections[0]![0],
    `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
      `Proxy-Authorization: Basic ${encoder.encode("u:p").toBase64()}\r\n\r\n`,
  );
  assert.deepEqual(firstBytes, [0x16], "a TLS handshake record went through the tunnel");
});

Deno.test("http/request fails with the send error when the proxy refuses the tunnel or its scheme is unsupported", async () => {
  await using proxy = forwardingProxy(403);
  for (
    const [env, url] of [
      [{ HTTPS_PROXY: `127.0.0.1:${proxy.port}` }, "https://127.0.0.1:9/x"],
      [{ HTTP_PROXY: `socks5://127.0.0.1:${proxy.port}` }, "http://127.0.0.1:9/x"],
    ] as const
  ) {
    using http = table(env);
    const err = await get(http, url).catch((err: unknown) => err);
    assert.ok(err instanceof RpcError);
    assert.equal(err.message, `http/request failed: error sending request for url (${url})`);
  }
  assert.equal(proxy.connections.length, 1);
  assert.match(proxy.connections[0]![0]!, /^CONNECT 127\.0\.0\.1:9 HTTP\/1\.1\r\n/);
});

Deno.test("proxy settings follow the reference: names, precedence, CGI and NO_PROXY matching", () => {
  const via = (env: Record<string, string>, url: string): string => {
    const route = proxyFor(proxySettings((name) => env[name]), new URL(url));
    return route === null ? "direct" : route.url?.host ?? "unsupported";
  };
  const P = "127.0.0.1:3128";
  assert.equal(via({ http_proxy: P }, "http://a.test/"), P);
  assert.equal(
    via({ HTTP_PROXY: "http://127.0.0.1:1", http_proxy: P }, "http://a.test/"),
    "127.0.0.1:1",
  );
  assert.equal(via({ HTTP_PROXY: "", ALL_PROXY: P }, "http://a.test/"), P);
  assert.equal(via({ all_proxy: P }, "https://a.test/"), P);
  assert.equal(via({ HTTPS_PROXY: P }, "http://a.test/"), "direct");
  assert.equal(via({ HTTP_PROXY: P }, "https://a.test/"), "direct");
  assert.equal(via({ HTTP_PROXY: P, REQUEST_METHOD: "GET" }, "http://a.test/"), "direct");
  assert.equal(via({ HTTP_PROXY: `socks5://${P}` }, "http://a.test/"), "unsupported");
  assert.equal(via({ HTTP_PROXY: P }, "http://127.0.0.1/"), P, "loopback is not exempt");
  const cases: [string, string, "direct" | "proxy"][] = [
    ["127.0.0.1", "http://127.0.0.1:8080/", "direct"],
    ["127.0.0.0/8", "http://127.0.0.9/", "direct"],
    ["127.0.0.1/32", "http://127.0.0.2/", "proxy"],
    ["::1", "http://[::1]/", "direct"],
    ["[::1]", "http://[::1]/", "proxy"],
    ["fe80::/10", "http://[fe80::1]/", "direct"],
    ["127.0.0.1:8080", "http://127.0.0.1:8080/", "proxy"],
    [".0.0.1", "http://127.0.0.1/", "proxy"],
    ["*", "http://127.0.0.1/", "proxy"],
    ["example.com", "http://sub.example.com/", "direct"],
    [".example.com", "http://example.com/", "direct"],
    ["*.example.com", "http://sub.example.com/", "proxy"],
    ["xample.com", "http://example.com/", "proxy"],
    ["LOCALHOST", "http://localhost/", "direct"],
    ["localhost.", "http://localhost/", "proxy"],
    ["foo , 127.0.0.1", "http://127.0.0.1/", "direct"],
  ];
  for (const [noProxy, url, expected] of cases) {
    const got = via({ HTTP_PROXY: P, NO_PROXY: noProxy }, url) === "direct" ? "direct" : "proxy";
    assert.equal(got, expected, `NO_PROXY=${noProxy} ${url}`);
  }
});
