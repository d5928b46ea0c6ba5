/**
 * `fs/createDirectory` and `fs/readDirectory` (docs/protocol.md §10.5, §10.8).
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { fsSyscallsAvailable } from "../host/fs_syscalls.ts";
import { fsError } from "../host/os_errors.ts";
import { joinPath } from "../host/path_uri.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { directoryAt } from "./inspect_at.ts";
import { createDirectoryAt, raceFreeWrites, readsScoped, writeScope } from "./resolve.ts";
import { linkTargetInScope } from "../host/stat.ts";

/** One entry of `fs/readDirectory`. */
type DirectoryEntry = ResultOf<"fs/readDirectory">["entries"][number];

/**
 * `fs/createDirectory`: creates a directory, by default with its missing parents.
 *
 * @param path Native absolute path, its write access already checked.
 * @param recursive Create missing parents and accept an existing directory (`mkdir -p`).
 * @param plans The sandbox plans the directories must stay inside (with `--allow-ffi` each
 * one is created in the directory descriptor that was checked).
 *
 * @example
 * ```ts
 * import { createDirectory } from "./directory.ts";
 * const dir = await Deno.makeTempDir();
 * await createDirectory(`${dir}/a/b`, true);
 * console.log((await Deno.stat(`${dir}/a/b`)).isDirectory); // true
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function createDirectory(
  path: string,
  recursive: boolean,
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/createDirectory">> {
  try {
    if (raceFreeWrites()) createDirectoryAt(path, recursive, writeScope(path, plans));
    else await Deno.mkdir(path, { recursive });
    return {};
  } catch (err) {
    throw fsError(err);
  }
}

/**
 * `fs/readDirectory`: the directory's entries in OS order, each with the type
 * the directory gives it, a symlink with its target's; a symlink whose target
 * cannot be stat'ed (a broken one) is left out, and so is one whose target is
 * outside the server's read scope (the answer does not depend on what is
 * there). A name that is not UTF-8 is listed with U+FFFD for its bytes, as the
 * reference lists it. Under a read scope or a sandbox (with `--allow-ffi`) the
 * directory is listed through its checked descriptor ({@linkcode directoryAt}).
 *
 * @param path Native absolute path, its read access already checked.
 * @param plans The sandbox plans whose denied paths the directory must not be under.
 *
 * @example
 * ```ts
 * import { readDirectory } from "./directory.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/f`, "");
 * console.log(await readDirectory(dir)); // { entries: [{ fileName: "f", isDirectory: false, isFile: true }] }
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readDirectory(
  path: string,
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/readDirectory">> {
  const entries: DirectoryEntry[] = [];
  try {
    // Through the descriptor also where nothing is scoped, when the file system calls are
    // there: one getdents64 per few hundred entries is cheaper than Deno.readDir's iteration.
    if (fsSyscallsAvailable() || readsScoped(path, plans)) return directoryAt(path, plans);
    for await (const entry of Deno.readDir(path)) {
      if (!entry.isSymlink) {
        // The directory's own type (Deno looks it up by the name's bytes where the directory
        // does not say): a name that is not UTF-8 cannot be looked up by its decoded text.
        entries.push({
          fileName: entry.name,
          isDirectory: entry.isDirectory,
          isFile: entry.isFile,
        });
        continue;
      }
      let info: Deno.FileInfo | undefined;
      try {
        // A link answers for its target only where the server may read the target.
        info = await linkTargetInScope(joinPath(path, entry.name));
      } catch {
        continue;
      }
      if (info === undefined) continue;
      entries.push({ fileName: entry.name, isDirectory: info.isDirectory, isFile: info.isFile });
    }
  } catch (err) {
    throw fsError(err);
  }
  return { entries };
}
