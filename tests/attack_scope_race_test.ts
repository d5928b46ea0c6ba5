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
 * Every fs method of the operations table has an entry in {@linkcode CASES}
 * (typed from the table, so a new method without one does not compile).
 * {@linkcode TRIES} tries per case: 50 in the fast suite, 200 with
 * `EXEC_SERVER_LONG_TESTS=1`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { FsMethod } from "../lib/server/fs/operations.ts";
import { FS_OPERATIONS } from "../lib/server/fs/operations.ts";
import { b64, listNames, uri } from "./helpers/attack.ts";
import {
  handshake,
  type Json,
  type ProtocolClient,
  ServerProcess,
} from "./helpers/server_harness.ts";

const LONG = Deno.env.get("EXEC_SERVER_LONG_TESTS") === "1";
/** Tries per case. */
const TRIES = LONG ? 200 : 50;
/** `renameat2` by architecture. */
const RENAMEAT2: Record<string, number> = { "x86_64": 316, aarch64: 276 };
const PERL = "/usr/bin/perl";
const SKIP = Deno.build.os !== "linux"
  ? " (skipped: Linux only)"
  : RENAMEAT2[Deno.build.arch] === undefined
  ? ` (skipped: no renameat2 number for ${Deno.build.arch})`
  : !exists(PERL)
  ? ` (skipped: no ${PERL})`
  : "";
const SECRET = "SECRET\n";
const PUBLIC = "public-public\n";

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * `base/scope` (S) holding `d` (`f`, `PUBLIC`, `lnk` → `public-target`) and
 * `l` → `base/outside` (holding `f`, `SECRETMARK`, `lnk` → `SECRET-target`,
 * and the victims of removals); `src` holds copy sources (`file.txt`,
 * `tree/inner.txt`): in S for a read-write scope, `base/source` for a
 * write-only one.
 */
interface Layout extends AsyncDisposable {
  base: string;
  scope: string;
  outside: string;
  src: string;
  /** `S/zz`: what copies into the scope create (listed last by a walk of S). */
  copies: string;
}

