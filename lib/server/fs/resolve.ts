/**
 * Race-free resolution of the paths fs requests write, and the writes
 * themselves done on the descriptors that were checked.
 *
 * A write's *scope root* is the deepest directory that contains the path
 * and is entirely writable: the topmost ancestor the server's
 * `--allow-write` grants, and, under a sandbox, the writable root that
 * holds it. The path's parent is opened with Linux `openat2` relative to
 * the root with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: symlinks are
 * followed only while they stay below the root, `..` cannot climb out, and
 * a concurrent swap of a directory for a symlink cannot redirect it (where
 * `RESOLVE_BENEATH` refuses an absolute symlink, {@linkcode openBelow} walks
 * the path component by component instead, and follows the link when its
 * target lies below the root, as the reference does; a kernel without
 * `openat2`, before Linux 5.6, gets that walk for every path). The
 * parent's real path (from `/proc/self/fd`) is then checked against the
 * server's permissions and the sandbox (read-only carve-outs, denied
 * paths), and the final create, replace, unlink or rename is done relative
 * to that descriptor (`mkdirat`, `unlinkat`, `renameat`, `openat` with
 * `O_NOFOLLOW`, an `O_TMPFILE` linked in with `linkat`). A symlink in the
 * last component is followed by reading it and resolving its target the
 * same way: a link that leaves the root (dangling or not) is refused (fail
 * closed); a dangling link inside it names the file to create, as for the
 * kernel.
 *
 * Needs `--allow-ffi` ({@linkcode raceFreeWrites}); without it the callers
 * keep their path-based code, and `permissions.ts` refuses what it cannot
 * verify.
 *
 * @module
 */

import { dirname, relative, resolve } from "../host/posix_path.ts";
import { osError } from "../host/os_errors.ts";
import { joinPath } from "../host/path_uri.ts";
import { grantedEverywhere } from "../host/permissions.ts";
import { permissionDenied } from "../host/permission_errors.ts";
import {
  close,
  F,
  fchmod,
  fchownQuiet,
  fdatasync,
  fdPath,
  fsSyscallsAvailable,
  fstatat,
  isType,
  linkTmpfile,
  listDirectoryEntries,
  mkdirat,
  openat,
  openat2,
  readlinkat,
  renameat,
  type Stat,
  symlinkat,
  SyscallError,
  unlinkat,
  writeAll,
} from "../host/fs_syscalls.ts";
import type { FileName } from "../host/libc.ts";
import { accessAt, mountAt, pathIsUnder, type SandboxPlan } from "../sandbox/policy.ts";

/** Maximum number of symlinks followed in the last component, as Linux. */
const MAX_SYMLINK_HOPS = 40;
const BENEATH = F.RESOLVE_BENEATH | F.RESOLVE_NO_MAGICLINKS;

/** Whether writes go through this module (Linux with `--allow-ffi`). */
export function raceFreeWrites(): boolean {
  return fsSyscallsAvailable();
}

/**
 * Opens `rel` below the directory `rootfd`: `openat2` with `RESOLVE_BENEATH
 * | RESOLVE_NO_MAGICLINKS`, and where the kernel refuses that (`EXDEV`: an
 * absolute symlink on the way, which `RESOLVE_BENEATH` never follows, or a
 * `..` above the root), a walk component by component from `rootfd`: each
 * directory opened with `O_NOFOLLOW` relative to the one before, each
 * symlink read (`readlinkat`) on the descriptor that was examined and its
 * target resolved the same way. An absolute target is followed only when it
 * names a path below the root's canonical path, and then from `rootfd`
 * itself (never by path); `..` never climbs above the root. So an absolute
 * link that stays in the scope resolves as the kernel would resolve it, and
 * anything that leaves the scope is refused with `EXDEV`.
 *
 * @param rootfd Descriptor of the root directory.
 * @param rel A relative path below it.
 * @param flags The final open's flags (`O_NOFOLLOW`: a last-component link is not followed).
 * @param rootReal The root's canonical path, when the caller has it.
 * @returns The new descriptor; close it.
 * @throws {SyscallError} `EXDEV` for a path that leaves the root, `ELOOP` after 40 links.
 */
