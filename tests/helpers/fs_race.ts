/**
 * The fs race shared by the Deno-scoped and the sandboxed attack tests: a
 * layout where `S/d` (a directory) and `S/l` (a link to a directory outside
 * S) are swapped in a loop by a swapper process, and one attack case per fs
 * method of the operations table ({@linkcode CASES}, typed from the table,
 * so a new method without an entry does not compile).
 *
 * @module
 */

import type { ParamsOf } from "../../lib/protocol/methods.ts";
import type { FsMethod } from "../../lib/server/fs/operations.ts";
import { b64, listNames, pathExists, uri } from "./attack.ts";
import type { Json, ProtocolClient } from "./server_harness.ts";

const LONG = Deno.env.get("EXEC_SERVER_LONG_TESTS") === "1";
/** Tries per case: 50, 200 with `EXEC_SERVER_LONG_TESTS=1`. */
export const TRIES = LONG ? 200 : 50;
/** `renameat2` by architecture. */
const RENAMEAT2: Record<string, number> = { "x86_64": 316, aarch64: 276 };
/** The swapper's interpreter. */
export const PERL = "/usr/bin/perl";
/** Why the race cannot run here (for test names), or `""`. */
export const RACE_SKIP = Deno.build.os !== "linux"
  ? " (skipped: Linux only)"
  : RENAMEAT2[Deno.build.arch] === undefined
  ? ` (skipped: no renameat2 number for ${Deno.build.arch})`
  : !pathExists(PERL)
  ? ` (skipped: no ${PERL})`
  : "";
const SECRET = "SECRET\n";
const PUBLIC = "public-public\n";

/**
 * `base/scope` (S) holding `d` (`f`, `PUBLIC`, `lnk` → `public-target`) and
 * `l` → `base/outside` (holding `f`, `SECRETMARK`, `lnk` → `SECRET-target`,
 * and the victims of removals); `src` holds copy sources (`file.txt`,
 * `tree/inner.txt`): in S for a read-write scope, `base/source` for a
 * write-only one.
 */
export interface Layout extends AsyncDisposable {
  base: string;
  scope: string;
  outside: string;
  src: string;
  /** `S/zz`: what copies into the scope create (listed last by a walk of S). */
  copies: string;
  /** Tries per case ({@linkcode runRace}); there is a removal victim for each. */
  tries: number;
}

/**
 * Creates a {@linkcode Layout} in a new directory under `dir`.
 *
 * @param writeOnly The copy sources live outside S (a write-only scope reads them there).
 * @param dir Where the layout's directory is made (default: the temp directory).
 * @param tries Tries per case.
 */
