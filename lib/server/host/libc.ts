/**
 * Minimal FFI bindings to the system C library (glibc on Linux), used by the
 * pseudo-terminal support in `pty.ts`, the pipe spawner in `pipe.ts` and the
 * watchdog.
 *
 * Only what pty and pipe children and the watchdog need is bound: opening a pty pair
 * or a pipe, spawning with `posix_spawn` ({@linkcode spawnInNewSession}),
 * non-blocking I/O, `poll`, `waitpid`/`pidfd_open` and `kill`.
 * The library is opened lazily on first use, so importing this module needs
 * no permission.
 *
 * @module
 */

/**
 * The first parameter of a rarely called synchronous symbol (pass it with
 * {@linkcode byValue}): a struct of one 64-bit integer, passed by value. On the x86_64 and
 * aarch64 Linux C ABIs it travels in the same register as an `i64` (or the `int`, or the
 * pointer, the C function takes there: an `int` is its low half), so the C function gets the
 * same arguments. What it changes is `Deno.dlopen`: for a synchronous symbol whose signature
 * has no struct, Deno compiles a fast-call trampoline (Cranelift), which only optimized
 * JavaScript enters and which a call made once per request or per spawn gains little from
 * (0.3-0.5 us per call). Binding the 7 spawn symbols took 1.96-3.01 ms and 3.7-5.2 MB of RSS
 * with trampolines, 0.91-1.33 ms and 1.6-2.0 MB without (fresh processes, 6 runs each; the
 * first trampoline of a process about 0.8 ms, each further one about 0.2). The pty table
 * ({@linkcode LIBC_SYMBOLS}) and the file calls of `fs_syscalls.ts` but `statx` are bound the
 * same way.
 */
export const BY_VALUE_I64 = { struct: ["i64"] } as const;

/**
 * What a pipe process's spawn, its pipes and its exit need, bound on their own: binding costs
 * about 0.1 ms per symbol ({@linkcode BY_VALUE_I64}), which the first `process/start` answer
 * should not pay for the pty and I/O calls of {@linkcode LIBC_SYMBOLS}. The
 * `posix_spawnattr_t` is built in JS ({@linkcode spawnAttributes}), the file actions start
 * zeroed as `posix_spawn_file_actions_init` leaves them, a child's `/dev/null` is opened by the
 * parent ({@linkcode openDevNull}) instead of by an `addopen` action, and plain system calls go
 * through `syscall`.
 */
export const SPAWN_SYMBOLS = {
  // Pointers are passed as `i64` addresses ({@linkcode address}): a "buffer" parameter made
  // binding 9 symbols take 4.6-5.1 ms instead of 2.7-3.2 (fresh processes, 5 runs each).
  posix_spawn: {
    parameters: [BY_VALUE_I64, "i64", "i64", "i64", "i64", "i64"],
    result: "i32",
  },
  posix_spawn_file_actions_destroy: { parameters: [BY_VALUE_I64], result: "i32" },
  posix_spawn_file_actions_adddup2: { parameters: [BY_VALUE_I64, "i32", "i32"], result: "i32" },
  posix_spawn_file_actions_addchdir_np: { parameters: [BY_VALUE_I64, "i64"], result: "i32" },
  posix_spawn_file_actions_addclosefrom_np: {
    parameters: [BY_VALUE_I64, "i32"],
    result: "i32",
    optional: true,
  },
  // Variadic in C (`long syscall(long number, ...)`); integer and pointer arguments are passed
  // as in a non-variadic call on the Linux x86_64 and aarch64 ABIs. One symbol instead of one
  // per call: see {@linkcode pipeFds}, {@linkcode closeFd}, {@linkcode waitChild}...
  syscall: { parameters: [BY_VALUE_I64, "i64", "i64", "i64", "i64"], result: "i64" },
  // `int *`, returned as a struct of one 64-bit integer: in the same register, and no
  // trampoline ({@linkcode BY_VALUE_I64}).
  __errno_location: { parameters: [], result: { struct: ["u64"] } },
} as const;

