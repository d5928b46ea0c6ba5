import assert from "node:assert/strict";
import { whole } from "./helpers/streamed_whole.ts";
import { StreamedString } from "../lib/protocol/streamed_json.ts";
import { zstdCompressSync } from "node:zlib";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import type { ParamsOf, ResultOf } from "../lib/protocol/methods.ts";
import { MAX_BUFFERED_BODY_BYTES } from "../lib/server/http/decoding.ts";
import { isValidHeaderValue } from "../lib/server/http/headers.ts";
import {
  HttpRequestTable,
  MAX_ACTIVE_STREAMS,
  MAX_DELTA_BYTES,
} from "../lib/server/http/request.ts";
import { concat } from "./helpers/server_harness.ts";

type BodyDelta = ParamsOf<"http/request/bodyDelta">;
type HttpRequestParams = ParamsOf<"http/request">;
type HttpResponseResult = ResultOf<"http/request">;

// Two kinds of local test servers: `Deno.serve` where its behaviour is enough, and a raw
// `Deno.listen` HTTP/1.1 responder where the test pins wire details `Deno.serve` hides (it merges
// repeated headers, reorders request headers) or misbehaves on purpose (drops the connection).

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A raw loopback HTTP server: records each request's bytes and answers with a handler. */
interface RawServer extends AsyncDisposable {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Every request received so far (head and body as text). */
  requests: string[];
}

type RawHandler = (conn: Deno.Conn, request: string) => Promise<void>;

function rawServer(handler: RawHandler): RawServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: string[] = [];
  const conns = new Set<Deno.Conn>();
  const tasks = new Set<Promise<void>>();
  async function serveConn(conn: Deno.Conn): Promise<void> {
    try {
      const request = await readRequest(conn);
      if (request === null) return;
      requests.push(request);
      await handler(conn, request);
    } catch {
      // The client went away; nothing to answer.
    } finally {
      conns.delete(conn);
      try {
        conn.close();
      } catch {
        // Already closed by the handler.
      }
    }
  }
  const accepting = (async () => {
    try {
      for await (const conn of listener) {
        conns.add(conn);
        const task = serveConn(conn);
        tasks.add(task);
        task.finally(() => tasks.delete(task));
      }
    } catch {
      // Listener closed.
    }
  })();
  return {
    origin: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    requests,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      }
      await accepting;
      await Promise.all(tasks);
    },
  };
}

async function readRequest(conn: Deno.Conn): Promise<string | null> {
  let data = new Uint8Array(0);
  const buffer = new Uint8Array(65536);
  while (true) {
    const text = decoder.decode(data);
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      // A chunked body ends with its last chunk (`0`) and the empty line after the trailers.
      if (/\r\ntransfer-encoding: [^\r]*chunked\r\n/i.test(text.slice(0, end + 2))) {
        if (text.endsWith("\r\n0\r\n\r\n")) return text;
      } else {
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? 0);
        if (data.length >= end + 4 + length) return text;
      }
    }
    const n = await conn.read(buffer);
    if (n === null) return data.length === 0 ? null : decoder.decode(data);
    const next = new Uint8Array(data.length + n);
    next.set(data);
    next.set(buffer.subarray(0, n), data.length);
    data = next;
  }
}

async function write(conn: Deno.Conn, text: string | Uint8Array): Promise<void> {
  const bytes = typeof text === "string" ? encoder.encode(text) : text;
  let offset = 0;
  while (offset < bytes.length) offset += await conn.write(bytes.subarray(offset));
}

/** A `Deno.serve` server on an ephemeral loopback port. */
function serve(handler: Deno.ServeHandler): { origin: string } & AsyncDisposable {
  const controller = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: controller.signal, onListen() {} },
    handler,
  );
  return {
    origin: `http://127.0.0.1:${server.addr.port}`,
    async [Symbol.asyncDispose]() {
      controller.abort();
      await server.finished;
    },
  };
}

/** A table whose deltas and responses are recorded, with a way to wait for a delta. */
function recordingTable(): {
  table: HttpRequestTable;
  deltas: BodyDelta[];
  events: string[];
  deltaWhere: (predicate: (delta: BodyDelta) => boolean) => Promise<BodyDelta>;
  finalDelta: (requestId: string) => Promise<BodyDelta>;
  request: (params: HttpRequestParams) => Promise<HttpResponseResult>;
} {
  const deltas: BodyDelta[] = [];
  const events: string[] = [];
  const waiters = new Set<(delta: BodyDelta) => void>();
  const table = new HttpRequestTable((delta) => {
    deltas.push(delta);
    events.push(`delta ${delta.requestId} ${delta.seq}`);
    for (const waiter of waiters) waiter(delta);
  });
  function deltaWhere(predicate: (delta: BodyDelta) => boolean): Promise<BodyDelta> {
    const seen = deltas.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => {
      const waiter = (delta: BodyDelta): void => {
        if (!predicate(delta)) return;
        waiters.delete(waiter);
        resolve(delta);
      };
      waiters.add(waiter);
    });
  }
  function finalDelta(requestId: string): Promise<BodyDelta> {
    return deltaWhere((delta) => delta.requestId === requestId && delta.done);
  }
  async function request(params: HttpRequestParams): Promise<HttpResponseResult> {
    const result = await whole(await table.request(params));
    events.push(`response ${params.requestId}`);
    return result as HttpResponseResult;
  }
  return { table, deltas, events, deltaWhere, finalDelta, request };
}

function text(base64: string): string {
  return decoder.decode(Uint8Array.fromBase64(base64));
}

function joined(deltas: BodyDelta[]): Uint8Array {
  return concat(deltas.map((delta) => Uint8Array.fromBase64(delta.deltaBase64)));
}

