/**
 * The sandboxed fs race: a process in the sandbox swaps a directory and a
 * symlink to outside the writable root in a loop (`renameat2` with
 * `RENAME_EXCHANGE`) while the client sends sandboxed `fs/*` requests
 * through the directory. Every request must stay inside the writable root:
 * 0 escapes per method, and no temp file left anywhere.
 *
 * 200 tries per method (a few seconds).
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type ProtocolClient, ServerProcess } from "./helpers/server_harness.ts";
import { attackLayout, b64, listNames, SANDBOX, sandboxValue, uri } from "./helpers/attack.ts";
import {
  Client,
  PERL,
  RACE_SKIP,
  raceCases,
  raceLayout,
  runRace,
  swapperScript,
  TRIES as TABLE_TRIES,
  zero,
} from "./helpers/fs_race.ts";

const TRIES = 200;
const SKIP = !SANDBOX.ok ? ` (skipped: ${SANDBOX.reason})` : RACE_SKIP;

/**
 * Starts, in the sandbox, a process that swaps `d` and `l` in `dir` with
 * `renameat2(RENAME_EXCHANGE)` until it is terminated; resolves once it runs.
 */
async function startSwapper(
  client: ProtocolClient,
  dir: string,
  sandbox: Record<string, unknown>,
): Promise<void> {
  const start = await client.request(0, "process/start", {
    processId: "swapper",
    argv: [PERL, "-e", swapperScript()],
    cwd: uri(dir),
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    sandbox,
  });
  assert.ok(start.result, JSON.stringify(start));
  await client.log.waitUntil(
    () => client.log.outputText("swapper").includes("swapping"),
    "the swapper to start",
  );
}