/**
 * The rest of what is bound from libc (ptys, non-blocking I/O), with the first pty start. The
 * first parameter of each synchronous one is {@linkcode BY_VALUE_I64} (a pointer passed as its
 * {@linkcode address}): no trampoline to compile. With trampolines, binding the 18 symbols this
 * table had took 4.5-10.3 ms (median 7.4) and 2.9-3.4 MB of RSS in a fresh process that had
 * bound {@linkcode SPAWN_SYMBOLS}; these 15 take 0.5-1.3 ms (0.8) and 0.6-0.8 MB (7 runs each).
 * `poll` runs on Deno's blocking thread pool (a `nonblocking` symbol has no trampoline either).
 * Closing, signalling and reaping go through `syscall`: {@linkcode closeFd},
 * {@linkcode killProcess}, {@linkcode waitChild}.
 */
export const LIBC_SYMBOLS = {
  // Only a pty's slave is opened by the child itself (after `setsid`, to become its terminal).
  posix_spawn_file_actions_addopen: {
    parameters: [BY_VALUE_I64, "i32", "i64", "i32", "u32"],
    result: "i32",
  },
  posix_openpt: { parameters: [BY_VALUE_I64], result: "i32" },
  grantpt: { parameters: [BY_VALUE_I64], result: "i32" },
  unlockpt: { parameters: [BY_VALUE_I64], result: "i32" },
  ptsname_r: { parameters: [BY_VALUE_I64, "buffer", "usize"], result: "i32" },
  // Variadic in C; on the Linux x86_64 and aarch64 ABIs a pointer third argument is passed the
  // same way as in a non-variadic call.
  ioctl: { parameters: [BY_VALUE_I64, "u64", "buffer"], result: "i32" },
  read: { parameters: [BY_VALUE_I64, "buffer", "usize"], result: "isize" },
  write: { parameters: [BY_VALUE_I64, "buffer", "usize"], result: "isize" },
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  eventfd: { parameters: [BY_VALUE_I64, "i32"], result: "i32" },
  pidfd_open: { parameters: [BY_VALUE_I64, "u32"], result: "i32", optional: true },
  // The path's address first.
  access: { parameters: [BY_VALUE_I64, "i32"], result: "i32" },
  stat: { parameters: [BY_VALUE_I64, "buffer"], result: "i32", optional: true },
  // The name's address.
  getenv: { parameters: [BY_VALUE_I64], result: "pointer" },
  strerror: { parameters: [BY_VALUE_I64], result: "pointer" },
} as const;

/** Linux system call numbers of the calls made through `syscall`. */
const SYS = Deno.build.arch === "aarch64"
  ? {
    openat: 56,
    write: 64,
    close: 57,
    fcntl: 25,
    kill: 129,
    ioctl: 29,
    pipe2: 59,
    wait4: 260,
    prctl: 167,
    prlimit64: 261,
    faccessat: 48,
    getuid: 174,
  }
  : {
    openat: 257,
    write: 1,
    close: 3,
    fcntl: 72,
    kill: 62,
    ioctl: 16,
    pipe2: 293,
    wait4: 61,
    prctl: 157,
    prlimit64: 302,
    faccessat: 269,
    getuid: 102,
  };

/** The bound spawn, pipe and exit functions ({@linkcode SPAWN_SYMBOLS}). */
export type SpawnLibc = Deno.DynamicLibrary<typeof SPAWN_SYMBOLS>["symbols"];

/** The bound libc functions: both tables. */
export type Libc = SpawnLibc & Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];