function openBelow(rootfd: number, rel: string, flags: number, rootReal?: string): number {
  if (!openat2Missing) {
    try {
      return openat2(rootfd, rel, flags, 0, BENEATH);
    } catch (err) {
      if (!(err instanceof SyscallError && (err.code === "EXDEV" || err.code === "ENOSYS"))) {
        throw err;
      }
      if (err.code === "ENOSYS") openat2Missing = true;
    }
  }
  return walkBelow(rootfd, rel, flags, rootReal ?? fdPath(rootfd));
}

/** The kernel has no `openat2` (before Linux 5.6): every path is walked. */
let openat2Missing = false;

/** Opens `rel` below `/` (`rootfd`): absolute symlinks followed, magic links not. */
function openBelowSlash(rootfd: number, rel: string, flags: number): number {
  if (!openat2Missing) {
    try {
      return openat2(rootfd, rel, flags, 0, F.RESOLVE_NO_MAGICLINKS);
    } catch (err) {
      if (!(err instanceof SyscallError && err.code === "ENOSYS")) throw err;
      openat2Missing = true;
    }
  }
  return walkBelow(rootfd, rel, flags, "/");
}

const EXDEV = 18;
const ELOOP = 40;
const ENOTDIR = 20;

function components(path: string): string[] {
  return path.split("/").filter((part) => part !== "" && part !== ".");
}

/**
 * {@linkcode openBelow}'s walk, also used where the kernel has no `openat2`.
 *
 * @param rootfd Descriptor of the root directory.
 * @param rel A relative path below it.
 * @param flags The final open's flags.
 * @param rootReal The canonical path of `rootfd`.
 * @returns The new descriptor; close it.
 * @throws {SyscallError} `EXDEV` for a path that leaves the root, `ELOOP` after 40 links.
 */
export function walkBelow(rootfd: number, rel: string, flags: number, rootReal: string): number {
  const follow = (flags & F.O_NOFOLLOW) === 0;
  const rootParts = components(rootReal);
  // The directories walked through, the root first: `..` pops one, never the root.
  const dirs = [openat(rootfd, ".", F.O_PATH | F.O_DIRECTORY)];
  let pending = components(rel);
  let hops = 0;
  /** The components a link's target stands for, from where the walk now is. */
  const throughLink = (target: string): string[] => {
    if (++hops > MAX_SYMLINK_HOPS) throw new SyscallError(ELOOP, "openBelow");
    if (!target.startsWith("/")) return components(target);
    const parts = target.split("/").filter((part) => part !== "");
    if (!rootParts.every((part, i) => parts[i] === part)) {
      throw new SyscallError(EXDEV, "openBelow");
    }
    while (dirs.length > 1) close(dirs.pop()!);
    return parts.slice(rootParts.length).filter((part) => part !== ".");
  };
  try {
    while (pending.length > 0) {
      const [part, ...rest] = pending as [string, ...string[]];
      pending = rest;
      const dir = dirs.at(-1)!;
      if (part === "..") {
        if (dirs.length === 1) throw new SyscallError(EXDEV, "openBelow");
        close(dirs.pop()!);
        continue;
      }
      const last = pending.length === 0;
      if (last && !follow) return openat(dir, part, flags);
      // The entry itself, examined on its descriptor: a link is read there, never by path.
      const fd = openat(dir, part, F.O_PATH | F.O_NOFOLLOW);
      const type = (fstatat(fd, "", false)?.mode ?? 0) & F.S_IFMT;
      if (type === F.S_IFLNK) {
        const target = readlinkat(fd, "");
        close(fd);
        pending = [...throughLink(target), ...pending];
        continue;
      }
      if (last) {
        close(fd);
        try {
          return openat(dir, part, flags | F.O_NOFOLLOW);
        } catch (err) {
          // A link swapped in meanwhile (`ELOOP`, or `ENOTDIR` with `O_DIRECTORY`): look again.
          const code = err instanceof SyscallError ? err.code : "";
          if (code !== "ELOOP" && code !== "ENOTDIR") throw err;
          if (++hops > MAX_SYMLINK_HOPS) throw err;
          pending = [part];
          continue;
        }
      }
      if (type !== F.S_IFDIR) {
        close(fd);
        throw new SyscallError(ENOTDIR, "openBelow");
      }
      dirs.push(fd);
    }
    // Nothing left to walk (`.`, or a path ending at a `..` or at a link to a directory).
    return openat(dirs.at(-1)!, ".", flags);
  } finally {
    for (const fd of dirs) close(fd);
  }
}

