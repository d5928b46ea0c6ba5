/**
 * `fs/createDirectory` and `fs/readDirectory` (docs/protocol.md §10.5, §10.8).
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";
import { fsError } from "../host/os_errors.ts";
import { joinPath } from "../host/path_uri.ts";

/** One entry of `fs/readDirectory`. */
type DirectoryEntry = ResultOf<"fs/readDirectory">["entries"][number];

/**
 * `fs/createDirectory`: creates a directory, by default with its missing parents.
 *
 * @param path Native absolute path, its write access already checked.
 * @param recursive Create missing parents and accept an existing directory (`mkdir -p`).
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
): Promise<ResultOf<"fs/createDirectory">> {
  try {
    await Deno.mkdir(path, { recursive });
    return {};
  } catch (err) {
    throw fsError(err);
  }
}

/**
 * `fs/readDirectory`: the directory's entries in OS order; entries whose
 * `stat` fails (such as broken symlinks) are left out.
 *
 * @param path Native absolute path, its read access already checked.
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
export async function readDirectory(path: string): Promise<ResultOf<"fs/readDirectory">> {
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
