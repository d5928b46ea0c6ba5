/**
 * File handles: `fs/open`, `fs/readBlock`, `fs/writeBlock`, `fs/close` (docs/protocol.md §10.12).
 *
 * @module
 */

import { ErrorCode, invalidRequest, kindError, RpcError } from "../../protocol/errors.ts";
import { fsError, osError, osErrorCode } from "../host/os_errors.ts";
import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { close, F, fsSyscallsAvailable, fstatat, preadAt, pwriteAt } from "../host/fs_syscalls.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import {
  openForRead as openCheckedForRead,
  openForReplace as openCheckedForReplace,
  writeScope,
} from "./resolve.ts";

/** Most open handles per connection. */
const MAX_HANDLES = 128;
/** Longest handle id, in UTF-8 bytes. */
const MAX_HANDLE_ID_BYTES = 32;
/** Largest block for one read or write. */
const MAX_BLOCK = 1_048_576;
const MAX_FILE_OFFSET = 9_223_372_036_854_775_807n;

/** Positional reads and writes on an open file. */
interface BlockFile {
  /** Reads into `buffer` at `offset`: the bytes read, 0 at the end, `false` beyond the largest offset. */
  read(buffer: Uint8Array, offset: bigint): Promise<number | false>;
  /** Writes `data` at `offset`: the bytes written, `false` beyond the largest offset. */
  write(data: Uint8Array, offset: bigint): Promise<number | false>;
  close(): void;
}

interface Handle {
  file: BlockFile;
  /** Tail of the chain that serializes this handle's operations. */
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
   * @param plans The sandbox plans the file must stay inside. With `--allow-ffi` the file is
   * opened on descriptors below the scope's root and checked after the open (`resolve.ts`).
   */
  async open(
    id: string,
    path: string,
    mode: "read" | "replace",
    plans: readonly SandboxPlan[] = [],
  ): Promise<ResultOf<"fs/open">> {
    checkId(id);
    if (this.#handles.has(id)) throw invalidRequest(`file handle \`${id}\` already exists`);
    if (this.#handles.size >= MAX_HANDLES) {
      throw kindError(
        "limitReached",
        `at most ${MAX_HANDLES} file handles may be open per connection`,
      );
    }
    const replace = mode === "replace";
    this.#handles.set(id, undefined);
    let file: BlockFile;
    try {
      file = fsSyscallsAvailable()
        ? descriptorFile(
          replace ? openCheckedForReplace(path, writeScope(path, plans)) : readable(path, plans),
        )
        : denoFile(replace ? await openForReplace(path) : await openForRead(path));
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
      const offset = BigInt(params.offset);
      if (offset > MAX_FILE_OFFSET) throw osError("EINVAL");
      const buffer = new Uint8Array(len);
      let filled = 0;
      while (filled < len) {
        const n = await file.read(buffer.subarray(filled), offset + BigInt(filled));
        if (n === false) return { chunk: "", eof: true };
        if (n === 0) break;
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
      const offset = BigInt(params.offset);
      let written = 0;
      while (written < chunk.length) {
        const n = await file.write(chunk.subarray(written), offset + BigInt(written));
        if (n === false) throw osError("EFBIG");
        written += n;
      }
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
  #run<T>(id: string, operation: (file: BlockFile) => Promise<T>): Promise<T> {
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
 * A Deno file as a {@linkcode BlockFile} (without FFI): seek, then transfer;
 * an offset beyond the largest file the filesystem supports (lseek(2) says
 * EINVAL) is `false`.
 */
function denoFile(file: Deno.FsFile): BlockFile {
  const seek = async (offset: bigint): Promise<boolean> => {
    try {
      await file.seek(offset, Deno.SeekMode.Start);
      return true;
    } catch (err) {
      if (osErrorCode(err) === "EINVAL") return false;
      throw err;
    }
  };
  return {
    read: async (buffer, offset) => (await seek(offset)) ? (await file.read(buffer)) ?? 0 : false,
    write: async (data, offset) => (await seek(offset)) ? await file.write(data) : false,
    close: () => file.close(),
  };
}

/** A descriptor as a {@linkcode BlockFile}: `pread`/`pwrite` (EINVAL past the largest offset). */
function descriptorFile(fd: number): BlockFile {
  const positional = async (call: () => Promise<number>): Promise<number | false> => {
    try {
      return await call();
    } catch (err) {
      if (osErrorCode(err) === "EINVAL" || osErrorCode(err) === "EFBIG") return false;
      throw err;
    }
  };
  return {
    read: (buffer, offset) => positional(() => preadAt(fd, buffer, offset)),
    write: (data, offset) => positional(() => pwriteAt(fd, data, offset)),
    close: () => close(fd),
  };
}

/** A checked read descriptor of a regular file (`openForRead` of `resolve.ts`). */
function readable(path: string, plans: readonly SandboxPlan[]): number {
  const fd = openCheckedForRead(path, plans);
  if ((fstatat(fd, "", true)!.mode & F.S_IFMT) !== F.S_IFREG) {
    close(fd);
    throw invalidRequest(`path \`${path}\` is not a file`);
  }
  return fd;
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
