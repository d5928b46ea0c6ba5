/**
 * The filesystem methods of SPEC §10 as plain async functions.
 *
 * Each function takes the method's params in wire shape (URIs as strings,
 * optional members `undefined` or `null`), checks the server's Deno
 * permissions for every path it touches, performs the operation and returns
 * the wire result. Failures are thrown as {@linkcode RpcError}s with the
 * reference server's codes and messages.
 *
 * @module
 */

import { decodeBase64 } from "../../protocol/base64.ts";
import { basename, dirname, resolve } from "node:path";
import { invalidRequest } from "../../protocol/errors.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import { joinPath, pathFromUri, uriFromPath } from "../host/path_uri.ts";
import {
  mayRead,
  mayWrite,
  permissionDenied,
  requireRead,
  requireReadOrMissing,
  requireWrite,
} from "../host/permissions.ts";

export { walk } from "./walk.ts";
export type { WalkEntry, WalkError, WalkOptions, WalkParams, WalkResult } from "./walk.ts";
export { FileHandleTable } from "./handles.ts";
export type {
  CloseParams,
  OpenParams,
  OpenResult,
  ReadBlockParams,
  ReadBlockResult,
  WriteBlockParams,
} from "./handles.ts";
export { MissingWatchTable } from "./watch.ts";
export type { WatchMissingParams, WatchMissingResult } from "./watch.ts";

/** The empty result object `{}` most fs methods return. */
export type EmptyResult = Record<string, never>;

/** Largest file `fs/readFile` returns: 512 MiB, as the reference. */
export const READ_FILE_LIMIT = 536_870_912;

/** Maximum number of symlinks followed when resolving a write target, as Linux. */
const MAX_SYMLINK_HOPS = 40;

/** Params of `fs/readFile`. */
export interface ReadFileParams {
  /** `file:` URI of the file. */
  path: string;
}

/** Result of `fs/readFile`. */
export interface ReadFileResult {
  /** The whole content, standard base64. */
  dataBase64: string;
}

/**
 * `fs/readFile`: returns a regular file's content (symlinks followed).
 *
 * Files larger than {@linkcode READ_FILE_LIMIT} are refused with `-32600`;
 * read those with `fs/open` and `fs/readBlock` instead.
 *
 * @param params `{path}`.
 */
export async function readFile(params: ReadFileParams): Promise<ReadFileResult> {
  const path = pathFromUri(params.path);
  requireRead(path);
  try {
    // stat before open: opening a FIFO for reading would block.
    assertReadableFile(path, await Deno.stat(path));
    using file = await Deno.open(path, { read: true });
    const info = await file.stat();
    assertReadableFile(path, info);
    const data = await readToEnd(file, info.size);
    return { dataBase64: data.toBase64() };
  } catch (err) {
    throw fsError(err);
  }
}

function assertReadableFile(path: string, info: Deno.FileInfo): void {
  if (!info.isFile) throw invalidRequest(`path \`${path}\` is not a file`);
  if (info.size > READ_FILE_LIMIT) {
    throw invalidRequest(`file is too large to read: limit is ${READ_FILE_LIMIT} bytes`);
  }
}

/** Reads the rest of `file`, expecting about `expected` bytes and enforcing the limit. */
async function readToEnd(file: Deno.FsFile, expected: number): Promise<Uint8Array> {
  let data = new Uint8Array(expected);
  let filled = 0;
  while (true) {
    if (filled === data.length) {
      // The file grew since `stat`: make room, within the limit.
      if (data.length >= READ_FILE_LIMIT) {
        if ((await file.read(new Uint8Array(1))) === null) return data;
        throw invalidRequest(`file is too large to read: limit is ${READ_FILE_LIMIT} bytes`);
      }
      const grown = new Uint8Array(Math.min(READ_FILE_LIMIT, Math.max(65_536, data.length * 2)));
      grown.set(data);
      data = grown;
    }
    const n = await file.read(data.subarray(filled));
    if (n === null) return data.subarray(0, filled);
    filled += n;
  }
}

/** Params of `fs/writeFile`. */
export interface WriteFileParams {
  /** `file:` URI of the file. */
  path: string;
  /** The new content, standard base64 with padding. */
  dataBase64: string;
}

/**
 * `fs/writeFile`: replaces a file's content, creating the file if needed.
 *
 * The write is atomic: the data goes to a temporary file in the same
 * directory, which is flushed and renamed over the target, so readers never
 * see a half-written file and a full disk leaves the old content intact. A
 * symlink is followed (the file it points to is replaced) and an existing
 * file keeps its permission bits. When the server may not write the
 * directory (only the file itself), the file is overwritten in place.
 *
 * @param params `{path, dataBase64}`.
 */
