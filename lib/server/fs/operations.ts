/**
 * The fs operations table: for every `fs/*` request of the method table,
 * the paths it reads and writes (its access rules) and the function that
 * runs it. {@linkcode runFsOperation} is the one place a request's paths are
 * resolved and checked: the request's `sandbox` (when it has one) and the
 * server's own `--sandbox` (when it confines), then the server's Deno
 * permissions, both derived from the access rules, and only
 * then the operation, which receives the checked paths. A metadata read
 * outside the server's read scope answers like a missing path; every other
 * access outside it gets a `permissionDenied` error.
 *
 * The table is typed from the method table: a `fs/*` request without an
 * entry does not compile, and neither does an entry whose method takes a
 * `sandbox` but lists no path.
 *
 * @module
 */

import type { ClientRequestName, ParamsOf, ReplyOf, ResultOf } from "../../protocol/methods.ts";
import { requireRead, requireReadOrMissing, requireWrite } from "../host/permissions.ts";
import { checkFsAccess, fsSandboxChecks, restrictListing } from "../sandbox/fs_guard.ts";
import { copiesTo, type PathAccess, reads, removes, writes } from "../host/path_access.ts";
import type { SandboxPlan } from "../sandbox/policy.ts";
import { copy } from "./copy.ts";
import { createDirectory, readDirectory } from "./directory.ts";
import type { FileHandleTable } from "./handles.ts";
import { canonicalize, getMetadata } from "./metadata.ts";
import { readFile } from "./read_file.ts";
import { remove } from "./remove.ts";
import { walk } from "./walk.ts";
import { osError } from "../host/os_errors.ts";
import type { MissingWatchTable } from "./watch.ts";
import { writeFile } from "./write_file.ts";

/** The `fs/*` requests of the method table. */
export type FsMethod = Extract<ClientRequestName, `fs/${string}`>;

/** The connection state fs requests use. */
export interface FsContext {
  /** This connection's open file handles. */
  readonly files: FileHandleTable;
  /** This connection's `fs/watchMissing` watches. */
  readonly watches: MissingWatchTable;
  /** Sends a notification to this connection. */
  notify(method: string, params: unknown): void;
}

/**
 * The access rules of a method: at least one path when its params take a
 * `sandbox` (so that no sandboxed request goes unchecked).
 */
type AccessList<M extends FsMethod> = "sandbox" extends keyof ParamsOf<M>
  ? readonly [PathAccess, ...PathAccess[]]
  : readonly PathAccess[];

/** One entry of the table. */
export interface FsOperation<M extends FsMethod, A extends AccessList<M> = AccessList<M>> {
  /**
   * The paths the request reads and writes, in the order they are checked.
   * Throws for a URI that names no local path.
   */
  access(params: ParamsOf<M>): A;
  /**
   * Performs the request on the paths of {@linkcode FsOperation.access}, once they are checked;
   * writes stay inside the request's and the server's sandbox `plans` (see `resolve.ts`).
   */
  run(
    params: ParamsOf<M>,
    paths: A,
    context: FsContext,
    plans: readonly SandboxPlan[],
  ): ReplyOf<M> | Promise<ReplyOf<M>>;
}

/** Builds a table entry, typing `run`'s paths after what `access` returns. */
function operation<M extends FsMethod, const A extends AccessList<M>>(
  _method: M,
  entry: FsOperation<M, A>,
): FsOperation<M, A> {
  return entry;
}

/** Every `fs/*` request, with its access rules and the function that runs it. */
export const FS_OPERATIONS: { readonly [M in FsMethod]: FsOperation<M> } = {
  "fs/readFile": operation("fs/readFile", {
    access: (params) => [reads(params.path, "content")],
    run: (_params, [file], _context, plans) => readFile(file.path, plans),
  }),
  "fs/writeFile": operation("fs/writeFile", {
    access: (params) => [writes(params.path, "file")],
    run: (params, [file], _context, plans) => writeFile(file.path, params.dataBase64, plans),
  }),
  "fs/createDirectory": operation("fs/createDirectory", {
    access: (params) => [writes(params.path, params.recursive ?? true ? "directories" : "entry")],
    run: (params, [directory], _context, plans) =>
      createDirectory(directory.path, params.recursive ?? true, plans),
  }),
  "fs/getMetadata": operation("fs/getMetadata", {
    access: (params) => [reads(params.path, "metadata")],
    run: (_params, [entry], _context, plans) => getMetadata(entry.path, plans),
  }),
  "fs/canonicalize": operation("fs/canonicalize", {
    access: (params) => [reads(params.path, "metadata")],
    run: (_params, [entry], _context, plans) => canonicalize(entry.path, plans),
  }),
  "fs/readDirectory": operation("fs/readDirectory", {
    access: (params) => [reads(params.path, "content")],
    run: (_params, [directory], _context, plans) => readDirectory(directory.path, plans),
  }),
  "fs/walk": operation("fs/walk", {
    access: (params) => [reads(params.path, "listing")],
    run: (params, [root], _context, plans) => walk(root.path, params.options, plans),
  }),
  "fs/remove": operation("fs/remove", {
    access: (params) => [removes(params.path, params.recursive ?? true)],
    run: (params, [entry], _context, plans) =>
      remove(entry.path, entry.recursive, params.force ?? true, plans),
  }),
  "fs/copy": operation("fs/copy", {
    access: (params) => {
      const source = reads(params.sourcePath, "tree");
      return [source, copiesTo(params.destinationPath, source)];
    },
    run: (params, [source, destination], _context, plans) =>
      copy(source.path, destination.path, params.recursive, plans),
  }),
  "fs/open": operation("fs/open", {
    access: (params) => [
      params.mode === "replace" ? writes(params.path, "file") : reads(params.path, "content"),
    ],
    run: (params, [file], context, plans) =>
      context.files.open(params.handleId, file.path, params.mode ?? "read", plans),
  }),
  // Handle requests touch no path: `fs/open` checked the handle's.
  "fs/readBlock": operation("fs/readBlock", {
    access: () => [],
    run: (params, _paths, context) => context.files.readBlock(params),
  }),
  "fs/writeBlock": operation("fs/writeBlock", {
    access: () => [],
    run: (params, _paths, context) => context.files.writeBlock(params),
  }),
  "fs/close": operation("fs/close", {
    access: () => [],
    run: (params, _paths, context) => context.files.close(params),
  }),
  "fs/watchMissing": operation("fs/watchMissing", {
    access: (params) => params.missing.map((uri) => reads(uri, "existence")),
    run: (params, paths, context) =>
      context.watches.watchMissing(
        params.watchId,
        paths.map((path) => path.path),
        (watchId) => context.notify("fs/missingChanged", { watchId }),
      ),
  }),
};