function assertEquals(actual: unknown, expected: unknown): void {
  assert.deepStrictEqual(actual, expected);
}

async function assertRpcError(
  promise: Promise<unknown>,
  code: number,
  message: string,
): Promise<void> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof RpcError, `expected an RpcError, got ${err}`);
    assertEquals({ code: err.code, message: err.message }, { code, message });
    return;
  }
  assert.fail("expected the request to fail");
}

Deno.test("http/request returns status, body and repeated response headers in wire order", async () => {
  await using server = rawServer(async (conn) => {
    await write(
      conn,
      "HTTP/1.1 200 OK\r\nServer: testsrv/1.0\r\nContent-Type: text/plain\r\nX-Multi: one\r\n" +
        "X-Multi: two\r\nContent-Length: 18\r\n\r\nhello from server\n",
    );
  });
  const { request } = recordingTable();
  const result = await request({ method: "GET", url: `${server.origin}/hello`, requestId: "r1" });
  assertEquals(result, {
    status: 200,
    headers: [
      { name: "server", value: "testsrv/1.0" },
      { name: "content-type", value: "text/plain" },
      { name: "x-multi", value: "one" },
      { name: "x-multi", value: "two" },
      { name: "content-length", value: "18" },
    ],
    bodyBase64: "aGVsbG8gZnJvbSBzZXJ2ZXIK",
  });
});

Deno.test("http/request groups repeated response headers and drops non-ASCII values like the reference", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 404 Not Found\r\nX-Multi: one\r\nx-other: 1\r\nX-MULTI: two\r\n");
    await write(conn, new Uint8Array([...encoder.encode("x-bin: "), 0xff, 0x0d, 0x0a]));
    await write(conn, "x-empty:\r\nContent-Length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  const result = await request({ method: "GET", url: `${server.origin}/`, requestId: "" });
  assertEquals(result, {
    status: 404,
    headers: [
      { name: "x-multi", value: "one" },
      { name: "x-multi", value: "two" },
      { name: "x-other", value: "1" },
      { name: "x-empty", value: "" },
      { name: "content-length", value: "0" },
    ],
    bodyBase64: "",
  });
});

Deno.test("http/request sends the method, headers and body exactly like the reference", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  await request({
    method: "POST",
    url: `${server.origin}/echo?q=1#fragment`,
    requestId: "r2",
    headers: [
      { name: "X-A", value: "1" },
      { name: "Y", value: "2" },
      { name: "X-A", value: "3" },
    ],
    bodyBase64: encoder.encode("hi"),
  });
  const host = server.origin.slice("http://".length);
  assertEquals(server.requests, [
    `POST /echo?q=1 HTTP/1.1\r\nx-a: 1\r\nx-a: 3\r\ny: 2\r\naccept: */*\r\n` +
    `accept-encoding: zstd,gzip\r\nhost: ${host}\r\ncontent-length: 2\r\n\r\nhi`,
  ]);
});

Deno.test("http/request sends a non-ASCII header value as UTF-8, with and without a body", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  });
  const { request } = recordingTable();
  const headers = [{ name: "x-name", value: "caf\u00e9 \u2713" }];
  // A head cut short would leave the server waiting for its end: the deadline ends the wait.
  const timeoutMs = 10_000;
  await request({ method: "GET", url: `${server.origin}/`, requestId: "u1", headers, timeoutMs });
  await request({
    method: "POST",
    url: `${server.origin}/`,
    requestId: "u2",
    headers,
    bodyBase64: encoder.encode("body"),
    timeoutMs,
  });
  const host = server.origin.slice("http://".length);
  const head =
    `x-name: caf\u00e9 \u2713\r\naccept: */*\r\naccept-encoding: zstd,gzip\r\nhost: ${host}\r\n`;
  assertEquals(server.requests, [
    `GET / HTTP/1.1\r\n${head}\r\n`,
    `POST / HTTP/1.1\r\n${head}content-length: 4\r\n\r\nbody`,
  ]);
});

Deno.test("http/request sends a lowercase method literally and no user-agent", async () => {
  await using server = serve((req) =>
    Response.json({ method: req.method, userAgent: req.headers.get("user-agent") })
  );
  const { request } = recordingTable();
  const result = await request({ method: "get", url: `${server.origin}/`, requestId: "" });
  assertEquals(JSON.parse(text(result.bodyBase64)), { method: "get", userAgent: null });
});

Deno.test("http/request lets client headers override the defaults and turns userinfo into basic auth", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  const port = server.origin.split(":").at(-1);
  await request({
    method: "GET",
    url: `${server.origin}/a`,
    requestId: "",
    headers: [
      { name: "Host", value: "example.test" },
      { name: "User-Agent", value: "ua" },
      { name: "Accept-Encoding", value: "identity" },
    ],
  });
  await request({ method: "GET", url: `http://user:p%40ss@127.0.0.1:${port}/b`, requestId: "" });
  assertEquals(server.requests, [
    "GET /a HTTP/1.1\r\nhost: example.test\r\nuser-agent: ua\r\naccept-encoding: identity\r\n" +
    "accept: */*\r\n\r\n",
    "GET /b HTTP/1.1\r\nauthorization: Basic dXNlcjpwQHNz\r\naccept: */*\r\n" +
    `accept-encoding: zstd,gzip\r\nhost: 127.0.0.1:${port}\r\n\r\n`,
  ]);
});