async function layout(writeOnly: boolean): Promise<Layout> {
  const base = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-scope-race-" }));
  const scope = `${base}/scope`;
  const outside = `${base}/outside`;
  const src = writeOnly ? `${base}/source` : `${scope}/src`;
  await Deno.mkdir(`${scope}/d`, { recursive: true });
  await Deno.mkdir(`${src}/tree`, { recursive: true });
  await Deno.mkdir(outside);
  await Deno.mkdir(`${scope}/zz`);
  await Deno.writeTextFile(`${scope}/d/f`, PUBLIC);
  await Deno.writeTextFile(`${scope}/d/PUBLIC`, "");
  await Deno.symlink("public-target", `${scope}/d/lnk`);
  await Deno.writeTextFile(`${outside}/f`, SECRET);
  await Deno.writeTextFile(`${outside}/SECRETMARK`, "");
  await Deno.symlink("SECRET-target", `${outside}/lnk`);
  await Deno.symlink(outside, `${scope}/l`);
  await Deno.writeTextFile(`${src}/file.txt`, "copied\n");
  await Deno.writeTextFile(`${src}/tree/inner.txt`, "copied\n");
  for (let i = 0; i < TRIES; i++) {
    await Deno.writeTextFile(`${outside}/v${i}`, "victim\n");
    await Deno.mkdir(`${outside}/r${i}`);
    await Deno.writeTextFile(`${outside}/r${i}/x`, "victim\n");
  }
  return {
    base,
    scope,
    outside,
    src,
    copies: `${scope}/zz`,
    async [Symbol.asyncDispose]() {
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** One attack: the requests of try `i`, and how many of them escaped. */
interface Case {
  /** Shown in the results. */
  what: string;
  /** Also run against the write-only scope (it writes only). */
  writes: boolean;
  /** Sends try `i`'s requests; `true` when the answer came from outside S. */
  attempt(client: Client, l: Layout, i: number): Promise<boolean>;
  /** Escapes found on disk after every try (writes and removals outside S). */
  after?(l: Layout): number;
}

/** A request sender that numbers its requests. */
interface Client {
  call(method: FsMethod, params: Json): Promise<Json>;
}

const named = (dir: string, pattern: RegExp) =>
  listNames(dir).filter((name) => pattern.test(name)).length;
const missing = (dir: string, prefix: string) => {
  let count = 0;
  for (let i = 0; i < TRIES; i++) if (!exists(`${dir}/${prefix}${i}`)) count++;
  return count;
};
const text = (base64: unknown) =>
  typeof base64 === "string" ? new TextDecoder().decode(Uint8Array.fromBase64(base64)) : "";
const result = (response: Json) => (response.result ?? {}) as Json;
/** Copies in `S/zz` named `prefix<i>` whose content, listing or link target shows `marker`. */
const leakedCopies = (l: Layout, prefix: string, marker: string) =>
  listNames(l.copies).filter((name) => {
    if (!name.startsWith(prefix)) return false;
    const path = `${l.copies}/${name}`;
    const info = Deno.lstatSync(path);
    if (info.isSymlink) return Deno.readLinkSync(path).includes(marker);
    if (info.isDirectory) return listNames(path).includes(marker);
    return Deno.readTextFileSync(path).includes(marker);
  }).length;

const writeCase = (
  what: string,
  prefix: string,
  request: (l: Layout, i: number) => [FsMethod, Json],
): Case => ({
  what,
  writes: true,
  attempt: async (client, l, i) => {
    await client.call(...request(l, i));
    return false;
  },
  after: (l) => named(l.outside, new RegExp(`^${prefix}\\d+$`)),
});

const readCase = (
  what: string,
  attempt: (client: Client, l: Layout, i: number) => Promise<boolean>,
  after?: (l: Layout) => number,
): Case => ({ what, writes: false, attempt, after });

/**
 * The attacks, by method: every fs method of the operations table, with its
 * reason where it touches no path.
 */
const CASES: { readonly [M in FsMethod]: readonly Case[] | { readonly none: string } } = {
  "fs/writeFile": [
    writeCase("writeFile", "w", (l, i) => ["fs/writeFile", {
      path: uri(`${l.scope}/d/w${i}`),
      dataBase64: b64("x"),
    }]),
  ],
  "fs/createDirectory": [
    writeCase("createDirectory -p", "m", (l, i) => ["fs/createDirectory", {
      path: uri(`${l.scope}/d/m${i}/deeper`),
      recursive: true,
    }]),
    writeCase("createDirectory", "n", (l, i) => ["fs/createDirectory", {
      path: uri(`${l.scope}/d/n${i}`),
      recursive: false,
    }]),
  ],
  "fs/remove": [
    {
      what: "remove",
      writes: true,
      attempt: async (client, l, i) => {
        await client.call("fs/remove", { path: uri(`${l.scope}/d/v${i}`), recursive: false });
        return false;
      },
      after: (l) => missing(l.outside, "v"),
    },
    {
      what: "remove --recursive",
      writes: true,
      attempt: async (client, l, i) => {
        await client.call("fs/remove", { path: uri(`${l.scope}/d/r${i}`), recursive: true });
        return false;
      },
      after: (l) => missing(l.outside, "r"),
    },
  ],
  "fs/copy": [
    writeCase("copy", "c", (l, i) => ["fs/copy", {
      sourcePath: uri(`${l.src}/file.txt`),
      destinationPath: uri(`${l.scope}/d/c${i}`),
      recursive: false,
    }]),
    writeCase("copy --recursive", "t", (l, i) => ["fs/copy", {
      sourcePath: uri(`${l.src}/tree`),
      destinationPath: uri(`${l.scope}/d/t${i}`),
      recursive: true,
    }]),
    readCase("copy a file into the root", async (client, l, i) => {
      await client.call("fs/copy", {
        sourcePath: uri(`${l.scope}/d/f`),
        destinationPath: uri(`${l.copies}/k${i}`),
        recursive: false,
      });
      return false;
    }, (l) => leakedCopies(l, "k", "SECRET")),
    readCase("copy a link into the root", async (client, l, i) => {
      await client.call("fs/copy", {
        sourcePath: uri(`${l.scope}/d/lnk`),
        destinationPath: uri(`${l.copies}/q${i}`),
        recursive: false,
      });
      return false;
    }, (l) => leakedCopies(l, "q", "SECRET")),
    readCase("copy --recursive into the root", async (client, l, i) => {
      await client.call("fs/copy", {
        sourcePath: uri(`${l.scope}/d`),
        destinationPath: uri(`${l.copies}/u${i}`),
        recursive: true,
      });
      return false;
    }, (l) => leakedCopies(l, "u", "SECRETMARK")),
  ],
  "fs/open": [
    {
      what: "open replace",
      writes: true,
      attempt: async (client, l, i) => {
        const opened = await client.call("fs/open", {
          handleId: "o",
          path: uri(`${l.scope}/d/o${i}`),
          mode: "replace",
        });
        if (opened.result !== undefined) await client.call("fs/close", { handleId: "o" });
        return false;
      },
      after: (l) => named(l.outside, /^o\d+$/),
    },
  ],
  "fs/writeBlock": [
    {
      what: "open replace + writeBlock",
      writes: true,
      attempt: async (client, l, i) => {
        const opened = await client.call("fs/open", {
          handleId: "wb",
          path: uri(`${l.scope}/d/b${i}`),
          mode: "replace",
        });
        if (opened.result === undefined) return false;
        await client.call("fs/writeBlock", { handleId: "wb", offset: 0, chunk: b64("x") });
        await client.call("fs/close", { handleId: "wb" });
        return false;
      },
      after: (l) => named(l.outside, /^b\d+$/),
    },
  ],
  "fs/readBlock": [
    readCase("open + readBlock", async (client, l) => {
      const opened = await client.call("fs/open", { handleId: "rb", path: uri(`${l.scope}/d/f`) });
      if (opened.result === undefined) return false;
      const block = await client.call("fs/readBlock", { handleId: "rb", offset: 0, len: 64 });
      await client.call("fs/close", { handleId: "rb" });
      return text(result(block).chunk).includes("SECRET");
    }),
  ],
  "fs/close": { none: "closes a handle: touches no path (fs/open checked it)" },
  "fs/readFile": [
    readCase("readFile", async (client, l) => {
      const read = await client.call("fs/readFile", { path: uri(`${l.scope}/d/f`) });
      return text(result(read).dataBase64).includes("SECRET");
    }),
  ],
  "fs/readDirectory": [
    readCase("readDirectory", async (client, l) => {
      const listing = await client.call("fs/readDirectory", { path: uri(`${l.scope}/d`) });
      const entries = (result(listing).entries ?? []) as { fileName: string }[];
      return entries.some((entry) => entry.fileName === "SECRETMARK");
    }),
  ],
  "fs/getMetadata": [
    readCase("getMetadata", async (client, l) => {
      const metadata = await client.call("fs/getMetadata", { path: uri(`${l.scope}/d/f`) });
      return result(metadata).size === SECRET.length;
    }),
  ],
  "fs/canonicalize": [
    readCase("canonicalize", async (client, l) => {
      const canonical = await client.call("fs/canonicalize", { path: uri(`${l.scope}/d/f`) });
      return String(result(canonical).path ?? "").includes("/outside");
    }),
  ],
  "fs/walk": [
    readCase("walk", async (client, l, i) => {
      const walked = await client.call("fs/walk", {
        path: uri(l.scope),
        options: {
          maxDepth: 1,
          maxDirectories: 5,
          maxEntries: 50,
          followDirectorySymlinks: i % 2 === 0,
        },
      });
      const entries = (result(walked).entries ?? []) as { path: string }[];
      return entries.some((entry) => /\/[dl]\/SECRETMARK$|\/outside/.test(entry.path));
    }),
  ],
  "fs/watchMissing": [
    readCase("watchMissing", async (client, l, i) => {
      // `SECRETMARK` is never in S: "not watching" says it exists outside. The second path is
      // then created, so the watch fires and releases its watchers before the next try.
      const fire = `${l.copies}/fire${i}`;
      const watch = await client.call("fs/watchMissing", {
        watchId: i,
        missing: [uri(`${l.scope}/d/SECRETMARK`), uri(fire)],
      });
      if (result(watch).watching !== true) return watch.result !== undefined;
      await Deno.writeTextFile(fire, "");
      await (client as RaceClient).protocol.log.waitFor(
        (msg) =>
          msg.method === "fs/missingChanged" && (msg.params as Json | undefined)?.watchId === i,
        "the watch to fire",
      );
      return false;
    }),
  ],
};

/** A {@linkcode Client} on a protocol client. */
class RaceClient implements Client {
  #id = 1;
  constructor(readonly protocol: ProtocolClient) {}
  call(method: FsMethod, params: Json): Promise<Json> {
    return this.protocol.request(this.#id++, method, params);
  }
}

/** The swapper: a process the test starts, writing only inside S. */
async function startSwapper(dir: string): Promise<Deno.ChildProcess & AsyncDisposable> {
  const swapper = `$| = 1; print "swapping\\n"; my ($a, $b) = ("d", "l"); ` +
    `while (1) { syscall(${RENAMEAT2[Deno.build.arch]}, -100, $a, -100, $b, 2) == 0 or die "$!" }`;
  const child = new Deno.Command(PERL, {
    args: ["-e", swapper],
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

/** Runs every case (writing ones only for a write-only scope) and returns escapes by case. */
async function race(writeOnly: boolean, ffi: boolean): Promise<Record<string, number>> {
  await using l = await layout(writeOnly);
  const permissions = writeOnly
    ? [`--allow-write=${l.scope}`, `--allow-read=${l.src}`]
    : [`--allow-read=${l.scope}`, `--allow-write=${l.scope}`];
  await using server = await ServerProcess.start({
    listen: "stdio",
    permissions: [...permissions, "--allow-env", "--allow-sys", ...(ffi ? ["--allow-ffi"] : [])],
    cwd: l.base,
  });
  const client = new RaceClient(server.stdio!);
  await handshake(server.stdio!);
  const cases = Object.values(CASES).flatMap((entry) => "none" in entry ? [] : entry)
    .filter((c) => c.writes || !writeOnly);
  const escapes: Record<string, number> = Object.fromEntries(cases.map((c) => [c.what, 0]));
  await using swapper = await startSwapper(l.scope);
  for (let i = 0; i < TRIES; i++) {
    for (const c of cases) if (await c.attempt(client, l, i)) escapes[c.what]!++;
  }
  const stopped = await Promise.race([swapper.status, Promise.resolve(undefined)]);
  assert.equal(stopped, undefined, "the swapper stopped early");
  swapper.kill("SIGKILL");
  await swapper.status;
  for (const c of cases) escapes[c.what]! += c.after?.(l) ?? 0;
  // `d` and `l` are where the swap left them: both are looked in.
  const temps = [l.outside, l.scope, l.copies, `${l.scope}/d`, `${l.scope}/l`]
    .flatMap((dir) => exists(dir) && Deno.statSync(dir).isDirectory ? listNames(dir) : [])
    .filter((name) => name.includes(".tmp"));
  escapes["temp files"] = temps.length;
  return escapes;
}

const zero = (escapes: Record<string, number>) =>
  Object.fromEntries(Object.keys(escapes).map((key) => [key, 0]));

Deno.test("every fs method of the operations table has a Deno-scoped race case or a reason", () => {
  assert.deepEqual(Object.keys(CASES).sort(), Object.keys(FS_OPERATIONS).sort());
  for (const [method, entry] of Object.entries(CASES)) {
    assert.ok("none" in entry ? entry.none !== "" : entry.length > 0, method);
  }
});

for (const writeOnly of [false, true]) {
  const scope = writeOnly ? "a write-only scope" : "a read-write scope";
  Deno.test({
    name:
      `fs calls stay in ${scope} while a local process swaps a directory and a link to outside it${SKIP}`,
    ignore: SKIP !== "",
    async fn() {
      const escapes = await race(writeOnly, true);
      console.log(`attack ${JSON.stringify({ scope, ffi: true, tries: TRIES, escapes })}`);
      assert.deepEqual(escapes, zero(escapes));
    },
  });
}

Deno.test({
  name:
    "fs calls stay in a read-write scope without --allow-ffi while a local process swaps a link in (ignored: without FFI Deno opens by path only, so the race remains; README, Not achieved)",
  ignore: true,
  async fn() {
    const escapes = await race(false, false);
    console.log(`attack ${JSON.stringify({ ffi: false, tries: TRIES, escapes })}`);
    assert.deepEqual(escapes, zero(escapes));
  },
});
