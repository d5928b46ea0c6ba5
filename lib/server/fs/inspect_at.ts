/**
 * `fs/getMetadata`, `fs/canonicalize` and `fs/readDirectory` on checked
 * descriptors: the path is opened below the read scope's root
 * ({@linkcode openForRead}), the real path of what was opened is checked
 * against the server's read permissions and the sandbox's denied paths, and
 * the answer is read from that descriptor (`statx` on it, its real path,
 * `getdents64` through it). A directory swapped for a symlink to a denied
 * one cannot redirect the answer.
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { RpcError } from "../../protocol/errors.ts";
import { osError } from "../host/os_errors.ts";
import { uriFromPath } from "../host/path_uri.ts";
import {
  close,
  F,
  fdPath,
  isType,
  listDirectoryEntries,
  openat2,
  type StatX,
  statx,
} from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { openForRead, readableAt } from "./resolve.ts";

/** Opens `path` for inspection; outside the read scope answers like a missing path. */
function openToInspect(path: string, plans: readonly SandboxPlan[], flags: number): number {
  try {
    return openForRead(path, plans, flags, true);
  } catch (err) {
    if (err instanceof RpcError) throw osError("ENOENT");
    throw err;
  }
}

/** Runs `use` on a descriptor and closes it. */
function using<T>(fd: number, use: (fd: number) => T): T {
  try {
    return use(fd);
  } finally {
    close(fd);
  }
}

/**
 * `fs/getMetadata` on descriptors: the entry itself (`O_PATH | O_NOFOLLOW`)
 * for `isSymlink`, and for a symlink what it leads to, each checked.
 *
 * @param path Native absolute path, its access checked lexically.
 * @param plans The request's and the server's sandbox plans.
 */
export function metadataAt(
  path: string,
  plans: readonly SandboxPlan[],
): ResultOf<"fs/getMetadata"> {
  const entry = using(
    openToInspect(path, plans, F.O_PATH | F.O_NOFOLLOW),
    (fd) => statx(fd, "", false),
  );
  const info = isType(entry, F.S_IFLNK)
    ? using(openToInspect(path, plans, F.O_PATH), (fd) => statx(fd, "", true))
    : entry;
  return metadataOf(entry, info);
}

/**
 * The `fs/getMetadata` answer from the `statx` of an entry and of what it leads to (the entry
 * itself unless it is a symlink).
 *
 * @param entry The entry's own `statx` (symlinks not followed).
 * @param info The `statx` of what it leads to.
 */
export function metadataOf(entry: StatX, info: StatX): ResultOf<"fs/getMetadata"> {
  return {
    isDirectory: isType(info, F.S_IFDIR),
    isFile: isType(info, F.S_IFREG),
    isSymlink: isType(entry, F.S_IFLNK),
    size: info.size,
    createdAtMs: info.createdMs ?? 0,
    modifiedAtMs: info.modifiedMs,
  };
}

/**
 * `fs/canonicalize` on a descriptor: the real path of what was opened and checked.
 *
 * @param path Native absolute path, its access checked lexically.
 * @param plans The request's and the server's sandbox plans.
 */
export function canonicalAt(
  path: string,
  plans: readonly SandboxPlan[],
): ResultOf<"fs/canonicalize"> {
  return { path: uriFromPath(using(openToInspect(path, plans, F.O_PATH), fdPath)) };
}

/** What a symlink leads to: its `statx` and real path. */
interface LinkTarget {
  /** `statx` of the target. */
  stat: StatX;
  /** Canonical path of the target. */
  real: string;
}

/**
 * What the symlink `name` in the directory `dirfd` leads to, or `undefined`
 * when it leads nowhere readable: dangling, looping, a magic link, out of
 * the read scope or denied by a plan.
 *
 * @param dirfd Descriptor of the directory holding the link.
 * @param name The link's name in it.
 * @param plans The request's and the server's sandbox plans.
 */
export function linkTargetAt(
  dirfd: number,
  name: string,
  plans: readonly SandboxPlan[],
): LinkTarget | undefined {
  let fd: number;
  try {
    fd = openat2(dirfd, name, F.O_PATH, 0, F.RESOLVE_NO_MAGICLINKS);
  } catch {
    return undefined;
  }
  return using(fd, (fd) => {
    const real = fdPath(fd);
    return readableAt(real, plans) ? { stat: statx(fd, "", true), real } : undefined;
  });
}

/**
 * Opens a directory to list it: below the read scope's root, its real path checked.
 *
 * @param path Native absolute path, its access checked lexically.
 * @param plans The request's and the server's sandbox plans.
 * @returns A read-only directory descriptor; close it.
 */
export function openDirectoryToList(path: string, plans: readonly SandboxPlan[]): number {
  return openForRead(path, plans, F.O_RDONLY | F.O_DIRECTORY | F.O_NONBLOCK);
}

/**
 * `fs/readDirectory` on descriptors: the directory is opened and checked,
 * listed through its descriptor, and each entry described relative to it
 * (a symlink answers for its target only where that is readable).
 *
 * @param path Native absolute path, its access checked lexically.
 * @param plans The request's and the server's sandbox plans.
 */
export function directoryAt(
  path: string,
  plans: readonly SandboxPlan[],
): ResultOf<"fs/readDirectory"> {
  return using(openDirectoryToList(path, plans), (dirfd) => {
    const entries: ResultOf<"fs/readDirectory">["entries"] = [];
    for (const { name: fileName, type } of listDirectoryEntries(dirfd)) {
      // The directory's own type when it gives one that is not a link: no lookup by a name
      // that may not be UTF-8.
      let info: Pick<StatX, "mode"> | undefined = type !== 0 && type !== F.S_IFLNK
        ? { mode: type }
        : undefined;
      try {
        info ??= statx(dirfd, fileName, false);
        if (isType(info, F.S_IFLNK)) info = linkTargetAt(dirfd, fileName, plans)?.stat;
      } catch {
        continue;
      }
      if (info === undefined) continue;
      entries.push({
        fileName,
        isDirectory: isType(info, F.S_IFDIR),
        isFile: isType(info, F.S_IFREG),
      });
    }
    return { entries };
  });
}
