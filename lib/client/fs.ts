/**
 * `client.fs`: the server's files with Deno's names and shapes
 * (`readFile`, `readTextFile`, `writeFile`, `readDir`, `stat`, `mkdir`,
 * `remove`, `copy`, `realPath`, `open`). Paths are plain absolute paths or
 * `file:` URLs; failures are the typed errors of `fs_errors.ts`, carrying the
 * path.
 *
 * @module
 */

import type { RequestArgs, RequestOptions, SessionRequestName } from "./request_types.ts";
import type { ResultOf } from "../protocol/methods.ts";
import { errorKind } from "../protocol/errors.ts";
import { MessageTooLargeError, RemoteError } from "../rpc/connection.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../rpc/transport.ts";
import { fsErrorOf } from "./fs_errors.ts";
import { fromPathUri, type RemotePath, toPathUri } from "./paths.ts";

/** An entry of {@linkcode RemoteFs.readDir}, as `Deno.DirEntry`. */
export interface DirEntry {
  /** The entry's name (not a path). */
  name: string;
  /** A regular file (a symlink counts as a symlink, not as its target). */
  isFile: boolean;
  /** A directory (a symlink counts as a symlink). */
  isDirectory: boolean;
  /** A symbolic link. */
  isSymlink: boolean;
}

/** What {@linkcode RemoteFs.stat} returns: the `Deno.FileInfo` members the protocol carries. */
export interface FileInfo {
  /** A regular file (after following symlinks, as `Deno.stat`). */
  isFile: boolean;
  /** A directory (after following symlinks). */
  isDirectory: boolean;
  /** Always `false`, as with `Deno.stat` (symlinks are followed). */
  isSymlink: boolean;
  /** Size in bytes. */
  size: number;
  /** Last modification, or `null` when the server does not know it. */
  mtime: Date | null;
  /** Creation, or `null` when the file system does not record it. */
  birthtime: Date | null;
}

/** Options of {@linkcode RemoteFs.open}: read, or write (which creates and truncates). */
export interface OpenOptions {
  /**
   * Open for reading.
   *
   * @default {true unless write is set}
   */
  read?: boolean;
  /**
   * Open for writing: the file is created or truncated (`fs/open` mode
   * `replace`). Reading and writing the same handle is not supported.
   *
   * @default {false}
   */
  write?: boolean;
}

/** An open remote file, as a small `Deno.FsFile`: a position, `read`, `write`, `close`. */
export interface RemoteFile extends AsyncDisposable {
  /**
   * Reads up to `p.length` bytes at the position into `p`; resolves with
   * the number read, or `null` at end of file.
   *
   * @param p The buffer to fill.
   */
  read(p: Uint8Array): Promise<number | null>;
  /**
   * Writes all of `p` at the position; resolves with `p.length`.
   *
   * @param p The bytes.
   */
  write(p: Uint8Array): Promise<number>;
  /** Closes the handle on the server. */
  close(): Promise<void>;
}

/** What `client.fs` needs from the client: its typed request. */
export interface FsHost {
  /** `ExecClient.request`. */
  request<M extends SessionRequestName>(method: M, ...args: RequestArgs<M>): Promise<ResultOf<M>>;
}

/** Largest block of one `fs/readBlock` or `fs/writeBlock` (the server's limit): 1 MiB. */
const MAX_BLOCK = 1024 * 1024;
/** Bytes of an `fs/readBlock` reply besides its block's base64, with room to spare. */
const READ_BLOCK_OVERHEAD = 1024;
/** Largest `writeFile` sent as one `fs/writeFile` (larger ones go in blocks): 32 MiB. */
const MAX_WHOLE_WRITE_BYTES = 32 * 1024 * 1024;
/** Entries whose metadata `readDir` asks for at once. */
const READ_DIR_CONCURRENCY = 32;
const RETRY: RequestOptions = { retry: true };

/**
 * The server's files. Get it as `client.fs`.
 *
 * @example Write, list, stat, read and remove files by plain path
 * ```ts
 * import { connect, NotFoundError } from "@exec-server/exec-server";
 * import { serveWebSocket } from "@exec-server/exec-server/server";
 * const server = await serveWebSocket();
 * try {
 *   await using client = await connect(server.url);
 *   const dir = (await client.exec(["mktemp", "-d"])).stdout.trim();
 *   await client.fs.writeTextFile(`${dir}/hello.txt`, "hi\n");
 *   for await (const entry of client.fs.readDir(dir)) console.log(entry.name, entry.isFile);
 *   console.log((await client.fs.stat(`${dir}/hello.txt`)).size); // 3
 *   console.log(await client.fs.readTextFile(`${dir}/hello.txt`)); // "hi\n"
 *   await client.fs.remove(dir, { recursive: true });
 *   await client.fs.stat(dir).catch((err) => console.log(err instanceof NotFoundError)); // true
 * } finally {
 *   await server.shutdown();
 * }
 * ```
 */