Deno.test("http/request sends a body chunked, without content-length, when the client sets transfer-encoding, as the reference does", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  const te = (value: string) => ({ name: "Transfer-Encoding", value });
  const x = { name: "X-A", value: "1" };
  const y = { name: "Y", value: "2" };
  const body = encoder.encode("hi");
  const post = (requestId: string, headers: { name: string; value: string }[]) =>
    request({
      method: "POST",
      url: `${server.origin}/`,
      requestId,
      headers,
      bodyBase64: body,
      timeoutMs: 10_000, // the server waits for a chunked body's end: a failure, not a hang
    });
  await post("c1", [x, te("chunked")]);
  // The reference's header map removes content-length by moving its last entry (host) there.
  await post("c2", [x, { name: "Content-Length", value: "2" }, y, te("chunked")]);
  // A coding list that does not end in chunked gets it appended to its last line.
  await post("c3", [te("gzip")]);
  await post("c4", [te("chunked"), te("gzip")]);
  await post("c5", [te("x"), { name: "X-Big", value: "1" }]);
  const host = `host: ${server.origin.slice("http://".length)}`;
  const defaults = "accept: */*\r\naccept-encoding: zstd,gzip";
  const chunked = "\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
  assertEquals(server.requests, [
    `POST / HTTP/1.1\r\nx-a: 1\r\ntransfer-encoding: chunked\r\n${defaults}\r\n${host}${chunked}`,
    `POST / HTTP/1.1\r\nx-a: 1\r\n${host}\r\ny: 2\r\ntransfer-encoding: chunked\r\n${defaults}${chunked}`,
    `POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n${defaults}\r\n${host}${chunked}`,
    `POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip, chunked\r\n` +
    `${defaults}\r\n${host}${chunked}`,
    `POST / HTTP/1.1\r\ntransfer-encoding: x, chunked\r\nx-big: 1\r\n${defaults}\r\n${host}${chunked}`,
  ]);
});

Deno.test("http/request sends a body's own length in place of a client's content-length", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  // The reference sends `content-length: 1` and only `h` (docs/protocol.md, section 14).
  await request({
    method: "POST",
    url: `${server.origin}/`,
    requestId: "",
    headers: [{ name: "Content-Length", value: "1" }, { name: "X-A", value: "1" }],
    bodyBase64: encoder.encode("hi"),
  });
  const host = `host: ${server.origin.slice("http://".length)}`;
  assertEquals(server.requests, [
    `POST / HTTP/1.1\r\ncontent-length: 2\r\nx-a: 1\r\naccept: */*\r\n` +
    `accept-encoding: zstd,gzip\r\n${host}\r\n\r\nhi`,
  ]);
});

Deno.test("http/request drops the client's transfer-encoding from a request without a body, as the reference does", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  });
  const { request } = recordingTable();
  const headers = [
    { name: "X-A", value: "1" },
    { name: "Transfer-Encoding", value: "chunked" },
    { name: "Y", value: "2" },
  ];
  const timeoutMs = 10_000; // the server waits for a chunked body's end: a failure, not a hang
  await request({ method: "GET", url: `${server.origin}/`, requestId: "", headers, timeoutMs });
  const bodyBase64 = new Uint8Array(0);
  await request({
    method: "POST",
    url: `${server.origin}/`,
    requestId: "",
    headers,
    bodyBase64,
    timeoutMs,
  });
  const host = `host: ${server.origin.slice("http://".length)}`;
  const rest = `x-a: 1\r\n${host}\r\ny: 2\r\naccept: */*\r\naccept-encoding: zstd,gzip\r\n\r\n`;
  assertEquals(server.requests, [`GET / HTTP/1.1\r\n${rest}`, `POST / HTTP/1.1\r\n${rest}`]);
});

Deno.test("http/request with a client's transfer-encoding keeps a kept-alive connection in step", async () => {
  // Before, the body went out raw beside `transfer-encoding: chunked`, and a request without a
  // body announced a chunked one: an HTTP server read the next request as that body.
  let accepted = 0;
  await using server = serve(async (req) => new Response(`${req.method} ${await req.text()}`));
  const { request } = recordingTable();
  const url = `${server.origin}/`;
  const headers = [{ name: "Transfer-Encoding", value: "chunked" }];
  const answers = [];
  for (const bodyBase64 of [encoder.encode("one"), undefined, encoder.encode("three")]) {
    const result = await request({
      method: "POST",
      url,
      requestId: "",
      headers,
      bodyBase64,
      timeoutMs: 10_000,
    });
    answers.push(`${result.status} ${text(result.bodyBase64)}`);
    accepted++;
  }
  assertEquals({ accepted, answers }, {
    accepted: 3,
    answers: ["200 POST one", "200 POST ", "200 POST three"],
  });
});

Deno.test("http/request follows redirects by default and returns the 3xx with redirectPolicy stop", async () => {
  await using server = serve((req) =>
    new URL(req.url).pathname === "/redirect"
      ? new Response(null, { status: 302, headers: { location: "/hello" } })
      : new Response("hello")
  );
  const { request } = recordingTable();
  const followed = await request({
    method: "GET",
    url: `${server.origin}/redirect`,
    requestId: "",
  });
  assertEquals([followed.status, text(followed.bodyBase64)], [200, "hello"]);
  const stopped = await request({
    method: "GET",
    url: `${server.origin}/redirect`,
    requestId: "",
    redirectPolicy: "stop",
  });
  assertEquals(stopped.status, 302);
  assert.ok(stopped.headers.some((h) => h.name === "location" && h.value === "/hello"));
});

Deno.test("http/request fails a redirect loop with too many redirects after 10 hops", async () => {
  let hits = 0;
  await using server = serve(() => {
    hits++;
    return new Response(null, { status: 302, headers: { location: "/loop" } });
  });
  const { request } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: `${server.origin}/loop`, requestId: "" }),
    ErrorCode.InternalError,
    "http/request failed: too many redirects",
  );
  assertEquals(hits, 11);
});