/** Linux constants (identical on x86_64 and aarch64). */
export const C = {
  O_RDONLY: 0,
  O_RDWR: 0o2,
  O_NOCTTY: 0o400,
  O_NONBLOCK: 0o4000,
  O_CLOEXEC: 0o2000000,
  F_SETFL: 4,
  F_SETPIPE_SZ: 1031,
  F_GETPIPE_SZ: 1032,
  EFD_NONBLOCK: 0o4000,
  EFD_CLOEXEC: 0o2000000,
  TIOCSWINSZ: 0x5414,
  TIOCSIG: 0x40045436,
  FIONREAD: 0x541b,
  POSIX_SPAWN_SETSIGDEF: 0x04,
  POSIX_SPAWN_SETSIGMASK: 0x08,
  POSIX_SPAWN_SETSID: 0x80,
  POLLIN: 0x1,
  POLLOUT: 0x4,
  POLLERR: 0x8,
  POLLHUP: 0x10,
  POLLNVAL: 0x20,
  WNOHANG: 1,
  X_OK: 1,
  W_OK: 2,
  AT_FDCWD: -100,
  S_IFMT: 0o170000,
  S_IFDIR: 0o040000,
  ESRCH: 3,
  EINTR: 4,
  EIO: 5,
  EAGAIN: 11,
  ENOENT: 2,
  EACCES: 13,
  EROFS: 30,
  ENOTDIR: 20,
} as const;

/** Linux signal numbers by Deno signal name. */
export const SIGNALS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGILL: 4,
  SIGTRAP: 5,
  SIGABRT: 6,
  SIGIOT: 6,
  SIGBUS: 7,
  SIGFPE: 8,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
  SIGSTKFLT: 16,
  SIGCHLD: 17,
  SIGCONT: 18,
  SIGSTOP: 19,
  SIGTSTP: 20,
  SIGTTIN: 21,
  SIGTTOU: 22,
  SIGURG: 23,
  SIGXCPU: 24,
  SIGXFSZ: 25,
  SIGVTALRM: 26,
  SIGPROF: 27,
  SIGWINCH: 28,
  SIGIO: 29,
  SIGPOLL: 29,
  SIGPWR: 30,
  SIGSYS: 31,
};

let spawnLibrary: SpawnLibc | null = null;
let library: Libc | null = null;
let loadFailed = false;

/**
 * Returns the spawn, pipe and exit functions, opening `libc.so.6` with only
 * {@linkcode SPAWN_SYMBOLS} on first use.
 *
 * Throws if the library cannot be opened (no FFI permission, not glibc).
 */
export function spawnLibc(): SpawnLibc {
  spawnLibrary ??= Deno.dlopen("libc.so.6", SPAWN_SYMBOLS).symbols;
  return spawnLibrary;
}

/**
 * Returns all the bound libc functions, opening `libc.so.6` on first use.
 *
 * Throws if the library cannot be opened (no FFI permission, not glibc).
 */
export function libc(): Libc {
  library ??= { ...spawnLibc(), ...Deno.dlopen("libc.so.6", LIBC_SYMBOLS).symbols };
  return library;
}

/** Returns whether `libc.so.6` can be opened (binding only {@linkcode SPAWN_SYMBOLS}); never throws. */
export function libcAvailable(): boolean {
  if (spawnLibrary !== null) return true;
  if (loadFailed) return false;
  try {
    spawnLibc();
    return true;
  } catch {
    loadFailed = true;
    return false;
  }
}

/** True once an attempt to open libc has failed (never opens it itself). */
export function libcLoadFailed(): boolean {
  return loadFailed;
}

/**
 * Where `errno` lives for the thread this module runs on (a module instance, the server's or a
 * worker's, stays on one thread): looked up once, so that {@linkcode errno} makes no call.
 */
let errnoView: Deno.UnsafePointerView | null | undefined;

/**
 * Looks up where `errno` lives, once, through `errnoLocation`: a `__errno_location` bound with
 * the result `{ struct: ["u64"] }` (an `int *` in the same register, without a trampoline, as
 * {@linkcode SPAWN_SYMBOLS} binds it). A module with a table of its own calls it right after
 * binding it: {@linkcode errno} would otherwise bind {@linkcode SPAWN_SYMBOLS} after the
 * failing call, and binding may itself set `errno`.
 */
