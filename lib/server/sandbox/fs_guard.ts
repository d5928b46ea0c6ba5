/**
 * The `sandbox` parameter of the `fs/*` methods, enforced in-process.
 *
 * The reference runs a sandboxed file operation in a helper process inside
 * the same bubblewrap sandbox as a command; this server checks the
 * operation against the same {@linkcode SandboxPlan} before performing it,
 * without a helper process. The checks follow the order in which the kernel
 * reports errors inside the sandbox, so the errors are the reference's:
 *
 * - a write where the plan is read-only: `-32603 Read-only file system (os error 30)`;
 * - a read or write inside a denied path: `-32600 Permission denied (os error 13)`;
 * - errors the kernel reports first win: a missing parent (`-32004 No such
 *   file or directory`), writing a directory (`Is a directory`),
 *   `mkdir` of an existing path (`File exists`, or success with
 *   `recursive`), removing a missing path (success with `force`);
 * - a read-only path missing inside a writable root behaves as the empty
 *   read-only directory the sandbox would show there; removing a mount
 *   point (a writable root, a carve-out) fails with `Resource busy`.
 *
 * Limit: the check and the operation are two steps. A process that runs in
 * a sandbox *at the same time* and can write the directories involved could
 * swap a directory for a symlink in between; the operation then follows it.
 *
 * @module
 */

import { osError } from "../host/os_errors.ts";
import { pathFromUri, uriFromPath } from "../host/path_uri.ts";
import {
  accessAt,
  canonicalPath,
  mountAt,
  pathIsUnder,
  planSandbox,
  type PlanSandboxOptions,
  type SandboxAccess,
  type SandboxPlan,
} from "./policy.ts";
import {
  activeServerSandbox,
  ceilingPlan,
  confines,
  effectivePlan,
  sandboxPermissionDenied,
} from "./server_policy.ts";

/** The `fs/*` methods that take a `sandbox`. */
export type FsSandboxMethod =
  | "fs/readFile"
  | "fs/writeFile"
  | "fs/createDirectory"
  | "fs/getMetadata"
  | "fs/canonicalize"
  | "fs/readDirectory"
  | "fs/walk"
  | "fs/remove"
  | "fs/copy"
  | "fs/open";

/** The params members {@linkcode withFsSandbox} reads. */
export interface FsSandboxParams {
  /** The wire `sandbox` value. */
  sandbox?: unknown;
  /** `file:` URI of the path (all methods but `fs/copy`). */
  path?: string;
  /** `fs/copy` source. */
  sourcePath?: string;
  /** `fs/copy` destination. */
  destinationPath?: string;
  /** `fs/createDirectory`, `fs/remove`, `fs/copy`. */
  recursive?: boolean | null;
  /** `fs/open`: `"replace"` opens for writing. */
  mode?: string | null;
}

const MAX_SYMLINK_HOPS = 40;

