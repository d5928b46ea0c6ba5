import {
  deepStrictEqual as assertEquals,
  ok as assert,
  rejects as assertRejects,
} from "node:assert/strict";
import { decodeBase64 } from "../lib/protocol/base64.ts";
import { RpcError } from "../lib/protocol/errors.ts";
import type { ParamsOf, ResultOf } from "../lib/protocol/methods.ts";
import { StreamedString } from "../lib/protocol/streamed_json.ts";
import { whole } from "./helpers/streamed_whole.ts";
import { makeNonUtf8File, NON_UTF8_NAME_TEXT } from "./helpers/non_utf8_name.ts";
import { READ_CHUNK_BYTES, READ_FILE_LIMIT } from "../lib/server/fs/read_file.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { type FsMethod, runFsOperation } from "../lib/server/fs/operations.ts";
import type { WalkOptions } from "../lib/server/fs/walk.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { uriFromPath } from "../lib/server/host/path_uri.ts";

/** An fs request as the server runs it (through the fs operations table), on its own handles. */
function request<M extends FsMethod>(
  method: M,
  files = new FileHandleTable(),
): (params: ParamsOf<M>) => Promise<ResultOf<M>> {
  const context = { files, watches: new MissingWatchTable(), notify() {} };
  return async (params) =>
    await whole(await runFsOperation(method, params, context)) as ResultOf<M>;
}

const readFile = request("fs/readFile");
const writeFile = request("fs/writeFile");
const createDirectory = request("fs/createDirectory");
const getMetadata = request("fs/getMetadata");
const canonicalize = request("fs/canonicalize");
const readDirectory = request("fs/readDirectory");
const walk = request("fs/walk");
const remove = request("fs/remove");
const copy = request("fs/copy");

/** `fs/open` on `table`. */
function open(table: FileHandleTable, params: ParamsOf<"fs/open">): Promise<ResultOf<"fs/open">> {
  return request("fs/open", table)(params);
}

/** `fs/watchMissing` on `table`; `notify` gets the watchId of `fs/missingChanged`. */
async function watchMissing(
  table: MissingWatchTable,
  params: ParamsOf<"fs/watchMissing">,
  notify: (watchId: number) => void,
): Promise<ResultOf<"fs/watchMissing">> {
  const context = {
    files: new FileHandleTable(),
    watches: table,
    notify: (_method: string, sent: unknown) => notify((sent as { watchId: number }).watchId),
  };
  return await runFsOperation("fs/watchMissing", params, context);
}

const uri = uriFromPath;

/** A temp dir holding the fixture of `transcripts/fixture.sh`, removed on dispose. */
interface Fixture extends AsyncDisposable {
  dir: string;
  /** `file:` URI of a path below the fixture. */
  at(relative: string): string;
}