export function locateErrno(errnoLocation: () => Uint8Array<ArrayBuffer>): void {
  if (errnoView !== undefined) return;
  const location = errnoLocation();
  const ptr = Deno.UnsafePointer.create(
    new BigUint64Array(location.buffer, location.byteOffset, 1)[0]!,
  );
  errnoView = ptr === null ? null : new Deno.UnsafePointerView(ptr);
}

/** Returns the calling thread's `errno`; call it right after the failing call. */
export function errno(): number {
  if (errnoView === undefined) locateErrno(spawnLibc().__errno_location);
  return errnoView?.getInt32() ?? 0;
}

/** The one {@linkcode BY_VALUE_I64} argument of a call (copied by the call before it returns). */
const firstArgument = new BigInt64Array(1);

/**
 * Passes `value` (an integer, a descriptor, or an {@linkcode address}) as a
 * {@linkcode BY_VALUE_I64} argument: pass it straight to the call, one per call (every
 * call shares the array it returns).
 *
 * @example
 * ```ts
 * import { byValue } from "./libc.ts";
 * console.log(byValue(-100)[0]); // -100n
 * ```
 */
export function byValue(value: number | bigint): BigInt64Array<ArrayBuffer> {
  firstArgument[0] = BigInt(value);
  return firstArgument;
}

/**
 * The address of a buffer's first byte, as a `syscall` or {@linkcode byValue} argument (0 for
 * `null`). Keep the buffer reachable ({@linkcode keepAlive}) until the call has returned.
 */
export function address(buffer: BufferSource | null): bigint {
  return buffer === null ? 0n : BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buffer)));
}

function sys(number: number, a = 0n, b = 0n, c = 0n, d = 0n): number {
  return Number(spawnLibc().syscall(byValue(BigInt(number)), a, b, c, d));
}

/** `pipe2(fds, flags)`: 0, or -1 with {@linkcode errno} set. */
export function pipeFds(fds: Int32Array<ArrayBuffer>, flags: number): number {
  return sys(SYS.pipe2, address(fds), BigInt(flags));
}

/** `close(fd)`: 0, or -1 with {@linkcode errno} set. */
export function closeFd(fd: number): number {
  return sys(SYS.close, BigInt(fd));
}

/** `fcntl(fd, cmd, arg)` with an integer argument: its result, or -1 with {@linkcode errno} set. */
export function fileControl(fd: number, cmd: number, arg: number): number {
  return sys(SYS.fcntl, BigInt(fd), BigInt(cmd), BigInt(arg));
}

/** `kill(pid, signal)`: 0, or -1 with {@linkcode errno} set. */
export function killProcess(pid: number, signal: number): number {
  return sys(SYS.kill, BigInt(pid), BigInt(signal));
}

/** `write(fd, bytes)`: the bytes written, or -1 with {@linkcode errno} set. */
export function writeFd(fd: number, bytes: Uint8Array<ArrayBuffer>): number {
  return sys(SYS.write, BigInt(fd), address(bytes), BigInt(bytes.length));
}

/**
 * `faccessat(AT_FDCWD, path, mode, 0)`: 0 when this process (its real uid and gid) may access
 * `path` in `mode` (`C.X_OK | C.W_OK`), else the `errno` (`EACCES`, `EROFS` for a read-only
 * mount, `ENOENT`, and so on).
 */
export function accessError(path: string, mode: number): number {
  const cPath = cString(path);
  const rc = sys(SYS.faccessat, BigInt(C.AT_FDCWD), address(cPath), BigInt(mode));
  keepAlive(cPath);
  return rc === 0 ? 0 : errno();
}

/** `getuid()`: this process's real user id (needs no `--allow-sys`, unlike `Deno.uid()`). */
export function realUid(): number {
  return sys(SYS.getuid);
}

/**
 * `ioctl(master, TIOCSIG, signal)`: the kernel sends `signal` to the foreground process group of
 * the pty whose master is `master`, as the terminal's interrupt key would, but without echoing
 * it or reading the terminal's settings. 0, or -1 with {@linkcode errno} set (`EINVAL` where the
 * kernel lacks it).
 */
