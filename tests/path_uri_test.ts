import { deepStrictEqual as assertEquals, throws as assertThrows } from "node:assert/strict";
import { RpcError } from "../lib/protocol/errors.ts";
import { cwdPathFromUri, joinPath, pathFromUri, uriFromPath } from "../lib/server/host/path_uri.ts";

function errorOf(uri: string, parse = pathFromUri): { code: number; message: string } {
  try {
    parse(uri);
  } catch (err) {
    if (err instanceof RpcError) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error(`${uri} parsed`);
}

Deno.test("pathFromUri accepts the local file URI spellings of docs/protocol.md §10.1", () => {
  assertEquals(pathFromUri("file:///tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("FILE:///tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("file://localhost/tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("file://LOCALHOST/tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("file:tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("file:/tmp/x"), "/tmp/x");
  assertEquals(pathFromUri("file://"), "/");
  assertEquals(pathFromUri("file:///"), "/");
  assertEquals(pathFromUri(" file:///tmp/x "), "/tmp/x");
});

Deno.test("pathFromUri percent-decodes and normalizes the path", () => {
  assertEquals(pathFromUri("file:///tmp/a%2Etxt"), "/tmp/a.txt");
  assertEquals(pathFromUri("file:///tmp/a%20b"), "/tmp/a b");
  assertEquals(pathFromUri("file:///tmp/%C3%A9"), "/tmp/é");
  assertEquals(pathFromUri("file:///tmp/é"), "/tmp/é");
  assertEquals(pathFromUri("file:///tmp/a%ZZ"), "/tmp/a%ZZ");
  assertEquals(pathFromUri("file:///tmp/a%FF"), "/tmp/a\uFFFD");
  assertEquals(pathFromUri("file:///tmp/a%2fb"), "/tmp/a/b");
  assertEquals(pathFromUri("file:///tmp/dir/../a.txt"), "/tmp/a.txt");
  assertEquals(pathFromUri("file:///tmp/dir/%2e%2e/a.txt"), "/tmp/a.txt");
  assertEquals(pathFromUri("file:///tmp//dir//"), "/tmp/dir");
});

Deno.test("pathFromUri rejects malformed URIs with -32602", () => {
  const relative = { code: -32602, message: "invalid URI: relative URL without a base" };
  assertEquals(errorOf("/tmp/x"), relative);
  assertEquals(errorOf(""), relative);
  assertEquals(errorOf("not a url"), relative);
  assertEquals(errorOf("1abc:x"), relative);
  assertEquals(errorOf("http://h/x"), {
    code: -32602,
    message: "unsupported path URI scheme `http`",
  });
  assertEquals(errorOf("c:/x").message, "unsupported path URI scheme `c`");
  assertEquals(errorOf("file:///x?y=1").message, "query parameters are not allowed in path URIs");
  assertEquals(errorOf("file:///x?").message, "query parameters are not allowed in path URIs");
  assertEquals(errorOf("file:///x#f").message, "fragments are not allowed in path URIs");
  assertEquals(errorOf("file:///x#").message, "fragments are not allowed in path URIs");
  assertEquals(errorOf("file:///x%00y"), {
    code: -32602,
    message: "'file:///x%00y' is invalid on 'linux'",
  });
});

Deno.test("pathFromUri names the URL parser's failure as the reference does", () => {
  assertEquals(
    errorOf("file://user@localhost/x").message,
    "invalid URI: invalid international domain name",
  );
  assertEquals(
    errorOf("file://other host/x").message,
    "invalid URI: invalid international domain name",
  );
  assertEquals(errorOf("http://[::1/").message, "invalid URI: invalid IPv6 address");
  assertEquals(errorOf("file://1.2.3.999/x").message, "invalid URI: invalid IPv4 address");
  assertEquals(errorOf("http://h:99999/x").message, "invalid URI: invalid port number");
  assertEquals(errorOf("http://").message, "invalid URI: empty host");
});

Deno.test("pathFromUri rejects other hosts and drive letters with -32600", () => {
  assertEquals(errorOf("file://otherhost/x"), {
    code: -32600,
    message: "'file://otherhost/x' is invalid on 'linux'",
  });
  assertEquals(errorOf("FILE://otherhost/x").message, "'file://otherhost/x' is invalid on 'linux'");
  assertEquals(errorOf("file://127.0.0.1/x").code, -32600);
  assertEquals(errorOf("file:/C|/x"), {
    code: -32600,
    message: "'file:///C:/x' is invalid on 'linux'",
  });
});

Deno.test("cwdPathFromUri answers other hosts and drive letters with -32602 naming the cwd", () => {
  assertEquals(errorOf("file://otherhost/x", cwdPathFromUri), {
    code: -32602,
    message:
      "cwd URI `file://otherhost/x` is not valid on this exec-server host: 'file://otherhost/x' is invalid on 'linux'",
  });
  assertEquals(errorOf("file:///C:/x", cwdPathFromUri).code, -32602);
  assertEquals(errorOf("/tmp", cwdPathFromUri), {
    code: -32602,
    message: "invalid URI: relative URL without a base",
  });
  assertEquals(cwdPathFromUri("file://localhost/tmp/"), "/tmp");
});

Deno.test("uriFromPath percent-encodes like the reference and drops trailing slashes", () => {
  assertEquals(uriFromPath("/"), "file:///");
  assertEquals(uriFromPath("/tmp/dir/"), "file:///tmp/dir");
  assertEquals(
    uriFromPath("/t/sp ace#?%[]@!$&'()*+,;=:é~`^{}|<>\"\\"),
    "file:///t/sp%20ace%23%3F%25[]@!$&'()*+,;=:%C3%A9~%60^%7B%7D|%3C%3E%22%5C",
  );
  assertEquals(uriFromPath("/a\u0001b\u007f"), "file:///a%01b%7F");
});

Deno.test("uriFromPath output parses back to the same path", () => {
  for (const path of ["/", "/tmp/a b", "/x/%41", "/é/ü?#", "/a\\b"]) {
    assertEquals(pathFromUri(uriFromPath(path)), path);
  }
});

Deno.test("joinPath does not double the root slash", () => {
  assertEquals(joinPath("/", "a"), "/a");
  assertEquals(joinPath("/tmp", "a"), "/tmp/a");
  assertThrows(() => pathFromUri("file://h/x"), RpcError);
});

Deno.test("pathFromUri gives plain URIs the path the URL parser gives them", () => {
  // Spellings the parser-free path accepts, and neighbours it must leave to the parser.
  const uris = [
    "file:///tmp",
    "file:///tmp/",
    "file:////tmp//a/",
    "file:///a-b_c.d~e/!$&'()*+,;=@",
    "file:///tmp/./a",
    "file:///tmp/a/..",
    "file:///tmp/.../..a/a..",
    "file:///.",
    "file:///C:/x",
    "file:///C|/x",
    "file:///tmp/a\\b",
    "file:///tmp/a%41",
    "file:///tmp/a^b",
    "file:///tmp/a`b",
  ];
  for (const uri of uris) {
    const url = new URL(uri);
    const expected = url.hostname !== "" || /^\/[A-Za-z]:(\/|$)/.test(url.pathname)
      ? "foreign"
      : "/" +
        decodeURIComponent(url.pathname).split("/").filter((part) => part !== "").join("/");
    let actual: string;
    try {
      actual = pathFromUri(uri);
    } catch {
      actual = "foreign";
    }
    assertEquals(actual, expected, uri);
  }
});

Deno.test("pathFromUri gives a plain URI's path as the URL parser normalizes it", () => {
  const parsed = (uri: string) =>
    "/" + decodeURIComponent(new URL(uri).pathname).split("/").filter((s) => s !== "").join("/");
  for (
    const uri of [
      "file:///",
      "file:///tmp",
      "file:///tmp/",
      "file:///tmp//x",
      "file:////tmp",
      "file:///tmp/.hidden",
      "file:///tmp/./x",
      "file:///tmp/x/.",
      "file:///tmp/../x",
      "file:///tmp/x/..",
      "file:///.",
      "file:///...",
      "file:///a..b/c~d/e-f_g",
    ]
  ) assertEquals(pathFromUri(uri), parsed(uri), uri);
});