async function fixture(): Promise<Fixture> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "fs_test_" }));
  await Deno.mkdir(`${dir}/dir/sub`, { recursive: true });
  await Deno.mkdir(`${dir}/.hidden/x`, { recursive: true });
  await Deno.mkdir(`${dir}/empty`);
  await Deno.writeTextFile(`${dir}/a.txt`, "hello world\n");
  await Deno.writeTextFile(`${dir}/dir/f1`, "x");
  await Deno.writeTextFile(`${dir}/dir/sub/f2`, "yy");
  await Deno.writeTextFile(`${dir}/.hidden/x/f`, "");
  await Deno.symlink("a.txt", `${dir}/link`);
  await Deno.symlink("nowhere", `${dir}/broken`);
  await Deno.symlink("dir", `${dir}/dirlink`);
  await Deno.symlink(`${dir}/dir`, `${dir}/dir/sub/loop`);
  const mkfifo = await new Deno.Command("mkfifo", { args: [`${dir}/fifo`] }).output();
  assert(mkfifo.success, "mkfifo failed");
  return {
    dir,
    at: (relative) => uri(`${dir}/${relative}`),
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** Awaits `promise`, expecting an RpcError, and returns its `data.kind`. */
async function failureKind(operation: Promise<unknown>): Promise<unknown> {
  try {
    await operation;
  } catch (err) {
    if (err instanceof RpcError) return (err.data as { kind?: unknown } | undefined)?.kind;
    throw err;
  }
  throw new Error("expected an RpcError");
}

/** Awaits `promise`, expecting an RpcError, and returns its wire code and message. */
async function failure(
  operation: Promise<unknown> | (() => unknown),
): Promise<{ code: number; message: string }> {
  try {
    await (typeof operation === "function" ? operation() : operation);
  } catch (err) {
    if (err instanceof RpcError) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected an RpcError");
}

const NOT_FOUND = { code: -32004, message: "No such file or directory (os error 2)" };
const NOT_A_DIRECTORY = { code: -32603, message: "Not a directory (os error 20)" };
const IS_A_DIRECTORY = { code: -32603, message: "Is a directory (os error 21)" };
const FILE_EXISTS = { code: -32603, message: "File exists (os error 17)" };
const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);

async function text(path: string): Promise<string> {
  return await Deno.readTextFile(path);
}

Deno.test("fs/readFile returns the bytes of a file, following symlinks", async () => {
  await using fx = await fixture();
  assertEquals(await readFile({ path: fx.at("a.txt") }), { dataBase64: "aGVsbG8gd29ybGQK" });
  assertEquals(await readFile({ path: fx.at("link") }), { dataBase64: "aGVsbG8gd29ybGQK" });
  assertEquals(await readFile({ path: `${fx.at("dir")}/../a%2Etxt` }), {
    dataBase64: "aGVsbG8gd29ybGQK",
  });
});

Deno.test("fs/readFile reports missing paths, non-files and file components", async () => {
  await using fx = await fixture();
  assertEquals(await failure(readFile({ path: fx.at("missing") })), NOT_FOUND);
  assertEquals(await failure(readFile({ path: fx.at("broken") })), NOT_FOUND);
  assertEquals(await failure(readFile({ path: fx.at("a.txt/x") })), NOT_A_DIRECTORY);
  assertEquals(await failure(readFile({ path: fx.at("dir/") })), {
    code: -32600,
    message: `path \`${fx.dir}/dir\` is not a file`,
  });
  assertEquals(await failure(readFile({ path: fx.at("fifo") })), {
    code: -32600,
    message: `path \`${fx.dir}/fifo\` is not a file`,
  });
});

Deno.test("fs/readFile refuses files over 512 MiB before reading them, with the reference's message", async () => {
  await using fx = await fixture();
  await Deno.writeFile(`${fx.dir}/big`, new Uint8Array());
  await Deno.truncate(`${fx.dir}/big`, READ_FILE_LIMIT + 1); // sparse
  const refused = await readFile({ path: fx.at("big") }).catch((err) => err);
  assertEquals([refused.code, refused.message, refused.data], [
    -32600,
    "file is too large to read: limit is 536870912 bytes",
    { kind: "replyTooLarge" },
  ]);
});

Deno.test("fs/readFile answers a file of up to one chunk with one string and a larger one streamed, in chunks that concatenate", async () => {
  await using fx = await fixture();
  for (const size of [READ_CHUNK_BYTES, READ_CHUNK_BYTES + 1, 3 * READ_CHUNK_BYTES + 2]) {
    const data = new Uint8Array(size).map((_, i) => (i * 7 + (i >> 10)) & 0xff);
    await Deno.writeFile(`${fx.dir}/sized`, data);
    const reply = await runFsOperation("fs/readFile", { path: fx.at("sized") }, {
      files: new FileHandleTable(),
      watches: new MissingWatchTable(),
      notify() {},
    });
    const streamed = reply.dataBase64 instanceof StreamedString;
    assertEquals(streamed, size > READ_CHUNK_BYTES, `size ${size}`);
    assertEquals((await whole(reply)).dataBase64, data.toBase64());
  }
});

Deno.test("fs/writeFile round-trips every byte value", async () => {
  await using fx = await fixture();
  const dataBase64 = ALL_BYTES.toBase64();
  assertEquals(await writeFile({ path: fx.at("bytes"), dataBase64 }), {});
  assertEquals(await Deno.readFile(`${fx.dir}/bytes`), ALL_BYTES);
  assertEquals(await readFile({ path: fx.at("bytes") }), { dataBase64 });
  await writeFile({ path: fx.at("bytes"), dataBase64: "" });
  assertEquals(await Deno.readFile(`${fx.dir}/bytes`), new Uint8Array());
});

Deno.test("fs/writeFile replaces atomically, leaving no temp file and keeping the mode", async () => {
  await using fx = await fixture();
  await Deno.chmod(`${fx.dir}/a.txt`, 0o640);
  const before = (await Deno.stat(`${fx.dir}/a.txt`)).ino;
  await writeFile({ path: fx.at("a.txt"), dataBase64: btoa("replaced") });
  assertEquals(await text(`${fx.dir}/a.txt`), "replaced");
  const after = await Deno.stat(`${fx.dir}/a.txt`);
  assertEquals(after.mode! & 0o777, 0o640);
  assert(after.ino !== before, "the file was replaced by a rename, not rewritten");
  const names = (await Array.fromAsync(Deno.readDir(fx.dir))).map((e) => e.name).sort();
  assertEquals(names, [".hidden", "a.txt", "broken", "dir", "dirlink", "empty", "fifo", "link"]);
});

Deno.test("fs/writeFile writes through symlinks, creating a dangling link's target", async () => {
  await using fx = await fixture();
  await writeFile({ path: fx.at("link"), dataBase64: btoa("via link") });
  assert((await Deno.lstat(`${fx.dir}/link`)).isSymlink, "the link stays a link");
  assertEquals(await text(`${fx.dir}/a.txt`), "via link");
  await writeFile({ path: fx.at("broken"), dataBase64: btoa("new") });
  assert((await Deno.lstat(`${fx.dir}/broken`)).isSymlink, "the link stays a link");
  assertEquals(await text(`${fx.dir}/nowhere`), "new");
});

Deno.test("fs/writeFile reports a missing parent, a directory and bad base64", async () => {
  await using fx = await fixture();
  assertEquals(await failure(writeFile({ path: fx.at("nodir/x"), dataBase64: "aGk=" })), NOT_FOUND);
  assertEquals(
    await failure(writeFile({ path: fx.at("dir"), dataBase64: "aGk=" })),
    IS_A_DIRECTORY,
  );
  assertEquals(
    await failure(writeFile({ path: fx.at("dirlink"), dataBase64: "aGk=" })),
    IS_A_DIRECTORY,
  );
  assertEquals(await failure(writeFile({ path: fx.at("bad"), dataBase64: "!!!" })), {
    code: -32600,
    message: "fs/writeFile requires valid base64 dataBase64: Invalid symbol 33, offset 0.",
  });
  assertEquals(
    (await failure(writeFile({ path: fx.at("bad"), dataBase64: "aGk" }))).message,
    "fs/writeFile requires valid base64 dataBase64: Invalid padding",
  );
  assertEquals(await failure(writeFile({ path: "/rel", dataBase64: "!" })), {
    code: -32602,
    message: "invalid URI: relative URL without a base",
  });
});

Deno.test("decodeBase64 fails with the reference decoder's messages", () => {
  const cases: [string, string][] = [
    ["a", "Invalid input length: 1"],
    ["aGkxa", "Invalid input length: 5"],
    ["aG", "Invalid padding"],
    ["aG=", "Invalid padding"],
    ["aGl=", "Invalid last symbol 108, offset 2."],
    ["aG==", "Invalid last symbol 71, offset 1."],
    ["a===", "Invalid symbol 61, offset 1."],
    ["aG=a", "Invalid symbol 61, offset 2."],
    ["====", "Invalid symbol 61, offset 0."],
    ["aGk=aGk=", "Invalid symbol 61, offset 3."],
    ["aGk==", "Invalid symbol 61, offset 3."],
    ["aGkx====", "Invalid symbol 61, offset 4."],
    ["a-_b", "Invalid symbol 45, offset 1."],
    ["aGkxaGkxa!kx", "Invalid symbol 33, offset 9."],
    ["aGk=\n", "Invalid symbol 10, offset 4."],
    ["aGkx!", "Invalid symbol 33, offset 4."],
    ["aGkx=", "Invalid symbol 61, offset 4."],
    ["aG==a", "Invalid symbol 61, offset 2."],
    ["!aGkxaGkxaGkx", "Invalid symbol 33, offset 0."],
    // Whitespace the built-in decoder would skip, at lengths that are a multiple of four.
    ["aGkx    ", "Invalid symbol 32, offset 4."],
    ["aG\tkx+/a", "Invalid symbol 9, offset 2."],
    [" aGkxaGk=", "Invalid symbol 32, offset 0."],
  ];
  for (const [input, message] of cases) {
    let got = "";
    try {
      decodeBase64(input);
    } catch (err) {
      got = (err as Error).message;
    }
    assertEquals(got, message, input);
  }
  assertEquals(decodeBase64("aGk="), new Uint8Array([104, 105]));
  assertEquals(decodeBase64(""), new Uint8Array());
});

Deno.test("fs/createDirectory is mkdir -p by default and plain mkdir otherwise", async () => {
  await using fx = await fixture();
  assertEquals(await createDirectory({ path: fx.at("cd/a/b") }), {});
  assertEquals(await createDirectory({ path: fx.at("cd/a/b"), recursive: undefined }), {});
  assert((await Deno.stat(`${fx.dir}/cd/a/b`)).isDirectory);
  assertEquals(
    await failure(createDirectory({ path: fx.at("cd"), recursive: false })),
    FILE_EXISTS,
  );
  assertEquals(
    await failure(createDirectory({ path: fx.at("cd3/a"), recursive: false })),
    NOT_FOUND,
  );
  assertEquals(await failure(createDirectory({ path: fx.at("a.txt") })), FILE_EXISTS);
  assertEquals(await failure(createDirectory({ path: fx.at("link") })), FILE_EXISTS);
  assertEquals(await failure(createDirectory({ path: fx.at("a.txt/x") })), NOT_A_DIRECTORY);
  assertEquals(await createDirectory({ path: fx.at("dirlink") }), {});
});

Deno.test("fs/createDirectory of a path of PATH_MAX bytes or more creates nothing, as the reference", async () => {
  await using fx = await fixture();
  // Components of 200 bytes under `long/`, the last one cut to give the path `bytes` bytes.
  const pathOf = (bytes: number) => {
    let path = `${fx.dir}/long`;
    while (path.length < bytes - 201) path += `/${"d".repeat(200)}`;
    return `${path}/${"e".repeat(bytes - path.length - 1)}`;
  };
  assertEquals(
    await failure(createDirectory({ path: uri(pathOf(4096)) })),
    { code: -32603, message: "Filename too long (os error 36)" },
  );
  assertEquals(
    await Array.fromAsync(Deno.readDir(fx.dir)).then((e) => e.some((x) => x.name === "long")),
    false,
  );
  assertEquals(await createDirectory({ path: uri(pathOf(4095)) }), {});
  assert((await Deno.lstat(`${fx.dir}/long`)).isDirectory);
  // A component over NAME_MAX (255 bytes) is found only on the way, after its parents exist.
  assertEquals(
    await failure(createDirectory({ path: fx.at(`name/a/${"n".repeat(256)}/b`) })),
    { code: -32603, message: "Filename too long (os error 36)" },
  );
  assert((await Deno.lstat(`${fx.dir}/name/a`)).isDirectory);
});

Deno.test("fs/getMetadata stats the target and lstats the path", async () => {
  await using fx = await fixture();
  const file = await getMetadata({ path: fx.at("a.txt") });
  assertEquals({ ...file, createdAtMs: 0, modifiedAtMs: 0 }, {
    isDirectory: false,
    isFile: true,
    isSymlink: false,
    size: 12,
    createdAtMs: 0,
    modifiedAtMs: 0,
  });
  assertEquals(file.modifiedAtMs, (await Deno.stat(`${fx.dir}/a.txt`)).mtime!.getTime());
  const dirlink = await getMetadata({ path: fx.at("dirlink/") });
  assertEquals([dirlink.isDirectory, dirlink.isFile, dirlink.isSymlink], [true, false, true]);
  const link = await getMetadata({ path: fx.at("link") });
  assertEquals([link.isDirectory, link.isFile, link.isSymlink, link.size], [
    false,
    true,
    true,
    12,
  ]);
  const fifo = await getMetadata({ path: fx.at("fifo") });
  assertEquals([fifo.isDirectory, fifo.isFile, fifo.isSymlink], [false, false, false]);
  assertEquals(await failure(() => getMetadata({ path: fx.at("broken") })), NOT_FOUND);
});

Deno.test("fs/getMetadata answers the same from statx (--allow-ffi) as from Deno.lstatSync", async () => {
  await using fx = await fixture();
  await Deno.utime(`${fx.dir}/a.txt`, -315619199.5, -315619199.5);
  const names = [
    "a.txt",
    "dir",
    "link",
    "dirlink",
    "fifo",
    "broken",
    "missing",
    "a.txt/x",
    "n".repeat(300), // a name over NAME_MAX
    "d/".repeat(2100), // a path over PATH_MAX (its own C string, not the shared buffer)
  ];
  const answer = async (name: string) => {
    try {
      return await getMetadata({ path: fx.at(name) });
    } catch (err) {
      if (err instanceof RpcError) return { code: err.code, message: err.message };
      throw err;
    }
  };
  const withFfi = [];
  for (const name of names) withFfi.push(await answer(name));
  // The same requests in a process without --allow-ffi (so `Deno.lstatSync` answers them).
  const operations = new URL("../lib/server/fs/operations.ts", import.meta.url).href;
  const script = `
    import { runFsOperation } from ${JSON.stringify(operations)};
    const answers = [];
    for (const path of ${JSON.stringify(names.map(fx.at))}) {
      try {
        answers.push(await runFsOperation("fs/getMetadata", { path }, {}));
      } catch (err) {
        answers.push({ code: err.code, message: err.message });
      }
    }
    console.log(JSON.stringify(answers));
  `;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-config", "--allow-read", "--allow-env", script],
    stderr: "inherit",
  }).output();
  assert(output.success, "the process without --allow-ffi failed");
  const withoutFfi = JSON.parse(new TextDecoder().decode(output.stdout));
  assertEquals(withFfi, withoutFfi);
  assertEquals((withFfi[0] as { modifiedAtMs: number }).modifiedAtMs, -315619199500);
});