/** Where a write may land: the root it is resolved beneath and the check of each real path. */
export interface WriteScope {
  /** The scope root (native absolute path as granted, not canonicalized). */
  readonly root: string;
  /** Whether the root came from a sandbox (refusals are `EROFS`) or the server's permissions. */
  readonly bySandbox: boolean;
  /** Whether a write at this real (canonical) path is allowed. */
  allows(real: string): boolean;
}

function granted(name: "read" | "write", path: string): boolean {
  return grantedEverywhere(name) || Deno.permissions.querySync({ name, path }).state === "granted";
}

function writeGranted(path: string): boolean {
  return granted("write", path);
}

/** The topmost ancestor of `path` (itself included) the server may read or write. */
function permissionRoot(path: string, name: "read" | "write" = "write"): string | undefined {
  if (grantedEverywhere(name)) return "/";
  let prefix = "";
  for (const part of path.split("/").filter((p) => p !== "")) {
    prefix += `/${part}`;
    if (granted(name, prefix)) return prefix;
  }
  return granted(name, "/") ? "/" : undefined;
}

/** The writable root of a sandbox plan that holds `path`, `/` when the whole root is writable. */
function sandboxRoot(plan: SandboxPlan, path: string): string | undefined {
  if (plan.rootAccess === "write") return "/";
  let best: string | undefined;
  for (const mount of plan.mounts) {
    if (mount.access !== "write" || !pathIsUnder(path, mount.path)) continue;
    if (best === undefined || mount.path.length > best.length) best = mount.path;
  }
  return best;
}

/**
 * The scope a write of `path` is resolved in: the server's `--allow-write`
 * and every given sandbox plan (those that isolate the file system).
 *
 * @param path Native absolute path of the write.
 * @param plans The request's and the server's sandbox plans.
 * @throws {RpcError} When no scope root holds the path.
 */
export function writeScope(path: string, plans: readonly SandboxPlan[] = []): WriteScope {
  const granted = permissionRoot(path);
  if (granted === undefined) throw permissionDenied("write", path);
  let root = granted;
  let bySandbox = false;
  const confining = plans.filter((plan) => plan.isolation === "filesystem");
  for (const plan of confining) {
    // No writable root holds it: resolved from `/`, and every write there is refused.
    const inPlan = sandboxRoot(plan, path) ?? "/";
    if (inPlan === "/" && plan.rootAccess !== "write") bySandbox = true;
    if (inPlan.length > root.length) {
      root = inPlan;
      bySandbox = true;
    }
  }
  return {
    root,
    bySandbox,
    allows: (real) =>
      writeGranted(real) && confining.every((plan) => accessAt(plan, real) === "write"),
  };
}

function refusal(scope: WriteScope, path: string): Error {
  return scope.bySandbox ? osError("EROFS") : permissionDenied("write", path);
}

