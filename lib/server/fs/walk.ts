/**
 * `fs/walk`: a bounded breadth-first listing of a directory tree (docs/protocol.md §10.9).
 *
 * @module
 */

import { invalidRequest } from "../../protocol/errors.ts";
import { fsError } from "../host/os_errors.ts";
import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { childUri, joinPath, pathFromUri, uriFromPath } from "../host/path_uri.ts";
import { linkTargetInScope } from "../host/stat.ts";
import { mayRead } from "../host/permissions.ts";
import {
  close,
  F,
  fsSyscallsAvailable,
  isType,
  listDirectoryEntries,
  openat,
  statx,
} from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { canonicalAt, linkTargetAt, metadataAt, openDirectoryToList } from "./inspect_at.ts";
import { readsScoped } from "./resolve.ts";

/** Largest accepted `maxDepth`. */
const MAX_DEPTH = 64;
/** Largest accepted `maxDirectories`. */
const MAX_DIRECTORIES = 10_000;
/** Largest accepted `maxEntries`. */
const MAX_ENTRIES = 50_000;
/**
 * Most characters of paths and messages one walk reply carries (16 Mi): an
 * entry or error that would take the reply past it is left out and the walk
 * stops with `truncated: true`, as at `maxEntries`, so long paths cannot make
 * the reply unbounded.
 */
export const WALK_REPLY_CHARS = 16 * 1024 * 1024;

/** The `options` member of `fs/walk`: limits and symlink handling. */
export type WalkOptions = ParamsOf<"fs/walk">["options"];

type WalkResult = ResultOf<"fs/walk">;
type WalkError = WalkResult["errors"][number];

interface PendingDirectory {
  path: string;
  /** Its `PathUri` (its entries' URIs extend it). */
  uri: string;
  /** Depth of this directory's children. */
  depth: number;
}