Deno.test("fs/canonicalize resolves symlinks and dot segments", async () => {
  await using fx = await fixture();
  assertEquals(await canonicalize({ path: fx.at("link") }), { path: fx.at("a.txt") });
  assertEquals(await canonicalize({ path: `${fx.at("dir")}/../dirlink/sub/` }), {
    path: fx.at("dir/sub"),
  });
  assertEquals(await canonicalize({ path: "file:///" }), { path: "file:///" });
  assertEquals(await failure(() => canonicalize({ path: fx.at("missing") })), NOT_FOUND);
});

Deno.test("fs/readDirectory lists a file whose name is not UTF-8, its byte as U+FFFD, as the reference does", async () => {
  // Before, the entry was left out: the stat of the decoded name found nothing.
  await using fx = await fixture();
  await Deno.mkdir(`${fx.dir}/odd`);
  await makeNonUtf8File(`${fx.dir}/odd`);
  assertEquals(await readDirectory({ path: fx.at("odd") }), {
    entries: [{ fileName: NON_UTF8_NAME_TEXT, isDirectory: false, isFile: true }],
  });
});

Deno.test("fs/walk answers a file whose name is not UTF-8 as an error of its U+FFFD name, as the reference does", async () => {
  // The reference describes each entry by its decoded name, which does not exist.
  await using fx = await fixture();
  await Deno.mkdir(`${fx.dir}/odd`);
  await makeNonUtf8File(`${fx.dir}/odd`);
  const options = {
    maxDepth: 1,
    maxDirectories: 10,
    maxEntries: 10,
    followDirectorySymlinks: false,
  };
  assertEquals(await walk({ path: fx.at("odd"), options }), {
    entries: [],
    errors: [{
      path: uriFromPath(`${fx.dir}/odd/${NON_UTF8_NAME_TEXT}`),
      message: "No such file or directory (os error 2)",
    }],
    truncated: false,
  });
});

