/**
 * `fs/readFile` (docs/protocol.md §10.3): a whole regular file, within a size limit.
 *
 * @module
 */

import { invalidRequest, kindError, type RpcError } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { fsError } from "../host/os_errors.ts";
import { MAX_REPLY_DATA_BYTES } from "../host/reply_limit.ts";
import { close, F, fsSyscallsAvailable, fstatat, readInto } from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { openForRead } from "./resolve.ts";

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
  try {
    const data = fsSyscallsAvailable()
      ? await readNonBlocking(path, plans)
      : await readWithDeno(path);
    return { dataBase64: data.toBase64() };
  } catch (err) {
    throw fsError(err);
  }
}

/**
 * Opens with `O_NONBLOCK` below the read scope's root and checks what was
 * opened: a FIFO, socket or device is refused without ever blocking a
 * thread (no window between a check and the open), a file outside the
 * scope or at a denied path is refused, a regular file is read on the
 * blocking pool.
 */
async function readNonBlocking(path: string, plans: readonly SandboxPlan[]): Promise<Uint8Array> {
  const fd = openForRead(path, plans);
  try {
    const info = fstatat(fd, "", true)!;
    assertReadableFile(path, (info.mode & F.S_IFMT) === F.S_IFREG, info.size);
    return await readToEnd((buffer) => readInto(fd, buffer), info.size);
  } finally {
    close(fd);
  }
}

/** Without FFI: stat before open (opening a FIFO for reading would block), then check again. */
async function readWithDeno(path: string): Promise<Uint8Array> {
  const before = await Deno.stat(path);
  assertReadableFile(path, before.isFile, before.size);
  using file = await Deno.open(path, { read: true });
  const info = await file.stat();
  assertReadableFile(path, info.isFile, info.size);
  return await readToEnd((buffer) => file.read(buffer), info.size);
}

function assertReadableFile(path: string, isFile: boolean, size: number): void {
  if (!isFile) throw invalidRequest(`path \`${path}\` is not a file`);
  if (size > READ_FILE_LIMIT) throw tooLarge();
}

function tooLarge(): RpcError {
  return kindError(
    "replyTooLarge",
    `file is too large to read: limit is ${READ_FILE_LIMIT} bytes; read it in blocks with fs/open and fs/readBlock`,
  );
}

/** Reads to the end, expecting about `expected` bytes and enforcing the limit. */
async function readToEnd(
  read: (buffer: Uint8Array) => Promise<number | null>,
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