Deno.test("http/request follows a chain of exactly 10 redirects and refuses an 11th", async () => {
  // /r/N redirects to /r/N-1; /r/0 answers.
  await using server = serve((req) => {
    const hops = Number(new URL(req.url).pathname.slice(3));
    if (hops === 0) return new Response("done");
    return new Response(null, { status: 302, headers: { location: `/r/${hops - 1}` } });
  });
  const { request } = recordingTable();
  const followed = await request({ method: "GET", url: `${server.origin}/r/10`, requestId: "" });
  assertEquals([followed.status, text(followed.bodyBase64)], [200, "done"]);
  await assertRpcError(
    request({ method: "GET", url: `${server.origin}/r/11`, requestId: "" }),
    ErrorCode.InternalError,
    "http/request failed: too many redirects",
  );
});

/** A response head of exactly `bytes` bytes (CR LF line ends, the empty line included). */
function headOfBytes(bytes: number): string {
  const start = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n";
  const filler = (n: number) => `x-fill: ${"f".repeat(n - "x-fill: \r\n".length)}\r\n`;
  // Several header lines of at most 60 000 bytes make up the size.
  let head = start;
  let rest = bytes - start.length - 2;
  while (rest > 0) {
    const line = Math.min(rest, 60_000);
    head += filler(line);
    rest -= line;
  }
  assertEquals(head.length + 2, bytes);
  return head + "\r\n";
}

Deno.test("http/request reads a response head of exactly 256 KiB and refuses one byte more", async () => {
  await using server = rawServer(async (conn, request) => {
    const bytes = Number(/GET \/(\d+)/.exec(request)![1]);
    await write(conn, headOfBytes(bytes) + "ok");
  });
  const { request } = recordingTable();
  const atLimit = await request({
    method: "GET",
    url: `${server.origin}/${256 * 1024}`,
    requestId: "",
  });
  assertEquals([atLimit.status, text(atLimit.bodyBase64)], [200, "ok"]);
  const over = `${server.origin}/${256 * 1024 + 1}`;
  await assertRpcError(
    request({ method: "GET", url: over, requestId: "" }),
    ErrorCode.InternalError,
    `http/request failed: error sending request for url (${over})`,
  );
});

Deno.test("http/request reads a response of exactly 100 header fields and refuses 101, as the reference does", async () => {
  await using server = rawServer(async (conn, request) => {
    const fields = Number(/GET \/(\d+)/.exec(request)![1]);
    await write(
      conn,
      `HTTP/1.1 200 OK\r\n${"x-a: 1\r\n".repeat(fields - 1)}content-length: 2\r\n\r\nok`,
    );
  });
  const { request } = recordingTable();
  const atLimit = await request({ method: "GET", url: `${server.origin}/100`, requestId: "" });
  assertEquals([atLimit.headers.length, text(atLimit.bodyBase64)], [100, "ok"]);
  const over = `${server.origin}/101`;
  await assertRpcError(
    request({ method: "GET", url: over, requestId: "" }),
    ErrorCode.InternalError,
    `http/request failed: error sending request for url (${over})`,
  );
});

Deno.test("http/request refuses a response header value with a control character other than tab, as the reference does", async () => {
  await using server = rawServer(async (conn, request) => {
    const code = Number(/GET \/(\d+)/.exec(request)![1]);
    await write(
      conn,
      `HTTP/1.1 200 OK\r\nx-a: a${String.fromCharCode(code)}b\r\ncontent-length: 0\r\n\r\n`,
    );
  });
  const { request } = recordingTable();
  const tab = await request({ method: "GET", url: `${server.origin}/9`, requestId: "" });
  assertEquals(tab.headers[0], { name: "x-a", value: "a\tb" });
  for (const code of [0, 1, 8, 0x0b, 0x0d, 0x1f, 0x7f]) {
    const url = `${server.origin}/${code}`;
    await assertRpcError(
      request({ method: "GET", url, requestId: "" }),
      ErrorCode.InternalError,
      `http/request failed: error sending request for url (${url})`,
    );
  }
});

/** A chunked response `ok` whose trailer section is `fields` lines and the empty line, `bytes` long. */
function trailerSection(fields: number, bytes: number): string {
  const lines = Array.from({ length: fields }, () => "t: \r\n");
  lines[0] = `t: ${"v".repeat(bytes - 2 - 5 * fields)}\r\n`;
  const section = lines.join("") + "\r\n";
  assertEquals(section.length, bytes);
  return `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n${section}`;
}

Deno.test("http/request reads a trailer section of 16 383 bytes or 100 fields and refuses more, as the reference does", async () => {
  await using server = rawServer(async (conn, request) => {
    const [fields, bytes] = /GET \/(\d+)\/(\d+)/.exec(request)!.slice(1).map(Number);
    await write(conn, trailerSection(fields!, bytes!));
  });
  const { request, finalDelta } = recordingTable();
  for (const [fields, bytes] of [[1, 16_383], [100, 16_383], [100, 600]]) {
    const result = await request({
      method: "GET",
      url: `${server.origin}/${fields}/${bytes}`,
      requestId: "",
    });
    assertEquals(text(result.bodyBase64), "ok");
  }
  for (const [fields, bytes] of [[1, 16_384], [100, 16_384], [101, 600]]) {
    const url = `${server.origin}/${fields}/${bytes}`;
    await assertRpcError(
      request({ method: "GET", url, requestId: "" }),
      ErrorCode.InternalError,
      "failed to read http/request response body: error decoding response body",
    );
    const requestId = `${fields}/${bytes}`;
    await request({ method: "GET", url, requestId, streamResponse: true });
    assertEquals((await finalDelta(requestId)).error, "error decoding response body");
  }
});