Deno.test("fs/walk and fs/readDirectory list a directory larger than one getdents64 buffer whole, in order, without . and ..", async () => {
  // 3 000 names of 100 bytes: about 360 KiB of records, a dozen reads of the 32 KiB buffer.
  await using fx = await fixture();
  await Deno.mkdir(`${fx.dir}/big`);
  const names = Array.from(
    { length: 3000 },
    (_, i) => `${String(i).padStart(4, "0")}${"é".repeat(48)}`,
  );
  for (const name of names) await Deno.writeTextFile(`${fx.dir}/big/${name}`, "");
  const options = {
    maxDepth: 0,
    maxDirectories: 10,
    maxEntries: 50_000,
    followDirectorySymlinks: false,
  };
  const walked = await walk({ path: fx.at("big"), options });
  assertEquals(walked.errors, []);
  assertEquals(
    walked.entries,
    names.map((name) => ({ path: uriFromPath(`${fx.dir}/big/${name}`), kind: "file" })),
  );
  const listed = await readDirectory({ path: fx.at("big") });
  assertEquals(
    listed.entries.map((entry) => entry.fileName).sort(),
    names,
  );
});

Deno.test("fs/copy and fs/remove of a tree take a file whose name is not UTF-8 along, as the reference does", async () => {
  // Before, the copy left the file out and the removal answered {} and removed nothing: the
  // decoded name was not found, and that ENOENT read as a missing path.
  await using fx = await fixture();
  await Deno.mkdir(`${fx.dir}/odd/sub`, { recursive: true });
  await makeNonUtf8File(`${fx.dir}/odd/sub`);
  await copy({ sourcePath: fx.at("odd"), destinationPath: fx.at("copied"), recursive: true });
  const names = (await Array.fromAsync(Deno.readDir(`${fx.dir}/copied/sub`))).map((e) => e.name);
  assertEquals(names, [NON_UTF8_NAME_TEXT]);
  assertEquals(await remove({ path: fx.at("odd"), recursive: true }), {});
  assertEquals(await remove({ path: fx.at("copied"), recursive: true }), {});
  const left = (await Array.fromAsync(Deno.readDir(fx.dir))).map((entry) => entry.name);
  assertEquals(left.filter((name) => name === "odd" || name === "copied"), []);
});

Deno.test("fs calls through a symlink loop answer ELOOP and change nothing, as the reference does", async () => {
  // Before, reads answered -32004 as for a missing path, and fs/writeFile replaced a link of the loop.
  await using fx = await fixture();
  await Deno.symlink("loop2", `${fx.dir}/loop1`);
  await Deno.symlink("loop1", `${fx.dir}/loop2`);
  const loop = { code: -32603, message: "Symbolic link loop (os error 40)" };
  const path = fx.at("loop1");
  assertEquals(await failure(getMetadata({ path })), loop);
  assertEquals(await failure(readFile({ path })), loop);
  assertEquals(await failure(canonicalize({ path })), loop);
  assertEquals(await failure(writeFile({ path, dataBase64: btoa("x") })), loop);
  assertEquals(
    [await Deno.readLink(`${fx.dir}/loop1`), await Deno.readLink(`${fx.dir}/loop2`)],
    ["loop2", "loop1"],
  );
});

Deno.test("fs/readDirectory follows symlinks and leaves out entries it cannot stat", async () => {
  await using fx = await fixture();
  const { entries } = await readDirectory({ path: fx.at("") });
  entries.sort((a, b) => a.fileName < b.fileName ? -1 : 1);
  assertEquals(entries, [
    { fileName: ".hidden", isDirectory: true, isFile: false },
    { fileName: "a.txt", isDirectory: false, isFile: true },
    { fileName: "dir", isDirectory: true, isFile: false },
    { fileName: "dirlink", isDirectory: true, isFile: false },
    { fileName: "empty", isDirectory: true, isFile: false },
    { fileName: "fifo", isDirectory: false, isFile: false },
    { fileName: "link", isDirectory: false, isFile: true },
  ]);
  assertEquals(await failure(readDirectory({ path: fx.at("a.txt") })), NOT_A_DIRECTORY);
  assertEquals(await failure(readDirectory({ path: fx.at("missing") })), NOT_FOUND);
});