/**
 * Whether reads of `path` have something to protect: the server's read
 * scope is narrower than `/`, or a sandbox plan confines the file system.
 * Where neither holds (and without `--allow-ffi`), the metadata and
 * listing requests keep their path-based code.
 *
 * @param path Native absolute path.
 * @param plans The request's and the server's sandbox plans.
 */
export function readsScoped(path: string, plans: readonly SandboxPlan[]): boolean {
  if (!fsSyscallsAvailable()) return false;
  return plans.some((plan) => plan.isolation === "filesystem") ||
    permissionRoot(path, "read") !== "/";
}

/**
 * Whether the server may read at the real (canonical) path `real` and no
 * plan denies it (the innermost mount decides: a writable root may
 * re-expose a path inside a denied one).
 *
 * @param real Canonical absolute path.
 * @param plans The request's and the server's sandbox plans.
 * @param metadataOnly Only `stat`/`realpath`: a denied path itself is visible, nothing below it.
 */
export function readableAt(
  real: string,
  plans: readonly SandboxPlan[],
  metadataOnly = false,
): boolean {
  return granted("read", real) && plansAllowRead(real, plans, metadataOnly);
}

/** Whether no plan denies reading at the real path `real` (see {@linkcode readableAt}). */
function plansAllowRead(
  real: string,
  plans: readonly SandboxPlan[],
  metadataOnly: boolean,
): boolean {
  return plans.every((plan) => {
    if (plan.isolation !== "filesystem") return true;
    const at = mountAt(plan, real);
    return at?.access !== "deny" || (metadataOnly && at.path === real);
  });
}

/**
 * Opens a file for reading below the topmost ancestor the server may read
 * (`openat2` with `RESOLVE_BENEATH`), then checks the real path of what was
 * opened against the server's read permissions and the plans' denied
 * paths: a link swapped in cannot make the read land elsewhere, since the
 * check is on the open file itself.
 *
 * @param path Native absolute path (read access checked lexically).
 * @param plans The request's and the server's sandbox plans.
 * @param flags The open's flags (`O_PATH`, with `O_NOFOLLOW` for the entry itself, to inspect
 * it; `O_DIRECTORY` to list it).
 * @param metadataOnly Only `stat`/`realpath` of it (a denied path itself is visible).
 * @returns A descriptor (by default read-only, non-blocking); close it.
 * @throws {RpcError} `permissionDenied` outside the read scope, `EACCES` at a denied path.
 */
export function openForRead(
  path: string,
  plans: readonly SandboxPlan[] = [],
  flags: number = F.O_RDONLY | F.O_NONBLOCK,
  metadataOnly = false,
): number {
  const root = permissionRoot(path, "read");
  if (root === undefined) throw permissionDenied("read", path);
  const rootfd = openat(F.AT_FDCWD, root, F.O_PATH | F.O_DIRECTORY);
  let fd: number;
  try {
    const rel = relative(root, path) || ".";
    // Nothing is above `/`: there absolute symlinks are followed (`RESOLVE_BENEATH` refuses them).
    fd = root === "/" ? openBelowSlash(rootfd, rel, flags) : openBelow(rootfd, rel, flags);
  } catch (err) {
    // Below a scope root the kernel's ELOOP may be a magic link that leads out; below `/` the
    // links are followed here and ELOOP is a loop of links, answered as the OS answers it.
    if (
      err instanceof SyscallError &&
      (err.code === "EXDEV" || (err.code === "ELOOP" && root !== "/"))
    ) {
      throw permissionDenied("read", path);
    }
    throw err;
  } finally {
    close(rootfd);
  }
  // Read granted everywhere and no plan that isolates the file system: whatever was opened may
  // be read, so its real path need not be looked up.
  if (grantedEverywhere("read") && plans.every((plan) => plan.isolation !== "filesystem")) {
    return fd;
  }
  try {
    const real = fdPath(fd);
    if (!granted("read", real)) throw permissionDenied("read", path);
    if (!plansAllowRead(real, plans, metadataOnly)) throw osError("EACCES");
    return fd;
  } catch (err) {
    close(fd);
    throw err;
  }
}

