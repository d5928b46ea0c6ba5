import assert from "node:assert/strict";
import {
  AlreadyExistsError,
  connect,
  DirectoryNotEmptyError,
  type ExecClient,
  FsError,
  fsErrorOf,
  MessageTooLargeError,
  NotADirectoryError,
  NotFoundError,
  PermissionDeniedError,
  RemoteError,
} from "../mod.ts";
import { serveStdio, serveWebSocket } from "../lib/server/listen/listen.ts";

/** Runs `fn` with a client of a server in this process and a fresh temp dir (with awkward characters). */
async function withFs(fn: (client: ExecClient, dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "es fs %#" });
  const server = await serveWebSocket();
  try {
    await using client = await connect(server.url);
    await fn(client, dir);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Runs `fn` with a client of a stdio server in this process (over in-memory streams), a fresh
 * temp dir, and the methods of the requests the client sent so far (read off its byte stream).
 */
async function withCountedFs(
  options: { maxMessageBytes?: number },
  fn: (client: ExecClient, dir: string, sent: () => string[]) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "es fs counted" });
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const methods: string[] = [];
  let line = "";
  const decoder = new TextDecoder();
  const counted = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      const lines = (line + decoder.decode(chunk, { stream: true })).split("\n");
      line = lines.pop()!;
      for (const text of lines) {
        const method = (JSON.parse(text) as { method?: string }).method;
        if (method !== undefined) methods.push(method);
      }
      controller.enqueue(chunk);
    },
  });
  const piped = counted.readable.pipeTo(toServer.writable);
  const server = serveStdio({}, toServer.readable, fromServer.writable);
  try {
    const client = await connect({
      readable: fromServer.readable,
      writable: counted.writable,
    }, options);
    try {
      await fn(client, dir, () => methods.filter((m) => m !== "initialize" && m !== "initialized"));
    } finally {
      await client.close();
    }
    await server.finished;
    await piped;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return await promise.then(() => assert.fail("expected a rejection"), (err) => err);
}

Deno.test("client.fs writes, reads, lists, stats and removes files by plain path", async () => {
  await withFs(async (client, dir) => {
    const file = `${dir}/a b%.txt`;
    await client.fs.writeTextFile(file, "héllo\n");
    assert.equal(await Deno.readTextFile(file), "héllo\n");
    assert.equal(await client.fs.readTextFile(file), "héllo\n");
    assert.deepEqual(await client.fs.readFile(file), new TextEncoder().encode("héllo\n"));
    await client.fs.writeFile(file, new Uint8Array([0, 255]));
    assert.deepEqual(await Deno.readFile(file), new Uint8Array([0, 255]));
    await client.fs.mkdir(`${dir}/sub/deeper`, { recursive: true });
    const names = [];
    for await (const entry of client.fs.readDir(dir)) names.push(entry.name);
    assert.deepEqual(names.sort(), ["a b%.txt", "sub"]);
    const info = await client.fs.stat(file);
    assert.equal(info.size, 2);
    assert.equal(info.isFile, true);
    await client.fs.remove(file);
    await client.fs.remove(`${dir}/sub`, { recursive: true });
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
  });
});

Deno.test("client.fs paths may be file: URLs as well", async () => {
  await withFs(async (client, dir) => {
    const url = new URL(`file://${dir.split("/").map(encodeURIComponent).join("/")}/u.txt`);
    await client.fs.writeTextFile(url, "url");
    assert.equal(await Deno.readTextFile(`${dir}/u.txt`), "url");
    assert.equal(await client.fs.readTextFile(url.href), "url");
  });
});

Deno.test("client.fs.readDir reports entries as Deno.readDir does, symlinks as symlinks", async () => {
  await withFs(async (client, dir) => {
    await Deno.writeTextFile(`${dir}/file`, "");
    await Deno.mkdir(`${dir}/directory`);
    await Deno.symlink(`${dir}/file`, `${dir}/file-link`);
    await Deno.symlink(`${dir}/directory`, `${dir}/dir-link`);
    const sorted = (entries: Deno.DirEntry[]) =>
      entries.sort((a, b) => a.name.localeCompare(b.name));
    const remote: Deno.DirEntry[] = [];
    for await (const entry of client.fs.readDir(dir)) remote.push(entry);
    assert.deepEqual(
      sorted(remote),
      sorted(
        (await Array.fromAsync(Deno.readDir(dir))).map((
          { name, isFile, isDirectory, isSymlink },
        ) => ({
          name,
          isFile,
          isDirectory,
          isSymlink,
        })),
      ),
    );
  });
});