Deno.test("fs/remove handles force, recursion and symlinks", async () => {
  await using fx = await fixture();
  assertEquals(await remove({ path: fx.at("missing") }), {});
  assertEquals(await failure(remove({ path: fx.at("missing"), force: false })), NOT_FOUND);
  assertEquals(await failure(remove({ path: fx.at("a.txt/x"), force: true })), NOT_A_DIRECTORY);
  assertEquals(await failure(remove({ path: fx.at("dir"), recursive: false })), {
    code: -32603,
    message: "Directory not empty (os error 39)",
  });
  assertEquals(await remove({ path: fx.at("empty"), recursive: false }), {});
  assertEquals(await remove({ path: fx.at("dirlink/") }), {});
  assert((await Deno.stat(`${fx.dir}/dir/f1`)).isFile, "the link's target survives");
  assertEquals(await remove({ path: fx.at("dir"), recursive: undefined, force: undefined }), {});
  assertEquals(
    await failure(
      Deno.lstat(`${fx.dir}/dir`).catch(() => {
        throw new RpcError(-1, "gone");
      }),
    ),
    { code: -1, message: "gone" },
  );
});

Deno.test("fs/copy copies files and symlinks, and a file onto itself is a no-op", async () => {
  await using fx = await fixture();
  const a = fx.at("a.txt");
  assertEquals(
    await copy({ sourcePath: a, destinationPath: fx.at("c.txt"), recursive: false }),
    {},
  );
  assertEquals(await text(`${fx.dir}/c.txt`), "hello world\n");
  await copy({ sourcePath: a, destinationPath: a, recursive: false });
  await copy({ sourcePath: a, destinationPath: fx.at("link"), recursive: false });
  assertEquals(await text(`${fx.dir}/a.txt`), "hello world\n");
  await copy({ sourcePath: fx.at("link"), destinationPath: fx.at("l2"), recursive: false });
  assertEquals(await Deno.readLink(`${fx.dir}/l2`), "a.txt");
  await copy({ sourcePath: fx.at("broken"), destinationPath: fx.at("b2"), recursive: true });
  assertEquals(await Deno.readLink(`${fx.dir}/b2`), "nowhere");
  const dst = { recursive: false, sourcePath: a };
  assertEquals(await failure(copy({ ...dst, destinationPath: fx.at("dir") })), IS_A_DIRECTORY);
  assertEquals(await failure(copy({ ...dst, destinationPath: fx.at("nodir/x") })), NOT_FOUND);
  assertEquals(
    await failure(copy({ ...dst, sourcePath: fx.at("link"), destinationPath: a })),
    FILE_EXISTS,
  );
  assertEquals(
    await failure(copy({ ...dst, sourcePath: fx.at("missing"), destinationPath: fx.at("x") })),
    NOT_FOUND,
  );
  assertEquals(
    await failure(copy({ ...dst, sourcePath: fx.at("fifo"), destinationPath: fx.at("x") })),
    { code: -32600, message: "fs/copy only supports regular files, directories, and symlinks" },
  );
});

Deno.test("fs/copy copies trees with nested symlinks and refuses to copy into itself", async () => {
  await using fx = await fixture();
  const source = fx.at("");
  assertEquals(
    await failure(
      copy({ sourcePath: fx.at("dir"), destinationPath: fx.at("d2"), recursive: false }),
    ),
    {
      code: -32600,
      message: "fs/copy requires recursive: true when sourcePath is a directory",
    },
  );
  const intoItself = {
    code: -32600,
    message: "fs/copy cannot copy a directory to itself or one of its descendants",
  };
  for (const inside of ["dir", "dir/sub", "dir/sub/new", "dirlink/sub/new"]) {
    assertEquals(
      await failure(
        copy({ sourcePath: fx.at("dir"), destinationPath: fx.at(inside), recursive: true }),
      ),
      intoItself,
    );
  }
  assertEquals(
    await failure(
      copy({ sourcePath: fx.at("dir"), destinationPath: fx.at("a.txt"), recursive: true }),
    ),
    FILE_EXISTS,
  );
  const copyDir = await Deno.makeTempDir({ prefix: "fs_test_copy_" });
  try {
    const target = `${copyDir}/tree/deeper`; // missing parents are created
    assertEquals(
      await copy({ sourcePath: source, destinationPath: uri(target), recursive: true }),
      {},
    );
    const names = (await Array.fromAsync(Deno.readDir(target))).map((e) => e.name).sort();
    assertEquals(names, [".hidden", "a.txt", "broken", "dir", "dirlink", "empty", "link"]); // no fifo
    assertEquals(await Deno.readLink(`${target}/dirlink`), "dir");
    assertEquals(await Deno.readLink(`${target}/dir/sub/loop`), `${fx.dir}/dir`);
    assertEquals(await text(`${target}/dir/sub/f2`), "yy");
    assert((await Deno.stat(`${target}/.hidden/x/f`)).isFile);
  } finally {
    await Deno.remove(copyDir, { recursive: true });
  }
});

function options(overrides: Partial<WalkOptions> = {}): WalkOptions {
  return {
    maxDepth: 10,
    maxDirectories: 100,
    maxEntries: 1000,
    followDirectorySymlinks: false,
    ...overrides,
  };
}

async function walkPaths(fx: Fixture, root: string, opts: Partial<WalkOptions>) {
  const result = await walk({ path: fx.at(root), options: options(opts) });
  const prefix = fx.at("");
  return {
    entries: result.entries.map((e) =>
      `${e.kind === "directory" ? "d" : "f"} ${e.path.slice(prefix.length)}`
    ),
    errors: result.errors,
    truncated: result.truncated,
  };
}

Deno.test("fs/walk lists breadth-first, sorted by name, without symlinks or FIFOs", async () => {
  await using fx = await fixture();
  assertEquals(await walkPaths(fx, "", {}), {
    entries: [
      "d /.hidden",
      "f /a.txt",
      "d /dir",
      "d /empty",
      "d /.hidden/x",
      "f /dir/f1",
      "d /dir/sub",
      "f /.hidden/x/f",
      "f /dir/sub/f2",
    ],
    errors: [],
    truncated: false,
  });
  const result = await walk({ path: fx.at("dir/"), options: options({ maxDepth: 0 }) });
  assertEquals(result.entries[0], { path: fx.at("dir/f1"), kind: "file" });
});