Deno.test("http/request turns POST into GET on 302 and keeps method and body on 307", async () => {
  await using server = serve(async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/r302") {
      return new Response(null, { status: 302, headers: { location: "/echo" } });
    }
    if (path === "/r307") {
      return new Response(null, { status: 307, headers: { location: "/echo" } });
    }
    return new Response(`${req.method} ${await req.text()} ${req.headers.get("referer")}`);
  });
  const { request } = recordingTable();
  const body = encoder.encode("payload");
  const r302 = await request({
    method: "POST",
    url: `${server.origin}/r302`,
    requestId: "",
    bodyBase64: body,
  });
  assertEquals(text(r302.bodyBase64), `GET  ${server.origin}/r302`);
  const r307 = await request({
    method: "POST",
    url: `${server.origin}/r307`,
    requestId: "",
    bodyBase64: body,
  });
  assertEquals(text(r307.bodyBase64), `POST payload ${server.origin}/r307`);
});

Deno.test("http/request sends a redirected request's headers in the reference's order", async (t) => {
  // A redirect swap-removes the headers it drops from the client's list (the last one takes the
  // place), appends referer, and the defaults follow. The expected heads are what codex
  // exec-server 0.171.0 sent (with its CODEX_HOME in place, as Codex starts it).
  await using server = rawServer(async (conn, request) => {
    const path = request.slice(request.indexOf(" ") + 1, request.indexOf(" HTTP/1.1"));
    const status = { "/r303": 303, "/r307": 307, "/other": 307 }[path];
    if (status !== undefined) {
      const location = path === "/other"
        ? server.origin.replace("127.0.0.1", "localhost") + "/echo"
        : "/echo";
      await write(
        conn,
        `HTTP/1.1 ${status} R\r\nconnection: close\r\nlocation: ${location}\r\ncontent-length: 0\r\n\r\n`,
      );
    } else {
      await write(conn, "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    }
  });
  const { request } = recordingTable();
  const headers = [
    { name: "x-a", value: "1" },
    { name: "authorization", value: "secret" },
    { name: "content-type", value: "text/plain" },
    { name: "cookie", value: "c=1" },
    { name: "y-b", value: "2" },
  ];
  const host = server.origin.slice("http://".length);
  const redirected = async (path: string) => {
    const before = server.requests.length;
    await request({
      method: "POST",
      url: `${server.origin}${path}`,
      requestId: "",
      headers,
      bodyBase64: encoder.encode("hello"),
    });
    assertEquals(server.requests.length, before + 2);
    return server.requests[before + 1]!;
  };
  await t.step("303: the content headers go, the method becomes GET", async () => {
    assertEquals(
      await redirected("/r303"),
      "GET /echo HTTP/1.1\r\nx-a: 1\r\nauthorization: secret\r\ny-b: 2\r\ncookie: c=1\r\n" +
        `referer: ${server.origin}/r303\r\naccept: */*\r\naccept-encoding: zstd,gzip\r\n` +
        `host: ${host}\r\n\r\n`,
    );
  });
  await t.step("307: everything stays", async () => {
    assertEquals(
      await redirected("/r307"),
      "POST /echo HTTP/1.1\r\nx-a: 1\r\nauthorization: secret\r\ncontent-type: text/plain\r\n" +
        `cookie: c=1\r\ny-b: 2\r\nreferer: ${server.origin}/r307\r\naccept: */*\r\n` +
        `accept-encoding: zstd,gzip\r\nhost: ${host}\r\ncontent-length: 5\r\n\r\nhello`,
    );
  });
  await t.step("to another origin: the credentials go, referer names only the origin", async () => {
    assertEquals(
      await redirected("/other"),
      "POST /echo HTTP/1.1\r\nx-a: 1\r\ny-b: 2\r\ncontent-type: text/plain\r\n" +
        `referer: ${server.origin}/\r\naccept: */*\r\naccept-encoding: zstd,gzip\r\n` +
        `host: ${host.replace("127.0.0.1", "localhost")}\r\ncontent-length: 5\r\n\r\nhello`,
    );
  });
});

Deno.test("http/request rejects a redirect to a non-http scheme", async () => {
  await using server = serve(() =>
    new Response(null, { status: 302, headers: { location: "ftp://example.test/" } })
  );
  const { request } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: `${server.origin}/`, requestId: "" }),
    ErrorCode.InternalError,
    "http/request failed: redirect target uses unsupported URL scheme: ftp",
  );
});

Deno.test("http/request validates params with the reference messages", async (t) => {
  const { request } = recordingTable();
  const cases: [Partial<HttpRequestParams>, string][] = [
    [{ method: "BAD METHOD" }, "http/request method is invalid: invalid HTTP method"],
    [{ method: "" }, "http/request method is invalid: invalid HTTP method"],
    [{ url: "not a url" }, "http/request url is invalid: relative URL without a base"],
    [{ url: "http://" }, "http/request url is invalid: empty host"],
    [{ url: "http://host:99999/" }, "http/request url is invalid: invalid port number"],
    [{ url: "http://[::1/" }, "http/request url is invalid: invalid IPv6 address"],
    [{ url: "http://1.2.3.256/" }, "http/request url is invalid: invalid IPv4 address"],
    [{ url: "http://a b/" }, "http/request url is invalid: invalid international domain name"],
    [{ url: "ftp://127.0.0.1/x" }, "http/request only supports http and https URLs, got ftp"],
    [
      { headers: [{ name: "bad name", value: "x" }] },
      "http/request header name is invalid: invalid HTTP header name",
    ],
    [
      { headers: [{ name: "X", value: "a\nb" }, { name: "bad name", value: "x" }] },
      "http/request header value is invalid for X: failed to parse header value",
    ],
  ];
  for (const [override, message] of cases) {
    await t.step(message, async () => {
      const params = { method: "GET", url: "http://127.0.0.1:9/", requestId: "", ...override };
      await assertRpcError(request(params), ErrorCode.InvalidParams, message);
    });
  }
});

