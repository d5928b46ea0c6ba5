/**
 * `fs/copy` (docs/protocol.md §10.11).
 *
 * @module
 */

import { basename, dirname, resolve } from "../host/posix_path.ts";
import { invalidRequest } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import { joinPath } from "../host/path_uri.ts";
import { mayRead } from "../host/permissions.ts";
import {
  close,
  F,
  fchmod,
  fdPath,
  fstatat,
  mkdirat,
  openat,
  readInto,
  readlinkat,
  type Stat,
  symlinkat,
  writeAll,
} from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import {
  copyTreeAt,
  createAt,
  createDirectoryAt,
  openForRead,
  raceFreeWrites,
  writeScope,
} from "./resolve.ts";
import { lstatOrUndefined } from "../host/stat.ts";

/**
 * `fs/copy`: copies a regular file, a symlink (as a link) or, with
 * `recursive: true`, a directory tree (nested symlinks stay links; FIFOs,
 * sockets and devices inside it are skipped). Copying a file onto itself is
 * a successful no-op.
 *
 * @param source Native absolute path, its read access already checked.
 * @param destination Native absolute path, its write access already checked.
 * @param recursive Must be `true` to copy a directory.
 * @param plans The sandbox plans the copy must stay inside. With `--allow-ffi` the source is
 * opened once below the read scope's root and checked, and its type, link target and content
 * are read from that descriptor; every entry of the copy is created on a directory descriptor
 * below the destination's scope root (see `resolve.ts`): no symlink, dangling or swapped in,
 * leads it elsewhere.
 *
 * @example
 * ```ts
 * import { copy } from "./copy.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/a`, "hi");
 * await copy(`${dir}/a`, `${dir}/b`, false);
 * console.log(await Deno.readTextFile(`${dir}/b`)); // "hi"
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function copy(
  source: string,
  destination: string,
  recursive: boolean,
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/copy">> {
  try {
    if (raceFreeWrites()) {
      await copyOnDescriptors(source, destination, recursive, plans);
      return {};
    }
    const info = await Deno.lstat(source);
    if (info.isSymlink) {
      await Deno.symlink(await Deno.readLink(source), destination);
    } else if (info.isFile) {
      if (!(await isSameFile(info, destination))) await copyFileContent(source, destination);
    } else if (info.isDirectory) {
      await checkDirectoryCopy(await Deno.realPath(source), destination, recursive);
      if ((await lstatOrUndefined(destination)) !== undefined) throw osError("EEXIST");
      await Deno.mkdir(destination, { recursive: true });
      await copyTree(source, destination);
    } else {
      throw notCopyable();
    }
    return {};
  } catch (err) {
    throw fsError(err);
  }
}

function notCopyable(): Error {
  return invalidRequest("fs/copy only supports regular files, directories, and symlinks");
}

/**
 * {@linkcode copy} on descriptors: the source entry itself is opened below
 * the read scope's root without following it (`O_PATH | O_NOFOLLOW`) and
 * its real path checked; its type, mode, link target and content are all
 * read from that descriptor, and every destination entry is created below
 * the destination's scope root.
 */
async function copyOnDescriptors(
  source: string,
  destination: string,
  recursive: boolean,
  plans: readonly SandboxPlan[],
): Promise<void> {
  const entry = openForRead(source, plans, F.O_PATH | F.O_NOFOLLOW);
  try {
    const info = fstatat(entry, "", false)!;
    const type = info.mode & F.S_IFMT;
    const scope = writeScope(destination, plans);
    if (type === F.S_IFLNK) {
      const target = readlinkat(entry, "");
      await createAt(destination, false, scope, (dir, name) => symlinkat(target, dir, name));
    } else if (type === F.S_IFREG) {
      await createAt(destination, true, scope, (dir, name, existing) => {
        // A file copied onto itself: a no-op.
        if (existing?.dev === info.dev && existing.ino === info.ino) return;
        return copyFileAt(entry, info.mode, dir, name, existing);
      });
    } else if (type === F.S_IFDIR) {
      const from = fdPath(entry);
      await checkDirectoryCopy(from, destination, recursive);
      // Missing parents are created, as `mkdir -p` would.
      createDirectoryAt(dirname(destination), true, scope);
      await createAt(destination, false, scope, async (dir, name, existing) => {
        if (existing !== undefined) throw osError("EEXIST");
        // Checked again on the descriptors: the destination must not be inside the source.
        refuseCopyInto(from, joinPath(fdPath(dir), name));
        const tree = openat(entry, ".", F.O_RDONLY | F.O_DIRECTORY);
        try {
          mkdirat(dir, name);
          await copyTreeAt(tree, dir, name, plans, pump);
        } finally {
          close(tree);
        }
      });
    } else {
      throw notCopyable();
    }
  } finally {
    close(entry);
  }
}

