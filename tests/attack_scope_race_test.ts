/**
 * The Deno-scoped fs race: a server started with `--allow-read=S
 * --allow-write=S` (no sandbox), and a process the test starts itself (a
 * local user, or any process that may write in S) swapping a directory
 * `S/d` with a symlink `S/l` to a directory outside S in a loop
 * (`renameat2` with `RENAME_EXCHANGE`), while the client sends fs requests
 * through `S/d`. Every request must stay in S: 0 escapes per method (no
 * write, removal or read outside S, no answer describing what is there),
 * and no temp file left anywhere. The same for a write-only scope
 * (`--allow-write=W`, no read access to W), for every writing method.
 *
 * Every fs method of the operations table has a case (`helpers/fs_race.ts`,
 * typed from the table). `TRIES` tries per case: 50 in the fast suite, 200
 * with `EXEC_SERVER_LONG_TESTS=1`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { FS_OPERATIONS } from "../lib/server/fs/operations.ts";
import {
  type Case,
  CASES,
  Client,
  type Layout,
  PERL,
  RACE_SKIP,
  raceCases,
  raceLayout,
  runRace,
  swapperScript,
  TRIES,
  zero,
} from "./helpers/fs_race.ts";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";

/** The swapper: a process the test starts, writing only inside S; resolves once it runs. */
async function startSwapper(dir: string): Promise<Deno.ChildProcess> {
  const child = new Deno.Command(PERL, {
    args: ["-e", swapperScript()],
    cwd: dir,
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin" },
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const first = await reader.read();
  reader.releaseLock();
  await child.stdout.cancel();
  assert.ok(new TextDecoder().decode(first.value).includes("swapping"), "the swapper started");
  return child;
}

/**
 * The `fs/watchMissing` case, run on its own server: a watcher on the swapped directory stalled the
 * whole server (`Deno.watchFs`), which this pins apart from the other methods.
 */
const isWatch = (c: Case) => c.what === "watchMissing";

/**
 * Runs the cases `pick` keeps (writing ones only for a write-only scope)
 * and returns escapes by case.
 */
async function race(
  writeOnly: boolean,
  ffi: boolean,
  pick: (c: Case) => boolean = (c) => !isWatch(c),
): Promise<Record<string, number>> {
  await using l: Layout = await raceLayout(writeOnly);
  const permissions = writeOnly
    ? [`--allow-write=${l.scope}`, `--allow-read=${l.src}`]
    : [`--allow-read=${l.scope}`, `--allow-write=${l.scope}`];
  await using server = await ServerProcess.start({
    listen: "stdio",
    permissions: [...permissions, "--allow-env", "--allow-sys", ...(ffi ? ["--allow-ffi"] : [])],
    cwd: l.base,
  });
  await handshake(server.stdio!);
  await using swapper = await startSwapper(l.scope);
  return await runRace(
    new Client(server.stdio!),
    l,
    raceCases({ writes: writeOnly }).filter(pick),
    async () => {
      const stopped = await Promise.race([swapper.status, Promise.resolve(undefined)]);
      assert.equal(stopped, undefined, "the swapper stopped early");
      swapper.kill("SIGKILL");
      await swapper.status;
    },
  );
}

Deno.test("every fs method of the operations table has a race case or a reason", () => {
  assert.deepEqual(Object.keys(CASES).sort(), Object.keys(FS_OPERATIONS).sort());
  for (const [method, entry] of Object.entries(CASES)) {
    assert.ok("none" in entry ? entry.none !== "" : entry.length > 0, method);
  }
});

for (const writeOnly of [false, true]) {
  const scope = writeOnly ? "a write-only scope" : "a read-write scope";
  Deno.test({
    name:
      `fs calls stay in ${scope} while a local process swaps a directory and a link to outside it${RACE_SKIP}`,
    ignore: RACE_SKIP !== "",
    async fn() {
      const escapes = await race(writeOnly, true);
      console.log(`attack ${JSON.stringify({ scope, ffi: true, tries: TRIES, escapes })}`);
      assert.deepEqual(escapes, zero(escapes));
    },
  });
}

Deno.test({
  name:
    `fs/watchMissing stays in a read-write scope and keeps answering while a local process swaps a directory and a link to outside it${RACE_SKIP}`,
  ignore: RACE_SKIP !== "",
  async fn() {
    const escapes = await race(false, true, isWatch);
    console.log(`attack ${JSON.stringify({ watch: true, ffi: true, tries: TRIES, escapes })}`);
    assert.deepEqual(escapes, zero(escapes));
  },
});

Deno.test({
  name:
    "fs calls stay in a read-write scope without --allow-ffi while a local process swaps a link in (ignored: without FFI Deno opens by path only, so the race remains; docs/security.md, Not achieved)",
  ignore: true,
  async fn() {
    const escapes = await race(false, false, () => true);
    console.log(`attack ${JSON.stringify({ ffi: false, tries: TRIES, escapes })}`);
    assert.deepEqual(escapes, zero(escapes));
  },
});