Deno.test("fs/walk follows directory symlinks once per canonical directory", async () => {
  await using fx = await fixture();
  assertEquals((await walkPaths(fx, "", { followDirectorySymlinks: true })).entries, [
    "d /.hidden",
    "f /a.txt",
    "d /dir",
    "d /dirlink",
    "d /empty",
    "d /.hidden/x",
    "f /dir/f1",
    "d /dir/sub",
    "f /.hidden/x/f",
    "f /dir/sub/f2",
    "d /dir/sub/loop",
  ]);
  assertEquals(
    (await walkPaths(fx, "dir/sub/loop/sub", { followDirectorySymlinks: true })).entries,
    [
      "f /dir/sub/loop/sub/f2",
      "d /dir/sub/loop/sub/loop",
      "f /dir/sub/loop/sub/loop/f1",
      "d /dir/sub/loop/sub/loop/sub",
    ],
  );
  assertEquals(
    (await walkPaths(fx, "dirlink", { followDirectorySymlinks: true })).entries.length,
    4,
  );
  assertEquals((await walkPaths(fx, "dirlink", {})).entries, []);
});

Deno.test("fs/walk prunes hidden directories but lists them", async () => {
  await using fx = await fixture();
  assertEquals((await walkPaths(fx, "", { pruneHiddenDirectories: true })).entries, [
    "d /.hidden",
    "f /a.txt",
    "d /dir",
    "d /empty",
    "f /dir/f1",
    "d /dir/sub",
    "f /dir/sub/f2",
  ]);
  const root = await walkPaths(fx, ".hidden", { pruneHiddenDirectories: true });
  assertEquals(root.entries, ["d /.hidden/x", "f /.hidden/x/f"]);
});

Deno.test("fs/walk truncates at the limits, counting skipped entries as the reference", async () => {
  await using fx = await fixture();
  const top = ["d /.hidden", "f /a.txt", "d /dir"];
  // broken is not counted; dirlink, fifo and link are.
  assertEquals(await walkPaths(fx, "", { maxEntries: 3 }), {
    entries: top,
    errors: [],
    truncated: true,
  });
  assertEquals((await walkPaths(fx, "", { maxEntries: 4 })).entries, top);
  assertEquals((await walkPaths(fx, "", { maxEntries: 9 })).entries.length, 6);
  assertEquals((await walkPaths(fx, "", { maxEntries: 12 })).truncated, true);
  assertEquals((await walkPaths(fx, "", { maxEntries: 13 })).truncated, false);
  const two = await walkPaths(fx, "", { maxDirectories: 2 });
  assertEquals(two.entries, ["d /.hidden", "f /a.txt", "d /dir", "d /empty", "d /.hidden/x"]);
  assertEquals(two.truncated, true);
  assertEquals((await walkPaths(fx, "", { maxDirectories: 6 })).truncated, false);
  assertEquals((await walkPaths(fx, "", { maxDirectories: 5 })).truncated, true);
  assertEquals(
    (await walkPaths(fx, "", { maxDirectories: 6, followDirectorySymlinks: true })).truncated,
    false,
  );
  assertEquals(await walkPaths(fx, "", { maxDepth: 0, maxDirectories: 1 }), {
    entries: ["d /.hidden", "f /a.txt", "d /dir", "d /empty"],
    errors: [],
    truncated: false,
  });
});

Deno.test("fs/walk validates limits and handles odd roots", async () => {
  await using fx = await fixture();
  const path = fx.at("");
  assertEquals(await failure(walk({ path, options: options({ maxEntries: 0 }) })), {
    code: -32600,
    message: "filesystem walk limits must be greater than zero",
  });
  assertEquals(await failure(walk({ path, options: options({ maxDepth: 65 }) })), {
    code: -32600,
    message: "filesystem walk limits exceed maximums: depth=64, directories=10000, entries=50000",
  });
  await walk({
    path,
    options: options({ maxDepth: 64, maxDirectories: 10_000, maxEntries: 50_000 }),
  });
  const empty = { entries: [], errors: [], truncated: false };
  assertEquals(await walk({ path: fx.at("a.txt"), options: options() }), empty);
  assertEquals(await walk({ path: fx.at("fifo"), options: options() }), empty);
  assertEquals(await failure(walk({ path: fx.at("missing"), options: options() })), NOT_FOUND);
  assertEquals(await failure(walk({ path: fx.at("broken"), options: options() })), NOT_FOUND);
  assertEquals(
    await failure(walk({ path: fx.at("a.txt/x"), options: options() })),
    NOT_A_DIRECTORY,
  );
});

Deno.test("fs/walk refuses maxDirectories 10 001 and maxEntries 50 001 like maxDepth 65", async () => {
  await using fx = await fixture();
  const path = fx.at("");
  const overMaximums = {
    code: -32600,
    message: "filesystem walk limits exceed maximums: depth=64, directories=10000, entries=50000",
  };
  for (const over of [{ maxDirectories: 10_001 }, { maxEntries: 50_001 }]) {
    assertEquals(await failure(walk({ path, options: options(over) })), overMaximums);
  }
});

Deno.test("fs/walk skips self-referencing links without reporting them", async () => {
  await using fx = await fixture();
  await Deno.symlink("self", `${fx.dir}/empty/self`);
  await Deno.writeTextFile(`${fx.dir}/empty/z`, "");
  assertEquals(await walkPaths(fx, "empty", { followDirectorySymlinks: true }), {
    entries: ["f /empty/z"],
    errors: [],
    truncated: false,
  });
});

Deno.test("FileHandleTable reads blocks with exact eof semantics", async () => {
  await using fx = await fixture();
  const table = new FileHandleTable();
  assertEquals(await open(table, { handleId: "h1", path: fx.at("a.txt") }), { handleId: "h1" });
  assertEquals(await failure(open(table, { handleId: "h1", path: fx.at("a.txt") })), {
    code: -32600,
    message: "file handle `h1` already exists",
  });
  const read = (offset: number, len: number) => table.readBlock({ handleId: "h1", offset, len });
  assertEquals(await read(0, 5), { chunk: "aGVsbG8=", eof: false });
  assertEquals(await read(5, 100), { chunk: "IHdvcmxkCg==", eof: true });
  assertEquals(await read(0, 12), { chunk: "aGVsbG8gd29ybGQK", eof: false });
  assertEquals(await read(12, 5), { chunk: "", eof: true });
  assertEquals(await read(1000, 5), { chunk: "", eof: true });
  const badLength = {
    code: -32600,
    message: "file read block length must be between 1 and 1048576",
  };
  assertEquals(await failure(read(0, 0)), badLength);
  assertEquals(await failure(read(0, 1_048_577)), badLength);
  assertEquals(
    await failure(table.writeBlock({ handleId: "h1", offset: 0, chunk: new Uint8Array([1]) })),
    { code: -32603, message: "Bad file descriptor (os error 9)" },
  );
  assertEquals(await table.close({ handleId: "h1" }), {});
  assertEquals(await table.close({ handleId: "h1" }), {});
  assertEquals(await failure(read(0, 5)), { code: -32004, message: "unknown file handle `h1`" });
});