Deno.test("client.fs.stat follows symlinks and matches Deno.stat", async () => {
  await withFs(async (client, dir) => {
    await Deno.writeTextFile(`${dir}/file`, "12345");
    await Deno.symlink(`${dir}/file`, `${dir}/link`);
    const local = await Deno.stat(`${dir}/link`);
    const remote = await client.fs.stat(`${dir}/link`);
    assert.deepEqual(remote, {
      isFile: local.isFile,
      isDirectory: local.isDirectory,
      isSymlink: false,
      size: local.size,
      mtime: local.mtime,
      birthtime: local.birthtime,
    });
  });
});

Deno.test("client.fs errors are typed classes carrying the path", async (t) => {
  await withFs(async (client, dir) => {
    await Deno.writeTextFile(`${dir}/file`, "");
    await Deno.mkdir(`${dir}/full`);
    await Deno.writeTextFile(`${dir}/full/x`, "");
    await t.step("not found", async () => {
      const err = await rejection(client.fs.readFile(`${dir}/missing`));
      assert.ok(err instanceof NotFoundError, String(err));
      assert.equal(err.path, `${dir}/missing`);
      assert.equal(err.errno, "ENOENT");
      assert.ok(err.cause instanceof RemoteError);
    });
    await t.step("already exists", async () => {
      const err = await rejection(client.fs.mkdir(`${dir}/full`));
      assert.ok(err instanceof AlreadyExistsError, String(err));
      assert.equal(err.path, `${dir}/full`);
    });
    await t.step("not a directory", async () => {
      const err = await rejection(client.fs.mkdir(`${dir}/file/sub`, { recursive: true }));
      assert.ok(err instanceof NotADirectoryError, String(err));
    });
    await t.step("directory not empty", async () => {
      const err = await rejection(client.fs.remove(`${dir}/full`));
      assert.ok(err instanceof DirectoryNotEmptyError, String(err));
      assert.ok((await Deno.stat(`${dir}/full/x`)).isFile, "nothing was removed");
    });
    await t.step("a relative path is a TypeError before any request", async () => {
      await assert.rejects(() => client.fs.readFile("relative/path"), TypeError);
    });
  });
});

Deno.test("client.fs refusals of the server's permission flags are PermissionDeniedError", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const main = new URL("../main.ts", import.meta.url).pathname;
    await using client = await connect({
      command: Deno.execPath(),
      args: [
        "run",
        `--allow-read=${dir},${main}`,
        "--allow-env",
        "--allow-sys",
        main,
        "--listen",
        "stdio",
      ],
    });
    const err = await rejection(client.fs.readFile("/etc/hostname"));
    assert.ok(err instanceof PermissionDeniedError, String(err));
    assert.equal(err.path, "/etc/hostname");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fsErrorOf takes the reference's not-found code without data as NotFoundError", () => {
  const reference = new RemoteError({
    code: -32004,
    message: "No such file or directory (os error 2)",
  });
  assert.ok(fsErrorOf(reference, "/x") instanceof NotFoundError);
  const other = fsErrorOf(
    new RemoteError({ code: -32603, message: "File exists (os error 17)" }),
    "/x",
  );
  assert.ok(
    other instanceof FsError && !(other instanceof AlreadyExistsError),
    "no message matching",
  );
});

Deno.test("client.fs.open reads and writes at a moving position across several blocks", async () => {
  await withFs(async (client, dir) => {
    const size = 2 * 1024 * 1024 + 12345;
    const data = new Uint8Array(size).map((_, i) => (i * 7) & 0xff);
    const pieces = [
      data.subarray(0, 1000),
      data.subarray(1000, 1_500_000),
      data.subarray(1_500_000),
    ];
    await client.fs.writeFile(`${dir}/big`, ReadableStream.from(pieces));
    assert.deepEqual(await Deno.readFile(`${dir}/big`), data);
    await using file = await client.fs.open(`${dir}/big`);
    const out = new Uint8Array(size);
    let offset = 0;
    const buffer = new Uint8Array(700_000);
    for (let n = await file.read(buffer); n !== null; n = await file.read(buffer)) {
      out.set(buffer.subarray(0, n), offset);
      offset += n;
    }
    assert.equal(offset, size);
    assert.deepEqual(out, data);
  });
});