export async function writeFile(params: WriteFileParams): Promise<EmptyResult> {
  const requested = pathFromUri(params.path);
  let data: Uint8Array;
  try {
    data = decodeBase64(params.dataBase64);
  } catch (err) {
    throw invalidRequest(
      `fs/writeFile requires valid base64 dataBase64: ${(err as Error).message}`,
    );
  }
  requireWrite(requested);
  try {
    if (!mayRead(requested)) {
      // Without read access symlinks cannot be resolved, so a link here must not be followed:
      // the path itself is replaced (a link is replaced by the new file, its target untouched).
      if (mayWrite(dirname(requested)) && await replaceAtomically(requested, data, undefined)) {
        return {};
      }
      throw permissionDenied("read", requested);
    }
    const target = await resolveSymlinks(requested);
    if (target !== requested) requireWrite(target);
    const existing = await lstatOrUndefined(target);
    if (existing?.isDirectory) throw osError("EISDIR");
    // Opening a FIFO without a reader for writing would block; the reference
    // uses a non-blocking open and fails with ENXIO in that case.
    if (existing?.isFifo) throw osError("ENXIO");
    if (existing !== undefined && !existing.isFile) {
      // Device or socket: renaming over it would replace the node itself.
      await Deno.writeFile(target, data);
    } else if (!mayWrite(dirname(target)) || !(await replaceAtomically(target, data, existing))) {
      await Deno.writeFile(target, data);
    }
    return {};
  } catch (err) {
    throw fsError(err);
  }
}