/** An open directory and a name in it, checked against the scope. */
interface Resolved {
  /** `O_PATH` descriptor of the parent directory; close it with {@linkcode done}. */
  dirfd: number;
  /** The last component. */
  name: string;
  /** Canonical path of the parent directory. */
  realDir: string;
  /** The entry itself (not followed), `undefined` when missing. */
  stat: Stat | undefined;
  /** The scope allows a write at the entry. */
  allowed: boolean;
}

function done(resolved: Resolved): void {
  close(resolved.dirfd);
}

/** Opens the scope root; returns its descriptor and canonical path. */
function openRoot(scope: WriteScope): { fd: number; real: string } {
  const fd = openat(F.AT_FDCWD, scope.root, F.O_PATH | F.O_DIRECTORY);
  return { fd, real: fdPath(fd) };
}

/** Maps the kernel's "leaves the root" answers to the scope's refusal. */
function rethrow(err: unknown, scope: WriteScope, path: string): never {
  if (err instanceof SyscallError && (err.code === "EXDEV" || err.code === "ELOOP")) {
    throw refusal(scope, path);
  }
  throw err;
}

/** Opens the parent of `path` (given relative to the root's canonical path `rootReal`). */
function openParentBelow(
  scope: WriteScope,
  root: { fd: number; real: string },
  path: string,
  shown: string,
  lenient = false,
): Resolved {
  const parent = dirname(path);
  const name = path.slice(parent === "/" ? 1 : parent.length + 1);
  let dirfd: number;
  try {
    if (!pathIsUnder(path, root.real) || path === root.real) {
      // The root itself: its parent is outside the scope, only the name is touched.
      if (path !== root.real) throw refusal(scope, shown);
      dirfd = openat(F.AT_FDCWD, parent, F.O_PATH | F.O_DIRECTORY);
    } else {
      const rel = relative(root.real, parent) || ".";
      dirfd = openBelow(root.fd, rel, F.O_PATH | F.O_DIRECTORY, root.real);
    }
  } catch (err) {
    rethrow(err, scope, shown);
  }
  try {
    const realDir = fdPath(dirfd);
    const allowed = scope.allows(joinPath(realDir, name));
    if (!allowed && !lenient) throw refusal(scope, shown);
    return { dirfd, name, realDir, stat: fstatat(dirfd, name, false), allowed };
  } catch (err) {
    close(dirfd);
    throw err;
  }
}

/** The requested path expressed below the root's canonical path. */
function belowRoot(scope: WriteScope, root: { real: string }, path: string): string {
  const rel = relative(scope.root, path);
  return rel === "" ? root.real : joinPath(root.real, rel);
}

/**
 * Opens the parent of `path` without following its last component.
 * Refuses a write the scope does not allow there, unless `lenient` (the
 * caller checks {@linkcode Resolved.allowed} itself, after reporting what
 * the kernel would report first).
 *
 * @param path Native absolute path (write access checked lexically).
 * @param scope From {@linkcode writeScope}.
 */
export function openParent(path: string, scope: WriteScope, lenient = false): Resolved {
  const root = openRoot(scope);
  try {
    return openParentBelow(scope, root, belowRoot(scope, root, path), path, lenient);
  } finally {
    close(root.fd);
  }
}

/**
 * Like {@linkcode openParent}, but follows symlinks in the last component
 * while they stay below the root (a dangling link names the file to
 * create); a link that leaves the root is refused.
 */
