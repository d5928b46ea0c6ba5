/**
 * Attacks on the `--allow-read` / `--allow-write` scopes through symlinks
 * that are not races: a dangling link, links in a write-only scope (where
 * the server may not read the link to check it), and what `fs/readDirectory`
 * and `fs/walk` reveal about a link's target outside the scope.
 *
 * Each attack runs against a server with `--allow-ffi` (the race-free
 * resolver) and one without (the fallback); both must refuse it and leave
 * the outside directory unchanged.
 *
 * @module
 */

import assert from "node:assert/strict";
import { snapshot } from "./helpers/attack.ts";
import {
  handshake,
  type Json,
  type ProtocolClient,
  ServerProcess,
} from "./helpers/server_harness.ts";

let nextId = 1;
const SECRET = "top secret: do not leak\n";
const uri = (path: string) => `file://${path}`;
const b64 = (text: string) => new TextEncoder().encode(text).toBase64();

interface Layout {
  root: string;
  /** The granted directory. */
  scope: string;
  /** A readable directory holding a source file for copies (write-only scope cases). */
  source: string;
  /** Not granted. */
  outside: string;
}

/** root/scope with links into root/outside; root/source readable. */
async function layout(): Promise<Layout> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-attack-link-" }));
  const scope = `${root}/scope`;
  const source = `${root}/source`;
  const outside = `${root}/outside`;
  await Deno.mkdir(scope);
  await Deno.mkdir(source);
  await Deno.mkdir(`${outside}/sub`, { recursive: true });
  await Deno.writeTextFile(`${outside}/secret.txt`, SECRET);
  await Deno.writeTextFile(`${outside}/sub/inner.txt`, SECRET);
  await Deno.writeTextFile(`${scope}/own.txt`, "mine\n");
  await Deno.writeTextFile(`${source}/data.txt`, "data\n");
  await Deno.symlink(`${outside}/secret.txt`, `${scope}/file-link`);
  await Deno.symlink(outside, `${scope}/dir-link`);
  await Deno.symlink(`${outside}/planted.txt`, `${scope}/dangling`);
  await Deno.symlink(`${outside}/made`, `${scope}/dangling-dir`);
  return { root, scope, source, outside };
}

async function server(l: Layout, permissions: string[], ffi: boolean): Promise<ServerProcess> {
  return await ServerProcess.start({
    listen: "stdio",
    permissions: [...permissions, "--allow-env", "--allow-sys", ...(ffi ? ["--allow-ffi"] : [])],
    cwd: l.scope,
  });
}

/** Sends a request and returns its error (or fails when it succeeded). */
async function refusal(client: ProtocolClient, method: string, params: Json): Promise<Json> {
  const response = await client.request(nextId++, method, params);
  const text = JSON.stringify(response);
  assert.ok(!text.includes("top secret") && !text.includes(b64(SECRET).slice(0, 12)), text);
  assert.ok(response.error, `${method} succeeded: ${text}`);
  return response.error as Json;
}

