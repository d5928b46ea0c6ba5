/**
 * Reading a file through the fs operations table without holding more of it than a caller
 * needs: for the subsystems above fs (capability discovery, config reading) that bound the
 * files they read.
 *
 * @module
 */

import { RpcError } from "../../protocol/errors.ts";
import type { ParamsOf } from "../../protocol/methods.ts";
import type { FsRunner } from "./operations.ts";

/**
 * The POSIX name of the OS error an fs request failed with (its `data.errno`), if any.
 *
 * @example
 * ```ts
 * import { errnoOf } from "./bounded_read.ts";
 * console.log(errnoOf(new Error("x"))); // undefined
 * ```
 */
export function errnoOf(err: unknown): string | undefined {
  return err instanceof RpcError ? (err.data as { errno?: string } | undefined)?.errno : undefined;
}

/**
 * Whether an error of an fs request says the path does not exist (`data.errno` `ENOENT`).
 *
 * @example
 * ```ts
 * import { isNotFound } from "./bounded_read.ts";
 * console.log(isNotFound(new Error("x"))); // false
 * ```
 */
export function isNotFound(err: unknown): boolean {
  return errnoOf(err) === "ENOENT";
}

/**
 * The file's bytes from `fs/readFile`, but never much more than `limit + 1` of them: a result
 * longer than `limit` says the file is larger (it may have grown since its size was read), and
 * the rest is left unread (a streamed reply's file is closed).
 *
 * @param run Runs fs requests through the fs operations table.
 * @param params The `fs/readFile` params.
 * @param limit The most bytes the caller takes.
 *
 * @example
 * ```ts
 * import { readFileUpTo } from "./bounded_read.ts";
 * import { type FsRunner, runFsOperation } from "./operations.ts";
 * import { FileHandleTable } from "./handles.ts";
 * import { MissingWatchTable } from "./watch.ts";
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "0123456789");
 * const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
 * const run: FsRunner = (method, params) => runFsOperation(method, params, context);
 * console.log((await readFileUpTo(run, { path: `file://${path}` }, 4)).length > 4); // true
 * await Deno.remove(path);
 * ```
 */
export async function readFileUpTo(
  run: FsRunner,
  params: ParamsOf<"fs/readFile">,
  limit: number,
): Promise<Uint8Array> {
  const { dataBase64 } = await run("fs/readFile", params);
  // Base64 of at least one byte more than the limit.
  const chars = Math.ceil((limit + 1) / 3) * 4;
  let text = typeof dataBase64 === "string" ? dataBase64 : "";
  if (typeof dataBase64 !== "string") {
    // Leaving the loop early closes the file (the chunks' generator ends).
    for await (const chunk of dataBase64.take()) {
      text += chunk;
      if (text.length >= chars) break;
    }
  }
  return Uint8Array.fromBase64(text.slice(0, chars));
}