Deno.test("fs/readBlock reads a block of exactly 1 MiB and refuses a len of 1 MiB + 1", async () => {
  await using fx = await fixture();
  await Deno.writeFile(`${fx.dir}/big`, new Uint8Array(1_048_577).fill(0x62));
  const table = new FileHandleTable();
  await open(table, { handleId: "r", path: fx.at("big") });
  const block = await table.readBlock({ handleId: "r", offset: 0, len: 1_048_576 });
  assertEquals(block.eof, false);
  assertEquals(Uint8Array.fromBase64(block.chunk).length, 1_048_576);
  assertEquals(await failure(table.readBlock({ handleId: "r", offset: 0, len: 1_048_577 })), {
    code: -32600,
    message: "file read block length must be between 1 and 1048576",
  });
  await table.close({ handleId: "r" });
});

Deno.test("fs/writeBlock writes a block of exactly 1 MiB and refuses one of 1 MiB + 1", async () => {
  await using fx = await fixture();
  const table = new FileHandleTable();
  await open(table, { handleId: "w", path: fx.at("out"), mode: "replace" });
  const write = (bytes: number) =>
    table.writeBlock({ handleId: "w", offset: 0, chunk: new Uint8Array(bytes).fill(0x63) });
  assertEquals(await write(1_048_576), {});
  assertEquals(await failure(write(1_048_577)), {
    code: -32600,
    message: "file write block length must be between 1 and 1048576",
  });
  await table.close({ handleId: "w" });
  assertEquals((await Deno.stat(`${fx.dir}/out`)).size, 1_048_576);
});

Deno.test("an open read handle keeps the file it opened when fs/writeFile replaces the path", async () => {
  // Deliberate difference: the reference writes in place, so its handle would read "new!".
  await using fx = await fixture();
  const table = new FileHandleTable();
  await open(table, { handleId: "h", path: fx.at("a.txt") });
  await writeFile({ path: fx.at("a.txt"), dataBase64: btoa("new!") });
  assertEquals(await table.readBlock({ handleId: "h", offset: 0, len: 100 }), {
    chunk: btoa("hello world\n"),
    eof: true,
  });
  await open(table, { handleId: "h2", path: fx.at("a.txt") });
  assertEquals(await table.readBlock({ handleId: "h2", offset: 0, len: 100 }), {
    chunk: btoa("new!"),
    eof: true,
  });
  await table.close({ handleId: "h" });
  await table.close({ handleId: "h2" });
});

Deno.test("FileHandleTable writes blocks positionally, zero-filling gaps", async () => {
  await using fx = await fixture();
  const table = new FileHandleTable();
  await Deno.writeTextFile(`${fx.dir}/out.txt`, "old content that gets truncated");
  await open(table, { handleId: "w1", path: fx.at("out.txt"), mode: "replace" });
  assertEquals((await Deno.stat(`${fx.dir}/out.txt`)).size, 0, "truncated at open");
  const write = (offset: number, bytes: Uint8Array) =>
    table.writeBlock({ handleId: "w1", offset, chunk: bytes });
  const enc = (s: string) => new TextEncoder().encode(s);
  assertEquals(await write(0, enc("hello\n")), {});
  await write(6, enc("world\n"));
  await write(20, enc("!"));
  assertEquals(await failure(write(0, new Uint8Array())), {
    code: -32600,
    message: "file write block length must be between 1 and 1048576",
  });
  // The wire's 9223372036854775807 arrives as the nearest number, 2^63.
  assertEquals(await failure(write(Number(9_223_372_036_854_775_807n), enc("x"))), {
    code: -32600,
    message: "file write range exceeds the signed 64-bit file offset limit",
  });
  assertEquals(await failure(table.readBlock({ handleId: "w1", offset: 0, len: 4 })), {
    code: -32603,
    message: "Bad file descriptor (os error 9)",
  });
  await table.close({ handleId: "w1" });
  assertEquals(
    await Deno.readFile(`${fx.dir}/out.txt`),
    Uint8Array.fromBase64("aGVsbG8Kd29ybGQKAAAAAAAAAAAh"),
  );
});

Deno.test("FileHandleTable rejects bad ids, non-files and the 129th handle", async () => {
  await using fx = await fixture();
  const table = new FileHandleTable();
  const tooLong = { code: -32600, message: "file handle ID must not exceed 32 bytes" };
  assertEquals(
    await failure(open(table, { handleId: "x".repeat(33), path: fx.at("a.txt") })),
    tooLong,
  );
  assertEquals(
    await failure(open(table, { handleId: "é".repeat(17), path: fx.at("a.txt") })),
    tooLong,
  );
  assertEquals(
    await failure(table.readBlock({ handleId: "x".repeat(33), offset: 0, len: 0 })),
    tooLong,
  );
  assertEquals(await failure(table.close({ handleId: "x".repeat(33) })), tooLong);
  await open(table, { handleId: "é".repeat(16), path: fx.at("a.txt") });
  await open(table, { handleId: "", path: fx.at("link") });
  assertEquals(await failure(open(table, { handleId: "m", path: fx.at("missing") })), NOT_FOUND);
  assertEquals(await failure(open(table, { handleId: "d", path: fx.at("dir") })), {
    code: -32600,
    message: `path \`${fx.dir}/dir\` is not a file`,
  });
  assertEquals(await failure(open(table, { handleId: "p", path: fx.at("fifo") })), {
    code: -32600,
    message: `path \`${fx.dir}/fifo\` is not a file`,
  });
  const replace = "replace" as const;
  assertEquals(
    await failure(open(table, { handleId: "p", path: fx.at("fifo"), mode: replace })),
    { code: -32603, message: "No such device or address (os error 6)" },
  );
  assertEquals(
    await failure(open(table, { handleId: "d", path: fx.at("dir"), mode: replace })),
    IS_A_DIRECTORY,
  );
  assertEquals(
    await failure(open(table, { handleId: "n", path: fx.at("nodir/x"), mode: replace })),
    NOT_FOUND,
  );
  for (let i = 2; i < 128; i++) await open(table, { handleId: `h${i}`, path: fx.at("a.txt") });
  assertEquals(table.size, 128);
  assertEquals(await failure(open(table, { handleId: "one-more", path: fx.at("a.txt") })), {
    code: -32600,
    message: "at most 128 file handles may be open per connection",
  });
  assertEquals(
    await failureKind(open(table, { handleId: "one-more", path: fx.at("a.txt") })),
    "limitReached",
  );
  table.closeAll();
  assertEquals(table.size, 0);
  assertEquals(await failure(table.readBlock({ handleId: "h2", offset: 0, len: 1 })), {
    code: -32004,
    message: "unknown file handle `h2`",
  });
});