async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** Follows symlinks at `path` to the file a write through it would hit. */
async function resolveSymlinks(path: string): Promise<string> {
  let current = path;
  for (let hops = 0; hops <= MAX_SYMLINK_HOPS; hops++) {
    const info = await lstatOrUndefined(current);
    if (info === undefined || !info.isSymlink) return current;
    requireRead(current);
    try {
      return await Deno.realPath(current);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    // A dangling link: a write creates the file it names.
    const target = await Deno.readLink(current);
    current = resolve(await Deno.realPath(dirname(current)), target);
  }
  throw osError("ELOOP");
}

/**
 * Writes `data` to a temporary sibling of `target` and renames it over the
 * target. Returns `false`, having changed nothing, when the directory does
 * not accept a new file for another reason than a full disk (a read-only
 * directory holding a writable file, procfs, ...), so the caller can
 * write in place.
 */
async function replaceAtomically(
  target: string,
  data: Uint8Array,
  existing: Deno.FileInfo | undefined,
): Promise<boolean> {
  const temp = `${dirname(target)}/.${basename(target)}.${crypto.randomUUID()}.tmp`;
  let file: Deno.FsFile;
  try {
    file = await Deno.open(temp, { write: true, createNew: true, mode: 0o666 });
  } catch (err) {
    const code = osErrorCode(err);
    if (code === "ENOSPC" || code === "EDQUOT") throw err;
    return false;
  }
  try {
    try {
      let written = 0;
      while (written < data.length) written += await file.write(data.subarray(written));
      if (existing !== undefined) {
        await Deno.chmod(temp, existing.mode! & 0o7777);
        if (existing.uid !== null && existing.gid !== null) {
          await Deno.chown(temp, existing.uid, existing.gid).catch(() => {});
        }
      }
      await file.syncData();
    } finally {
      file.close();
    }
    await Deno.rename(temp, target);
    return true;
  } catch (err) {
    await Deno.remove(temp).catch(() => {});
    throw err;
  }
}

/** Params of `fs/createDirectory`. */
export interface CreateDirectoryParams {
  /** `file:` URI of the directory. */
  path: string;
  /** Create missing parents and accept an existing directory (`mkdir -p`); default `true`. */
  recursive?: boolean | null;
}

/**
 * `fs/createDirectory`: creates a directory, by default with its missing parents.
 *
 * @param params `{path, recursive?}`.
 */
export async function createDirectory(params: CreateDirectoryParams): Promise<EmptyResult> {
  const path = pathFromUri(params.path);
  requireWrite(path);
  try {
    await Deno.mkdir(path, { recursive: params.recursive ?? true });
    return {};
  } catch (err) {
    throw fsError(err);
  }
}

/** Params of `fs/getMetadata`, `fs/canonicalize` and `fs/readDirectory`. */
export interface PathParams {
  /** `file:` URI of the path. */
  path: string;
}

/** Result of `fs/getMetadata`. */
export interface MetadataResult {
  /** The path is (or links to) a directory. */
  isDirectory: boolean;
  /** The path is (or links to) a regular file. */
  isFile: boolean;
  /** The path itself is a symlink. */
  isSymlink: boolean;
  /** Size in bytes of the file (or link target). */
  size: number;
  /** Birth time in epoch milliseconds, `0` where the platform has none. */
  createdAtMs: number;
  /** Modification time in epoch milliseconds. */
  modifiedAtMs: number;
}

/**
 * `fs/getMetadata`: `stat` of the path (symlinks followed) plus whether the
 * path itself is a symlink.
 *
 * Synchronous on purpose: two metadata syscalls take microseconds, while an
 * async Deno fs op costs a round trip through the blocking thread pool; with
 * the default in-order request handling that hop dominated the RPC latency.
 *
 * @param params `{path}`.
 */
export function getMetadata(params: PathParams): MetadataResult {
  const path = pathFromUri(params.path);
  requireReadOrMissing(path);
  try {
    const info = Deno.statSync(path);
    const link = Deno.lstatSync(path);
    return {
      isDirectory: info.isDirectory,
      isFile: info.isFile,
      isSymlink: link.isSymlink,
      size: info.size,
      createdAtMs: info.birthtime?.getTime() ?? 0,
      modifiedAtMs: info.mtime?.getTime() ?? 0,
    };
  } catch (err) {
    throw fsError(err);
  }
}

/** Result of `fs/canonicalize`. */
export interface CanonicalizeResult {
  /** `file:` URI of the canonical path. */
  path: string;
}

/**
 * `fs/canonicalize`: `realpath` of an existing path (synchronous, like
 * {@linkcode getMetadata}).
 *
 * @param params `{path}`.
 */
export function canonicalize(params: PathParams): CanonicalizeResult {
  const path = pathFromUri(params.path);
  requireReadOrMissing(path);
  try {
    return { path: uriFromPath(Deno.realPathSync(path)) };
  } catch (err) {
    throw fsError(err);
  }
}

/** One entry of `fs/readDirectory`. */
export interface DirectoryEntry {
  /** The entry's name. */
  fileName: string;
  /** The entry is (or links to) a directory. */
  isDirectory: boolean;
  /** The entry is (or links to) a regular file. */
  isFile: boolean;
}

/** Result of `fs/readDirectory`. */
export interface ReadDirectoryResult {
  /** Entries in the order the OS lists them. */
  entries: DirectoryEntry[];
}

/**
 * `fs/readDirectory`: the directory's entries in OS order; entries whose
 * `stat` fails (such as broken symlinks) are left out.
 *
 * @param params `{path}`.
 */
export async function readDirectory(params: PathParams): Promise<ReadDirectoryResult> {
  const path = pathFromUri(params.path);
  requireRead(path);
  const entries: DirectoryEntry[] = [];
  try {
    for await (const entry of Deno.readDir(path)) {
      let info: Deno.FileInfo;
      try {
        info = await Deno.stat(joinPath(path, entry.name));
      } catch {
        continue;
      }
      entries.push({ fileName: entry.name, isDirectory: info.isDirectory, isFile: info.isFile });
    }
  } catch (err) {
    throw fsError(err);
  }
  return { entries };
}

/** Params of `fs/remove`. */
export interface RemoveParams {
  /** `file:` URI of the path. */
  path: string;
  /** Remove a non-empty directory with its content; default `true`. */
  recursive?: boolean | null;
  /** Succeed when the path does not exist; default `true`. */
  force?: boolean | null;
}

/**
 * `fs/remove`: removes a file, a symlink (never its target) or a directory.
 *
 * @param params `{path, recursive?, force?}`.
 */
export async function remove(params: RemoveParams): Promise<EmptyResult> {
  const path = pathFromUri(params.path);
  requireWrite(path);
  try {
    await Deno.remove(path, { recursive: params.recursive ?? true });
  } catch (err) {
    if (!(params.force ?? true) || osErrorCode(err) !== "ENOENT") throw fsError(err);
  }
  return {};
}

/** Params of `fs/copy`. */
export interface CopyParams {
  /** `file:` URI of the source. */
  sourcePath: string;
  /** `file:` URI of the destination. */
  destinationPath: string;
  /** Must be `true` to copy a directory. */
  recursive: boolean;
}

/**
 * `fs/copy`: copies a regular file, a symlink (as a link) or, with
 * `recursive: true`, a directory tree (nested symlinks stay links; FIFOs,
 * sockets and devices inside it are skipped). Copying a file onto itself is
 * a successful no-op.
 *
 * @param params `{sourcePath, destinationPath, recursive}`.
 */
export async function copy(params: CopyParams): Promise<EmptyResult> {
  const source = pathFromUri(params.sourcePath);
  const destination = pathFromUri(params.destinationPath);
  requireRead(source);
  requireWrite(destination);
  try {
    const info = await Deno.lstat(source);
    if (info.isSymlink) {
      await Deno.symlink(await Deno.readLink(source), destination);
    } else if (info.isFile) {
      if (!(await isSameFile(info, destination))) await Deno.copyFile(source, destination);
    } else if (info.isDirectory) {
      if (!params.recursive) {
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
      await Deno.copyFile(from, to);
    }
  }
}
