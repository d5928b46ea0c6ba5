/**
 * The WebSocket listener's plain HTTP at its edges, over a raw TCP socket: an
 * upgrade of another WebSocket version is answered 426 naming version 13
 * (RFC 6455 §4.4), `HEAD` is answered wherever `GET` is (RFC 9110 §9.3.2: the
 * same status and headers, no body), and a head whose lines end in a bare LF
 * is read as RFC 9112 §2.2 allows, never dropped without an answer.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InProcessServer } from "./helpers/in_process_server.ts";

/** An HTTP response as read off the socket. */
interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  /** Every byte after the head, up to the server's close. */
  body: Uint8Array;
}

/** Sends `request` as it is and reads until the server closes (at most 5 s). */
async function exchange(port: number, request: string): Promise<RawAnswer | "closed silently"> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const timer = setTimeout(() => conn.close(), 5000);
  const chunks: Uint8Array[] = [];
  try {
    await conn.write(new TextEncoder().encode(request));
    const buffer = new Uint8Array(65536);
    while (true) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) break;
      chunks.push(buffer.slice(0, n));
    }
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // Closed by the timer.
    }
  }
  const bytes = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  let at = 0;
  for (const chunk of chunks) bytes.set(chunk, (at += chunk.length) - chunk.length);
  const text = new TextDecoder().decode(bytes);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return "closed silently";
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(statusLine!.split(" ")[1]), headers, body: bytes.subarray(end + 4) };
}

function portOf(server: InProcessServer): number {
  return Number(new URL(server.url).port);
}

const UPGRADE = "Upgrade: websocket\r\nConnection: Upgrade\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

Deno.test("an upgrade asking for a WebSocket version other than 13 is answered 426 with Sec-WebSocket-Version: 13", async (t) => {
  await using server = await InProcessServer.websocket();
  for (const version of ["12", "8", "14", "13, 8", ""]) {
    await t.step(`version ${JSON.stringify(version)}`, async () => {
      const answer = await exchange(
        portOf(server),
        `GET / HTTP/1.1\r\nHost: x\r\n${UPGRADE}Sec-WebSocket-Version: ${version}\r\n\r\n`,
      );
      assert.ok(typeof answer === "object");
      assert.equal(answer.status, 426);
      assert.equal(answer.headers.get("sec-websocket-version"), "13");
    });
  }
  await t.step("the console's feed answers the same", async () => {
    const answer = await exchange(
      portOf(server),
      `GET /console/feed HTTP/1.1\r\nHost: 127.0.0.1:${
        portOf(server)
      }\r\n${UPGRADE}Sec-WebSocket-Version: 12\r\n\r\n`,
    );
    assert.ok(typeof answer === "object");
    assert.equal(answer.status, 426);
    assert.equal(answer.headers.get("sec-websocket-version"), "13");
  });
  await t.step("version 13 still upgrades", async () => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: portOf(server) });
    try {
      await conn.write(
        new TextEncoder().encode(
          `GET / HTTP/1.1\r\nHost: x\r\n${UPGRADE}Sec-WebSocket-Version: 13\r\n\r\n`,
        ),
      );
      const buffer = new Uint8Array(1024);
      const n = await conn.read(buffer);
      assert.match(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), /^HTTP\/1\.1 101 /);
    } finally {
      conn.close();
    }
  });
});