Deno.test("http/request header values refuse control characters other than tab and accept any other text", () => {
  for (let code = 0; code < 0x100; code++) {
    const expected = code === 0x09 || (code >= 0x20 && code !== 0x7f);
    assertEquals([code, isValidHeaderValue(`a${String.fromCharCode(code)}b`)], [code, expected]);
  }
  const accepted = ["", "caf\u00e9 \u2713", "\ud83d\ude00", "Bearer " + "t".repeat(300)];
  assertEquals(accepted.map(isValidHeaderValue), accepted.map(() => true));
  assertEquals(isValidHeaderValue("x".repeat(300) + "\n"), false);
});

Deno.test("http/request appends valueEnvVar and refuses an unset or empty variable", async () => {
  const name = `HTTP_REQUEST_TEST_${crypto.randomUUID().replaceAll("-", "_")}`;
  await using server = serve((req) => new Response(req.headers.get("authorization")));
  const { request } = recordingTable();
  const params = (valueEnvVar: string): HttpRequestParams => ({
    method: "GET",
    url: server.origin,
    requestId: "",
    headers: [{ name: "Authorization", value: "Bearer ", valueEnvVar }],
  });
  await assertRpcError(
    request(params(name)),
    ErrorCode.InvalidParams,
    `http/request header Authorization requires executor environment variable ${name}`,
  );
  await assertRpcError(
    request(params("")),
    ErrorCode.InvalidParams,
    "http/request header Authorization requires executor environment variable ",
  );
  Deno.env.set(name, "");
  try {
    await assertRpcError(
      request(params(name)),
      ErrorCode.InvalidParams,
      `http/request header Authorization requires a non-empty executor environment variable ${name}`,
    );
    Deno.env.set(name, "secret-token");
    const result = await request(params(name));
    assertEquals(text(result.bodyBase64), "Bearer secret-token");
  } finally {
    Deno.env.delete(name);
  }
});

Deno.test("http/request fails with timeoutMs 0 before connecting", async () => {
  const { request } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: "http://127.0.0.1:9/", requestId: "", timeoutMs: 0 }),
    ErrorCode.InternalError,
    "http/request failed: route-aware request timed out",
  );
});

Deno.test("http/request reports an expired deadline while waiting for headers as a send error", async () => {
  const release = Promise.withResolvers<void>();
  await using server = rawServer(() => release.promise);
  const { request } = recordingTable();
  try {
    await assertRpcError(
      request({ method: "GET", url: `${server.origin}/slow`, requestId: "", timeoutMs: 50 }),
      ErrorCode.InternalError,
      `http/request failed: error sending request for url (${server.origin}/slow)`,
    );
  } finally {
    release.resolve();
  }
});

Deno.test("http/request reports an expired deadline mid-body as a body error", async () => {
  const release = Promise.withResolvers<void>();
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n");
    await release.promise;
  });
  const { request, deltas, finalDelta } = recordingTable();
  try {
    // The server never sends the rest of the body: each deadline expires mid-body. 2 s leaves the
    // head (sent at once) time to arrive under any load; the two requests run side by side.
    const [, result] = await Promise.all([
      assertRpcError(
        request({ method: "GET", url: `${server.origin}/stall`, requestId: "", timeoutMs: 2000 }),
        ErrorCode.InternalError,
        "failed to read http/request response body: error decoding response body",
      ),
      request({
        method: "GET",
        url: `${server.origin}/stall`,
        requestId: "s7",
        streamResponse: true,
        timeoutMs: 2000,
      }),
    ]);
    assertEquals(result.headers, [{ name: "transfer-encoding", value: "chunked" }]);
    await finalDelta("s7");
    assertEquals(deltas, [
      { requestId: "s7", seq: 1, deltaBase64: "YWJj", done: false, error: null },
      {
        requestId: "s7",
        seq: 2,
        deltaBase64: "",
        done: true,
        error: "error decoding response body",
      },
    ]);
  } finally {
    release.resolve();
  }
});

Deno.test("http/request reports a refused connection with the request URL", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  const { request } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: `http://user:pw@127.0.0.1:${port}/x#f`, requestId: "" }),
    ErrorCode.InternalError,
    `http/request failed: error sending request for url (http://127.0.0.1:${port}/x#f)`,
  );
});