for (const ffi of [true, false]) {
  const mode = ffi ? "with --allow-ffi" : "without --allow-ffi";

  Deno.test(`fs/copy onto a dangling symlink in a read-write scope creates nothing outside (${mode})`, async () => {
    const l = await layout();
    const before = await snapshot(l.outside);
    try {
      await using s = await server(l, [`--allow-read=${l.scope}`, `--allow-write=${l.scope}`], ffi);
      await handshake(s.stdio!);
      await refusal(s.stdio!, "fs/copy", {
        sourcePath: uri(`${l.scope}/own.txt`),
        destinationPath: uri(`${l.scope}/dangling`),
        recursive: false,
      });
      await refusal(s.stdio!, "fs/createDirectory", { path: uri(`${l.scope}/dangling-dir`) });
      await refusal(s.stdio!, "fs/open", {
        handleId: "h",
        path: uri(`${l.scope}/dangling`),
        mode: "replace",
      });
      assert.equal(await snapshot(l.outside), before, "the outside directory changed");
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  });

  Deno.test(`a write-only scope writes, creates and deletes nothing through its symlinks (${mode})`, async (t) => {
    const l = await layout();
    const before = await snapshot(l.outside);
    try {
      await using s = await server(
        l,
        [`--allow-write=${l.scope}`, `--allow-read=${l.source}`],
        ffi,
      );
      const client = s.stdio!;
      await handshake(client);
      const attacks: [string, string, Json][] = [
        ["copy through a directory link", "fs/copy", {
          sourcePath: uri(`${l.source}/data.txt`),
          destinationPath: uri(`${l.scope}/dir-link/planted.txt`),
          recursive: false,
        }],
        ["copy onto a file link", "fs/copy", {
          sourcePath: uri(`${l.source}/data.txt`),
          destinationPath: uri(`${l.scope}/file-link`),
          recursive: false,
        }],
        ["copy onto a dangling link", "fs/copy", {
          sourcePath: uri(`${l.source}/data.txt`),
          destinationPath: uri(`${l.scope}/dangling`),
          recursive: false,
        }],
        ["createDirectory through a directory link", "fs/createDirectory", {
          path: uri(`${l.scope}/dir-link/made`),
        }],
        ["createDirectory -p through a directory link", "fs/createDirectory", {
          path: uri(`${l.scope}/dir-link/made/deeper`),
          recursive: true,
        }],
        ["remove --recursive through a directory link", "fs/remove", {
          path: uri(`${l.scope}/dir-link/sub`),
          recursive: true,
        }],
        ["remove a file through a directory link", "fs/remove", {
          path: uri(`${l.scope}/dir-link/secret.txt`),
        }],
        ["writeFile through a directory link", "fs/writeFile", {
          path: uri(`${l.scope}/dir-link/planted.txt`),
          dataBase64: b64("pwned"),
        }],
        ["open for replace through a directory link", "fs/open", {
          handleId: "plant",
          path: uri(`${l.scope}/dir-link/secret.txt`),
          mode: "replace",
        }],
      ];
      for (const [what, method, params] of attacks) {
        await t.step(what, async () => {
          await refusal(client, method, params);
          assert.equal(await snapshot(l.outside), before, `${what} changed the outside directory`);
        });
      }
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  });

  Deno.test(`fs/readDirectory and fs/walk say nothing about a link target outside the scope (${mode})`, async () => {
    const l = await layout();
    try {
      await using s = await server(l, [`--allow-read=${l.scope}`], ffi);
      const client = s.stdio!;
      await handshake(client);
      const listings = async () => {
        const list = await client.request(nextId++, "fs/readDirectory", { path: uri(l.scope) });
        const walk = await client.request(nextId++, "fs/walk", {
          path: uri(l.scope),
          options: {
            maxDepth: 2,
            maxDirectories: 10,
            maxEntries: 100,
            followDirectorySymlinks: true,
          },
        });
        const entries = (list.result as { entries: Json[] }).entries
          .map((e) => JSON.stringify(e)).sort();
        return { entries, walk: JSON.stringify(walk.result) };
      };
      const first = await listings();
      // Swap what the links point to outside: the file becomes a directory, the directory a
      // file, the dangling target appears.
      await Deno.remove(`${l.outside}/secret.txt`);
      await Deno.mkdir(`${l.outside}/secret.txt`);
      await Deno.remove(l.outside, { recursive: true });
      await Deno.writeTextFile(l.outside, "now a file\n");
      const second = await listings();
      assert.deepEqual(second, first, "the answers depend on what is outside the scope");
      await Deno.remove(l.outside);
      await Deno.mkdir(l.outside);
      await Deno.writeTextFile(`${l.outside}/planted.txt`, "x");
      await Deno.writeTextFile(`${l.outside}/secret.txt`, "x");
      const third = await listings();
      assert.deepEqual(third, first, "the answers depend on what is outside the scope");
      // Links inside the scope still answer for their target.
      assert.ok(first.entries.includes('{"fileName":"own.txt","isDirectory":false,"isFile":true}'));
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  });
}

for (const ffi of [true, false]) {
  const mode = ffi ? "with --allow-ffi" : "without --allow-ffi";

  Deno.test(`absolute symlinks whose target stays in a narrow scope are followed, others refused (${mode})`, async () => {
    const l = await layout();
    try {
      await Deno.mkdir(`${l.scope}/real/sub`, { recursive: true });
      await Deno.writeTextFile(`${l.scope}/real/file.txt`, "inside\n");
      await Deno.symlink(`${l.scope}/real/file.txt`, `${l.scope}/abs-file`);
      await Deno.symlink(`${l.scope}/real`, `${l.scope}/abs-dir`);
      // Absolute, but `..` climbs out of the scope: refused like any link that leaves it.
      await Deno.symlink(`${l.scope}/../outside/secret.txt`, `${l.scope}/abs-climb`);
      await Deno.symlink(`${l.scope}/../outside`, `${l.scope}/abs-climb-dir`);
      const before = await snapshot(l.outside);
      await using s = await server(l, [`--allow-read=${l.scope}`, `--allow-write=${l.scope}`], ffi);
      const client = s.stdio!;
      await handshake(client);
      const ok = async (method: string, params: Json) => {
        const response = await client.request(nextId++, method, params);
        assert.ok(
          response.result,
          `${method} ${JSON.stringify(params)}: ${JSON.stringify(response)}`,
        );
        return response.result as Json;
      };
      const read = await ok("fs/readFile", { path: uri(`${l.scope}/abs-file`) });
      assert.equal(read.dataBase64, b64("inside\n"));
      const through = await ok("fs/readFile", { path: uri(`${l.scope}/abs-dir/file.txt`) });
      assert.equal(through.dataBase64, b64("inside\n"));
      const metadata = await ok("fs/getMetadata", { path: uri(`${l.scope}/abs-file`) });
      assert.deepEqual([metadata.isFile, metadata.isSymlink], [true, true]);
      const canonical = await ok("fs/canonicalize", { path: uri(`${l.scope}/abs-dir/file.txt`) });
      assert.equal(canonical.path, uri(`${l.scope}/real/file.txt`));
      const listing = await ok("fs/readDirectory", { path: uri(`${l.scope}/abs-dir`) });
      assert.deepEqual(
        (listing.entries as { fileName: string }[]).map((e) => e.fileName).sort(),
        ["file.txt", "sub"],
      );
      await ok("fs/writeFile", { path: uri(`${l.scope}/abs-dir/new.txt`), dataBase64: b64("n") });
      await ok("fs/writeFile", { path: uri(`${l.scope}/abs-file`), dataBase64: b64("again\n") });
      await ok("fs/createDirectory", { path: uri(`${l.scope}/abs-dir/sub/made`) });
      await ok("fs/copy", {
        sourcePath: uri(`${l.scope}/abs-dir/file.txt`),
        destinationPath: uri(`${l.scope}/abs-dir/sub/copy.txt`),
        recursive: false,
      });
      await ok("fs/remove", { path: uri(`${l.scope}/abs-dir/sub/copy.txt`) });
      assert.equal(await Deno.readTextFile(`${l.scope}/real/file.txt`), "again\n");
      assert.equal(await Deno.readTextFile(`${l.scope}/real/new.txt`), "n");
      assert.ok((await Deno.stat(`${l.scope}/real/sub/made`)).isDirectory);
      await refusal(client, "fs/readFile", { path: uri(`${l.scope}/abs-climb`) });
      await refusal(client, "fs/readFile", { path: uri(`${l.scope}/abs-climb-dir/secret.txt`) });
      await refusal(client, "fs/writeFile", {
        path: uri(`${l.scope}/abs-climb-dir/planted.txt`),
        dataBase64: b64("x"),
      });
      await refusal(client, "fs/writeFile", {
        path: uri(`${l.scope}/abs-climb`),
        dataBase64: b64("x"),
      });
      assert.equal(await snapshot(l.outside), before, "the outside directory changed");
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  });

  Deno.test(`Deno's --deny-read under an unscoped --allow-read is not bypassed through a symlink (${mode})`, async () => {
    const l = await layout();
    try {
      await using s = await server(
        l,
        ["--allow-read", `--deny-read=${l.outside}`, `--allow-write=${l.scope}`],
        ffi,
      );
      await handshake(s.stdio!);
      await refusal(s.stdio!, "fs/readFile", { path: uri(`${l.scope}/file-link`) });
      await refusal(s.stdio!, "fs/readFile", { path: uri(`${l.scope}/dir-link/secret.txt`) });
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  });
}