export function openTarget(path: string, scope: WriteScope): Resolved {
  const root = openRoot(scope);
  try {
    let current = belowRoot(scope, root, path);
    for (let hop = 0; hop <= MAX_SYMLINK_HOPS; hop++) {
      const resolved = openParentBelow(scope, root, current, path);
      const type = (resolved.stat?.mode ?? 0) & F.S_IFMT;
      // A dangling link's target is created, as by the kernel, once it resolved below the root.
      if (type !== F.S_IFLNK) return resolved;
      const target = readlinkat(resolved.dirfd, resolved.name);
      current = resolve(resolved.realDir, target);
      done(resolved);
      if (!pathIsUnder(current, root.real)) throw refusal(scope, path);
    }
    throw osError("ELOOP");
  } finally {
    close(root.fd);
  }
}

/**
 * Opens a file for writing, created or truncated (`fs/open` for `replace`):
 * symlinks followed below the scope root, the final open done with
 * `O_NOFOLLOW | O_NONBLOCK` in the checked directory (a FIFO without a
 * reader fails with `ENXIO` instead of blocking).
 *
 * @param path Native absolute path.
 * @param scope From {@linkcode writeScope}.
 * @returns The descriptor; close it.
 */
export function openForReplace(path: string, scope: WriteScope): number {
  const target = openTarget(path, scope);
  try {
    if (isType(target.stat, F.S_IFDIR)) throw osError("EISDIR");
    const flags = F.O_WRONLY | F.O_CREAT | F.O_TRUNC | F.O_NOFOLLOW | F.O_NONBLOCK;
    return openat(target.dirfd, target.name, flags, 0o666);
  } finally {
    done(target);
  }
}

/**
 * `fs/writeFile` on descriptors: follows symlinks below the scope root,
 * writes an `O_TMPFILE` in the target's directory, flushes it and renames
 * it over the target, so a killed server leaves no half-written file.
 * Where the directory takes no new file (the server may write only the
 * file itself), the file is overwritten in place, never through a link.
 *
 * @param path Native absolute path.
 * @param data The content.
 * @param scope From {@linkcode writeScope}.
 */
export async function writeFileAt(
  path: string,
  data: Uint8Array,
  scope: WriteScope,
): Promise<void> {
  const target = openTarget(path, scope);
  try {
    const existing = target.stat;
    if (isType(existing, F.S_IFDIR)) throw osError("EISDIR");
    if (isType(existing, F.S_IFIFO)) throw osError("ENXIO");
    if (existing !== undefined && !isType(existing, F.S_IFREG)) {
      // Device or socket: renaming over it would replace the node itself.
      await writeInPlace(target, data);
      return;
    }
    const temp = `.${target.name}.${crypto.randomUUID()}.tmp`;
    const fd = scope.allows(joinPath(target.realDir, temp)) ? openTmpfile(target) : undefined;
    if (fd === undefined) {
      await writeInPlace(target, data);
      return;
    }
    try {
      await writeAll(fd, data);
      if (existing !== undefined) {
        fchmod(fd, existing.mode & 0o7777);
        fchownQuiet(fd, existing.uid, existing.gid);
      }
      await fdatasync(fd);
      linkTmpfile(fd, target.dirfd, temp);
    } finally {
      close(fd);
    }
    try {
      renameat(target.dirfd, temp, target.dirfd, target.name);
    } catch (err) {
      try {
        unlinkat(target.dirfd, temp, false);
      } catch {
        // Best effort.
      }
      throw err;
    }
  } finally {
    done(target);
  }
}

/** An unnamed file in the target's directory, `undefined` when the directory takes none. */
function openTmpfile(target: Resolved): number | undefined {
  try {
    return openat(target.dirfd, ".", F.O_TMPFILE | F.O_WRONLY, 0o666);
  } catch (err) {
    const code = err instanceof SyscallError ? err.code : "";
    if (code === "ENOSPC" || code === "EDQUOT") throw err;
    return undefined;
  }
}