/**
 * `fs/walk`: lists a directory tree breadth-first within the given limits.
 *
 * Each directory is read once per walk (by canonical path), so symlink loops
 * end. A root that is a file, or a symlink when `followDirectorySymlinks` is
 * false, gives an empty result.
 *
 * @param root Native absolute path of the root, its read access already checked.
 * @param options Limits and symlink handling.
 * @param plans The sandbox plans whose denied paths the walk must not list. Under a read
 * scope or a sandbox (with `--allow-ffi`) each directory is opened below the read scope's
 * root, its real path checked, and listed and described through its descriptor, so a link
 * swapped in cannot make the walk list a denied directory.
 *
 * @example List a tree
 * ```ts
 * import { walk } from "./walk.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/f`, "");
 * const options = { maxDepth: 1, maxDirectories: 10, maxEntries: 10, followDirectorySymlinks: false };
 * console.log((await walk(dir, options)).entries.length); // 1
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function walk(
  root: string,
  options: WalkOptions,
  plans: readonly SandboxPlan[] = [],
): Promise<WalkResult> {
  const { maxDepth, maxDirectories, maxEntries, followDirectorySymlinks } = options;
  // maxDepth 0 is valid: it lists the root's children only.
  if (maxDirectories === 0 || maxEntries === 0) {
    throw invalidRequest("filesystem walk limits must be greater than zero");
  }
  if (maxDepth > MAX_DEPTH || maxDirectories > MAX_DIRECTORIES || maxEntries > MAX_ENTRIES) {
    throw invalidRequest(
      `filesystem walk limits exceed maximums: depth=${MAX_DEPTH}, ` +
        `directories=${MAX_DIRECTORIES}, entries=${MAX_ENTRIES}`,
    );
  }
  const result: WalkResult = { entries: [], errors: [], truncated: false };
  let rootCanonical: string;
  const scoped = readsScoped(root, plans);
  try {
    if (scoped) {
      const info = metadataAt(root, plans);
      if (!info.isDirectory || (info.isSymlink && !followDirectorySymlinks)) return result;
      rootCanonical = pathFromUri(canonicalAt(root, plans).path);
    } else {
      const info = await Deno.stat(root);
      const link = await Deno.lstat(root);
      if (!info.isDirectory || (link.isSymlink && !followDirectorySymlinks)) return result;
      rootCanonical = await Deno.realPath(root);
    }
  } catch (err) {
    throw fsError(err);
  }
  const prune = options.pruneHiddenDirectories ?? false;
  const visited = new Set([rootCanonical]);
  const canonical = new Map([[root, rootCanonical]]);
  const queue: PendingDirectory[] = [{ path: root, uri: uriFromPath(root), depth: 0 }];
  let expanded = 0;
  let counted = 0;
  // Characters of the reply so far: every entry's path, every error's path and message.
  let chars = 0;
  /** Adds an error unless it would take the reply past its characters (then the walk is truncated). */
  const addError = (path: string, err: unknown): boolean => {
    const error = { path: uriFromPath(path), message: fsError(err).message };
    if (chars + error.path.length + error.message.length > WALK_REPLY_CHARS) {
      result.truncated = true;
      return false;
    }
    chars += error.path.length + error.message.length;
    result.errors.push(error);
    return true;
  };
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (expanded >= maxDirectories) {
      result.truncated = true;
      break;
    }
    expanded++;
    const listing = scoped ? listAt(next.path, plans) : await listPath(next.path);
    if (listing instanceof Error && !addError(next.path, listing)) return result;
    const names = listing instanceof Error ? [] : listing.names.sort(compareCodePoints);
    try {
      for (const name of names) {
        const path = joinPath(next.path, name);
        let link: Entry;
        try {
          link = await (listing as Listing).entry(name);
        } catch (err) {
          if (!addError(path, err)) return result;
          continue;
        }
        let isDirectory = link.isDirectory;
        let linkReal: string | undefined;
        if (link.isSymlink) {
          // Dangling, looping or out of the read scope: skipped and not counted, as the
          // reference skips a dangling link.
          const target = await (listing as Listing).target(name);
          if (target === undefined) continue;
          isDirectory = target.isDirectory && followDirectorySymlinks;
          linkReal = target.real;
        }
        // Counted toward maxEntries even when not listed (a link to a file, a FIFO...).
        const uri = link.isFile || isDirectory ? childUri(next.uri, name) : "";
        if (counted >= maxEntries || chars + uri.length > WALK_REPLY_CHARS) {
          result.truncated = true;
          return result;
        }
        counted++;
        chars += uri.length;
        if (link.isFile) {
          result.entries.push({ path: uri, kind: "file" });
        } else if (isDirectory) {
          result.entries.push({ path: uri, kind: "directory" });
          if (next.depth >= maxDepth || (prune && name.startsWith("."))) continue;
          const parent = canonical.get(next.path);
          const real = link.isSymlink || parent === undefined ? linkReal : joinPath(parent, name);
          if (real === undefined || visited.has(real)) continue;
          if (!mayRead(real)) continue; // A link out of the server's read scope is listed, not entered.
          visited.add(real);
          canonical.set(path, real);
          queue.push({ path, uri, depth: next.depth + 1 });
        }
      }
    } finally {
      if (!(listing instanceof Error)) listing.close();
    }
    canonical.delete(next.path);
  }
  return result;
}

/** What a walk needs of an entry (not followed). */
interface Entry {
  isFile: boolean;
  isDirectory: boolean;
  isSymlink: boolean;
}

/** One directory being listed: its names, each entry, what a link leads to. */
interface Listing {
  names: string[];
  /** The entry itself; throws when it cannot be described. */
  entry(name: string): Entry | Promise<Entry>;
  /**
   * A link's target and, for a directory, its real path (the only one the walk enters);
   * `undefined` when it leads nowhere readable.
   */
  target(
    name: string,
  ):
    | { isDirectory: boolean; real?: string }
    | undefined
    | Promise<
      { isDirectory: boolean; real?: string } | undefined
    >;
  close(): void;
}

/**
 * Whether a listed name may be a lossy decoding (it holds U+FFFD): such an entry is described by
 * looking that name up, as the reference does (which fails for a name that is not UTF-8),
 * not by the type the listing reports.
 */
function mayBeLossy(name: string): boolean {
  return name.includes("\uFFFD");
}