Deno.test("client.fs.realPath and copy", async () => {
  await withFs(async (client, dir) => {
    await Deno.mkdir(`${dir}/tree/inner`, { recursive: true });
    await Deno.writeTextFile(`${dir}/tree/inner/f`, "f");
    await Deno.symlink(`${dir}/tree`, `${dir}/link`);
    assert.equal(await client.fs.realPath(`${dir}/link/inner/../inner`), `${dir}/tree/inner`);
    await client.fs.copy(`${dir}/tree/inner/f`, `${dir}/g`);
    assert.equal(await Deno.readTextFile(`${dir}/g`), "f");
    await client.fs.copy(`${dir}/tree`, `${dir}/copy`, { recursive: true });
    assert.equal(await Deno.readTextFile(`${dir}/copy/inner/f`), "f");
  });
});

Deno.test("client.fs writes a file beyond 32 MiB in blocks and reads it back in one streamed reply", async () => {
  await withFs(async (client, dir) => {
    const size = 32 * 1024 * 1024 + 1;
    const data = new Uint8Array(size).map((_, i) => (i * 31) & 0xff);
    await client.fs.writeFile(`${dir}/big`, data);
    assert.deepEqual(await Deno.readFile(`${dir}/big`), data);
    const read = await client.fs.readFile(`${dir}/big`);
    assert.equal(read.length, size);
    assert.deepEqual(read, data);
  });
});

Deno.test("client.fs reads a 100 MiB file, whose one reply passes its 64 MiB message limit, again in blocks", async () => {
  await withFs(async (client, dir) => {
    const data = new Uint8Array(100 << 20).map((_, i) => (i * 13 + (i >> 16)) & 0xff);
    await Deno.writeFile(`${dir}/huge`, data);
    const read = await client.fs.readFile(`${dir}/huge`);
    assert.equal(read.length, data.length);
    assert.ok(read.every((byte, i) => byte === data[i]), "the bytes read back differ");
  });
});

Deno.test("client.fs.readFile takes one round trip: one fs/readFile, no stat first", async () => {
  await withCountedFs({}, async (client, dir, sent) => {
    await Deno.writeTextFile(`${dir}/f`, "one trip");
    assert.equal(await client.fs.readTextFile(`${dir}/f`), "one trip");
    assert.deepEqual(sent(), ["fs/readFile"]);
    const err = await rejection(client.fs.readFile(`${dir}/missing`));
    assert.ok(err instanceof NotFoundError, String(err));
    assert.equal(err.path, `${dir}/missing`);
    assert.deepEqual(sent(), ["fs/readFile", "fs/readFile"]);
  });
});

Deno.test("a reply over the client's maxMessageBytes fails its call with MessageTooLargeError instead of hanging, over stdio", async () => {
  await withCountedFs({ maxMessageBytes: 4096 }, async (client, dir) => {
    await Deno.writeFile(`${dir}/8k`, new Uint8Array(8192));
    const err = await rejection(
      client.request("fs/readFile", { path: `file://${encodeURI(dir)}/8k` }, { timeoutMs: 5000 }),
    );
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.limit, 4096);
    assert.equal(err.method, "fs/readFile");
    assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  });
});

Deno.test("a reply over the client's maxMessageBytes fails its call with MessageTooLargeError instead of hanging, over WebSocket", async () => {
  const dir = await Deno.makeTempDir();
  const server = await serveWebSocket();
  try {
    await using client = await connect(server.url, { maxMessageBytes: 4096 });
    await Deno.writeFile(`${dir}/8k`, new Uint8Array(8192));
    const err = await rejection(
      client.request("fs/readFile", { path: `file://${dir}/8k` }, { timeoutMs: 5000 }),
    );
    assert.ok(err instanceof MessageTooLargeError, String(err));
    assert.equal(err.limit, 4096);
    assert.equal(err.method, "fs/readFile");
    assert.equal(client.connected, true, "the connection stays open");
    assert.deepEqual(await client.methods["environment/status"](), { status: "ready" });
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("client.fs.readFile of a file whose reply passes maxMessageBytes reads it in blocks that fit", async () => {
  await withCountedFs({ maxMessageBytes: 8192 }, async (client, dir, sent) => {
    const data = new Uint8Array(20_000).map((_, i) => (i * 7) & 0xff);
    await Deno.writeFile(`${dir}/20k`, data);
    assert.deepEqual(await client.fs.readFile(`${dir}/20k`), data);
    const methods = sent();
    assert.deepEqual(methods.slice(0, 2), ["fs/readFile", "fs/open"]);
    assert.equal(methods.at(-1), "fs/close");
    // Blocks of 5376 bytes (their base64 and 1 KiB to spare fit 8 KiB): 4 with data, 1 at the end.
    assert.deepEqual(methods.slice(2, -1), Array(5).fill("fs/readBlock"));
  });
});
