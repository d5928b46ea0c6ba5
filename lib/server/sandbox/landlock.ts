/**
 * A {@linkcode SandboxPlan} as Landlock rules: the `landlock` layer's file
 * system half (`layer.ts`).
 *
 * Landlock only grants: a rule gives a directory and everything below it a
 * set of access rights, and an access is allowed when a rule on the path or
 * one of its parents grants it. It cannot take a right away below a
 * directory it grants it on. So the rules are the plan *decomposed*:
 *
 * - a directory with nothing more restricted below it gets its access's
 *   rights in one rule;
 * - a directory with a more restricted path below it (a writable root
 *   holding a read-only `.git`, the root holding a denied secret file) gets
 *   only the rights that are safe everywhere below it (read, or nothing),
 *   and each of its entries gets its own rule, recursively down to the
 *   restricted path.
 *
 * The result never grants more than the plan. It grants less in the
 * directories that hold a restriction: their own entries cannot be added
 * or removed (no `MAKE_*`/`REMOVE_*` on them), and a directory above a
 * denied path cannot be listed. Entries that appear after the sandbox
 * started get their directory's (lesser) rights. Missing restrictions need
 * no cover: the directory that would hold them cannot get new entries.
 *
 * `/dev`'s terminals and null devices are writable (bubblewrap gives a
 * fresh `/dev`); a private `/tmp` is a directory of its own under the
 * host's `/tmp`, which is denied (see `launch.ts`).
 *
 * @module
 */

import { F, fsSyscallsAvailable, fstatat, isType, listDirectoryAt } from "../host/fs_syscalls.ts";
import type { LauncherSpec } from "./landlock_exec.ts";
import { accessAt, pathIsUnder, type SandboxAccess, type SandboxPlan } from "./policy.ts";
import { seccompArch, seccompProgram } from "./seccomp.ts";
import { filterModeFor } from "./unix_sockets.ts";

/** Landlock's file system access rights (`LANDLOCK_ACCESS_FS_*`, ABI 1 to 3). */
export const FS = {
  EXECUTE: 1 << 0,
  WRITE_FILE: 1 << 1,
  READ_FILE: 1 << 2,
  READ_DIR: 1 << 3,
  REMOVE_DIR: 1 << 4,
  REMOVE_FILE: 1 << 5,
  MAKE_CHAR: 1 << 6,
  MAKE_DIR: 1 << 7,
  MAKE_REG: 1 << 8,
  MAKE_SOCK: 1 << 9,
  MAKE_FIFO: 1 << 10,
  MAKE_BLOCK: 1 << 11,
  MAKE_SYM: 1 << 12,
  REFER: 1 << 13,
  TRUNCATE: 1 << 14,
} as const;

/** The lowest Landlock ABI the layer uses: 3, the first that controls `truncate`. */
export const MIN_LANDLOCK_ABI = 3;

/** The ABI from which Landlock scopes signals and abstract unix sockets to the sandbox (6). */
export const SCOPE_ABI = 6;

/** `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL`. */
export const SCOPES = 1 | 2;

const READ = FS.EXECUTE | FS.READ_FILE | FS.READ_DIR;
const WRITE = READ | FS.WRITE_FILE | FS.REMOVE_DIR | FS.REMOVE_FILE | FS.MAKE_CHAR |
  FS.MAKE_DIR | FS.MAKE_REG | FS.MAKE_SOCK | FS.MAKE_FIFO | FS.MAKE_BLOCK | FS.MAKE_SYM |
  FS.REFER | FS.TRUNCATE;

/** Every right the layer handles (all of ABI 3; device `ioctl`s, ABI 5, stay unrestricted). */
export const HANDLED_FS = WRITE;

/** The rights that mean something on a file (the rest apply to directories). */
export const FILE_RIGHTS = FS.EXECUTE | FS.WRITE_FILE | FS.READ_FILE | FS.TRUNCATE;

/** The most rules one sandbox gets (one per entry of each directory that holds a restriction). */
export const MAX_LANDLOCK_RULES = 4096;

