/**
 * `fs/writeFile` (docs/protocol.md §10.4): replaces a file's content atomically.
 *
 * @module
 */

import { basename, dirname, resolve } from "../host/posix_path.ts";
import { decodeBase64 } from "../../protocol/base64.ts";
import { invalidRequest } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import { permissionDenied } from "../host/permission_errors.ts";
import { mayRead, mayWrite, requireRead, requireWrite } from "../host/permissions.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { raceFreeWrites, writeFileAt, writeScope } from "./resolve.ts";
import { lstatOrUndefined } from "../host/stat.ts";

/** Maximum number of symlinks followed when resolving a write target, as Linux. */
const MAX_SYMLINK_HOPS = 40;

/**
 * `fs/writeFile`: replaces a file's content, creating the file if needed.
 *
 * The write is atomic: the data goes to a temporary file in the same
 * directory, which is flushed and renamed over the target, so readers never
 * see a half-written file and a full disk leaves the old content intact. A
 * symlink is followed (the file it points to is replaced, once the server
 * may write it too) and an existing file keeps its permission bits. When
 * the server may not write the directory (only the file itself), the file
 * is overwritten in place.
 *
 * With `--allow-ffi` the target is resolved and replaced on directory
 * descriptors ({@linkcode writeFileAt}: no symlink leads out of the scope,
 * and the temporary file is an `O_TMPFILE` a crash cannot leave behind).
 *
 * @param requested Native absolute path, its write access already checked.
 * @param dataBase64 The new content, standard base64 with padding.
 * @param plans The sandbox plans the write must stay inside.
 *
 * @example Write a file
 * ```ts
 * import { writeFile } from "./write_file.ts";
 * const path = await Deno.makeTempFile();
 * await writeFile(path, "aGk=");
 * console.log(await Deno.readTextFile(path)); // "hi"
 * await Deno.remove(path);
 * ```
 */
export async function writeFile(
  requested: string,
  dataBase64: string,
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/writeFile">> {
  let data: Uint8Array;
  try {
    data = decodeBase64(dataBase64);
  } catch (err) {
    throw invalidRequest(
      `fs/writeFile requires valid base64 dataBase64: ${(err as Error).message}`,
    );
  }
  if (raceFreeWrites()) {
    try {
      await writeFileAt(requested, data, writeScope(requested, plans));
      return {};
    } catch (err) {
      throw fsError(err);
    }
  }
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