export function signalForegroundGroup(master: number, signal: number): number {
  return sys(SYS.ioctl, BigInt(master), BigInt(C.TIOCSIG), BigInt(signal));
}

/** Bytes waiting to be read from a pipe (`ioctl(FIONREAD)`), or -1 with {@linkcode errno} set. */
export function bytesReadable(fd: number): number {
  const count = new Int32Array(1);
  return sys(SYS.ioctl, BigInt(fd), BigInt(C.FIONREAD), address(count)) < 0 ? -1 : count[0]!;
}

/**
 * `waitpid(pid, status, options)`: the pid collected, 0 (`WNOHANG`, still running), or -1
 * with {@linkcode errno} set.
 */
export function waitChild(pid: number, status: Int32Array<ArrayBuffer>, options: number): number {
  return sys(SYS.wait4, BigInt(pid), address(status), BigInt(options), 0n);
}

/** `prctl(option, arg2)` (the other arguments 0): its result, or -1 with {@linkcode errno} set. */
export function processControl(option: number, arg2: bigint): number {
  return sys(SYS.prctl, BigInt(option), arg2, 0n, 0n);
}

/**
 * `prlimit(0, resource, newLimit, oldLimit)` on this process (either limit may be `null`):
 * 0, or -1 with {@linkcode errno} set. A limit is two `u64`: soft, hard.
 */
export function processLimit(
  resource: number,
  newLimit: BigUint64Array<ArrayBuffer> | null,
  oldLimit: BigUint64Array<ArrayBuffer> | null,
): number {
  return sys(SYS.prlimit64, 0n, BigInt(resource), address(newLimit), address(oldLimit));
}

/** Returns the C library's description of an error number, e.g. `No such file or directory`. */
export function strerror(code: number): string {
  const ptr = libc().strerror(byValue(code));
  return ptr === null ? `Unknown error ${code}` : Deno.UnsafePointerView.getCString(ptr);
}

/** Formats an error number the way Rust's `io::Error` displays it: `<strerror> (os error N)`. */
export function osErrorMessage(code: number): string {
  return `${strerror(code)} (os error ${code})`;
}

const encoder = new TextEncoder();

/**
 * A path or a file name: text (sent as UTF-8), or the bytes a directory listed, for a name that
 * is not UTF-8 and so cannot be spelled as text.
 */
export type FileName = string | Uint8Array;

/** Encodes a string as a NUL-terminated UTF-8 C string (bytes are copied as they are). */
export function cString(value: FileName): Uint8Array<ArrayBuffer> {
  if (typeof value !== "string") {
    const copy = new Uint8Array(value.length + 1);
    copy.set(value);
    return copy;
  }
  const bytes = new Uint8Array(encoder.encode(value).length + 1);
  encoder.encodeInto(value, bytes);
  return bytes;
}

/** `openat(AT_FDCWD, ...)`'s directory argument: the working directory. */
const AT_FDCWD = -100n;

const DEV_NULL = cString("/dev/null");

/**
 * Opens `/dev/null` close-on-exec (`flags` adds the access mode, `O_RDONLY` or `O_RDWR`), for
 * a child to get as a copy ({@linkcode SpawnStdio} `dup`); close it once the child is spawned.
 *
 * @param flags The access mode.
 * @returns The descriptor, or -1 with {@linkcode errno} set.
 */
export function openDevNull(flags: typeof C.O_RDONLY | typeof C.O_RDWR): number {
  return sys(SYS.openat, AT_FDCWD, address(DEV_NULL), BigInt(flags | C.O_CLOEXEC));
}

/**
 * Builds a NULL-terminated `char *[]` from strings.
 *
 * Returns the pointer array and the strings it points into; keep both alive until the call
 * that uses them has returned.
 */