async function writeInPlace(target: Resolved, data: Uint8Array): Promise<void> {
  // `openat` needs a real directory descriptor for O_CREAT: reopen the O_PATH one.
  const dir = openat(target.dirfd, ".", F.O_RDONLY | F.O_DIRECTORY);
  try {
    const flags = F.O_WRONLY | F.O_CREAT | F.O_TRUNC | F.O_NOFOLLOW | F.O_NONBLOCK;
    const fd = openat(dir, target.name, flags, 0o666);
    try {
      await writeAll(fd, data);
    } finally {
      close(fd);
    }
  } finally {
    close(dir);
  }
}

/** Bytes in a path the kernel takes, its NUL included (`PATH_MAX`). */
const PATH_MAX = 4096;
const UTF8 = new TextEncoder();

/** A readable (`O_RDONLY`) descriptor of the parent, for the `*at` calls that need one. */
function directoryOf(resolved: Resolved): number {
  return openat(resolved.dirfd, ".", F.O_RDONLY | F.O_DIRECTORY);
}

/**
 * `fs/createDirectory` on descriptors: each missing component is created
 * with `mkdirat` in the directory that was opened and checked.
 *
 * @param path Native absolute path.
 * @param recursive `mkdir -p`: missing parents too, an existing directory is fine.
 * @param scope From {@linkcode writeScope}.
 */
export function createDirectoryAt(path: string, recursive: boolean, scope: WriteScope): void {
  // The kernel refuses such a path whole; component by component it would get as far as the
  // directories before the limit, which the reference (one mkdir of the whole path) never creates.
  if (UTF8.encode(path).length >= PATH_MAX) throw osError("ENAMETOOLONG");
  if (!recursive) {
    const parent = openParent(path, scope);
    try {
      mkdirat(parent.dirfd, parent.name);
    } finally {
      done(parent);
    }
    return;
  }
  const root = openRoot(scope);
  try {
    const parts = relative(scope.root, path).split("/").filter((part) => part !== "");
    let dir = openat(root.fd, ".", F.O_RDONLY | F.O_DIRECTORY);
    try {
      for (let i = 0; i < parts.length; i++) {
        try {
          mkdirat(dir, parts[i]!);
        } catch (err) {
          if (!(err instanceof SyscallError && err.code === "EEXIST")) throw err;
        }
        let next: number;
        try {
          next = openBelow(root.fd, parts.slice(0, i + 1).join("/"), F.O_DIRECTORY, root.real);
        } catch (err) {
          const last = i === parts.length - 1;
          if (last && err instanceof SyscallError && err.code === "ENOTDIR") {
            throw osError("EEXIST");
          }
          rethrow(err, scope, path);
        }
        close(dir);
        dir = next;
        if (!scope.allows(fdPath(dir))) throw refusal(scope, path);
      }
    } finally {
      close(dir);
    }
  } finally {
    close(root.fd);
  }
}

/**
 * `fs/remove` on descriptors: a file or symlink is unlinked in its checked
 * directory; a tree is emptied through descriptors opened with
 * `O_NOFOLLOW`, so a link swapped in never leads the removal elsewhere.
 *
 * @param path Native absolute path.
 * @param recursive Remove a non-empty directory with its content.
 * @param scope From {@linkcode writeScope}.
 * @throws {SyscallError} `ENOENT` when the path does not exist.
 */
export function removeAt(path: string, recursive: boolean, scope: WriteScope): void {
  const parent = openParent(path, scope, true);
  try {
    if (parent.stat === undefined) throw new SyscallError(2, "fstatat");
    if (!parent.allowed) throw refusal(scope, path);
    const dir = directoryOf(parent);
    try {
      if (!isType(parent.stat, F.S_IFDIR)) unlinkat(dir, parent.name, false);
      else if (recursive) removeTree(dir, parent.name);
      else unlinkat(dir, parent.name, true);
    } finally {
      close(dir);
    }
  } finally {
    done(parent);
  }
}