/** The walk of a directory the sandbox denies: no entries and its root's denial. */
function deniedWalk(root: string): ResultOf<"fs/walk"> {
  return {
    entries: [],
    errors: [{ path: root, message: osError("EACCES").message }],
    truncated: false,
  };
}

/**
 * Runs one fs request through the fs operations table: {@linkcode runFsOperation} with a
 * connection's context, as the subsystems above fs (discovery, config reading) are given it.
 */
export type FsRunner = <M extends FsMethod>(
  method: M,
  params: ParamsOf<M>,
) => ReplyOf<M> | Promise<ReplyOf<M>>;

/**
 * Runs an fs request: plans its `sandbox`, resolves its paths, checks them
 * against the sandbox and the server's Deno permissions, then runs it.
 * Under a sandbox, a `mkdir -p` of a directory the sandbox already shows is
 * answered `{}` without touching the disk, and a walk leaves out what
 * denied directories hold.
 *
 * @param method The wire method.
 * @param params The request's parsed params.
 * @param context The connection's handles, watches and notifications.
 * @returns The wire result.
 * @throws {RpcError} The sandbox's refusal, a `permissionDenied` error, or the operation's error.
 *
 * @example Read a file
 * ```ts
 * import { runFsOperation } from "./operations.ts";
 * import { FileHandleTable } from "./handles.ts";
 * import { MissingWatchTable } from "./watch.ts";
 * const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "hi");
 * console.log(await runFsOperation("fs/readFile", { path: `file://${path}` }, context));
 * await Deno.remove(path);
 * ```
 */
export function runFsOperation<M extends FsMethod>(
  method: M,
  params: ParamsOf<M>,
  context: FsContext,
): ReplyOf<M> | Promise<ReplyOf<M>> {
  const entry = FS_OPERATIONS[method] as unknown as {
    access(params: ParamsOf<M>): readonly PathAccess[];
    run(
      params: ParamsOf<M>,
      paths: readonly PathAccess[],
      context: FsContext,
      plans: readonly SandboxPlan[],
    ): ReplyOf<M>;
  };
  // The sandbox first: an invalid one is reported before an invalid path, as by the reference.
  const { client, server } = fsSandboxChecks((params as { sandbox?: unknown }).sandbox);
  const paths = entry.access(params);
  // Only `mkdir -p` can be done without running, and its result is `{}`; only a walk is denied.
  const verdict = client === undefined ? "run" : checkFsAccess(client.plan, paths, client.refusals);
  if (verdict === "done") return {} as ReplyOf<M>;
  if (verdict === "denied") return deniedWalk((params as { path: string }).path) as ReplyOf<M>;
  for (const path of paths) {
    if (path.access === "write") requireWrite(path.path);
    else if (path.kind === "metadata") requireReadOrMissing(path.path);
    else requireRead(path.path);
  }
  // The server's own sandbox last: it resolves paths the server's permissions let it see.
  if (server !== undefined && checkFsAccess(server.plan, paths, server.refusals) === "done") {
    return {} as ReplyOf<M>;
  }
  const checks = [client, server].filter((check) => check !== undefined);
  const result = entry.run(params, paths, context, checks.map((check) => check.plan));
  const listing = checks.length > 0 ? paths.find((path) => path.kind === "listing") : undefined;
  if (listing === undefined) return result;
  return Promise.resolve(result).then((walked) =>
    checks.reduce(
      (restricted, check) => restrictListing(check.plan, listing.path, restricted),
      walked as ResultOf<"fs/walk">,
    ) as ReplyOf<M>
  );
}
