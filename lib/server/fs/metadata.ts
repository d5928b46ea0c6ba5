/**
 * `fs/getMetadata` and `fs/canonicalize` (docs/protocol.md §10.6, §10.7): what a path is.
 *
 * Both are synchronous on purpose: a metadata syscall takes microseconds,
 * while an async Deno fs op costs a round trip through the blocking thread
 * pool; with the default in-order request handling that hop dominated the
 * RPC latency.
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { fsError } from "../host/os_errors.ts";
import { uriFromPath } from "../host/path_uri.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { F, fsSyscallsAvailable, isType, statx } from "../host/fs_syscalls.ts";
import { canonicalAt, metadataAt, metadataOf } from "./inspect_at.ts";
import { readsScoped } from "./resolve.ts";

/**
 * `fs/getMetadata`: `stat` of the path (symlinks followed) plus whether the
 * path itself is a symlink.
 *
 * Under a read scope or a sandbox (with `--allow-ffi`) the answer comes
 * from checked descriptors ({@linkcode metadataAt}); otherwise from a
 * `statx` of the path when `--allow-ffi` is granted, or `Deno.lstatSync`.
 *
 * @param path Native absolute path, its access already checked.
 * @param plans The sandbox plans whose denied paths the entry must not be under.
 *
 * @example
 * ```ts
 * import { getMetadata } from "./metadata.ts";
 * console.log(getMetadata("/").isDirectory); // true
 * ```
 */
export function getMetadata(
  path: string,
  plans: readonly SandboxPlan[] = [],
): ResultOf<"fs/getMetadata"> {
  try {
    if (readsScoped(path, plans)) return metadataAt(path, plans);
    if (fsSyscallsAvailable()) {
      // The `statx` Deno's `lstatSync` makes, without its op's second permission check (the
      // request's was made) and its `FileInfo` of four `Date`s: about 2 of a pipelined call's
      // 20 µs. One call for everything but a symlink, whose target is then asked for.
      const entry = statx(F.AT_FDCWD, path, false);
      return metadataOf(entry, isType(entry, F.S_IFLNK) ? statx(F.AT_FDCWD, path, true) : entry);
    }
    // One syscall for everything but a symlink, whose target is then asked for.
    const link = Deno.lstatSync(path);
    const info = link.isSymlink ? Deno.statSync(path) : link;
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

/**
 * `fs/canonicalize`: `realpath` of an existing path.
 *
 * Under a read scope or a sandbox (with `--allow-ffi`): the real path of
 * the checked descriptor ({@linkcode canonicalAt}).
 *
 * @param path Native absolute path, its access already checked.
 * @param plans The sandbox plans whose denied paths the entry must not be under.
 *
 * @example
 * ```ts
 * import { canonicalize } from "./metadata.ts";
 * console.log(canonicalize("/")); // { path: "file:///" }
 * ```
 */
export function canonicalize(
  path: string,
  plans: readonly SandboxPlan[] = [],
): ResultOf<"fs/canonicalize"> {
  try {
    if (readsScoped(path, plans)) return canonicalAt(path, plans);
    return { path: uriFromPath(Deno.realPathSync(path)) };
  } catch (err) {
    throw fsError(err);
  }
}