Deno.test("http/request decodes gzip bodies and drops content-encoding and content-length", async () => {
  const gzipped = new Uint8Array(
    await new Response(
      new Blob(["hello gzip"]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
  await using server = serve((req) =>
    new Response(req.method === "HEAD" ? null : gzipped, {
      headers: {
        "content-encoding": "gzip",
        "content-length": String(gzipped.length),
        "x-a": "1",
      },
    })
  );
  const { request, deltas, finalDelta } = recordingTable();
  const result = await request({ method: "GET", url: server.origin, requestId: "" });
  assertEquals(text(result.bodyBase64), "hello gzip");
  const names = result.headers.map((h) => h.name);
  assert.ok(names.includes("x-a"));
  assert.ok(!names.includes("content-encoding") && !names.includes("content-length"));
  const head = await request({ method: "HEAD", url: server.origin, requestId: "" });
  assertEquals(head.bodyBase64, "");
  await request({ method: "GET", url: server.origin, requestId: "gz", streamResponse: true });
  await finalDelta("gz");
  assertEquals(text(joined(deltas).toBase64()), "hello gzip");
});

Deno.test("http/request decodes zstd bodies", async () => {
  const compressed = new Uint8Array(zstdCompressSync(encoder.encode("hello zstd")));
  await using server = serve(() =>
    new Response(compressed, { headers: { "content-encoding": "zstd" } })
  );
  const { request } = recordingTable();
  const result = await request({ method: "GET", url: server.origin, requestId: "" });
  assertEquals(text(result.bodyBase64), "hello zstd");
  assert.ok(!result.headers.some((h) => h.name === "content-encoding"));
});

Deno.test("http/request buffers a body of MAX_BUFFERED_BODY_BYTES and refuses one byte more", async () => {
  const piece = new Uint8Array(1024 * 1024);
  // Answers with a body of `?size=` bytes, in 1 MiB pieces.
  await using server = serve((req) => {
    let left = Number(new URL(req.url).searchParams.get("size"));
    return new Response(
      new ReadableStream<Uint8Array>({
        pull(controller): void {
          if (left === 0) return controller.close();
          const chunk = piece.subarray(0, Math.min(left, piece.length));
          controller.enqueue(chunk);
          left -= chunk.length;
        },
      }),
    );
  });
  const { table, request } = recordingTable();
  const url = (size: number) => `${server.origin}/?size=${size}`;
  // At the bound the body's base64 is streamed (as one string it would pass V8's string limit).
  const atLimit = await table.request({
    method: "GET",
    url: url(MAX_BUFFERED_BODY_BYTES),
    requestId: "",
  });
  assert.ok(atLimit.bodyBase64 instanceof StreamedString);
  let decoded = 0;
  for await (const chunk of atLimit.bodyBase64.take()) {
    decoded += Uint8Array.fromBase64(chunk).length;
  }
  assertEquals(decoded, MAX_BUFFERED_BODY_BYTES);
  await assertRpcError(
    request({ method: "GET", url: url(MAX_BUFFERED_BODY_BYTES + 1), requestId: "" }),
    ErrorCode.InternalError,
    "failed to read http/request response body: response body exceeds the 536870912 byte " +
      "limit of buffered requests; use streamResponse",
  );
});

Deno.test("http/request reports a corrupt gzip body as a body error", async () => {
  await using server = serve(() =>
    new Response("not gzip at all", { headers: { "content-encoding": "gzip" } })
  );
  const { request, deltas, finalDelta } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: server.origin, requestId: "" }),
    ErrorCode.InternalError,
    "failed to read http/request response body: error decoding response body",
  );
  await request({ method: "GET", url: server.origin, requestId: "bad", streamResponse: true });
  assertEquals((await finalDelta("bad")).error, "error decoding response body");
  assert.ok(deltas.every((delta) => delta.deltaBase64 === "" || !delta.done));
});

Deno.test("http/request streams a several-MiB body completely and in order after the response", async () => {
  const size = 5 * 1024 * 1024 + 123;
  const body = new Uint8Array(size).map((_, i) => (i * 7 + (i >> 12)) & 0xff);
  await using server = serve(() => {
    let offset = 0;
    return new Response(
      new ReadableStream<Uint8Array>({
        pull(controller): void {
          if (offset >= size) return controller.close();
          controller.enqueue(body.slice(offset, offset + 300_000));
          offset += 300_000;
        },
      }),
    );
  });
  const { request, deltas, events, finalDelta } = recordingTable();
  const result = await request({
    method: "GET",
    url: server.origin,
    requestId: "big",
    streamResponse: true,
  });
  assertEquals([result.status, result.bodyBase64], [200, ""]);
  const final = await finalDelta("big");
  assertEquals(events[0], "response big");
  assertEquals(deltas.map((delta) => delta.seq), deltas.map((_, i) => i + 1));
  assertEquals(deltas.filter((delta) => delta.done), [final]);
  assertEquals(final, {
    requestId: "big",
    seq: deltas.length,
    deltaBase64: "",
    done: true,
    error: null,
  });
  const chunks = deltas.slice(0, -1);
  assert.ok(chunks.every((delta) => !delta.done && delta.error === null));
  assert.ok(chunks.every((delta) => {
    const length = Uint8Array.fromBase64(delta.deltaBase64).length;
    return length > 0 && length <= MAX_DELTA_BYTES;
  }));
  assertEquals(joined(chunks), body);
});

Deno.test("http/request streams an empty body as a single final delta", async () => {
  await using server = serve(() => new Response(null, { status: 204 }));
  const { request, deltas, finalDelta } = recordingTable();
  const result = await request({
    method: "GET",
    url: server.origin,
    requestId: "e",
    streamResponse: true,
  });
  assertEquals(result.status, 204);
  await finalDelta("e");
  assertEquals(deltas, [{ requestId: "e", seq: 1, deltaBase64: "", done: true, error: null }]);
});

Deno.test("http/request ends a stream with an error when the server drops the connection", async () => {
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\npartial");
  });
  const { request, deltas, finalDelta } = recordingTable();
  await assertRpcError(
    request({ method: "GET", url: `${server.origin}/abort`, requestId: "" }),
    ErrorCode.InternalError,
    "failed to read http/request response body: error decoding response body",
  );
  await request({
    method: "GET",
    url: `${server.origin}/abort`,
    requestId: "s3",
    streamResponse: true,
  });
  await finalDelta("s3");
  assertEquals(deltas, [
    { requestId: "s3", seq: 1, deltaBase64: "cGFydGlhbA==", done: false, error: null },
    { requestId: "s3", seq: 2, deltaBase64: "", done: true, error: "error decoding response body" },
  ]);
});

