/**
 * File handles: `fs/open`, `fs/readBlock`, `fs/writeBlock`, `fs/close` (docs/protocol.md §10.12).
 *
 * @module
 */

import { ErrorCode, invalidRequest, RpcError } from "../../protocol/errors.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";

/** Most open handles per connection. */
const MAX_HANDLES = 128;
/** Longest handle id, in UTF-8 bytes. */
const MAX_HANDLE_ID_BYTES = 32;
/** Largest block for one read or write. */
const MAX_BLOCK = 1_048_576;
const MAX_FILE_OFFSET = 9_223_372_036_854_775_807n;

interface Handle {
  file: Deno.FsFile;
  /** Tail of the chain that serializes this handle's seek-then-transfer operations. */
  queue: Promise<unknown>;
}

/**
 * The open file handles of one connection. Create one per connection and
 * call {@linkcode FileHandleTable.closeAll} when it ends.
 *
 * @example Read a file in blocks
 * ```ts
 * import { FileHandleTable } from "./handles.ts";
 * const table = new FileHandleTable();
 * await table.open("h", "/etc/hostname", "read");
 * console.log(await table.readBlock({ handleId: "h", offset: 0, len: 4096 }));
 * await table.close({ handleId: "h" });
 * ```
 */
export class FileHandleTable {
  /** Open handles, plus `undefined` for ids whose open is in progress. */
  #handles = new Map<string, Handle | undefined>();

  /** Number of open (or opening) handles. */
  get size(): number {
    return this.#handles.size;
  }

  /**
   * `fs/open`: opens a file under a client-chosen id.
   *
   * @param id Client-chosen id, at most 32 bytes (`""` is valid).
   * @param path Native absolute path, its access for `mode` already checked.
   * @param mode `read` an existing regular file, or create-or-truncate it for writing (`replace`).
   */
  async open(
    id: string,
    path: string,
    mode: "read" | "replace",
  ): Promise<ResultOf<"fs/open">> {
    checkId(id);
    if (this.#handles.has(id)) throw invalidRequest(`file handle \`${id}\` already exists`);
    if (this.#handles.size >= MAX_HANDLES) {
      throw invalidRequest(`at most ${MAX_HANDLES} file handles may be open per connection`);
    }
    const replace = mode === "replace";
    this.#handles.set(id, undefined);
    let file: Deno.FsFile;
    try {
      file = replace ? await openForReplace(path) : await openForRead(path);
    } catch (err) {
      this.#handles.delete(id);
      throw fsError(err);
    }
    if (!this.#handles.has(id)) {
      // closeAll() ran while the file was opening.
      file.close();
      throw invalidRequest(`file handle \`${id}\` was closed while opening`);
    }
    this.#handles.set(id, { file, queue: Promise.resolve() });
    return { handleId: id };
  }

  /**
   * `fs/readBlock`: reads up to `len` bytes at `offset` without moving any cursor.
   *
   * @param params `{handleId, offset, len}`.
   */
  async readBlock(params: ParamsOf<"fs/readBlock">): Promise<ResultOf<"fs/readBlock">> {
    checkId(params.handleId);
    const len = params.len;
    if (!(len >= 1 && len <= MAX_BLOCK)) {
      throw invalidRequest(`file read block length must be between 1 and ${MAX_BLOCK}`);
    }
    return await this.#run(params.handleId, async (file) => {
      // The reference's positional read fails the same way for offsets beyond i64.
      if (BigInt(params.offset) > MAX_FILE_OFFSET) throw osError("EINVAL");
      const buffer = new Uint8Array(len);
      if (!(await seekOrFalse(file, params.offset))) return { chunk: "", eof: true };
      let filled = 0;
      while (filled < len) {
        const n = await file.read(buffer.subarray(filled));
        if (n === null) break;
        filled += n;
      }
      return { chunk: buffer.subarray(0, filled).toBase64(), eof: filled < len };
    });
  }

  /**
   * `fs/writeBlock`: writes `chunk` at `offset` without moving any cursor.
   *
   * @param params `{handleId, offset, chunk}`.
   */
  async writeBlock(params: ParamsOf<"fs/writeBlock">): Promise<ResultOf<"fs/writeBlock">> {
    checkId(params.handleId);
    const chunk = params.chunk;
    if (chunk.length < 1 || chunk.length > MAX_BLOCK) {
      throw invalidRequest(`file write block length must be between 1 and ${MAX_BLOCK}`);
    }
    if (BigInt(params.offset) + BigInt(chunk.length) > MAX_FILE_OFFSET) {
      throw invalidRequest("file write range exceeds the signed 64-bit file offset limit");
    }
    return await this.#run(params.handleId, async (file) => {
      // Beyond the filesystem's largest file size pwrite(2) fails with EFBIG.
      if (!(await seekOrFalse(file, params.offset))) throw osError("EFBIG");
      let written = 0;
      while (written < chunk.length) written += await file.write(chunk.subarray(written));
      return {};
    });
  }

  /**
   * `fs/close`: closes a handle once its pending operations finish; an
   * unknown id is not an error.
   *
   * @param params `{handleId}`.
   */
  async close(params: ParamsOf<"fs/close">): Promise<ResultOf<"fs/close">> {
    checkId(params.handleId);
    const handle = this.#handles.get(params.handleId);
    if (handle === undefined) return {};
    this.#handles.delete(params.handleId);
    await handle.queue;
    handle.file.close();
    return {};
  }

  /** Closes every handle at once (connection end); operations in flight fail. */
  closeAll(): void {
    for (const handle of this.#handles.values()) {
      try {
        handle?.file.close();
      } catch {
        // Already closed.
      }
    }
    this.#handles.clear();
  }

  /** Runs `operation` on a handle after the operations queued before it. */
  #run<T>(id: string, operation: (file: Deno.FsFile) => Promise<T>): Promise<T> {
    const handle = this.#handles.get(id);
    if (handle === undefined) {
      throw new RpcError(ErrorCode.NotFound, `unknown file handle \`${id}\``);
    }
    const result = handle.queue.then(() => operation(handle.file)).catch((err) => {
      throw fsError(err);
    });
    handle.queue = result.catch(() => {});
    return result;
  }
}

/**
 * Seeks to `offset`; `false` when it lies beyond the largest file the
 * filesystem supports (lseek(2) says EINVAL where pread(2) would report EOF).
 */
async function seekOrFalse(file: Deno.FsFile, offset: number | bigint): Promise<boolean> {
  try {
    await file.seek(offset, Deno.SeekMode.Start);
    return true;
  } catch (err) {
    if (osErrorCode(err) === "EINVAL") return false;
    throw err;
  }
}

function checkId(id: string): void {
  if (new TextEncoder().encode(id).length > MAX_HANDLE_ID_BYTES) {
    throw invalidRequest(`file handle ID must not exceed ${MAX_HANDLE_ID_BYTES} bytes`);
  }
}

async function openForRead(path: string): Promise<Deno.FsFile> {
  // stat before open: opening a FIFO for reading would block.
  if (!(await Deno.stat(path)).isFile) throw invalidRequest(`path \`${path}\` is not a file`);
  const file = await Deno.open(path, { read: true });
  if (!(await file.stat()).isFile) {
    file.close();
    throw invalidRequest(`path \`${path}\` is not a file`);
  }
  return file;
}

async function openForReplace(path: string): Promise<Deno.FsFile> {
  try {
    // The reference opens without blocking, so a FIFO without a reader fails with ENXIO.
    if ((await Deno.stat(path)).isFifo) throw osError("ENXIO");
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return await Deno.open(path, { write: true, create: true, truncate: true });
}