Deno.test("MissingWatchTable fires once when the first missing component appears", async () => {
  await using fx = await fixture();
  const table = new MissingWatchTable();
  const fired: number[] = [];
  const deep = Promise.withResolvers<void>();
  const notify = (id: number) => {
    fired.push(id);
    if (id === 4) deep.resolve();
  };
  assertEquals(
    await watchMissing(table, { watchId: 4, missing: [fx.at("deep/missing/path")] }, notify),
    { watching: true },
  );
  await Deno.mkdir(`${fx.dir}/deep`);
  await deep.promise;
  await Deno.mkdir(`${fx.dir}/deep/missing`);
  assertEquals(table.size, 0);
  // One-shot: the id can be used again.
  const again = Promise.withResolvers<number>();
  assertEquals(
    await watchMissing(table, { watchId: 4, missing: [fx.at("deep/missing/path")] }, again.resolve),
    { watching: true },
  );
  await Deno.writeTextFile(`${fx.dir}/deep/missing/path`, "");
  assertEquals(await again.promise, 4);
  assertEquals(fired, [4]);
  await table.closeAll();
});

Deno.test("MissingWatchTable fires watches that share a directory independently", async () => {
  await using fx = await fixture();
  const table = new MissingWatchTable();
  const three = Promise.withResolvers<number>();
  const four = Promise.withResolvers<number>();
  await watchMissing(table, { watchId: 3, missing: [fx.at("one")] }, three.resolve);
  await watchMissing(table, { watchId: 4, missing: [fx.at("two")] }, four.resolve);
  await Deno.mkdir(`${fx.dir}/one`);
  assertEquals(await three.promise, 3);
  assertEquals(table.size, 1);
  await Deno.writeTextFile(`${fx.dir}/two`, "");
  assertEquals(await four.promise, 4);
  await table.closeAll();
});

Deno.test("MissingWatchTable watches at most 64 distinct paths at once, as the reference does", async () => {
  await using fx = await fixture();
  const table = new MissingWatchTable();
  const never = () => {
    throw new Error("must not fire");
  };
  const paths = (n: number) => Array.from({ length: n }, (_, i) => fx.at(`m${i}`));
  assertEquals(await watchMissing(table, { watchId: 1, missing: paths(64) }, never), {
    watching: true,
  });
  assertEquals(await watchMissing(table, { watchId: 2, missing: paths(65) }, never), {
    watching: false,
  });
  const repeated = Array.from({ length: 200 }, () => fx.at("same"));
  assertEquals(await watchMissing(table, { watchId: 3, missing: repeated }, never), {
    watching: true,
  });
  assertEquals(table.size, 2);
  await table.closeAll();
});

Deno.test("MissingWatchTable holds at most 1024 watches per connection; a fired one frees its place", async () => {
  await using fx = await fixture();
  const table = new MissingWatchTable();
  const fired = Promise.withResolvers<number>();
  const notify = (id: number) => fired.resolve(id);
  for (let id = 0; id < 1024; id++) {
    const result = await watchMissing(table, { watchId: id, missing: [fx.at(`w${id}`)] }, notify);
    assertEquals(result, { watching: true });
  }
  assertEquals(
    await failure(watchMissing(table, { watchId: 1024, missing: [fx.at("x")] }, notify)),
    {
      code: -32600,
      message: "at most 1024 missing-path watches may be registered per connection",
    },
  );
  assertEquals(
    await failureKind(watchMissing(table, { watchId: 1024, missing: [fx.at("x")] }, notify)),
    "limitReached",
  );
  await Deno.writeTextFile(`${fx.dir}/w7`, "");
  assertEquals(await fired.promise, 7);
  assertEquals(table.size, 1023);
  assertEquals(await watchMissing(table, { watchId: 1024, missing: [fx.at("x")] }, notify), {
    watching: true,
  });
  await table.closeAll();
});

Deno.test("MissingWatchTable registers nothing for existing paths, empty lists and taken ids", async () => {
  await using fx = await fixture();
  const table = new MissingWatchTable();
  const never = () => {
    throw new Error("must not fire");
  };
  const no = { watching: false };
  assertEquals(await watchMissing(table, { watchId: 1, missing: [fx.at("a.txt")] }, never), no);
  assertEquals(await watchMissing(table, { watchId: 1, missing: [fx.at("broken")] }, never), no);
  assertEquals(await watchMissing(table, { watchId: 2, missing: [] }, never), no);
  assertEquals(
    await watchMissing(table, { watchId: 3, missing: [fx.at("zz"), fx.at("a.txt/x")] }, never),
    no,
  );
  assertEquals(await watchMissing(table, { watchId: 5, missing: [fx.at("zz")] }, never), {
    watching: true,
  });
  assertEquals(await watchMissing(table, { watchId: 5, missing: [fx.at("other")] }, never), no);
  await assertRejects(watchMissing(table, { watchId: 6, missing: ["/rel"] }, never), RpcError);
  await table.closeAll();
  assertEquals(table.size, 0);
  await Deno.mkdir(`${fx.dir}/zz`); // closed: nothing fires
});