export async function raceLayout(
  writeOnly: boolean,
  dir?: string,
  tries = TRIES,
): Promise<Layout> {
  const base = await Deno.realPath(await Deno.makeTempDir({ dir, prefix: "es-fs-race-" }));
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
  for (let i = 0; i < tries; i++) {
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
    tries,
    async [Symbol.asyncDispose]() {
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** One attack: the requests of try `i`, and how many of them escaped. */
export interface Case {
  /** Shown in the results. */
  what: string;
  /** Also run against the write-only scope (it writes only). */
  writes: boolean;
  /** Run under a sandbox too (its requests take a `sandbox`). */
  sandboxed?: boolean;
  /** Sends try `i`'s requests; `true` when the answer came from outside S. */
  attempt(client: Client, l: Layout, i: number): Promise<boolean>;
  /** Escapes found on disk after every try (writes and removals outside S). */
  after?(l: Layout): number;
}

/** Whether a method's params take a `sandbox` (checked against the method table). */
const TAKES_SANDBOX: {
  readonly [M in FsMethod]: "sandbox" extends keyof ParamsOf<M> ? true : false;
} = {
  "fs/readFile": true,
  "fs/writeFile": true,
  "fs/createDirectory": true,
  "fs/getMetadata": true,
  "fs/canonicalize": true,
  "fs/readDirectory": true,
  "fs/walk": true,
  "fs/remove": true,
  "fs/copy": true,
  "fs/open": true,
  "fs/readBlock": false,
  "fs/writeBlock": false,
  "fs/close": false,
  "fs/watchMissing": false,
};

/** Sends fs requests, numbered, each with `sandbox` where its method takes one. */
export class Client {
  #id = 1;
  /**
   * @param protocol The connection.
   * @param sandbox Added to every request that takes one.
   */
  constructor(readonly protocol: ProtocolClient, readonly sandbox?: Json) {}
  /** Sends one request and waits for its answer. */
  call(method: FsMethod, params: Json): Promise<Json> {
    const sandbox = TAKES_SANDBOX[method] ? this.sandbox : undefined;
    return this.protocol.request(this.#id++, method, sandbox ? { ...params, sandbox } : params);
  }
}

const named = (dir: string, pattern: RegExp) =>
  listNames(dir).filter((name) => pattern.test(name)).length;
const missing = (l: Layout, prefix: string) => {
  let count = 0;
  for (let i = 0; i < l.tries; i++) if (!pathExists(`${l.outside}/${prefix}${i}`)) count++;
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

/** A copy from `S/<source>` (through the swapped `d`) to `S/zz/<prefix><i>`; leaks show `marker`. */
const copyIntoScope = (
  what: string,
  source: string,
  prefix: string,
  marker: string,
  recursive: boolean,
): Case =>
  readCase(what, async (client, l, i) => {
    await client.call("fs/copy", {
      sourcePath: uri(`${l.scope}/${source}`),
      destinationPath: uri(`${l.copies}/${prefix}${i}`),
      recursive,
    });
    return false;
  }, (l) => leakedCopies(l, prefix, marker));

/** `fs/open` for replace of `S/d/<prefix><i>` (then a block written, when `write`), and closed. */
const openForReplace = (what: string, prefix: string, write: boolean): Case => ({
  what,
  writes: true,
  attempt: async (client, l, i) => {
    const handleId = prefix;
    const path = uri(`${l.scope}/d/${prefix}${i}`);
    const opened = await client.call("fs/open", { handleId, path, mode: "replace" });
    if (opened.result === undefined) return false;
    if (write) await client.call("fs/writeBlock", { handleId, offset: 0, chunk: b64("x") });
    await client.call("fs/close", { handleId });
    return false;
  },
  after: (l) => named(l.outside, new RegExp(`^${prefix}\\d+$`)),
});

/** `fs/remove` of `S/d/<prefix><i>`; the victims are `outside/<prefix><i>`. */
const removal = (what: string, prefix: string, recursive: boolean): Case => ({
  what,
  writes: true,
  attempt: async (client, l, i) => {
    await client.call("fs/remove", { path: uri(`${l.scope}/d/${prefix}${i}`), recursive });
    return false;
  },
  after: (l) => missing(l, prefix),
});

/**
 * The attacks, by method: every fs method of the operations table, with its
 * reason where it touches no path.
 */
export const CASES: { readonly [M in FsMethod]: readonly Case[] | { readonly none: string } } = {
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
  "fs/remove": [removal("remove", "v", false), removal("remove --recursive", "r", true)],
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
    copyIntoScope("copy a file into the root", "d/f", "k", "SECRET", false),
    copyIntoScope("copy a link into the root", "d/lnk", "q", "SECRET", false),
    copyIntoScope("copy --recursive into the root", "d", "u", "SECRETMARK", true),
  ],
  "fs/open": [openForReplace("open replace", "o", false)],
  "fs/writeBlock": [openForReplace("open replace + writeBlock", "b", true)],
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
    // No `sandbox` in its params: run against a Deno scope only.
    {
      sandboxed: false,
      ...readCase("watchMissing", async (client, l, i) => {
        // `SECRETMARK` is never in S: "not watching" says it exists outside. The second path is
        // then created, so the watch fires and releases its watchers before the next try.
        const fire = `${l.copies}/fire${i}`;
        const watch = await client.call("fs/watchMissing", {
          watchId: i,
          missing: [uri(`${l.scope}/d/SECRETMARK`), uri(fire)],
        });
        if (result(watch).watching !== true) return watch.result !== undefined;
        await Deno.writeTextFile(fire, "");
        await client.protocol.log.waitFor(
          (msg) =>
            msg.method === "fs/missingChanged" && (msg.params as Json | undefined)?.watchId === i,
          "the watch to fire",
        );
        return false;
      }),
    },
  ],
};

/** The cases to run: all of them, or those that write (a write-only scope) or take a sandbox. */
export function raceCases(only: { writes?: boolean; sandboxed?: boolean } = {}): Case[] {
  return Object.values(CASES).flatMap((entry) => "none" in entry ? [] : entry)
    .filter((c) => (!only.writes || c.writes) && (!only.sandboxed || c.sandboxed !== false));
}

/**
 * Runs the layout's tries of every case (the swapper running), then
 * counts what escaped (answers from outside S, writes and removals there,
 * temp files anywhere).
 *
 * @param stop Ends the swap, once every try ran.
 */
export async function runRace(
  client: Client,
  l: Layout,
  cases: readonly Case[],
  stop: () => Promise<void>,
): Promise<Record<string, number>> {
  const escapes: Record<string, number> = Object.fromEntries(cases.map((c) => [c.what, 0]));
  for (let i = 0; i < l.tries; i++) {
    for (const c of cases) if (await c.attempt(client, l, i)) escapes[c.what]!++;
  }
  await stop();
  for (const c of cases) escapes[c.what]! += c.after?.(l) ?? 0;
  // `d` and `l` are where the swap left them: both are looked in.
  const temps = [l.outside, l.scope, l.copies, `${l.scope}/d`, `${l.scope}/l`]
    .flatMap((dir) => pathExists(dir) && Deno.statSync(dir).isDirectory ? listNames(dir) : [])
    .filter((name) => name.includes(".tmp"));
  escapes["temp files"] = temps.length;
  return escapes;
}

/** The same keys as `escapes`, all 0. */
export function zero(escapes: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.keys(escapes).map((key) => [key, 0]));
}

/** The swapper's program: swaps `d` and `l` in its working directory until it is killed. */
export function swapperScript(): string {
  return `$| = 1; print "swapping\\n"; my ($a, $b) = ("d", "l"); ` +
    `while (1) { syscall(${RENAMEAT2[Deno.build.arch]}, -100, $a, -100, $b, 2) == 0 or die "$!" }`;
}