Deno.test({
  name:
    `sandboxed fs calls stay in the writable root while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await attackLayout("es-attack-race-");
    await Deno.mkdir(`${l.ws}/d`);
    await Deno.symlink(l.outside, `${l.ws}/l`);
    await Deno.writeTextFile(`${l.ws}/src.txt`, "copied\n");
    for (let i = 0; i < TRIES; i++) await Deno.writeTextFile(`${l.outside}/v${i}`, "victim\n");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    await handshake(client);
    const sandbox = sandboxValue([l.ws], "restricted");
    await startSwapper(client, l.ws, sandbox);
    let id = 1;
    const d = `${l.ws}/d`;
    const calls: [string, (i: number) => [string, Record<string, unknown>]][] = [
      ["writeFile", (i) => ["fs/writeFile", { path: uri(`${d}/w${i}`), dataBase64: b64("x") }]],
      ["createDirectory", (i) => ["fs/createDirectory", { path: uri(`${d}/m${i}`) }]],
      ["remove", (i) => ["fs/remove", { path: uri(`${d}/v${i}`) }]],
      ["copy", (i) => ["fs/copy", {
        sourcePath: uri(`${l.ws}/src.txt`),
        destinationPath: uri(`${d}/c${i}`),
        recursive: false,
      }]],
    ];
    for (let i = 0; i < TRIES; i++) {
      for (const [, make] of calls) {
        const [method, params] = make(i);
        await client.request(id++, method, { ...params, sandbox });
      }
    }
    const swapping = client.log.processEvents("swapper").every((m) =>
      m.method !== "process/exited"
    );
    assert.ok(swapping, `the swapper stopped early: ${client.log.outputText("swapper", "stderr")}`);
    await client.request(id++, "process/terminate", { processId: "swapper" });
    await client.log.processClosed("swapper");
    const outside = listNames(l.outside);
    const escapes = {
      writeFile: outside.filter((name) => /^w\d+$/.test(name)).length,
      createDirectory: outside.filter((name) => /^m\d+$/.test(name)).length,
      remove: TRIES - outside.filter((name) => /^v\d+$/.test(name)).length,
      copy: outside.filter((name) => /^c\d+$/.test(name)).length,
    };
    const inside = [...listNames(`${l.ws}/d`), ...listNames(l.ws)];
    const temps = [...outside, ...inside].filter((name) => name.includes(".tmp"));
    console.log(`attack ${JSON.stringify({ tries: TRIES, escapes, tempFiles: temps.length })}`);
    assert.deepEqual(escapes, { writeFile: 0, createDirectory: 0, remove: 0, copy: 0 });
    assert.deepEqual(temps, [], "temp files were left behind");
  },
});

/**
 * The read races' layout: `d` (holding `f`, "public", and `PUBLIC`) swapped
 * with `l`, a link to a directory the sandbox denies (holding `f`,
 * "SECRET", and the marker file `SECRETMARK`); returns the sandbox value.
 */
async function startDeniedSwap(
  client: ProtocolClient,
  l: { base: string; ws: string },
): Promise<Record<string, unknown>> {
  const secret = `${l.base}/secret`;
  await Deno.mkdir(secret);
  await Deno.writeTextFile(`${secret}/f`, "SECRET\n");
  await Deno.writeTextFile(`${secret}/SECRETMARK`, "");
  await Deno.mkdir(`${l.ws}/d`);
  await Deno.writeTextFile(`${l.ws}/d/f`, "public-public\n");
  await Deno.writeTextFile(`${l.ws}/d/PUBLIC`, "");
  await Deno.symlink(secret, `${l.ws}/l`);
  await handshake(client);
  const base = sandboxValue([l.ws], "restricted") as {
    permissions: { file_system: { entries: unknown[] } };
  };
  base.permissions.file_system.entries.push({
    path: { type: "path", path: uri(secret) },
    access: "none",
  });
  const sandbox = base as Record<string, unknown>;
  await startSwapper(client, l.ws, sandbox);
  return sandbox;
}

/** Stops the swapper, asserting it kept swapping until now. */
async function stopSwapper(client: ProtocolClient, id: number | string): Promise<void> {
  const swapping = client.log.processEvents("swapper").every((m) => m.method !== "process/exited");
  assert.ok(swapping, `the swapper stopped early: ${client.log.outputText("swapper", "stderr")}`);
  await client.request(id, "process/terminate", { processId: "swapper" });
  await client.log.processClosed("swapper");
}

Deno.test({
  name:
    `sandboxed fs/readDirectory, fs/getMetadata and fs/canonicalize reveal nothing of a denied directory while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await attackLayout("es-attack-race-inspect-");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    const sandbox = await startDeniedSwap(client, l);
    const seen = { listings: 0, metadata: 0, canonical: 0 };
    const leaks = { readDirectory: 0, getMetadata: 0, canonicalize: 0 };
    let id = 1;
    for (let i = 0; i < TRIES; i++) {
      const listing = await client.request(id++, "fs/readDirectory", {
        path: uri(`${l.ws}/d`),
        sandbox,
      });
      const entries = (listing.result as { entries?: { fileName: string }[] } | undefined)
        ?.entries;
      if (entries?.some((entry) => entry.fileName === "PUBLIC")) seen.listings++;
      if (entries?.some((entry) => entry.fileName === "SECRETMARK")) leaks.readDirectory++;
      const metadata = await client.request(id++, "fs/getMetadata", {
        path: uri(`${l.ws}/d/f`),
        sandbox,
      });
      const size = (metadata.result as { size?: number } | undefined)?.size;
      if (size === "public-public\n".length) seen.metadata++;
      if (size === "SECRET\n".length) leaks.getMetadata++;
      const canonical = await client.request(id++, "fs/canonicalize", {
        path: uri(`${l.ws}/d/f`),
        sandbox,
      });
      const path = (canonical.result as { path?: string } | undefined)?.path;
      if (path === uri(`${l.ws}/d/f`)) seen.canonical++;
      if (path?.includes("/secret/")) leaks.canonicalize++;
    }
    await stopSwapper(client, id);
    console.log(`attack ${JSON.stringify({ tries: TRIES, seen, leaks })}`);
    assert.deepEqual(leaks, { readDirectory: 0, getMetadata: 0, canonicalize: 0 });
  },
});

