import assert from "node:assert/strict";
import { readRequestHead } from "../lib/server/listen/http_head.ts";

/** A connection that delivers `text` in one read. */
function connOf(text: string): Deno.Conn {
  const chunks = [new TextEncoder().encode(text)];
  return {
    read: (buffer: Uint8Array) => {
      const chunk = chunks.shift();
      if (chunk === undefined) return Promise.resolve(null);
      buffer.set(chunk);
      return Promise.resolve(chunk.length);
    },
  } as unknown as Deno.Conn;
}

Deno.test("a request head's fields are read by lower-case name, repeated ones joined with a comma as Headers joins them", async () => {
  const head = await readRequestHead(
    connOf("GET / HTTP/1.1\r\nHost: a\r\nX-Many: 1\r\nx-many:  2 \r\nX-Latin: caf\u00e9\r\n\r\n"),
  );
  assert.ok(typeof head === "object");
  assert.deepEqual([...head.headers], [["host", "a"], ["x-many", "1, 2"], ["x-latin", "café"]]);
  const fetchView = new Headers([...head.headers]);
  assert.equal(fetchView.get("X-Many"), "1, 2");
});

Deno.test("a request head with a field value Headers refuses (NUL, a lone CR or LF, a character beyond a byte) is malformed", async () => {
  for (const value of ["a\0b", "a\rb", "a\nb", "\u20ac", "\u{1F600}"]) {
    const text = `GET / HTTP/1.1\r\nHost: a\r\nX-Bad: ${value}\r\n\r\n`;
    assert.throws(() => new Headers({ "x-bad": value }), TypeError, JSON.stringify(value));
    assert.equal(await readRequestHead(connOf(text)), "malformed", JSON.stringify(value));
  }
});

Deno.test("a request head whose lines end in a bare LF is read as RFC 9112 allows, the bytes after its blank line kept", async () => {
  for (const end of ["\n", "\r\n"]) {
    for (const blank of ["\n", "\r\n"]) {
      const text = `GET /x HTTP/1.1${end}Host: a${end}X-B: c ${end}${blank}early`;
      const head = await readRequestHead(connOf(text));
      assert.ok(typeof head === "object", JSON.stringify(text));
      assert.equal(head.target, "/x");
      assert.deepEqual([...head.headers], [["host", "a"], ["x-b", "c"]]);
      assert.equal(new TextDecoder().decode(head.rest), "early");
    }
  }
  assert.equal(await readRequestHead(connOf("GET /x HTTP/1.1\rHost: a\n\n")), "malformed");
});