function envGet(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function serverCwd(): string {
  try {
    return Deno.cwd();
  } catch {
    return "/";
  }
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch {
    return null;
  }
}

function join(directory: string, name: string): string {
  return directory === "/" ? `/${name}` : `${directory}/${name}`;
}

function split(path: string): { parent: string; name: string } {
  const cut = path.lastIndexOf("/");
  return { parent: cut <= 0 ? "/" : path.slice(0, cut), name: path.slice(cut + 1) };
}

/** A path that exists inside the sandbox only: the empty directory over a missing carve-out. */
function isVirtual(plan: SandboxPlan, path: string): boolean {
  return plan.mounts.some((mount) => mount.node === "missing" && mount.path === path);
}

function hasEntries(directory: string): boolean {
  try {
    for (const _ of Deno.readDirSync(directory)) return true;
  } catch {
    // Unreadable: treat as empty.
  }
  return false;
}

function isMountPoint(plan: SandboxPlan, path: string): boolean {
  return plan.mounts.some((mount) => mount.path === path);
}

/**
 * How a refusal is reported: `access` is what the plan gives the path.
 * For a client's sandbox, the error the sandboxed operation would get;
 * for the server's own sandbox, the typed permission error.
 */
export type FsRefusal = (access: SandboxAccess, path: string) => never;

/** The errors a sandboxed operation gets from the kernel (the reference's). */
const kernelRefusal: FsRefusal = (access) => {
  throw osError(access === "deny" ? "EACCES" : "EROFS");
};

/** What a path is inside the sandbox, resolved like the kernel would. */
interface Located {
  /** Canonical path of the entry (its parent resolved, and the entry itself when followed). */
  path: string;
  /** What is there. */
  kind: "missing" | "directory" | "other";
}

/**
 * Resolves `path` inside the sandbox's view. Throws `ENOENT` or `ENOTDIR`
 * when the parent directory does not exist there.
 */
function locate(plan: SandboxPlan, path: string, follow: boolean): Located {
  let current = path;
  for (let hop = 0; hop <= MAX_SYMLINK_HOPS; hop++) {
    if (current === "/") return { path: "/", kind: "directory" };
    const { parent, name } = split(current);
    const canonicalParent = canonicalPath(parent);
    let parentPath = canonicalParent.path;
    if (canonicalParent.exists) {
      if (!Deno.statSync(parentPath).isDirectory) throw osError("ENOTDIR");
      // A carve-out's synthetic mount point is empty inside the sandbox.
      if (isVirtual(plan, parentPath)) return { path: join(parentPath, name), kind: "missing" };
    } else if (isVirtual(plan, parentPath)) {
      return { path: join(parentPath, name), kind: "missing" };
    } else {
      throw osError("ENOENT");
    }
    parentPath = canonicalParent.path;
    const target = join(parentPath, name);
    const info = isVirtual(plan, target) ? null : lstatOrNull(target);
    if (info === null) {
      return { path: target, kind: isVirtual(plan, target) ? "directory" : "missing" };
    }
    if (info.isSymlink && follow) {
      try {
        current = Deno.realPathSync(target);
        continue;
      } catch {
        // A dangling link: a write creates the file it names.
        const link = Deno.readLinkSync(target);
        current = link.startsWith("/") ? link : join(parentPath, link);
        continue;
      }
    }
    return { path: target, kind: info.isDirectory ? "directory" : "other" };
  }
  throw osError("ELOOP");
}

/** Refuses a write at a location (a new entry, or an existing non-directory). */
function requireWritable(plan: SandboxPlan, path: string, refuse: FsRefusal): void {
  const mount = mountAt(plan, path);
  const access = mount?.access ?? plan.rootAccess;
  if (access === "write") return;
  // A denied file is an empty, unreadable, read-only file in the sandbox.
  if (mount?.path === path && mount.node === "file") refuse("read", path);
  refuse(access, path);
}

/**
 * Checks a write against the plan. Returns `"run"` when the operation may
 * proceed (it may still fail on its own), `"done"` when it already succeeds
 * inside the sandbox without touching the disk (`mkdir -p` of a directory
 * that exists there).
 *
 * @param plan The request's plan.
 * @param operation What is written: `file` (create or replace a file,
 * following symlinks), `entry` (create a new directory entry: `mkdir`, a
 * copied symlink or tree), `directories` (`mkdir -p`), `remove`.
 * @param path Native absolute path as requested.
 * @param recursive For `remove`: the subtree goes too.
 * @param refuse How a refusal is thrown (default: the sandboxed operation's error).
 * @throws {RpcError} The error the sandboxed operation would get.
 */
export function checkFsWrite(
  plan: SandboxPlan,
  operation: "file" | "entry" | "directories" | "remove",
  path: string,
  recursive = false,
  refuse: FsRefusal = kernelRefusal,
): "run" | "done" {
  if (plan.isolation !== "filesystem") return "run";
  if (operation === "directories") return checkMkdirAll(plan, path, refuse);
  if (operation === "remove") return checkRemove(plan, path, recursive, refuse);
  const located = locate(plan, path, operation === "file");
  if (operation === "file") {
    if (located.kind === "directory") throw osError("EISDIR");
  } else if (located.kind !== "missing") {
    throw osError("EEXIST");
  }
  requireWritable(plan, located.path, refuse);
  return "run";
}

function checkMkdirAll(plan: SandboxPlan, path: string, refuse: FsRefusal): "run" | "done" {
  let current = "/";
  for (const part of path.split("/").filter((p) => p !== "")) {
    const next = join(current, part);
    if (isVirtual(plan, next)) {
      current = next;
      continue;
    }
    const info = lstatOrNull(next);
    if (info === null) {
      // The first directory to create decides.
      requireWritable(plan, next, refuse);
      return "run";
    }
    if (info.isSymlink) {
      try {
        current = Deno.realPathSync(next);
      } catch {
        return "run";
      }
    } else {
      current = next;
    }
    if (!lstatOrNull(current)?.isDirectory) return "run";
  }
  return "done";
}

function checkRemove(
  plan: SandboxPlan,
  path: string,
  recursive: boolean,
  refuse: FsRefusal,
): "run" | "done" {
  let located: Located;
  try {
    located = locate(plan, path, false);
  } catch {
    return "run";
  }
  if (isVirtual(plan, located.path)) throw osError("EBUSY");
  if (located.kind === "missing") return "run";
  if (isMountPoint(plan, located.path)) {
    // `rm -r` empties a directory before removing it: a read-only mount
    // with content fails on the content first.
    const access = accessAt(plan, located.path);
    if (
      recursive && located.kind === "directory" && access !== "write" && hasEntries(located.path)
    ) {
      refuse(access, located.path);
    }
    throw osError("EBUSY");
  }
  requireWritable(plan, located.path, refuse);
  if (recursive && located.kind === "directory") {
    const inside = plan.mounts.filter((mount) =>
      mount.path !== located.path && pathIsUnder(mount.path, located.path)
    );
    const fixed = inside.find((mount) => mount.access !== "write");
    if (fixed !== undefined) refuse("read", fixed.path);
    if (inside.length > 0) throw osError("EBUSY");
  }
  return "run";
}

/**
 * Checks a read against the plan: a path at or below a denied path fails
 * with `Permission denied`, except the metadata of the denied path itself.
 *
 * @param plan The request's plan.
 * @param path Native absolute path as requested.
 * @param subtree The whole tree below `path` is read (a recursive copy).
 * @param metadataOnly Only `stat`/`realpath` (the denied path itself is visible).
 * @param refuse How a refusal is thrown (default: the sandboxed operation's error).
 * @throws {RpcError} `-32600 Permission denied (os error 13)`.
 */
export function checkFsRead(
  plan: SandboxPlan,
  path: string,
  subtree = false,
  metadataOnly = false,
  refuse: FsRefusal = kernelRefusal,
): void {
  if (plan.isolation !== "filesystem") return;
  const canonical = canonicalPath(path).path;
  for (const mount of plan.mounts) {
    if (mount.access !== "deny") continue;
    const exactlyIt = mount.path === canonical;
    if (pathIsUnder(canonical, mount.path) && !(exactlyIt && metadataOnly)) {
      refuse("deny", canonical);
    }
    if (subtree && pathIsUnder(mount.path, canonical)) refuse("deny", mount.path);
  }
}

/** Planning options for an fs request: the server's cwd and `TMPDIR`. */
function planOptions(): PlanSandboxOptions {
  const tmpdir = envGet("TMPDIR");
  return { cwd: serverCwd(), env: tmpdir === undefined ? {} : { TMPDIR: tmpdir } };
}

interface WalkLike {
  entries: { path: string; kind: string }[];
  errors: { path: string; message: string }[];
}

/** Drops walk entries inside denied directories and reports those directories as errors. */
function restrictWalk<R>(plan: SandboxPlan, root: string, result: R): R {
  const walk = result as unknown as WalkLike;
  const canonicalRoot = canonicalPath(root).path;
  const denied = plan.mounts.filter((mount) =>
    mount.access === "deny" && mount.path !== canonicalRoot &&
    pathIsUnder(mount.path, canonicalRoot)
  ).map((mount) => root + mount.path.slice(canonicalRoot === "/" ? 0 : canonicalRoot.length));
  if (denied.length === 0) return result;
  const message = osError("EACCES").message;
  const entries = walk.entries.filter((entry) => {
    const path = pathFromUri(entry.path);
    return !denied.some((dir) => path !== dir && pathIsUnder(path, dir));
  });
  const errors = [...walk.errors];
  for (const dir of denied) {
    const listed = walk.entries.some((entry) =>
      pathFromUri(entry.path) === dir && entry.kind === "directory"
    );
    if (listed) errors.push({ path: uriFromPath(dir), message });
  }
  return { ...walk, entries, errors } as unknown as R;
}

/** A plan to check a request against, and how its refusals are reported. */
interface FsCheck {
  plan: SandboxPlan;
  refuseRead: FsRefusal;
  refuseWrite: FsRefusal;
}

/** The refusals of the server's own sandbox: the typed permission error. */
function ceilingCheck(plan: SandboxPlan): FsCheck {
  return {
    plan,
    refuseRead: (_, path) => {
      throw sandboxPermissionDenied("read", path);
    },
    refuseWrite: (_, path) => {
      throw sandboxPermissionDenied("write", path);
    },
  };
}

/**
 * The plans an fs request is checked against: the client's `sandbox` (the
 * reference's errors; without a server ceiling it also hides the server's
 * secret files) and the server's `--sandbox` ceiling (the typed permission
 * error).
 */
function checksFor(sandbox: unknown): FsCheck[] {
  const options = planOptions();
  const server = activeServerSandbox();
  const confined = confines(server);
  const checks: FsCheck[] = [];
  const client = confined ? planSandbox(sandbox, options) : effectivePlan(sandbox, options, server);
  if (client?.isolation === "filesystem") {
    checks.push({ plan: client, refuseRead: kernelRefusal, refuseWrite: kernelRefusal });
  }
  const ceiling = confined ? ceilingPlan(server, options) : undefined;
  if (ceiling !== undefined) checks.push(ceilingCheck(ceiling));
  return checks;
}

/** Checks one request against one plan; `"done"` when it succeeds without touching the disk. */
function checkRequest(
  method: FsSandboxMethod,
  params: FsSandboxParams,
  check: FsCheck,
): "run" | "done" {
  const { plan, refuseRead, refuseWrite } = check;
  const path = (uri: string | undefined) => pathFromUri(uri ?? "");
  switch (method) {
    case "fs/readFile":
    case "fs/readDirectory":
    case "fs/walk":
      checkFsRead(plan, path(params.path), false, false, refuseRead);
      return "run";
    case "fs/getMetadata":
    case "fs/canonicalize":
      checkFsRead(plan, path(params.path), false, true, refuseRead);
      return "run";
    case "fs/open":
      if (params.mode === "replace") {
        return checkFsWrite(plan, "file", path(params.path), false, refuseWrite);
      }
      checkFsRead(plan, path(params.path), false, false, refuseRead);
      return "run";
    case "fs/writeFile":
      return checkFsWrite(plan, "file", path(params.path), false, refuseWrite);
    case "fs/createDirectory": {
      const recursive = params.recursive ?? true;
      const operation = recursive ? "directories" : "entry";
      return checkFsWrite(plan, operation, path(params.path), false, refuseWrite);
    }
    case "fs/remove":
      return checkFsWrite(plan, "remove", path(params.path), params.recursive ?? true, refuseWrite);
    case "fs/copy": {
      const source = path(params.sourcePath);
      const info = lstatOrNull(source);
      checkFsRead(plan, source, info?.isDirectory === true, false, refuseRead);
      if (info === null) return "run";
      const operation = info.isFile ? "file" : "entry";
      return checkFsWrite(plan, operation, path(params.destinationPath), false, refuseWrite);
    }
  }
}

/**
 * Runs an `fs/*` handler under the request's `sandbox` and the server's own
 * `--sandbox`: checks the request against both plans (see the module
 * documentation), then runs it, or answers `{}` when the sandboxed
 * operation succeeds without touching the disk. Without either (or with
 * plans that restrict nothing) it just runs.
 *
 * @param method The wire method.
 * @param params The request params (`sandbox`, paths, `recursive`, `mode`).
 * @param run Performs the operation.
 * @returns The handler's result.
 * @throws {RpcError} `-32602` for an invalid `sandbox`, the error the
 * sandboxed operation would get for a refusal of the client's sandbox, and
 * `-32600` with `data.kind: "permissionDenied"` for a refusal of the
 * server's sandbox.
 */
export async function withFsSandbox<R>(
  method: FsSandboxMethod,
  params: FsSandboxParams,
  run: () => R | Promise<R>,
): Promise<R> {
  const checks = checksFor(params.sandbox);
  if (checks.length === 0) return await run();
  let done = false;
  for (const check of checks) {
    if (checkRequest(method, params, check) === "done") done = true;
  }
  if (done) return {} as R;
  if (method !== "fs/walk") return await run();
  const root = pathFromUri(params.path ?? "");
  let result = await run();
  for (const check of checks) result = restrictWalk(check.plan, root, result);
  return result;
}