Deno.test({
  name:
    `sandboxed fs/walk lists nothing of a denied directory while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await attackLayout("es-attack-race-walk-");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    const sandbox = await startDeniedSwap(client, l);
    let seen = 0;
    let leaks = 0;
    let id = 1;
    const options = { maxDepth: 3, maxDirectories: 10, maxEntries: 100 };
    for (let i = 0; i < TRIES; i++) {
      const walked = await client.request(id++, "fs/walk", {
        path: uri(l.ws),
        options: { ...options, followDirectorySymlinks: i % 2 === 0 },
        sandbox,
      });
      const paths = ((walked.result as { entries?: { path: string }[] } | undefined)?.entries ?? [])
        .map((entry) => entry.path);
      if (paths.some((path) => path.endsWith("/PUBLIC"))) seen++;
      if (paths.some((path) => path.endsWith("/SECRETMARK"))) leaks++;
    }
    await stopSwapper(client, id);
    console.log(`attack ${JSON.stringify({ tries: TRIES, seen, leaks })}`);
    assert.equal(leaks, 0, "a walk listed a denied directory");
  },
});

Deno.test({
  name:
    `sandboxed recursive fs/copy copies nothing of a denied directory while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await attackLayout("es-attack-race-tree-");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    const sandbox = await startDeniedSwap(client, l);
    let id = 1;
    for (let i = 0; i < TRIES; i++) {
      await client.request(id++, "fs/copy", {
        sourcePath: uri(`${l.ws}/d`),
        destinationPath: uri(`${l.ws}/tree${i}`),
        recursive: true,
        sandbox,
      });
    }
    await stopSwapper(client, id);
    // A copy of the link itself is a link (legitimate): only copied directories count.
    const copies = listNames(l.ws).filter((name) =>
      name.startsWith("tree") && Deno.lstatSync(`${l.ws}/${name}`).isDirectory
    );
    const inside = (marker: string) =>
      copies.filter((name) => listNames(`${l.ws}/${name}`).includes(marker)).length;
    const counts = { trees: copies.length, public: inside("PUBLIC"), leaks: inside("SECRETMARK") };
    console.log(`attack ${JSON.stringify({ tries: TRIES, ...counts })}`);
    assert.equal(counts.leaks, 0, "a copy holds a denied directory's entries");
  },
});

Deno.test({
  name:
    `sandboxed fs/readFile, fs/open and fs/copy read no denied file while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await attackLayout("es-attack-race-read-");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    const sandbox = await startDeniedSwap(client, l);
    let leaks = 0;
    let read = 0;
    let handleLeaks = 0;
    let id = 1;
    const secretIn = (base64: string | undefined) =>
      base64 !== undefined &&
      new TextDecoder().decode(Uint8Array.fromBase64(base64)).includes("SECRET");
    for (let i = 0; i < TRIES; i++) {
      const response = await client.request(id++, "fs/readFile", {
        path: uri(`${l.ws}/d/f`),
        sandbox,
      });
      const data = (response.result as { dataBase64?: string } | undefined)?.dataBase64;
      if (data !== undefined) read++;
      if (secretIn(data)) leaks++;
      // The same through a handle.
      const opened = await client.request(id++, "fs/open", {
        handleId: "h",
        path: uri(`${l.ws}/d/f`),
        sandbox,
      });
      // And through a copy into the writable root, where the swapper could read it.
      await client.request(id++, "fs/copy", {
        sourcePath: uri(`${l.ws}/d/f`),
        destinationPath: uri(`${l.ws}/copy${i}`),
        recursive: false,
        sandbox,
      });
      if (opened.result === undefined) continue;
      const block = await client.request(id++, "fs/readBlock", {
        handleId: "h",
        offset: 0,
        len: 64,
      });
      if (secretIn((block.result as { chunk?: string } | undefined)?.chunk)) handleLeaks++;
      await client.request(id++, "fs/close", { handleId: "h" });
    }
    await stopSwapper(client, id++);
    const copyLeaks = listNames(l.ws).filter((name) =>
      name.startsWith("copy") && Deno.readTextFileSync(`${l.ws}/${name}`).includes("SECRET")
    ).length;
    const counts = {
      publicReads: read,
      deniedReads: leaks,
      deniedHandleReads: handleLeaks,
      deniedCopies: copyLeaks,
    };
    console.log(`attack ${JSON.stringify({ tries: TRIES, ...counts })}`);
    assert.deepEqual(
      { leaks, handleLeaks, copyLeaks },
      { leaks: 0, handleLeaks: 0, copyLeaks: 0 },
      "a denied file was read",
    );
  },
});

Deno.test({
  name:
    `sandboxed fs calls of every method of the operations table stay in the writable root and read nothing denied while a sandboxed process swaps a link in${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    // The cases of `attack_scope_race_test.ts`, with the outside directory denied by the sandbox.
    await using l = await raceLayout(false, "/var/tmp");
    await using server = await ServerProcess.start({ listen: "stdio" });
    const client = server.stdio!;
    await handshake(client);
    const sandbox = sandboxValue([l.scope], "restricted") as {
      permissions: { file_system: { entries: unknown[] } };
    };
    sandbox.permissions.file_system.entries.push({
      path: { type: "path", path: uri(l.outside) },
      access: "none",
    });
    await startSwapper(client, l.scope, sandbox);
    const escapes = await runRace(
      new Client(client, sandbox),
      l,
      raceCases({ sandboxed: true }),
      () => stopSwapper(client, "stop"),
    );
    console.log(`attack ${JSON.stringify({ sandboxed: true, tries: TABLE_TRIES, escapes })}`);
    assert.deepEqual(escapes, zero(escapes));
  },
});