/**
 * A directory listed by path (nothing to protect: no read scope, no sandbox). Each entry's type
 * is the one the listing reports (looked up with `lstat` where the file system does not say),
 * except for a name holding U+FFFD, which `lstat` describes. With the file system calls the
 * listing is one `getdents64` per few hundred entries (`listDirectoryEntries`); without them,
 * `Deno.readDir`.
 */
async function listPath(path: string): Promise<Listing | Error> {
  let listed: Listed;
  try {
    listed = fsSyscallsAvailable() ? describedEntries(path) : await readDirEntries(path);
  } catch (err) {
    return err as Error;
  }
  const { names, types } = listed;
  return {
    names,
    entry: (name) => {
      const type = mayBeLossy(name) ? 0 : types.get(name)!;
      if (typeof type !== "number") return type;
      if (type === 0) return Deno.lstat(joinPath(path, name));
      return {
        isFile: type === F.S_IFREG,
        isDirectory: type === F.S_IFDIR,
        isSymlink: type === F.S_IFLNK,
      };
    },
    target: async (name) => {
      const full = joinPath(path, name);
      const info = await linkTargetInScope(full);
      if (info === undefined) return undefined;
      if (!info.isDirectory) return { isDirectory: false };
      try {
        return { isDirectory: info.isDirectory, real: await Deno.realPath(full) };
      } catch {
        return undefined;
      }
    },
    close() {},
  };
}

/** A directory's names (two names that are not UTF-8 may read alike) and what each is. */
interface Listed {
  names: string[];
  /** By name: the entry, or the type the directory reports (`0`: not said). */
  types: Map<string, Entry | number>;
}

/** A directory listed through its descriptor, with the types it reports. */
function describedEntries(path: string): Listed {
  const fd = openat(F.AT_FDCWD, path, F.O_RDONLY | F.O_DIRECTORY | F.O_NONBLOCK);
  try {
    const entries = listDirectoryEntries(fd);
    return {
      names: entries.map((entry) => entry.name),
      types: new Map(entries.map((entry) => [entry.name, entry.type])),
    };
  } finally {
    close(fd);
  }
}

/** A directory listed by `Deno.readDir`. */
async function readDirEntries(path: string): Promise<Listed> {
  const listed: Listed = { names: [], types: new Map() };
  for await (const entry of Deno.readDir(path)) {
    listed.names.push(entry.name);
    listed.types.set(entry.name, entry);
  }
  return listed;
}

/** A directory opened below the read scope's root, checked, and listed through its descriptor. */
function listAt(path: string, plans: readonly SandboxPlan[]): Listing | Error {
  let fd: number;
  try {
    fd = openDirectoryToList(path, plans);
  } catch (err) {
    return err as Error;
  }
  const names: string[] = [];
  const types = new Map<string, number>();
  try {
    for (const entry of listDirectoryEntries(fd)) {
      names.push(entry.name);
      types.set(entry.name, entry.type);
    }
  } catch (err) {
    close(fd);
    return err as Error;
  }
  return {
    names,
    entry: (name) => {
      // The type the listing reports, as in `listPath`; statx where it says nothing.
      const type = mayBeLossy(name) ? 0 : types.get(name)!;
      if (type !== 0) {
        return {
          isFile: type === F.S_IFREG,
          isDirectory: type === F.S_IFDIR,
          isSymlink: type === F.S_IFLNK,
        };
      }
      const stat = statx(fd, name, false);
      return {
        isFile: isType(stat, F.S_IFREG),
        isDirectory: isType(stat, F.S_IFDIR),
        isSymlink: isType(stat, F.S_IFLNK),
      };
    },
    target: (name) => {
      const target = linkTargetAt(fd, name, plans);
      return target && { isDirectory: isType(target.stat, F.S_IFDIR), real: target.real };
    },
    close: () => close(fd),
  };
}

/**
 * A UTF-16 code unit mapped so that comparing mapped units orders strings by code point:
 * surrogates (U+D800–U+DFFF, halves of the characters above U+FFFF) move above U+E000–U+FFFF.
 */
function codePointRank(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit;
}

/** Orders two names by their code points (the reference's order), without copying them. */
function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const left = a.charCodeAt(i);
    const right = b.charCodeAt(i);
    if (left !== right) return codePointRank(left) - codePointRank(right);
  }
  return a.length - b.length;
}