export function cStringArray(
  values: readonly string[],
): { array: BigUint64Array<ArrayBuffer>; keep: Uint8Array[] } {
  const keep = values.map(cString);
  const array = new BigUint64Array(keep.length + 1);
  keep.forEach((bytes, i) => {
    array[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes)));
  });
  return { array, keep };
}

/** Reads an environment variable of this process through libc (needs no env permission). */
export function getenv(name: string): string | null {
  const cName = cString(name);
  const ptr = libc().getenv(byValue(address(cName)));
  keepAlive(cName);
  return ptr === null ? null : Deno.UnsafePointerView.getCString(ptr);
}

/** What {@linkcode fileKind} found at a path. */
export type FileKind = "missing" | "directory" | "other";

/** Offset of `st_mode` in `struct stat` for the current architecture. */
const ST_MODE_OFFSET = Deno.build.arch === "aarch64" ? 16 : 24;

/** Returns whether a path is missing, a directory, or something else (follows symlinks). */
export function fileKind(path: string): FileKind {
  const lib = libc();
  if (lib.stat === null) {
    try {
      return Deno.statSync(path).isDirectory ? "directory" : "other";
    } catch {
      return "missing";
    }
  }
  const buf = new Uint8Array(256);
  const cPath = cString(path);
  const rc = lib.stat(byValue(address(cPath)), buf);
  keepAlive(cPath);
  if (rc !== 0) return "missing";
  const mode = new DataView(buf.buffer).getUint32(ST_MODE_OFFSET, true);
  return (mode & C.S_IFMT) === C.S_IFDIR ? "directory" : "other";
}

/** Returns whether the calling process may execute the file at `path`. */
export function isExecutable(path: string): boolean {
  const cPath = cString(path);
  const rc = libc().access(byValue(address(cPath)), C.X_OK);
  keepAlive(cPath);
  return rc === 0;
}

/** Where a child's descriptor 0, 1 or 2 comes from in {@linkcode spawnInNewSession}. */
export type SpawnStdio =
  /**
   * A file opened in the child (after `setsid`: a tty slave becomes the controlling terminal).
   * Its `addopen` action binds the rest of libc ({@linkcode libc}) on first use: for a file
   * the child needs no terminal of, pass a copy of a descriptor instead.
   */
  | { open: Uint8Array<ArrayBuffer>; flags: number }
  /** A copy of a descriptor (of the parent, or an earlier one of the child). */
  | { dup: number };

/**
 * Spawns `path` with `posix_spawn` in a new session, every signal reset to
 * its default and unblocked, descriptors 0-2 from `stdio` and every other one
 * closed (glibc >= 2.34; else only the close-on-exec ones are).
 *
 * @param path The executable.
 * @param argv Its command line.
 * @param envEntries Its environment, as `NAME=value` entries.
 * @param cwd Its working directory.
 * @param stdio Where descriptors 0, 1 and 2 come from, in that order.
 * @returns The child's pid.
 * @throws {Error} With `code` set to the errno of the failed call.
 */