/** Copies the regular file `entry` (an `O_PATH` descriptor) to `name` in `dir`. */
async function copyFileAt(
  entry: number,
  mode: number,
  dir: number,
  name: string,
  existing: Stat | undefined,
): Promise<void> {
  if (existing !== undefined && (existing.mode & F.S_IFMT) === F.S_IFIFO) throw osError("ENXIO");
  // The checked file itself, reopened for reading (never by its path).
  const from = openat(F.AT_FDCWD, `/proc/self/fd/${entry}`, F.O_RDONLY | F.O_NONBLOCK);
  try {
    const flags = F.O_WRONLY | F.O_CREAT | F.O_TRUNC | F.O_NOFOLLOW | F.O_NONBLOCK;
    const fd = openat(dir, name, flags, mode & 0o777);
    try {
      await pump(from, fd);
      fchmod(fd, mode & 0o7777);
    } finally {
      close(fd);
    }
  } finally {
    close(from);
  }
}

/**
 * Refuses a directory copy without `recursive`, or into itself or one of
 * its descendants (by the destination's path, before anything is created;
 * the descriptor-based copy checks again where it creates the copy).
 *
 * @param from Canonical path of the source directory.
 */
async function checkDirectoryCopy(
  from: string,
  destination: string,
  recursive: boolean,
): Promise<void> {
  if (!recursive) {
    throw invalidRequest("fs/copy requires recursive: true when sourcePath is a directory");
  }
  refuseCopyInto(from, await canonicalizeMissing(destination));
}

function refuseCopyInto(from: string, to: string): void {
  if (to === from || to.startsWith(from === "/" ? "/" : `${from}/`)) {
    throw invalidRequest("fs/copy cannot copy a directory to itself or one of its descendants");
  }
}

/** Copies everything `from` has left to `to`. */
async function pump(from: number, to: number): Promise<void> {
  const buffer = new Uint8Array(1 << 20);
  for (let n = await readInto(from, buffer); n !== null; n = await readInto(from, buffer)) {
    await writeAll(to, buffer.subarray(0, n));
  }
}

/**
 * Copies a regular file's content. Opening a FIFO without a reader for
 * writing blocks (and holds one of the runtime's blocking threads until a
 * reader comes), so a FIFO destination is refused with ENXIO first, as the
 * reference's non-blocking open reports it.
 */
async function copyFileContent(from: string, to: string): Promise<void> {
  let existing: Deno.FileInfo | undefined;
  try {
    existing = await Deno.stat(to);
  } catch {
    existing = undefined;
  }
  if (existing?.isFifo) throw osError("ENXIO");
  await Deno.copyFile(from, to);
}

async function isSameFile(source: Deno.FileInfo, destination: string): Promise<boolean> {
  if (!mayRead(destination)) return false;
  try {
    const info = await Deno.stat(destination);
    return info.dev === source.dev && info.ino !== null && info.ino === source.ino;
  } catch {
    return false;
  }
}

/** `realpath` of the longest existing prefix of `path`, plus the missing rest. */
async function canonicalizeMissing(path: string): Promise<string> {
  const rest: string[] = [];
  let current = path;
  while (true) {
    try {
      if (!mayRead(current)) return resolve(path);
      const real = await Deno.realPath(current);
      return rest.length === 0 ? real : joinPath(real, rest.reverse().join("/"));
    } catch (err) {
      const parent = dirname(current);
      if (parent === current || osErrorCode(err) !== "ENOENT") return resolve(path);
      rest.push(basename(current));
      current = parent;
    }
  }
}

async function copyTree(source: string, destination: string): Promise<void> {
  for await (const entry of Deno.readDir(source)) {
    const from = joinPath(source, entry.name);
    const to = joinPath(destination, entry.name);
    const info = await Deno.lstat(from);
    if (info.isSymlink) {
      await Deno.symlink(await Deno.readLink(from), to);
    } else if (info.isDirectory) {
      await Deno.mkdir(to);
      await copyTree(from, to);
    } else if (info.isFile) {
      await copyFileContent(from, to);
    }
  }
}
