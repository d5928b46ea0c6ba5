/**
 * `posix_spawn` through FFI, for the pipe and pty backends: the child starts
 * in a new session (its own process group), with every signal at its default
 * disposition and an empty signal mask, in its working directory, with exactly
 * the descriptors asked for.
 *
 * Why not `node:child_process` or `Deno.Command` with `detached`: a new
 * session needs `setsid()` in the child, which they run from a `pre_exec`
 * hook, and a `pre_exec` hook makes Rust's spawner `fork()` the whole server
 * instead of using glibc's `posix_spawn` (a `vfork`-like clone). A `fork()`
 * copies the page tables of the server's heap: on this project's machine it
 * cost about 2 ms of server CPU per spawn at 50 MB RSS and 6 ms at 150 MB,
 * against 0.7 ms here at either size. glibc's `posix_spawn` calls `setsid()`
 * itself for `POSIX_SPAWN_SETSID` (glibc >= 2.26).
 *
 * @module
 */

import { C, cString, cStringArray, libc, libcAvailable } from "./libc.ts";

/**
 * Whether {@linkcode posixSpawn} can run here: Linux, the FFI permission
 * granted (checked first, so that no prompt appears) and glibc loadable.
 */
export function posixSpawnAvailable(): boolean {
  if (Deno.build.os !== "linux") return false;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return false;
  } catch {
    return false;
  }
  return libcAvailable();
}

/** One descriptor the child starts with. */
export type ChildFd =
  /** `fd` is `path` opened with `flags` (a `Uint8Array` is a NUL-terminated path). */
  | { fd: number; open: string | Uint8Array; flags: number }
  /** `fd` is a duplicate of descriptor `dup` as the child has it at this step (this process's, or an earlier `fd`). */
  | { fd: number; dup: number };

/** What {@linkcode posixSpawn} did: the child's pid, or the errno that prevented it. */
export type SpawnOutcome = { pid: number; errno?: undefined } | { pid?: undefined; errno: number };

/**
 * Spawns `path` in a new session. Descriptors other than `fds` are closed in
 * the child (glibc >= 2.34; older ones rely on close-on-exec).
 *
 * @param path The executable (absolute; no `PATH` search).
 * @param argv The command line, `argv[0]` included.
 * @param env The environment, as `NAME=value` entries.
 * @param cwd The working directory.
 * @param fds The child's descriptors, set up in this order.
 * @returns The pid, or the errno of the failed set-up or `execve`.
 *
 * @example
 * ```ts
 * import { posixSpawn } from "./posix_spawn.ts";
 * const outcome = posixSpawn("/bin/true", ["true"], [], "/", [
 *   { fd: 0, open: "/dev/null", flags: 0 },
 * ]);
 * console.log(outcome.pid !== undefined); // true
 * ```
 */
export function posixSpawn(
  path: string,
  argv: readonly string[],
  env: readonly string[],
  cwd: string,
  fds: readonly ChildFd[],
): SpawnOutcome {
  const lib = libc();
  // Generous sizes: glibc's posix_spawn_file_actions_t is 80 bytes, posix_spawnattr_t 336.
  const actions = new Uint8Array(256);
  const attr = new Uint8Array(512);
  lib.posix_spawn_file_actions_init(actions);
  lib.posix_spawnattr_init(attr);
  try {
    const set = (rc: number): void => {
      if (rc !== 0) throw new SpawnSetupError(rc);
    };
    for (const child of fds) {
      set(
        "dup" in child
          ? lib.posix_spawn_file_actions_adddup2(actions, child.dup, child.fd)
          : lib.posix_spawn_file_actions_addopen(
            actions,
            child.fd,
            typeof child.open === "string" ? cString(child.open) : child.open,
            child.flags,
            0,
          ),
      );
    }
    set(lib.posix_spawn_file_actions_addchdir_np(actions, cString(cwd)));
    if (lib.posix_spawn_file_actions_addclosefrom_np !== null) {
      const first = Math.max(2, ...fds.map((child) => child.fd)) + 1;
      set(lib.posix_spawn_file_actions_addclosefrom_np(actions, first));
    }
    set(lib.posix_spawnattr_setflags(
      attr,
      C.POSIX_SPAWN_SETSID | C.POSIX_SPAWN_SETSIGMASK | C.POSIX_SPAWN_SETSIGDEF,
    ));
    // Deno ignores some signals (SIGPIPE); ignored dispositions survive exec, so reset all.
    set(lib.posix_spawnattr_setsigmask(attr, signalSet(false)));
    set(lib.posix_spawnattr_setsigdefault(attr, signalSet(true)));
    const cArgv = cStringArray(argv);
    const cEnv = cStringArray(env);
    const pidOut = new Int32Array(1);
    const rc = lib.posix_spawn(pidOut, cString(path), actions, attr, cArgv.array, cEnv.array);
    // The pointer arrays point into these strings: keep them reachable until the call returned.
    keepAlive(cArgv.keep, cEnv.keep);
    return rc === 0 ? { pid: pidOut[0]! } : { errno: rc };
  } catch (err) {
    if (err instanceof SpawnSetupError) return { errno: err.errno };
    throw err;
  } finally {
    lib.posix_spawn_file_actions_destroy(actions);
    lib.posix_spawnattr_destroy(attr);
  }
}

/** A failed `posix_spawn_*` set-up call. */
class SpawnSetupError extends Error {
  constructor(readonly errno: number) {
    super(`posix_spawn set-up failed with errno ${errno}`);
  }
}

const signalSets: Uint8Array[] = [];

/** An empty or a full `sigset_t` (made once each). */
function signalSet(full: boolean): Uint8Array {
  const index = full ? 1 : 0;
  let set = signalSets[index];
  if (set === undefined) {
    set = new Uint8Array(128);
    if (full) libc().sigfillset(set);
    else libc().sigemptyset(set);
    signalSets[index] = set;
  }
  return set;
}

function keepAlive(..._values: unknown[]): void {}
