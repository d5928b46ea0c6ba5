import assert from "node:assert/strict";
import * as node from "node:path";
import { basename, dirname, relative, resolve } from "../lib/server/host/posix_path.ts";

const PATHS = [
  "",
  "/",
  "//",
  "///a",
  "//a",
  "/a",
  "/a/",
  "/a//b",
  "/a/b/",
  "/a/b//",
  "a",
  "a/",
  "a/b",
  "./a",
  "../a",
  "/a/./b/../c",
  "/..",
  "/a/..",
  ".",
  "..",
  "/with space/ünïcode",
  ".hidden",
  "/a/.b.c",
];

Deno.test("posix path helpers give node:path's dirname and basename", () => {
  for (const path of PATHS) {
    assert.equal(dirname(path), node.posix.dirname(path), `dirname(${JSON.stringify(path)})`);
    assert.equal(basename(path), node.posix.basename(path), `basename(${JSON.stringify(path)})`);
  }
});

Deno.test("posix path helpers give node:path's resolve and relative", () => {
  for (const a of PATHS) {
    assert.equal(resolve(a), node.posix.resolve(a), `resolve(${JSON.stringify(a)})`);
    for (const b of PATHS) {
      const args = JSON.stringify([a, b]);
      assert.equal(resolve(a, b), node.posix.resolve(a, b), `resolve(${args})`);
      assert.equal(relative(a, b), node.posix.relative(a, b), `relative(${args})`);
    }
  }
});
