/**
 * `fs/readFile` (docs/protocol.md §10.3): a whole regular file, within a size limit.
 *
 * @module
 */

import { invalidRequest, kindError, type RpcError } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { fsError } from "../host/os_errors.ts";
import { MAX_REPLY_DATA_BYTES } from "../host/reply_limit.ts";
import { close, F, fstatat, readInto } from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { openForRead, raceFreeWrites } from "./resolve.ts";

/**
 * Largest file `fs/readFile` returns: 32 MiB (a 43 MiB reply). The reference
 * allows 512 MiB, which a Deno server cannot encode as one JSON reply without
 * running out of memory (a 200 MiB file ended the process); larger files are
 * read with `fs/open` and `fs/readBlock`.
 */
export const READ_FILE_LIMIT = MAX_REPLY_DATA_BYTES;

/**
 * `fs/readFile`: returns a regular file's content (symlinks followed).
 *
 * Files larger than {@linkcode READ_FILE_LIMIT} are refused with `-32600`
 * and `data.kind` `replyTooLarge`; read those with `fs/open` and
 * `fs/readBlock` instead.
 *
 * With `--allow-ffi` the file is opened below the read scope's root and
 * checked after the open ({@linkcode openForRead}): a symlink swapped in
 * cannot redirect the read.
 *
 * @param path Native absolute path, its access already checked.
 * @param plans The sandbox plans whose denied paths the file must not be under.
 *
 * @example Read a file
 * ```ts
 * import { readFile } from "./read_file.ts";
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "hi");
 * console.log(await readFile(path)); // { dataBase64: "aGk=" }
 * await Deno.remove(path);
 * ```
 */
export async function readFile(
  path: string,
  plans: readonly SandboxPlan[] = [],
): Promise<ResultOf<"fs/readFile">> {
  if (raceFreeWrites()) return await readOpened(path, plans);
  try {
    // stat before open: opening a FIFO for reading would block.
    assertReadableFile(path, await Deno.stat(path));
    using file = await Deno.open(path, { read: true });
    const info = await file.stat();
    assertReadableFile(path, info);
    const data = await readToEnd((buffer) => file.read(buffer), info.size);
    return { dataBase64: data.toBase64() };
  } catch (err) {
    throw fsError(err);
  }
}

/** {@linkcode readFile} on the descriptor that was checked. */
async function readOpened(
  path: string,
  plans: readonly SandboxPlan[],
): Promise<ResultOf<"fs/readFile">> {
  try {
    const fd = openForRead(path, plans);
    try {
      const stat = fstatat(fd, "", true)!;
      if ((stat.mode & F.S_IFMT) !== F.S_IFREG) {
        throw invalidRequest(`path \`${path}\` is not a file`);
      }
      if (stat.size > READ_FILE_LIMIT) throw tooLarge();
      const data = await readToEnd(
        (buffer) => readInto(fd, buffer).then((n) => (n === 0 ? null : n)),
        stat.size,
      );
      return { dataBase64: data.toBase64() };
    } finally {
      close(fd);
    }
  } catch (err) {
    throw fsError(err);
  }
}

function assertReadableFile(path: string, info: Deno.FileInfo): void {
  if (!info.isFile) throw invalidRequest(`path \`${path}\` is not a file`);
  if (info.size > READ_FILE_LIMIT) throw tooLarge();
}

function tooLarge(): RpcError {
  return kindError(
    "replyTooLarge",
    `file is too large to read: limit is ${READ_FILE_LIMIT} bytes; read it in blocks with fs/open and fs/readBlock`,
  );
}

/** Reads to the end (`read` answers `null` there), expecting about `expected` bytes, within the limit. */
async function readToEnd(
  read: (buffer: Uint8Array<ArrayBuffer>) => Promise<number | null>,
  expected: number,
): Promise<Uint8Array> {
  let data = new Uint8Array(expected);
  let filled = 0;
  while (true) {
    if (filled === data.length) {
      // The file grew since `stat`: make room, within the limit.
      if (data.length >= READ_FILE_LIMIT) {
        if ((await read(new Uint8Array(1))) === null) return data;
        throw tooLarge();
      }
      const grown = new Uint8Array(Math.min(READ_FILE_LIMIT, Math.max(65_536, data.length * 2)));
      grown.set(data);
      data = grown;
    }
    const n = await read(data.subarray(filled));
    if (n === null) return data.subarray(0, filled);
    filled += n;
  }
}