/** Devices every sandbox may write (bubblewrap's `--dev` has them). */
const DEVICES = [
  "/dev/null",
  "/dev/zero",
  "/dev/full",
  "/dev/random",
  "/dev/urandom",
  "/dev/tty",
  "/dev/ptmx",
  "/dev/pts",
];

/** One Landlock rule: a path and the rights below it. */
export interface LandlockRule {
  /** Canonical absolute path. */
  readonly path: string;
  /** `LANDLOCK_ACCESS_FS_*` bits. */
  readonly rights: number;
}

function rightsOf(access: SandboxAccess): number {
  return access === "write" ? WRITE : access === "read" ? READ : 0;
}

/**
 * The rights a rule above `mount` may grant without reaching into it: its
 * own access's rights; above an existing file also the directory rights
 * (they do not apply to a file) but removal; above a missing path reading
 * (there is nothing to read, and no rule above it lets it be created).
 */
function safeAbove(mount: SandboxPlan["mounts"][number]): number {
  const own = rightsOf(mount.access);
  if (mount.node === "missing") return own | READ;
  if (mount.node === "file") {
    return own | (WRITE & ~FILE_RIGHTS & ~FS.REMOVE_FILE & ~FS.REMOVE_DIR);
  }
  return own;
}

function listEntries(directory: string): { name: string; directory: boolean }[] {
  try {
    return [...Deno.readDirSync(directory)]
      .filter((entry) => !entry.isSymlink)
      .map((entry) => ({ name: entry.name, directory: entry.isDirectory }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  } catch {
    // Outside the server's --allow-read (the container image's scoped permissions leave `/` out):
    // the layer needs --allow-ffi anyway, so the kernel lists it.
    return listEntriesBySyscalls(directory);
  }
}

/** {@linkcode listEntries} through libc: what the kernel lets the server's user list. */
function listEntriesBySyscalls(directory: string): { name: string; directory: boolean }[] {
  if (!fsSyscallsAvailable()) return [];
  try {
    return listDirectoryAt(directory)
      .map((name) => ({ name, stat: fstatat(F.AT_FDCWD, join(directory, name), false) }))
      .filter(({ stat }) => stat !== undefined && !isType(stat, F.S_IFLNK))
      .map(({ name, stat }) => ({ name, directory: isType(stat, F.S_IFDIR) }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  } catch {
    // Unreadable: its entries keep the directory's lesser rights.
    return [];
  }
}

function join(directory: string, name: string): string {
  return directory === "/" ? `/${name}` : `${directory}/${name}`;
}

/**
 * The Landlock rules of a plan (see the module documentation).
 *
 * @param plan A plan whose isolation is `"filesystem"` or `"network"`.
 * @returns The rules, parents before children; none for a plan with a writable root and no mounts.
 * @throws {RangeError} When more than {@linkcode MAX_LANDLOCK_RULES} rules would be needed.
 *
 * @example A writable root keeps `.git` read-only and its own entries fixed
 * ```ts
 * import { FS, landlockRules } from "./landlock.ts";
 * const rules = landlockRules({
 *   type: "linuxSeccomp",
 *   isolation: "filesystem",
 *   network: "restricted",
 *   rootAccess: "read",
 *   mounts: [
 *     { path: "/var/empty-ws", access: "write", node: "directory" },
 *     { path: "/var/empty-ws/.git", access: "read", node: "missing" },
 *   ],
 * });
 * const ws = rules.find((rule) => rule.path === "/var/empty-ws")!;
 * console.log((ws.rights & FS.MAKE_REG) === 0); // true
 * ```
 */
export function landlockRules(plan: SandboxPlan): LandlockRule[] {
  const rules: LandlockRule[] = [];
  const add = (path: string, rights: number) => {
    if (rights === 0) return;
    if (rules.length >= MAX_LANDLOCK_RULES) {
      throw new RangeError(
        `the Landlock layer needs more than ${MAX_LANDLOCK_RULES} rules for this sandbox`,
      );
    }
    rules.push({ path, rights });
  };
  const mounts = plan.mounts;
  const visit = (path: string, isDirectory: boolean) => {
    const own = rightsOf(accessAt(plan, path));
    const below = mounts.filter((mount) => mount.path !== path && pathIsUnder(mount.path, path));
    if (!isDirectory) {
      add(path, own & FILE_RIGHTS);
      return;
    }
    let safe = own;
    for (const mount of below) safe &= safeAbove(mount);
    add(path, safe);
    if (below.length === 0) return;
    if (safe === own) {
      // Nothing below is more restricted: only the paths with more access need rules.
      for (const mount of below) {
        const between = below.some((other) =>
          other !== mount && pathIsUnder(mount.path, other.path)
        );
        if (!between && mount.node !== "missing") visit(mount.path, mount.node === "directory");
      }
      return;
    }
    for (const entry of listEntries(path)) {
      const child = join(path, entry.name);
      const holds = below.some((mount) => pathIsUnder(mount.path, child));
      if (holds) visit(child, entry.directory);
      else if (own !== safe) add(child, entry.directory ? own : own & FILE_RIGHTS);
    }
  };
  visit("/", true);
  for (const device of DEVICES) {
    if (accessAt(plan, device) !== "deny") {
      add(device, device === "/dev/pts" ? READ | FS.WRITE_FILE : FILE_RIGHTS & ~FS.EXECUTE);
    }
  }
  return rules;
}

let abi: number | { reason: string } | undefined;

/**
 * The kernel's Landlock ABI (`landlock_create_ruleset(NULL, 0,
 * LANDLOCK_CREATE_RULESET_VERSION)`), queried once through FFI, or why it
 * cannot be used.
 *
 * @returns The ABI, at least {@linkcode MIN_LANDLOCK_ABI}, or the reason.
 */
export function landlockAbi(): number | { reason: string } {
  abi ??= queryAbi();
  return abi;
}

function queryAbi(): number | { reason: string } {
  if (Deno.build.os !== "linux") {
    return { reason: `Landlock needs Linux (this is ${Deno.build.os})` };
  }
  let state: Deno.PermissionState;
  try {
    state = Deno.permissions.querySync({ name: "ffi" }).state;
  } catch {
    state = "denied";
  }
  if (state !== "granted") {
    return { reason: "the server needs --allow-ffi to use Landlock (its launcher calls libc)" };
  }
  let version: number;
  try {
    const lib = Deno.dlopen("libc.so.6", {
      syscall: { parameters: ["i64", "i64", "i64", "i64"], result: "i64" },
    });
    version = Number(lib.symbols.syscall(444n, 0n, 0n, 1n));
    lib.close();
  } catch (err) {
    return { reason: `cannot load libc.so.6 for Landlock: ${(err as Error).message}` };
  }
  if (version < 0) {
    return {
      reason:
        "the kernel has no Landlock (not built in, or not in its lsm= list; landlock_create_ruleset failed)",
    };
  }
  if (version < MIN_LANDLOCK_ABI) {
    return {
      reason:
        `the kernel's Landlock ABI is ${version}; the landlock layer needs ${MIN_LANDLOCK_ABI} (Linux 6.2)`,
    };
  }
  return version;
}

/**
 * What the launcher applies for these rules: the ruleset's handled rights,
 * the scopes (signals and abstract unix sockets stay inside the sandbox,
 * from ABI {@linkcode SCOPE_ABI}) and the seccomp filter of the network policy.
 *
 * @param rules The rules ({@linkcode landlockRules}).
 * @param version The kernel's Landlock ABI.
 * @param network The plan's network policy.
 */
export function landlockSpec(
  rules: readonly LandlockRule[],
  version: number,
  network: SandboxPlan["network"],
): LauncherSpec {
  const arch = seccompArch();
  if (arch === undefined) throw new Error(`No seccomp filter for ${Deno.build.arch}`);
  return {
    rules: rules.map((rule) => [rule.path, rule.rights]),
    handled: HANDLED_FS,
    scoped: version >= SCOPE_ABI ? SCOPES : 0,
    abi: version,
    filter: seccompProgram(filterModeFor(network), arch).toHex(),
  };
}

/** The rights of a read-only file system (the trial sandbox's). */
export const READ_ONLY_RULES: readonly LandlockRule[] = [{ path: "/", rights: READ }];