export function spawnInNewSession(
  path: string,
  argv: readonly string[],
  envEntries: readonly string[],
  cwd: string,
  stdio: readonly [SpawnStdio, SpawnStdio, SpawnStdio],
): number {
  const lib = spawnLibc();
  // Generous sizes: glibc's posix_spawn_file_actions_t is 80 bytes, posix_spawnattr_t 336.
  // Zeroed, as glibc's posix_spawn_file_actions_init leaves it (it only clears it): one symbol
  // fewer to bind before the first spawn. The add calls allocate its list; destroy frees it.
  const actions = new Uint8Array(256);
  const at = address(actions);
  const attr = spawnAttributes();
  try {
    // With POSIX_SPAWN_SETSID, glibc calls setsid() before the file actions.
    stdio.forEach((from, fd) => {
      spawnCheck(
        "dup" in from
          ? lib.posix_spawn_file_actions_adddup2(byValue(at), from.dup, fd)
          : libc().posix_spawn_file_actions_addopen(
            byValue(at),
            fd,
            address(from.open),
            from.flags,
            0,
          ),
      );
    });
    // glibc copies the paths of addopen and addchdir_np.
    const cCwd = cString(cwd);
    spawnCheck(lib.posix_spawn_file_actions_addchdir_np(byValue(at), address(cCwd)));
    // Do not leak this process's inheritable descriptors (glibc >= 2.34).
    if (lib.posix_spawn_file_actions_addclosefrom_np !== null) {
      spawnCheck(lib.posix_spawn_file_actions_addclosefrom_np(byValue(at), 3));
    }
    const cArgv = cStringArray(argv);
    const cEnv = cStringArray(envEntries);
    const pidOut = new Int32Array(1);
    const cPath = cString(path);
    const rc = lib.posix_spawn(
      byValue(address(pidOut)),
      address(cPath),
      at,
      address(attr),
      address(cArgv.array),
      address(cEnv.array),
    );
    // The addresses point into these buffers: keep them reachable until the calls returned.
    keepAlive(cCwd, cPath, attr, cArgv, cEnv, stdio);
    spawnCheck(rc);
    return pidOut[0]!;
  } finally {
    lib.posix_spawn_file_actions_destroy(byValue(at));
    keepAlive(actions);
  }
}

/** Size of glibc's `sigset_t` (1024 bits). */
const SIGSET_BYTES = 128;

/**
 * What glibc's `sigfillset` makes: signals 1 to 64 (the first 8 bytes; the rest stays zero),
 * except the two the C library keeps for its threads (32 and 33, `SIGCANCEL` and `SIGSETXID`).
 * Signal `n` is bit `n - 1` of the little-endian words.
 */
function filledSignalSet(): Uint8Array<ArrayBuffer> {
  const set = new Uint8Array(SIGSET_BYTES).fill(0xff, 0, 8);
  for (const signal of [32, 33]) set[(signal - 1) >> 3]! &= ~(1 << ((signal - 1) & 7));
  return set;
}

/** Offsets in glibc's `posix_spawnattr_t` (x86_64 and aarch64, 336 bytes). */
const ATTR = { size: 336, flags: 0, sigDefault: 8, sigMask: 136 } as const;

/**
 * The `posix_spawnattr_t` of {@linkcode spawnInNewSession}, as glibc's
 * `posix_spawnattr_init`, `_setflags`, `_setsigmask` and `_setsigdefault`
 * make it (they only write these fields; `_destroy` does nothing): flags
 * `POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF`, no
 * signal blocked and every signal reset to its default (Deno ignores some,
 * e.g. SIGPIPE, and ignored dispositions survive `exec`). Built here: five
 * fewer symbols to bind before the first spawn.
 */
export function spawnAttributes(): Uint8Array<ArrayBuffer> {
  const attr = new Uint8Array(ATTR.size);
  new DataView(attr.buffer).setInt16(
    ATTR.flags,
    C.POSIX_SPAWN_SETSID | C.POSIX_SPAWN_SETSIGMASK | C.POSIX_SPAWN_SETSIGDEF,
    true,
  );
  attr.set(filledSignalSet(), ATTR.sigDefault);
  // The mask at ATTR.sigMask stays empty.
  return attr;
}

/** What the last {@linkcode keepAlive} call was given. */
const kept: { values: unknown[] } = { values: [] };

/**
 * Keeps its arguments reachable up to this call: the buffers an {@linkcode address} points into,
 * which nothing else refers to once their address is taken. An empty function would not do:
 * V8's optimizing compiler inlines it, the arguments are then dead after their last other use,
 * and a collection triggered by an allocation before the C call (`byValue`, `BigInt`, the next
 * `address`) could free a buffer the call is about to read. The store to a module-level object
 * cannot be dropped, so each argument stays a root until here; they are let go by the next call.
 */
export function keepAlive(...values: unknown[]): void {
  kept.values = values;
}

function spawnCheck(rc: number): void {
  if (rc !== 0) throw Object.assign(new Error(osErrorMessage(rc)), { code: rc });
}