export class RemoteFs {
  #host: FsHost;
  #blockBytes: number;

  /**
   * Creates the view; use `client.fs`.
   *
   * @param host The client.
   * @param maxMessageBytes The client's inbound message limit: `fs/readBlock` asks for blocks
   *   whose replies fit it.
   */
  constructor(host: FsHost, maxMessageBytes: number = DEFAULT_MAX_MESSAGE_BYTES) {
    this.#host = host;
    const fits = Math.floor((maxMessageBytes - READ_BLOCK_OVERHEAD) / 4) * 3;
    this.#blockBytes = Math.max(3, Math.min(MAX_BLOCK, fits));
  }

  /**
   * Reads a whole file in one `fs/readFile`. A file whose reply passes the client's message
   * limit (`MessageTooLargeError`: over about 47 MiB with the default 64 MiB), or one the server
   * will not send whole (`data.kind` `replyTooLarge`, over 512 MiB), is then read again in
   * blocks of up to 1 MiB: such a file crosses the wire once whole, unread, before its blocks.
   *
   * @param path The file.
   */
  async readFile(path: RemotePath): Promise<Uint8Array> {
    try {
      const { dataBase64 } = await this.#host.request(
        "fs/readFile",
        { path: toPathUri(path) },
        RETRY,
      );
      return Uint8Array.fromBase64(dataBase64);
    } catch (err) {
      const tooLarge = err instanceof MessageTooLargeError ||
        (err instanceof RemoteError && errorKind(err.data) === "replyTooLarge");
      if (!tooLarge) throw fsErrorOf(err, labelOf(path));
    }
    return await this.#readBlocks(path);
  }

  /** The file in blocks (of up to 1 MiB) through a handle. */
  async #readBlocks(path: RemotePath): Promise<Uint8Array> {
    await using file = await this.open(path);
    const chunks: Uint8Array[] = [];
    let size = 0;
    const blockBytes = this.#blockBytes;
    for (let block = new Uint8Array(blockBytes);; block = new Uint8Array(blockBytes)) {
      const n = await file.read(block);
      if (n === null) break;
      chunks.push(block.subarray(0, n));
      size += n;
    }
    const data = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      data.set(chunk, offset);
      offset += chunk.length;
    }
    return data;
  }

  /**
   * Reads a whole file as UTF-8 text (invalid bytes become U+FFFD).
   *
   * @param path The file.
   */
  async readTextFile(path: RemotePath): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path));
  }

  /**
   * Creates or replaces a file. Bytes up to 32 MiB are written atomically
   * (a temporary file renamed over the path); more bytes, or a stream, are
   * written block by block through a handle (not atomically).
   *
   * @param path The file.
   * @param data The content.
   */
  async writeFile(path: RemotePath, data: Uint8Array | ReadableStream<Uint8Array>): Promise<void> {
    if (data instanceof Uint8Array && data.length <= MAX_WHOLE_WRITE_BYTES) {
      await this.#call(path, "fs/writeFile", { path: toPathUri(path), dataBase64: data }, RETRY);
      return;
    }
    if (data instanceof Uint8Array) data = ReadableStream.from([data]);
    await using file = await this.open(path, { write: true });
    for await (const chunk of data) await file.write(chunk);
  }

  /**
   * Creates or replaces a file with UTF-8 text.
   *
   * @param path The file.
   * @param text The content.
   */
  async writeTextFile(path: RemotePath, text: string): Promise<void> {
    await this.writeFile(path, new TextEncoder().encode(text));
  }

  /**
   * Lists a directory, in the server's readdir order. Entries the server
   * cannot stat (broken symlinks) are left out. Telling symlinks apart costs
   * one `fs/getMetadata` per entry (32 at a time).
   *
   * @param path The directory.
   */
  async *readDir(path: RemotePath): AsyncIterable<DirEntry> {
    const uri = toPathUri(path);
    const { entries } = await this.#call(path, "fs/readDirectory", { path: uri }, RETRY);
    const base = uri.endsWith("/") ? uri : `${uri}/`;
    for (let i = 0; i < entries.length; i += READ_DIR_CONCURRENCY) {
      const batch = entries.slice(i, i + READ_DIR_CONCURRENCY);
      const links = await Promise.all(batch.map((entry) =>
        this.#host.request(
          "fs/getMetadata",
          { path: base + encodeURIComponent(entry.fileName) },
          RETRY,
        ).then((meta) => meta.isSymlink, () => undefined)
      ));
      for (const [j, entry] of batch.entries()) {
        const isSymlink = links[j];
        if (isSymlink === undefined) continue; // Gone since the listing.
        yield {
          name: entry.fileName,
          isFile: !isSymlink && entry.isFile,
          isDirectory: !isSymlink && entry.isDirectory,
          isSymlink,
        };
      }
    }
  }

  /**
   * Describes a path, following symlinks (as `Deno.stat`).
   *
   * @param path The path.
   */
  async stat(path: RemotePath): Promise<FileInfo> {
    const meta = await this.#call(path, "fs/getMetadata", { path: toPathUri(path) }, RETRY);
    return {
      isFile: meta.isFile,
      isDirectory: meta.isDirectory,
      isSymlink: false,
      size: meta.size,
      mtime: meta.modifiedAtMs > 0 ? new Date(meta.modifiedAtMs) : null,
      birthtime: meta.createdAtMs > 0 ? new Date(meta.createdAtMs) : null,
    };
  }

  /**
   * Creates a directory; with `recursive`, also its parents, and an existing
   * directory is fine (as `Deno.mkdir`).
   *
   * @param path The directory.
   * @param options `recursive` (default `false`).
   */
  async mkdir(path: RemotePath, options: { recursive?: boolean } = {}): Promise<void> {
    const recursive = options.recursive ?? false;
    await this.#call(path, "fs/createDirectory", { path: toPathUri(path), recursive }, {
      retry: recursive,
    });
  }

  /**
   * Removes a file, a symlink or an empty directory; with `recursive`, a
   * directory and everything in it. A missing path is an error (as
   * `Deno.remove`).
   *
   * @param path The path.
   * @param options `recursive` (default `false`).
   */
  async remove(path: RemotePath, options: { recursive?: boolean } = {}): Promise<void> {
    const recursive = options.recursive ?? false;
    await this.#call(path, "fs/remove", { path: toPathUri(path), recursive, force: false });
  }

  /**
   * Copies a file or symlink; with `recursive`, a directory tree.
   *
   * @param from The source.
   * @param to The destination.
   * @param options `recursive` (default `false`).
   */
  async copy(
    from: RemotePath,
    to: RemotePath,
    options: { recursive?: boolean } = {},
  ): Promise<void> {
    await this.#call(from, "fs/copy", {
      sourcePath: toPathUri(from),
      destinationPath: toPathUri(to),
      recursive: options.recursive ?? false,
    }, RETRY);
  }

  /**
   * Resolves symlinks and `.`/`..` of an existing path; returns a plain path.
   *
   * @param path The path.
   */
  async realPath(path: RemotePath): Promise<string> {
    const result = await this.#call(path, "fs/canonicalize", { path: toPathUri(path) }, RETRY);
    return fromPathUri(result.path);
  }

  /**
   * Opens a file for reading, or (with `write`) creates or truncates it for
   * writing. The handle belongs to the connection: after a reconnect it is
   * gone and its calls fail.
   *
   * @param path The file.
   * @param options `read` or `write`.
   */
  async open(path: RemotePath, options: OpenOptions = {}): Promise<RemoteFile> {
    if (options.write && options.read) {
      throw new TypeError("Cannot open a remote file for reading and writing at once");
    }
    const handleId = crypto.randomUUID().replaceAll("-", ""); // The server allows 32 bytes.
    await this.#call(path, "fs/open", {
      handleId,
      path: toPathUri(path),
      mode: options.write ? "replace" : "read",
    });
    const label = labelOf(path);
    let position = 0;
    let closed: Promise<void> | undefined;
    const close = (): Promise<void> =>
      closed ??= this.#host.request("fs/close", { handleId }).then(() => {}, () => {});
    return {
      read: async (p) => {
        if (p.length === 0) return 0;
        const { chunk, eof } = await this.#call(label, "fs/readBlock", {
          handleId,
          offset: position,
          len: Math.min(p.length, this.#blockBytes),
        });
        const bytes = Uint8Array.fromBase64(chunk);
        if (bytes.length === 0 && eof) return null;
        p.set(bytes);
        position += bytes.length;
        return bytes.length;
      },
      write: async (p) => {
        for (let offset = 0; offset < p.length; offset += MAX_BLOCK) {
          const block = p.subarray(offset, offset + MAX_BLOCK);
          await this.#call(label, "fs/writeBlock", { handleId, offset: position, chunk: block });
          position += block.length;
        }
        return p.length;
      },
      close,
      [Symbol.asyncDispose]: close,
    };
  }

  async #call<M extends SessionRequestName>(
    path: RemotePath,
    method: M,
    ...args: RequestArgs<M>
  ): Promise<ResultOf<M>> {
    try {
      return await this.#host.request(method, ...args);
    } catch (err) {
      throw fsErrorOf(err, labelOf(path));
    }
  }
}

function labelOf(path: RemotePath): string {
  return typeof path === "string" ? path : path.href;
}
