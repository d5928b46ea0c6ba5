/**
 * Access rules: how an fs request touches one path. Each entry of the fs
 * operations table lists them for its method; the server's Deno permission
 * checks and the sandbox guard are both computed from that list (so it sits
 * here, below both `fs/` and `sandbox/`).
 *
 * @module
 */

import { pathFromUri } from "./path_uri.ts";

/**
 * What a read looks at, which decides what a sandbox lets through:
 *
 * - `content`: the file's bytes or the directory's names (refused at or below a denied path);
 * - `metadata`: `stat`/`realpath` only (a denied path itself is visible, nothing below it);
 * - `listing`: a walk of the tree (refused below a denied path; denied subtrees are left
 *   out of the result);
 * - `tree`: all of it when it is a directory (a copy's source: refused when a denied path
 *   lies inside);
 * - `existence`: whether it exists (a watch; such requests take no sandbox).
 */
export type ReadKind = "content" | "metadata" | "listing" | "tree" | "existence";

/**
 * What a write does at a path:
 *
 * - `file`: creates or replaces a file, following symlinks;
 * - `entry`: creates a new directory entry (`mkdir`);
 * - `directories`: creates the directory and its missing parents (`mkdir -p`).
 */
export type WriteKind = "file" | "entry" | "directories";

/** One path a request reads. */
export interface ReadAccess {
  /** Discriminator. */
  readonly access: "read";
  /** Native absolute path as requested (symlinks not resolved). */
  readonly path: string;
  /** What is read. */
  readonly kind: ReadKind;
}

/** A path a request creates or replaces. */
export interface CreateAccess {
  /** Discriminator. */
  readonly access: "write";
  /** Native absolute path as requested (symlinks not resolved). */
  readonly path: string;
  /** What is written. */
  readonly kind: WriteKind;
}

/** A path a request removes (a symlink itself, never its target). */
export interface RemoveAccess {
  /** Discriminator. */
  readonly access: "write";
  /** Native absolute path as requested (symlinks not resolved). */
  readonly path: string;
  /** What is written. */
  readonly kind: "remove";
  /** The subtree goes too. */
  readonly recursive: boolean;
}

/** A path a request creates a copy at: for a file like `file`, for anything else like `entry`. */
export interface CopyAccess {
  /** Discriminator. */
  readonly access: "write";
  /** Native absolute path as requested (symlinks not resolved). */
  readonly path: string;
  /** What is written. */
  readonly kind: "copy";
  /** Native path of the copy's source. */
  readonly from: string;
}

/** One path a request writes. */
export type WriteAccess = CreateAccess | RemoveAccess | CopyAccess;

/** One path a request reads or writes. */
export type PathAccess = ReadAccess | WriteAccess;

/**
 * A read of the path a `file:` URI names.
 *
 * @param uri The request's `file:` URI.
 * @param kind What is read.
 * @throws {RpcError} `-32602` for a URI that names no local path.
 *
 * @example A metadata read
 * ```ts
 * import { reads } from "./path_access.ts";
 * console.log(reads("file:///tmp/a%20b", "metadata")); // { access: "read", path: "/tmp/a b", kind: "metadata" }
 * ```
 */
export function reads(uri: string, kind: ReadKind): ReadAccess {
  return { access: "read", path: pathFromUri(uri), kind };
}

/**
 * A write of the path a `file:` URI names.
 *
 * @param uri The request's `file:` URI.
 * @param kind What is written.
 * @throws {RpcError} `-32602` for a URI that names no local path.
 *
 * @example Creating a file
 * ```ts
 * import { writes } from "./path_access.ts";
 * console.log(writes("file:///tmp/out.txt", "file").path); // "/tmp/out.txt"
 * ```
 */
export function writes(uri: string, kind: WriteKind): CreateAccess {
  return { access: "write", path: pathFromUri(uri), kind };
}

/**
 * The removal of the path a `file:` URI names.
 *
 * @param uri The request's `file:` URI.
 * @param recursive The subtree goes too.
 * @throws {RpcError} `-32602` for a URI that names no local path.
 */
export function removes(uri: string, recursive: boolean): RemoveAccess {
  return { access: "write", path: pathFromUri(uri), kind: "remove", recursive };
}

/**
 * The creation of a copy of `from` at the path a `file:` URI names.
 *
 * @param uri The destination's `file:` URI.
 * @param from The source, a read access of the same request.
 * @throws {RpcError} `-32602` for a URI that names no local path.
 */
export function copiesTo(uri: string, from: ReadAccess): CopyAccess {
  return { access: "write", path: pathFromUri(uri), kind: "copy", from: from.path };
}