Deno.test("HEAD is answered wherever GET is, with GET's status and headers and no body", async (t) => {
  await using server = await InProcessServer.websocket();
  const port = portOf(server);
  const html = `Host: 127.0.0.1:${port}\r\nAccept: text/html\r\n`;
  const targets: [string, string][] = [
    ["/healthz", "Host: x\r\n"],
    ["/readyz", "Host: x\r\n"],
    ["/metrics", "Host: x\r\n"],
    ["/", html],
    ["/console/login", html],
    ["/console/app.js", html],
    ["/console/app.css", html],
    ["/console/xterm.js", html],
    ["/console/xterm.css", html],
    ["/nowhere", "Host: x\r\n"],
  ];
  for (const [target, fields] of targets) {
    await t.step(target, async () => {
      const got = await exchange(port, `GET ${target} HTTP/1.1\r\n${fields}\r\n`);
      const head = await exchange(port, `HEAD ${target} HTTP/1.1\r\n${fields}\r\n`);
      assert.ok(typeof got === "object" && typeof head === "object");
      assert.equal(head.status, got.status);
      assert.equal(head.body.length, 0, "no body");
      // The same fields, the body's length included (the metrics' values may move between two).
      const fieldsOf = (answer: RawAnswer) =>
        [...answer.headers].filter(([name]) => target !== "/metrics" || name !== "content-length");
      assert.deepEqual(fieldsOf(head), fieldsOf(got));
      assert.equal(Number(got.headers.get("content-length")), got.body.length);
    });
  }
  await t.step("a HEAD carrying upgrade headers is not upgraded", async () => {
    const head = await exchange(
      port,
      `HEAD / HTTP/1.1\r\nHost: x\r\n${UPGRADE}Sec-WebSocket-Version: 13\r\n\r\n`,
    );
    assert.ok(typeof head === "object");
    assert.equal(head.status, 400);
    assert.equal(head.body.length, 0);
  });
});

Deno.test("a request head whose lines end in a bare LF is answered as its CRLF twin is", async (t) => {
  await using server = await InProcessServer.websocket();
  const port = portOf(server);
  for (
    const request of [
      "GET /healthz HTTP/1.1\nHost: x\n\n",
      "GET /healthz HTTP/1.1\r\nHost: x\n\n",
      "GET /healthz HTTP/1.1\nHost: x\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\n",
      "GET /healthz HTTP/1.1\n\n",
    ]
  ) {
    await t.step(JSON.stringify(request), async () => {
      const answer = await exchange(port, request);
      assert.ok(typeof answer === "object", "answered");
      assert.equal(answer.status, 200);
      assert.equal(new TextDecoder().decode(answer.body), "ok\n");
    });
  }
  await t.step("an upgrade with bare LF line ends upgrades", async () => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const head = `GET / HTTP/1.1\r\nHost: x\r\n${UPGRADE}Sec-WebSocket-Version: 13\r\n\r\n`;
      await conn.write(new TextEncoder().encode(head.replaceAll("\r\n", "\n")));
      const buffer = new Uint8Array(1024);
      const n = await conn.read(buffer);
      assert.match(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), /^HTTP\/1\.1 101 /);
    } finally {
      conn.close();
    }
  });
  await t.step("a bare CR inside the head is refused with 400", async () => {
    const answer = await exchange(port, "GET /healthz HTTP/1.1\rHost: x\n\n");
    assert.ok(typeof answer === "object", "answered");
    assert.equal(answer.status, 400);
  });
});

Deno.test("a method other than GET or HEAD on a served path is answered 405 with Allow, as the reference answers it", async (t) => {
  await using server = await InProcessServer.websocket();
  const port = portOf(server);
  for (
    const [method, target] of [["POST", "/"], ["PUT", "/readyz"], ["DELETE", "/healthz"], [
      "POST",
      "/metrics",
    ]]
  ) {
    await t.step(`${method} ${target}`, async () => {
      const got = await exchange(
        port,
        `${method} ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`,
      );
      assert.ok(typeof got === "object");
      assert.equal(got.status, 405);
      assert.equal(got.headers.get("allow"), "GET, HEAD");
      if (target === "/") {
        assert.equal(new TextDecoder().decode(got.body), "Request method must be `GET`");
      }
    });
  }
  await t.step("POST carrying upgrade headers", async () => {
    const got = await exchange(
      port,
      `POST / HTTP/1.1\r\nHost: x\r\n${UPGRADE}Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n`,
    );
    assert.ok(typeof got === "object");
    assert.equal(got.status, 405);
  });
  await t.step("an unknown path stays 404 whatever the method", async () => {
    const got = await exchange(
      port,
      "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert.ok(typeof got === "object");
    assert.equal(got.status, 404);
  });
});
