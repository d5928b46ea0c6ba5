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

import type { ResultOf } from "../../protocol/methods.ts";
import type { PathAccess } from "../host/path_access.ts";
import { lstatOrNull } from "../host/stat.ts";
import { serverEnv } from "../host/env.ts";
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

const MAX_SYMLINK_HOPS = 40;

function serverCwd(): string {
  try {
    return Deno.cwd();
  } catch {
    return "/";
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

/** How the refusals of one plan are reported, by the kind of access refused. */
export interface FsRefusals {
  /** A refused read. */
  read: FsRefusal;
  /** A refused write. */
  write: FsRefusal;
}

/** The refusals of a client's sandbox: the errors the sandboxed operation would get. */
const KERNEL_REFUSALS: FsRefusals = { read: kernelRefusal, write: kernelRefusal };

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
  // The deepest mount decides: a writable root re-exposed inside a denied directory is readable.
  const at = mountAt(plan, canonical);
  if (at?.access === "deny" && !(at.path === canonical && metadataOnly)) {
    refuse("deny", canonical);
  }
  for (const mount of plan.mounts) {
    if (mount.access !== "deny") continue;
    if (subtree && pathIsUnder(mount.path, canonical)) refuse("deny", mount.path);
  }
}

/** Whether `path` is a directory the plan denies, itself (not a path below one). */
function isDeniedMount(plan: SandboxPlan, path: string): boolean {
  if (plan.isolation !== "filesystem") return false;
  const canonical = canonicalPath(path).path;
  const at = mountAt(plan, canonical);
  return at?.access === "deny" && at.path === canonical;
}

/** Planning options for an fs request: the server's cwd and `TMPDIR`. */
function planOptions(): PlanSandboxOptions {
  const tmpdir = serverEnv("TMPDIR");
  return { cwd: serverCwd(), env: tmpdir === undefined ? {} : { TMPDIR: tmpdir } };
}

/**
 * The plan of an fs request's `sandbox`, planned against the server's cwd
 * and `TMPDIR`; `undefined` without one.
 *
 * @param sandbox The wire `sandbox` value.
 * @throws {RpcError} `-32602` for an invalid `sandbox`.
 */
export function planFsSandbox(sandbox: unknown): SandboxPlan | undefined {
  if (sandbox === undefined || sandbox === null) return undefined;
  return planSandbox(sandbox, planOptions());
}

/**
 * Checks an fs request's accesses against its plan, in order (see the module
 * documentation). Returns `"run"` when the operation may proceed (it may
 * still fail on its own), `"done"` when it already succeeds inside the
 * sandbox without touching the disk (`mkdir -p` of a directory that exists
 * there), `"denied"` when it lists a directory the request's sandbox denies, itself (the
 * sandboxed walk of its root fails, which the reference answers as the walk's one error, not
 * as the request's; under the server's own sandbox, `refusals` other than the default, the walk
 * is refused).
 *
 * @param plan The request's plan.
 * @param accesses Every path the request reads or writes, from the fs operations table.
 * @param refusals How refusals are thrown (default: the sandboxed operation's errors).
 * @throws {RpcError} The error the sandboxed operation would get.
 */
export function checkFsAccess(
  plan: SandboxPlan,
  accesses: readonly PathAccess[],
  refusals: FsRefusals = KERNEL_REFUSALS,
): "run" | "done" | "denied" {
  let verdict: "run" | "done" | "denied" = "run";
  const { read, write } = refusals;
  for (const access of accesses) {
    // Only the request's own sandbox answers so; the server's refuses the walk.
    const walksDenied = refusals === KERNEL_REFUSALS && access.access === "read" &&
      access.kind === "listing" && isDeniedMount(plan, access.path);
    if (walksDenied) {
      verdict = "denied";
    } else if (access.access === "read") {
      const subtree = access.kind === "tree" && lstatOrNull(access.path)?.isDirectory === true;
      const metadataOnly = access.kind === "metadata" || access.kind === "existence";
      checkFsRead(plan, access.path, subtree, metadataOnly, read);
    } else if (access.kind === "copy") {
      const source = lstatOrNull(access.from);
      if (source !== null) {
        checkFsWrite(plan, source.isFile ? "file" : "entry", access.path, false, write);
      }
    } else if (access.kind === "remove") {
      checkFsWrite(plan, "remove", access.path, access.recursive, write);
    } else if (checkFsWrite(plan, access.kind, access.path, false, write) === "done") {
      verdict = "done";
    }
  }
  return verdict;
}

/**
 * Drops the entries of a walk's result that lie inside denied directories,
 * and reports each such directory as an error, as the sandboxed walk sees them.
 *
 * @param plan The request's plan.
 * @param root Native path of the walk's root, as requested.
 * @param result The unrestricted walk.
 */
export function restrictListing(
  plan: SandboxPlan,
  root: string,
  result: ResultOf<"fs/walk">,
): ResultOf<"fs/walk"> {
  const canonicalRoot = canonicalPath(root).path;
  const denied = plan.mounts.filter((mount) =>
    mount.access === "deny" && mount.path !== canonicalRoot &&
    pathIsUnder(mount.path, canonicalRoot)
  ).map((mount) => root + mount.path.slice(canonicalRoot === "/" ? 0 : canonicalRoot.length));
  if (denied.length === 0) return result;
  const message = osError("EACCES").message;
  // What the plan gives an entry, by its canonical path (a re-exposed root inside stays listed).
  const accessOf = (path: string) => accessAt(plan, canonicalRoot + path.slice(root.length) || "/");
  const entries = result.entries.filter((entry) => {
    const path = pathFromUri(entry.path);
    const inside = denied.some((dir) => path !== dir && pathIsUnder(path, dir));
    return !inside || accessOf(path) !== "deny";
  });
  const errors = [...result.errors];
  for (const dir of denied) {
    const listed = result.entries.some((entry) =>
      pathFromUri(entry.path) === dir && entry.kind === "directory"
    );
    const reported = errors.some((error) => error.path === uriFromPath(dir));
    if (listed && !reported) errors.push({ path: uriFromPath(dir), message });
  }
  return { ...result, entries, errors };
}

/** The refusals of the server's own sandbox: the typed permission error. */
const CEILING_REFUSALS: FsRefusals = {
  read: (_, path) => {
    throw sandboxPermissionDenied("read", path);
  },
  write: (_, path) => {
    throw sandboxPermissionDenied("write", path);
  },
};

/** A plan an fs request is checked against, and how its refusals are reported. */
export interface FsSandboxCheck {
  /** The plan (its isolation is `"filesystem"`). */
  readonly plan: SandboxPlan;
  /** How its refusals are thrown. */
  readonly refusals: FsRefusals;
}

/**
 * The plans an fs request is checked against: the client's `sandbox`
 * (`client`, with the reference's errors; without a server ceiling it also
 * hides the server's secret files) and the server's own `--sandbox`
 * (`server`, with the typed permission error of
 * {@linkcode sandboxPermissionDenied}). Each is `undefined` when it does not
 * restrict the file system.
 *
 * @param sandbox The request's wire `sandbox` value.
 * @throws {RpcError} `-32602` for an invalid `sandbox`.
 */
export function fsSandboxChecks(
  sandbox: unknown,
): { client?: FsSandboxCheck; server?: FsSandboxCheck } {
  const active = activeServerSandbox();
  const confined = confines(active);
  // Without a sandbox of its own and without a confining server, nothing restricts the request:
  // skip planning (it reads the server's cwd and environment) on the common path.
  if ((sandbox === undefined || sandbox === null) && !confined) return {};
  const options = planOptions();
  const clientPlan = confined ? planFsSandbox(sandbox) : effectivePlan(sandbox, options, active);
  const serverPlan = confined ? ceilingPlan(active, options) : undefined;
  return {
    client: clientPlan?.isolation === "filesystem"
      ? { plan: clientPlan, refusals: KERNEL_REFUSALS }
      : undefined,
    server: serverPlan === undefined ? undefined : { plan: serverPlan, refusals: CEILING_REFUSALS },
  };
}
