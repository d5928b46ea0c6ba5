import assert from "node:assert/strict";
import {
  close,
  F,
  fdPath,
  fsSyscallsAvailable,
  fstatat,
  openat,
  openat2,
  preadAt,
  pwriteAt,
  readInto,
  readlinkat,
  readSmallFile,
  sealedMemoryFile,
  symlinkat,
  SyscallError,
  writeAll,
} from "../lib/server/host/fs_syscalls.ts";
import { walkBelow } from "../lib/server/fs/resolve.ts";

const SKIP = fsSyscallsAvailable() ? "" : " (skipped: needs Linux and --allow-ffi)";

/** `root/scope` holding `a/f`, links of every kind, and `root/outside/x` next to it. */
async function layout(): Promise<
  { root: string; scope: string; [Symbol.asyncDispose](): Promise<void> }
> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-walk-below-" }));
  const scope = `${root}/scope`;
  await Deno.mkdir(`${scope}/a`, { recursive: true });
  await Deno.mkdir(`${root}/outside`);
  await Deno.writeTextFile(`${scope}/a/f`, "f");
  await Deno.writeTextFile(`${root}/outside/x`, "x");
  const links: [string, string][] = [
    ["rel", "a/f"],
    ["rel-dir", "a"],
    ["abs", `${scope}/a/f`],
    ["abs-dir", `${scope}/a`],
    ["to-root", scope],
    ["abs-out", `${root}/outside/x`],
    ["abs-climb", `${scope}/../outside/x`],
    ["rel-climb", "../outside/x"],
    ["loop1", "loop2"],
    ["loop2", "loop1"],
    ["dangling", "a/missing"],
  ];
  for (const [name, target] of links) await Deno.symlink(target, `${scope}/${name}`);
  return {
    root,
    scope,
    async [Symbol.asyncDispose]() {
      await Deno.remove(root, { recursive: true });
    },
  };
}

/** What the walk opens for `rel` (its real path), or the errno name it fails with. */
function walked(scope: string, rel: string, flags: number = F.O_PATH): string {
  const rootfd = openat(F.AT_FDCWD, scope, F.O_PATH | F.O_DIRECTORY);
  try {
    const fd = walkBelow(rootfd, rel, flags, scope);
    try {
      const link = (fstatat(fd, "", false)!.mode & F.S_IFMT) === F.S_IFLNK;
      return `${fdPath(fd).slice(scope.length) || "/"}${link ? " (link)" : ""}`;
    } finally {
      close(fd);
    }
  } catch (err) {
    if (err instanceof SyscallError) return err.code;
    throw err;
  } finally {
    close(rootfd);
  }
}

Deno.test({
  name: `walkBelow follows links that stay below the root and refuses those that leave it${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using l = await layout();
    const cases: [string, string][] = [
      ["a/f", "/a/f"],
      ["rel", "/a/f"],
      ["rel-dir/f", "/a/f"],
      ["abs", "/a/f"],
      ["abs-dir/f", "/a/f"],
      ["to-root/a/f", "/a/f"],
      ["to-root", "/"],
      ["a/../a/f", "/a/f"],
      [".", "/"],
      ["abs-out", "EXDEV"],
      ["abs-climb", "EXDEV"],
      ["rel-climb", "EXDEV"],
      ["../outside/x", "EXDEV"],
      ["a/../../outside/x", "EXDEV"],
      ["loop1", "ELOOP"],
      ["a/f/x", "ENOTDIR"],
      ["dangling", "ENOENT"],
      ["missing", "ENOENT"],
    ];
    for (const [rel, expected] of cases) assert.equal(walked(l.scope, rel), expected, rel);
    // O_NOFOLLOW: the last component's link itself.
    assert.equal(walked(l.scope, "abs", F.O_PATH | F.O_NOFOLLOW), "/abs (link)");
    assert.equal(walked(l.scope, "abs-out", F.O_PATH | F.O_NOFOLLOW), "/abs-out (link)");
    assert.equal(walked(l.scope, "a/f", F.O_RDONLY | F.O_DIRECTORY), "ENOTDIR");
    // Where the kernel resolves the path below the root, the walk opens the same file.
    for (const [rel] of cases) {
      const rootfd = openat(F.AT_FDCWD, l.scope, F.O_PATH | F.O_DIRECTORY);
      try {
        const fd = openat2(rootfd, rel, F.O_PATH, 0, F.RESOLVE_BENEATH | F.RESOLVE_NO_MAGICLINKS);
        const kernel = fdPath(fd).slice(l.scope.length) || "/";
        close(fd);
        assert.equal(walked(l.scope, rel), kernel, rel);
      } catch (err) {
        if (!(err instanceof SyscallError)) throw err;
      } finally {
        close(rootfd);
      }
    }
  },
});

Deno.test("SyscallError takes its errno name from the OS error table (ESRCH was E3), an unlisted errno is E<number>", () => {
  assert.equal(new SyscallError(18, "openat2").code, "EXDEV");
  assert.equal(new SyscallError(3, "kill").code, "ESRCH");
  assert.equal(new SyscallError(95, "fallocate").code, "EOPNOTSUPP");
  assert.equal(new SyscallError(200, "x").code, "E200");
  assert.equal(new SyscallError(18, "openat2").message, "openat2 failed: EXDEV");
});

Deno.test({
  name: `reads and writes on the blocking pool that fail throw their own errno${SKIP}`,
  ignore: SKIP !== "",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "es-pool-errno-" });
    await Deno.writeTextFile(`${dir}/f`, "data");
    const dirfd = openat(F.AT_FDCWD, dir, F.O_RDONLY | F.O_DIRECTORY);
    const readOnly = openat(F.AT_FDCWD, `${dir}/f`, F.O_RDONLY);
    const code = async (call: Promise<unknown>) => {
      const err = await call.then(() => undefined, (e) => e);
      assert.ok(err instanceof SyscallError, String(err));
      return err.code;
    };
    try {
      assert.equal(await code(readInto(dirfd, new Uint8Array(8))), "EISDIR");
      assert.equal(await code(preadAt(dirfd, new Uint8Array(8), 0n)), "EISDIR");
      assert.equal(await code(writeAll(readOnly, new Uint8Array(8))), "EBADF");
      assert.equal(await code(pwriteAt(readOnly, new Uint8Array(8), 0n)), "EBADF");
      assert.equal(await preadAt(readOnly, new Uint8Array(8), 2n), 2);
    } finally {
      close(dirfd);
      close(readOnly);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    `the fs calls whose by-value first argument is a C string's address get that string: symlinkat links to its target, memfd_create names its file${SKIP}`,
  ignore: SKIP !== "",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "es-by-value-" });
    const dirfd = openat(F.AT_FDCWD, dir, F.O_RDONLY | F.O_DIRECTORY);
    const memfd = sealedMemoryFile("by-value-name", new TextEncoder().encode("sealed"));
    try {
      symlinkat("a/target", dirfd, "link");
      assert.equal(readlinkat(dirfd, "link"), "a/target");
      assert.equal(await Deno.readLink(`${dir}/link`), "a/target");
      assert.equal(fdPath(memfd), "/memfd:by-value-name (deleted)");
      assert.equal(readSmallFile(`/proc/self/fd/${memfd}`), "sealed");
    } finally {
      close(memfd);
      close(dirfd);
      await Deno.remove(dir, { recursive: true });
    }
  },
});