Deno.test("http/request refuses a duplicate active requestId and accepts it after the final delta", async () => {
  const release = Promise.withResolvers<void>();
  await using server = rawServer(async (conn, request) => {
    if (request.startsWith("GET /stall ")) {
      await write(conn, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n");
      await release.promise;
      await write(conn, "0\r\n\r\n");
    } else {
      await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    }
  });
  const { table, deltas, deltaWhere, request } = recordingTable();
  const stall = { method: "GET", url: `${server.origin}/stall`, requestId: "dup" };
  const hello = { ...stall, url: `${server.origin}/hello` };
  await request({ ...stall, streamResponse: true });
  await deltaWhere((delta) => delta.seq === 1);
  await assertRpcError(
    request({ ...hello, streamResponse: true }),
    ErrorCode.InvalidParams,
    "http/request streamResponse requestId `dup` is already active",
  );
  const buffered = await request(hello);
  assertEquals(text(buffered.bodyBase64), "ok");
  release.resolve();
  await deltaWhere((delta) => delta.done);
  assertEquals(table.activeStreams, 0);
  const again = await request({ ...hello, streamResponse: true });
  assertEquals(again.status, 200);
  await deltaWhere((delta) => delta.done && delta !== deltas[1]);
  assertEquals(deltas, [
    { requestId: "dup", seq: 1, deltaBase64: "YWJj", done: false, error: null },
    { requestId: "dup", seq: 2, deltaBase64: "", done: true, error: null },
    { requestId: "dup", seq: 1, deltaBase64: "b2s=", done: false, error: null },
    { requestId: "dup", seq: 2, deltaBase64: "", done: true, error: null },
  ]);
});

Deno.test("http/request holds at most MAX_ACTIVE_STREAMS streamed responses per connection; a finished one frees its place", async () => {
  const release = Promise.withResolvers<void>();
  const releaseFirst = Promise.withResolvers<void>();
  await using server = rawServer(async (conn, request) => {
    if (request.startsWith("GET /stall")) {
      await write(conn, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n");
      await (request.startsWith("GET /stall0 ") ? releaseFirst.promise : release.promise);
      await write(conn, "0\r\n\r\n");
    } else {
      await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    }
  });
  const { table, finalDelta, request } = recordingTable();
  try {
    for (let i = 0; i < MAX_ACTIVE_STREAMS; i++) {
      await request({
        method: "GET",
        url: `${server.origin}/stall${i}`,
        requestId: `s${i}`,
        streamResponse: true,
      });
    }
    assertEquals(table.activeStreams, MAX_ACTIVE_STREAMS);
    const more = { method: "GET", url: `${server.origin}/hello`, requestId: "more" };
    const refused = await table.request({ ...more, streamResponse: true }).then(
      () => assert.fail("expected the stream past the bound to be refused"),
      (err) => err,
    );
    assert.ok(refused instanceof RpcError);
    assertEquals(
      { code: refused.code, message: refused.message, data: refused.data },
      {
        code: ErrorCode.InvalidRequest,
        message:
          `at most ${MAX_ACTIVE_STREAMS} streamed http/request responses may be active per connection`,
        data: { kind: "limitReached" },
      },
    );
    // Buffered requests still run.
    assertEquals(text((await request(more)).bodyBase64), "ok");
    releaseFirst.resolve();
    await finalDelta("s0");
    assertEquals((await request({ ...more, streamResponse: true })).status, 200);
    await finalDelta("more");
  } finally {
    release.resolve();
  }
  for (let i = 1; i < MAX_ACTIVE_STREAMS; i++) await finalDelta(`s${i}`);
  assertEquals(table.activeStreams, 0);
});

Deno.test("http/request closeAll stops active streams without further deltas", async () => {
  const clientGone = Promise.withResolvers<void>();
  await using server = rawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n");
    try {
      while ((await conn.read(new Uint8Array(16))) !== null);
    } catch {
      // Reset by the client.
    }
    clientGone.resolve();
  });
  const { table, deltas, deltaWhere, request } = recordingTable();
  await request({ method: "GET", url: server.origin, requestId: "c", streamResponse: true });
  await deltaWhere((delta) => delta.seq === 1);
  table.closeAll();
  await clientGone.promise;
  await new Promise((resolve) => setTimeout(resolve, 0));
  assertEquals(deltas, [{ requestId: "c", seq: 1, deltaBase64: "YWJj", done: false, error: null }]);
  assertEquals(table.activeStreams, 0);
  await assertRpcError(
    request({ method: "GET", url: server.origin, requestId: "d" }),
    ErrorCode.InternalError,
    "http/request failed: connection closed",
  );
});

Deno.test({
  name: "http/request checks the network policy for every redirect hop",
  permissions: { net: ["127.0.0.1"] },
  async fn() {
    await using server = serve(() =>
      new Response(null, { status: 302, headers: { location: "http://localhost:9/" } })
    );
    const { request } = recordingTable();
    const err = await request({ method: "GET", url: server.origin, requestId: "" }).then(
      () => assert.fail("expected the policy to refuse the redirect"),
      (err: unknown) => err,
    );
    assert.ok(err instanceof RpcError);
    assertEquals([err.code, err.message], [
      ErrorCode.InvalidRequest,
      `net access to "localhost:9" is denied by the server's permissions; ` +
      `start it with --allow-net=localhost:9`,
    ]);
  },
});