function removeTree(dir: number, name: FileName): void {
  const fd = openat(dir, name, F.O_RDONLY | F.O_DIRECTORY | F.O_NOFOLLOW);
  try {
    // By the names' bytes: a name that is not UTF-8 is not found by its decoded text.
    for (const { bytes: child } of listDirectoryEntries(fd)) {
      if (isType(fstatat(fd, child, false), F.S_IFDIR)) removeTree(fd, child);
      else unlinkat(fd, child, false);
    }
  } finally {
    close(fd);
  }
  unlinkat(dir, name, true);
}

/**
 * Creates the destination entry of a copy in its checked directory and
 * hands a writable descriptor of its directory to `create`.
 *
 * @param path Native absolute path of the destination.
 * @param follow Follow symlinks in the last component (a file copy replaces the file a link
 * leads to, below the root).
 * @param scope From {@linkcode writeScope}.
 * @param create Creates the entry, given the directory descriptor, the name and what is there.
 */
export async function createAt<T>(
  path: string,
  follow: boolean,
  scope: WriteScope,
  create: (dir: number, name: string, existing: Stat | undefined) => T | Promise<T>,
): Promise<T> {
  const target = follow ? openTarget(path, scope) : openParent(path, scope);
  try {
    const dir = directoryOf(target);
    try {
      return await create(dir, target.name, target.stat);
    } finally {
      close(dir);
    }
  } finally {
    done(target);
  }
}

/**
 * Copies a tree into the directory `name` (just created) of `dir`: the
 * source is read through `source`, a directory descriptor that was opened
 * and checked, each subdirectory and file opened relative to it with
 * `O_NOFOLLOW` and its real path checked against the read permissions and
 * the plans; every destination entry is created relative to a descriptor
 * opened with `O_NOFOLLOW`.
 *
 * @param source Readable descriptor of the source directory (checked; stays open).
 * @param dir Descriptor of the destination's parent.
 * @param name The destination directory in it.
 * @param plans The request's and the server's sandbox plans.
 * @param copyFile Copies one regular file's content between two descriptors.
 */
export async function copyTreeAt(
  source: number,
  dir: number,
  name: FileName,
  plans: readonly SandboxPlan[],
  copyFile: (from: number, to: number) => Promise<void>,
): Promise<void> {
  const fd = openat(dir, name, F.O_RDONLY | F.O_DIRECTORY | F.O_NOFOLLOW);
  try {
    // By the names' bytes: a name that is not UTF-8 is not found by its decoded text.
    for (const { bytes: entry } of listDirectoryEntries(source)) {
      const info = fstatat(source, entry, false);
      if (info === undefined) continue;
      if (isType(info, F.S_IFLNK)) {
        symlinkat(readlinkat(source, entry), fd, entry);
      } else if (isType(info, F.S_IFDIR)) {
        const from = openChild(source, entry, F.O_RDONLY | F.O_DIRECTORY, plans);
        try {
          mkdirat(fd, entry);
          await copyTreeAt(from, fd, entry, plans, copyFile);
        } finally {
          close(from);
        }
      } else if (isType(info, F.S_IFREG)) {
        const from = openChild(source, entry, F.O_RDONLY | F.O_NONBLOCK, plans);
        try {
          const flags = F.O_WRONLY | F.O_CREAT | F.O_EXCL | F.O_NOFOLLOW;
          const out = openat(fd, entry, flags, info.mode & 0o777);
          try {
            await copyFile(from, out);
          } finally {
            close(out);
          }
        } finally {
          close(from);
        }
      }
    }
  } finally {
    close(fd);
  }
}

/** Opens `name` in `dirfd` without following a link, and checks its real path. */
function openChild(
  dirfd: number,
  name: FileName,
  flags: number,
  plans: readonly SandboxPlan[],
): number {
  const fd = openat(dirfd, name, flags | F.O_NOFOLLOW);
  if (readableAt(fdPath(fd), plans)) return fd;
  close(fd);
  throw osError("EACCES");
}
