/**
 * `fs/readFile` (docs/protocol.md §10.3): a whole regular file, within a size limit.
 *
 * @module
 */

import { invalidRequest, kindError, type RpcError } from "../../protocol/errors.ts";
import type { ReplyOf } from "../../protocol/methods.ts";
import { STREAMED_CHUNK_BYTES, StreamedString } from "../../protocol/streamed_json.ts";
import { fsError } from "../host/os_errors.ts";
import { close, F, fsSyscallsAvailable, fstatat, readInto } from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { openForRead } from "./resolve.ts";

/**
 * Largest file `fs/readFile` returns: 512 MiB, the reference's limit (with its
 * error, `file is too large to read: limit is 536870912 bytes`). Larger files
 * are read with `fs/open` and `fs/readBlock`.
 */
export const READ_FILE_LIMIT = 512 * 1024 * 1024;

/**
 * Files up to this size (93 KiB, {@linkcode STREAMED_CHUNK_BYTES}) are answered
 * with one string; larger ones are streamed: read and encoded a chunk of this
 * size at a time while the reply is sent, so the server holds about a chunk of
 * the file at once, not the file.
 */
export const READ_CHUNK_BYTES = STREAMED_CHUNK_BYTES;

/** An open regular file: its size when opened, how to read it, how to close it. */
interface OpenFile {
  readonly size: number;
  read(buffer: Uint8Array): Promise<number | null>;
  close(): void;
}

/**
 * `fs/readFile`: returns a regular file's content (symlinks followed).
 *
 * Files larger than {@linkcode READ_FILE_LIMIT} are refused with `-32600`
 * and `data.kind` `replyTooLarge` (read those with `fs/open` and
 * `fs/readBlock`). A file over {@linkcode READ_CHUNK_BYTES} is answered with
 * its base64 as a {@linkcode StreamedString}: chunks of
 * {@linkcode READ_CHUNK_BYTES} (a multiple of 3, so that their base64
 * concatenates) read while the reply is written.
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
): Promise<ReplyOf<"fs/readFile">> {
  let file: OpenFile;
  try {
    file = fsSyscallsAvailable() ? openNonBlocking(path, plans) : await openWithDeno(path);
  } catch (err) {
    throw fsError(err);
  }
  if (file.size > READ_CHUNK_BYTES) {
    return { dataBase64: new StreamedString(base64Chunks(file), () => file.close()) };
  }
  try {
    return { dataBase64: (await readToEnd(file.read, file.size)).toBase64() };
  } catch (err) {
    throw fsError(err);
  } finally {
    file.close();
  }
}

/**
 * Opens with `O_NONBLOCK` below the read scope's root and checks what was
 * opened: a FIFO, socket or device is refused without ever blocking a
 * thread (no window between a check and the open), a file outside the
 * scope or at a denied path is refused, a regular file is read on the
 * blocking pool.
 */
function openNonBlocking(path: string, plans: readonly SandboxPlan[]): OpenFile {
  const fd = openForRead(path, plans);
  try {
    const info = fstatat(fd, "", true)!;
    assertReadableFile(path, (info.mode & F.S_IFMT) === F.S_IFREG, info.size);
    return { size: info.size, read: (buffer) => readInto(fd, buffer), close: () => close(fd) };
  } catch (err) {
    close(fd);
    throw err;
  }
}

/** Without FFI: stat before open (opening a FIFO for reading would block), then check again. */
async function openWithDeno(path: string): Promise<OpenFile> {
  const before = await Deno.stat(path);
  assertReadableFile(path, before.isFile, before.size);
  const file = await Deno.open(path, { read: true });
  try {
    const info = await file.stat();
    assertReadableFile(path, info.isFile, info.size);
    return { size: info.size, read: (buffer) => file.read(buffer), close: () => file.close() };
  } catch (err) {
    file.close();
    throw err;
  }
}

function assertReadableFile(path: string, isFile: boolean, size: number): void {
  if (!isFile) throw invalidRequest(`path \`${path}\` is not a file`);
  if (size > READ_FILE_LIMIT) throw tooLarge();
}

function tooLarge(): RpcError {
  return kindError("replyTooLarge", `file is too large to read: limit is ${READ_FILE_LIMIT} bytes`);
}

/**
 * The file's base64 in chunks of {@linkcode READ_CHUNK_BYTES} bytes (one buffer, reused),
 * to its end; closes the file when done or abandoned. A file grown past the limit since it
 * was opened ends the stream with an error (the reply cannot be finished).
 */
async function* base64Chunks(file: OpenFile): AsyncGenerator<string> {
  try {
    const buffer = new Uint8Array(READ_CHUNK_BYTES);
    let total = 0;
    while (true) {
      let filled = 0;
      let ended = false;
      while (filled < buffer.length) {
        const n = await file.read(buffer.subarray(filled));
        if (n === null) {
          ended = true;
          break;
        }
        filled += n;
      }
      total += filled;
      if (total > READ_FILE_LIMIT) throw tooLarge();
      if (filled > 0) yield buffer.subarray(0, filled).toBase64();
      if (ended) return;
    }
  } finally {
    file.close();
  }
}

/**
 * Reads to the end, expecting about `expected` bytes and enforcing the limit. The buffer has
 * room for one byte more than expected: a read of a regular file is short only at its end, so
 * one that stops at the expected size with room to spare ended the file, and the read that
 * would return 0 (a trip to the blocking pool) is skipped.
 */
async function readToEnd(
  read: (buffer: Uint8Array) => Promise<number | null>,
  expected: number,
): Promise<Uint8Array> {
  let data = new Uint8Array(expected + 1);
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
    if (filled === expected && filled < data.length) return data.subarray(0, filled);
  }
}
