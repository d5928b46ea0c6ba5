/**
 * `fs/copy` (docs/protocol.md §10.11).
 *
 * @module
 */

import { basename, dirname, resolve } from "node:path";
import { invalidRequest } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import { joinPath } from "../host/path_uri.ts";
import { mayRead } from "../host/permissions.ts";
import { lstatOrUndefined } from "./stat.ts";

/**
 * `fs/copy`: copies a regular file, a symlink (as a link) or, with
 * `recursive: true`, a directory tree (nested symlinks stay links; FIFOs,
 * sockets and devices inside it are skipped). Copying a file onto itself is
 * a successful no-op.
 *
 * @param source Native absolute path, its read access already checked.
 * @param destination Native absolute path, its write access already checked.
 * @param recursive Must be `true` to copy a directory.
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
): Promise<ResultOf<"fs/copy">> {
  try {
    const info = await Deno.lstat(source);
    if (info.isSymlink) {
      await Deno.symlink(await Deno.readLink(source), destination);
    } else if (info.isFile) {
      if (!(await isSameFile(info, destination))) await copyFileContent(source, destination);
    } else if (info.isDirectory) {
      if (!recursive) {
        throw invalidRequest("fs/copy requires recursive: true when sourcePath is a directory");
      }
      const from = await Deno.realPath(source);
      const to = await canonicalizeMissing(destination);
      if (to === from || to.startsWith(from === "/" ? "/" : `${from}/`)) {
        throw invalidRequest("fs/copy cannot copy a directory to itself or one of its descendants");
      }
      if ((await lstatOrUndefined(destination)) !== undefined) throw osError("EEXIST");
      await Deno.mkdir(destination, { recursive: true });
      await copyTree(source, destination);
    } else {
      throw invalidRequest("fs/copy only supports regular files, directories, and symlinks");
    }
    return {};
  } catch (err) {
    throw fsError(err);
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
