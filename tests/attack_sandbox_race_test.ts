/**
 * The sandboxed fs race: a process in the sandbox swaps a directory and a
 * symlink to outside the writable root in a loop (`renameat2` with
 * `RENAME_EXCHANGE`) while the client sends sandboxed `fs/*` requests
 * through the directory. Every request must stay inside the writable root:
 * 0 escapes per method, and no temp file left anywhere.
 *
 * The cases are those of the operations table (`helpers/fs_race.ts`, as in
 * `attack_scope_race_test.ts`), with the outside directory denied by the
 * sandbox, on each sandbox layer (`--sandbox-layer`): the reading ones 200 times each, the writing ones `TRIES` times
 * (50, 200 with `EXEC_SERVER_LONG_TESTS=1`). Writes are also raced, 200
 * times, against an outside directory the sandbox may read but not write.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type ProtocolClient, ServerProcess } from "./helpers/server_harness.ts";
import { attackLayout, b64, listNames, sandboxValue, uri } from "./helpers/attack.ts";
import { TEST_LAYERS, type TestLayer } from "./helpers/sandbox_layers.ts";
import {
  type Case,
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

/**
 * The swapper's sandbox: the requests' own, except on Landlock, where a
 * writable root's own entries cannot be renamed (`layer.ts`): there its
 * writable root is the directory's parent, with `outside` kept at
 * `access`, so that the swapper can swap in the directory as on the other layers.
 */
function swapperSandbox(
  t: TestLayer,
  sandbox: Record<string, unknown>,
  dir: string,
  outside: string,
  access: "read" | "none",
): Record<string, unknown> {
  if (t.traits.rootEntriesWritable) return sandbox;
  const wider = sandboxValue([dir.slice(0, dir.lastIndexOf("/"))], "restricted") as {
    permissions: { file_system: { entries: unknown[] } };
  };
  wider.permissions.file_system.entries.push({
    path: { type: "path", path: uri(outside) },
    access,
  });
  return wider;
}

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

/** Stops the swapper, asserting it kept swapping until now. */
async function stopSwapper(client: ProtocolClient, id: number | string): Promise<void> {
  const swapping = client.log.processEvents("swapper").every((m) => m.method !== "process/exited");
  assert.ok(swapping, `the swapper stopped early: ${client.log.outputText("swapper", "stderr")}`);
  await client.request(id, "process/terminate", { processId: "swapper" });
  await client.log.processClosed("swapper");
}

/**
 * Runs `cases` of the operations table ({@linkcode raceCases}) `tries` times under a sandbox
 * whose writable root is S, with the directory outside S denied, while a sandboxed process
 * swaps `S/d` and the link `S/l` to it; returns escapes by case.
 */
async function tableRace(
  t: TestLayer,
  cases: (c: Case) => boolean,
  tries: number,
): Promise<Record<string, number>> {
  await using l = await raceLayout(false, "/var/tmp", tries);
  await using server = await ServerProcess.start({ listen: "stdio", args: [...t.serverArgs] });
  const client = server.stdio!;
  await handshake(client);
  const sandbox = sandboxValue([l.scope], "restricted") as {
    permissions: { file_system: { entries: unknown[] } };
  };
  sandbox.permissions.file_system.entries.push({
    path: { type: "path", path: uri(l.outside) },
    access: "none",
  });
  await startSwapper(client, l.scope, swapperSandbox(t, sandbox, l.scope, l.outside, "none"));
  return await runRace(
    new Client(client, sandbox),
    l,
    raceCases({ sandboxed: true }).filter(cases),
    () => stopSwapper(client, "stop"),
  );
}

for (const t of TEST_LAYERS) {
  const SKIP = t.skip || RACE_SKIP;

  Deno.test({
    name:
      `sandboxed fs writes stay in the writable root while a sandboxed process swaps in a link to a directory the sandbox may read but not write${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      await using l = await attackLayout("es-attack-race-");
      await Deno.mkdir(`${l.ws}/d`);
      await Deno.symlink(l.outside, `${l.ws}/l`);
      await Deno.writeTextFile(`${l.ws}/src.txt`, "copied\n");
      for (let i = 0; i < TRIES; i++) await Deno.writeTextFile(`${l.outside}/v${i}`, "victim\n");
      await using server = await ServerProcess.start({ listen: "stdio", args: [...t.serverArgs] });
      const client = server.stdio!;
      await handshake(client);
      const sandbox = sandboxValue([l.ws], "restricted");
      await startSwapper(client, l.ws, swapperSandbox(t, sandbox, l.ws, l.outside, "read"));
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
      await stopSwapper(client, id++);
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

  /** Stops the swapper, asserting it kept swapping until now. */
  Deno.test({
    name:
      `sandboxed fs calls of every writing case of the operations table stay in the writable root while a sandboxed process swaps a link to a denied directory in${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      const escapes = await tableRace(t, (c) => c.writes, TABLE_TRIES);
      console.log(`attack ${JSON.stringify({ sandboxed: true, tries: TABLE_TRIES, escapes })}`);
      assert.deepEqual(escapes, zero(escapes));
    },
  });

  Deno.test({
    name:
      `sandboxed fs calls of every reading case of the operations table read nothing of a denied directory while a sandboxed process swaps a link to it in${SKIP} [${t.layer}]`,
    ignore: SKIP !== "",
    async fn() {
      const escapes = await tableRace(t, (c) => !c.writes, TRIES);
      console.log(`attack ${JSON.stringify({ sandboxed: true, tries: TRIES, escapes })}`);
      assert.deepEqual(escapes, zero(escapes));
    },
  });
}
