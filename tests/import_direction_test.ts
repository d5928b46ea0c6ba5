/**
 * The house's floors: every import of `lib/`, `main.ts` and `mod.ts` points
 * down, and no files import each other in a circle.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  climbs,
  cycles,
  type Floors,
  importGraph,
  typeScriptFiles,
} from "./helpers/import_graph.ts";

const ROOT = new URL("../", import.meta.url);

/**
 * The floors, written down once: each folder and the folders directly below
 * it (a folder may import its own files and everything below it, directly or
 * not). Two towers stand on one ground floor:
 *
 * - the wire: `protocol` (the method table, schemas, errors: what both ends
 *   agree on) under `rpc` (connections and transports, used by both ends);
 * - the client: `client` on `rpc`; `mod.ts`, the public API, on `client`
 *   (and through it on `rpc` and `protocol`, which it re-exports);
 * - the server, from the machine up: `server/host` (the OS, Deno's
 *   permissions, FFI, paths, errors, and the vocabulary several subsystems
 *   share) on `rpc`; `server/sandbox` (what a request may touch, and how a
 *   child is confined) on `host`; the three things a request does,
 *   `server/fs`, `server/process` and `server/http`, side by side on
 *   `sandbox` (none imports another); `server/capabilities` (capability
 *   discovery, made of fs requests) on `fs`; `server/session` (a connection,
 *   its session and the handler table) on all four; `server/observe` (audit
 *   log, metrics, console) on `session`, watching the core through the
 *   events it publishes (`host/hook.ts`), never imported by it;
 *   `server/listen` (stdio and WebSocket listeners, authentication) on
 *   `observe`, handing the console what it needs of the listener;
 * - `mcp` (the MCP tool server of `exec-server mcp`: its tools use the
 *   server only through `client`; its in-process server is a `server/listen`
 *   listener) on `server/listen` and `client`;
 * - `cli` (flag tables, `exec-server run`, `exec-server mcp`) on `mcp`;
 *   `main.ts` on `cli`.
 *
 * A folder that is not listed has no floor: any import from or into it fails
 * the test until it is placed here.
 */
export const FLOORS: Floors = {
  "protocol": [],
  "rpc": ["protocol"],
  "client": ["rpc"],
  "mod.ts": ["client"],
  "server/host": ["rpc"],
  "server/sandbox": ["server/host"],
  "server/fs": ["server/sandbox"],
  "server/process": ["server/sandbox"],
  "server/http": ["server/sandbox"],
  "server/capabilities": ["server/fs"],
  "server/codex_config": ["server/fs"],
  "server/session": [
    "server/fs",
    "server/process",
    "server/http",
    "server/capabilities",
    "server/codex_config",
  ],
  "server/observe": ["server/session"],
  "server/listen": ["server/observe"],
  "mcp": ["server/listen", "client"],
  "cli": ["mcp"],
  "main.ts": ["cli"],
};

/** The graph of every file of `lib/`, `main.ts` and `mod.ts`. */
async function houseGraph() {
  const files = [...await typeScriptFiles(ROOT, "lib"), "main.ts", "mod.ts"];
  const graph = await importGraph(ROOT, files);
  for (const file of files) assert.ok(graph.has(file), `${file} is missing from the graph`);
  return graph;
}

Deno.test("every import of lib/, main.ts and mod.ts points down a floor or stays in its folder", async () => {
  assert.deepEqual(climbs(await houseGraph(), FLOORS), []);
});

Deno.test("no files of lib/, main.ts and mod.ts import each other in a circle", async () => {
  assert.deepEqual(cycles(await houseGraph()), []);
});

Deno.test("the import graph holds static, type-only and dynamic imports and re-exports", async () => {
  const graph = await houseGraph();
  const imports = (file: string) => graph.get(file) ?? [];
  // `import type` (managed_process.ts imports backend.ts's types only).
  assert.ok(
    imports("lib/server/process/managed_process.ts").includes("lib/server/process/backend.ts"),
  );
  // A dynamic `import()` (the tty backend is loaded with the first `tty: true` start).
  assert.ok(imports("lib/server/process/table.ts").includes("lib/server/process/tty.ts"));
  // `export ... from` (mod.ts re-exports the client).
  assert.ok(imports("mod.ts").includes("lib/client/client.ts"));
});

Deno.test("docs/contributing/architecture.md shows the floors as FLOORS has them", async () => {
  const doc = await Deno.readTextFile(new URL("docs/contributing/architecture.md", ROOT));
  const shown: Record<string, string[]> = {};
  for (const [, folder, below] of doc.matchAll(/^\| `([^`]+)` +\| (.+?) +\|$/gm)) {
    shown[folder!] = below === "nothing"
      ? []
      : [...below!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  }
  assert.deepEqual(shown, FLOORS);
});

Deno.test("climbs() reports an import into a folder that is not below, a sibling, and a folder without a floor", () => {
  const floors: Floors = { base: [], left: ["base"], right: ["base"], top: ["left", "right"] };
  const graph = new Map([
    ["lib/top/a.ts", ["lib/left/b.ts", "lib/base/c.ts", "lib/top/d.ts"]],
    ["lib/left/b.ts", ["lib/right/e.ts"]],
    ["lib/base/c.ts", ["lib/top/a.ts"]],
    ["lib/right/e.ts", ["lib/stray/f.ts"]],
    ["lib/stray/f.ts", []],
  ]);
  assert.deepEqual(climbs(graph, floors), [
    "lib/base/c.ts -> lib/top/a.ts (base imports top, which is not below it)",
    "lib/left/b.ts -> lib/right/e.ts (left imports right, which is not below it)",
    "lib/right/e.ts -> lib/stray/f.ts (right imports stray, which has no floor)",
    "lib/stray/f.ts is in stray, which has no floor",
  ]);
});

Deno.test("cycles() reports each cycle once, with a path around it, and a file importing itself", () => {
  const graph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts", "d.ts"]],
    ["c.ts", ["a.ts"]],
    ["d.ts", ["e.ts"]],
    ["e.ts", ["d.ts", "f.ts"]],
    ["f.ts", ["f.ts"]],
    ["g.ts", ["a.ts"]],
  ]);
  assert.deepEqual(cycles(graph), [
    "a.ts -> b.ts -> c.ts -> a.ts",
    "d.ts -> e.ts -> d.ts",
    "f.ts -> f.ts",
  ]);
});
