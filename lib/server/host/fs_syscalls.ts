/**
 * File system calls on descriptors through FFI (glibc on Linux): what the
 * race-free resolver (`fs/resolve.ts`) and the `/proc` readers need and
 * Deno has no API for - `openat2`, the `*at` calls relative to a directory
 * descriptor, `O_TMPFILE` and reading `/proc` (which Deno only allows with
 * `--allow-all`).
 *
 * The library is opened lazily; {@linkcode fsSyscallsAvailable} tells
 * whether it can be (it needs `--allow-ffi`). Every call returns `-1` and
 * leaves `errno` set on failure, as in C; {@linkcode check} turns that into
 * a `Deno.errors`-like error with the errno's code name.
 *
 * @module
 */

import {
  address,
  BY_VALUE_I64,
  byValue,
  cString,
  errno,
  fileControl,
  type FileName,
  keepAlive,
  locateErrno,
} from "./libc.ts";
import { osErrorName } from "./os_errors.ts";

/**
 * `statx`, bound on its own with its first call, with Deno's fast call: it is the one call of
 * an `fs/getMetadata` (one or two per request, and one per entry of a scoped listing or walk),
 * and a fast call saves 0.3-0.5 us of each (a trampoline, see {@linkcode SYMBOLS}).
 */
const STATX_SYMBOLS = {
  statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32" },
} as const;

/**
 * The rest, bound by {@linkcode fsSyscallsAvailable}. The first parameter of each synchronous
 * one is {@linkcode BY_VALUE_I64} (pass it with {@linkcode byValue}; a pointer as its
 * {@linkcode address}), so that `Deno.dlopen` compiles no fast-call trampoline for it
 * (`nonblocking` ones get none anyway): they run once or a few times per request, or, as
 * `getdents64`, once per few hundred entries of a listing. In fresh processes (7 runs each),
 * binding the 31 symbols this file had, all with trampolines, took 7.4-13.1 ms (median 10.8)
 * and grew RSS by 3.5-4.6 MB; this table takes 2.1-2.7 ms (2.5) and 2.4-2.9 MB, and with
 * {@linkcode STATX_SYMBOLS} 3.1-6.6 ms (4.0) and 5.0-5.5 MB: most of it is the process's
 * first trampoline, which a server that never answers an `fs/getMetadata` (or scoped listing
 * or walk) now never compiles for its file calls and `/proc` reads.
 */
const SYMBOLS = {
  syscall: { parameters: [BY_VALUE_I64, "i64", "buffer", "buffer", "u64"], result: "i64" },
  /** `syscall(SYS_getdents64, fd, buffer, size)`: a directory's records, many per call. */
  getdents64: {
    name: "syscall",
    parameters: [BY_VALUE_I64, "i64", "buffer", "u64"],
    result: "i64",
  },
  openat: { parameters: [BY_VALUE_I64, "buffer", "i32", "u32"], result: "i32" },
  close: { parameters: [BY_VALUE_I64], result: "i32" },
  read: { parameters: [BY_VALUE_I64, "buffer", "usize"], result: "isize" },
  write: { parameters: [BY_VALUE_I64, "buffer", "usize"], result: "isize" },
  pread: { parameters: [BY_VALUE_I64, "buffer", "usize", "i64"], result: "isize" },
  pwrite: { parameters: [BY_VALUE_I64, "buffer", "usize", "i64"], result: "isize" },
  preadAsync: {
    name: "pread",
    parameters: ["i32", "buffer", "usize", "i64"],
    result: "isize",
    nonblocking: true,
  },
  pwriteAsync: {
    name: "pwrite",
    parameters: ["i32", "buffer", "usize", "i64"],
    result: "isize",
    nonblocking: true,
  },
  readAsync: {
    name: "read",
    parameters: ["i32", "buffer", "usize"],
    result: "isize",
    nonblocking: true,
  },
  writeAsync: {
    name: "write",
    parameters: ["i32", "buffer", "usize"],
    result: "isize",
    nonblocking: true,
  },
  mkdirat: { parameters: [BY_VALUE_I64, "buffer", "u32"], result: "i32" },
  unlinkat: { parameters: [BY_VALUE_I64, "buffer", "i32"], result: "i32" },
  renameat: { parameters: [BY_VALUE_I64, "buffer", "i32", "buffer"], result: "i32" },
  linkat: { parameters: [BY_VALUE_I64, "buffer", "i32", "buffer", "i32"], result: "i32" },
  // The target's address first.
  symlinkat: { parameters: [BY_VALUE_I64, "i32", "buffer"], result: "i32" },
  readlinkat: { parameters: [BY_VALUE_I64, "buffer", "buffer", "usize"], result: "isize" },
  fstatat: { parameters: [BY_VALUE_I64, "buffer", "buffer", "i32"], result: "i32" },
  fchmod: { parameters: [BY_VALUE_I64, "u32"], result: "i32" },
  fchown: { parameters: [BY_VALUE_I64, "u32", "u32"], result: "i32" },
  fdatasync: { parameters: [BY_VALUE_I64], result: "i32" },
  fdatasyncAsync: { name: "fdatasync", parameters: ["i32"], result: "i32", nonblocking: true },
  // The name's address first.
  memfd_create: { parameters: [BY_VALUE_I64, "u32"], result: "i32" },
  // Variadic in C; an int third argument is passed as in a non-variadic call.
  flock: { parameters: [BY_VALUE_I64, "i32"], result: "i32" },
  // `int *`, returned as a struct of one 64-bit integer: no trampoline (see `locateErrno`).
  __errno_location: { parameters: [], result: { struct: ["u64"] } },
} as const;

/** Linux constants (identical on x86_64 and aarch64 unless noted). */
export const F = {
  AT_FDCWD: -100,
  AT_SYMLINK_NOFOLLOW: 0x100,
  AT_REMOVEDIR: 0x200,
  AT_SYMLINK_FOLLOW: 0x400,
  AT_EMPTY_PATH: 0x1000,
  O_RDONLY: 0,
  O_WRONLY: 1,
  O_CREAT: 0o100,
  O_EXCL: 0o200,
  O_TRUNC: 0o1000,
  O_NONBLOCK: 0o4000,
  O_DIRECTORY: Deno.build.arch === "aarch64" ? 0o40000 : 0o200000,
  O_NOFOLLOW: Deno.build.arch === "aarch64" ? 0o100000 : 0o400000,
  O_CLOEXEC: 0o2000000,
  O_PATH: 0o10000000,
  LOCK_SH: 1,
  LOCK_EX: 2,
  LOCK_NB: 4,
  /** `__O_TMPFILE | O_DIRECTORY`. */
  O_TMPFILE: 0o20000000 | (Deno.build.arch === "aarch64" ? 0o40000 : 0o200000),
  RESOLVE_NO_MAGICLINKS: 0x02,
  RESOLVE_BENEATH: 0x08,
  SYS_OPENAT2: 437,
  SYS_GETDENTS64: Deno.build.arch === "aarch64" ? 61 : 217,
  S_IFMT: 0o170000,
  S_IFDIR: 0o040000,
  S_IFREG: 0o100000,
  S_IFLNK: 0o120000,
  S_IFIFO: 0o010000,
} as const;

type StatxLibrary = Deno.DynamicLibrary<typeof STATX_SYMBOLS>["symbols"];
type Library = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
let statxLibrary: StatxLibrary | null = null;
let library: Library | null = null;
let unavailable = false;

function lib(): Library {
  if (library === null) {
    library = Deno.dlopen("libc.so.6", SYMBOLS).symbols;
    locateErrno(library.__errno_location);
  }
  return library;
}

function statxLib(): StatxLibrary {
  if (statxLibrary === null) {
    lib();
    statxLibrary = Deno.dlopen("libc.so.6", STATX_SYMBOLS).symbols;
  }
  return statxLibrary;
}

/**
 * Whether the calls can be made: Linux, `--allow-ffi` granted and glibc's
 * `libc.so.6` loadable (binding {@linkcode SYMBOLS}). Never throws.
 */
export function fsSyscallsAvailable(): boolean {
  if (library !== null) return true;
  if (unavailable || Deno.build.os !== "linux") return false;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return false;
    lib();
    return true;
  } catch {
    unavailable = true;
    return false;
  }
}

/** An OS error from a failed call: `code` is the errno name, as on Deno's own errors. */
export class SyscallError extends Error {
  /** The errno name, e.g. `ENOENT`. */
  readonly code: string;
  /** The errno number. */
  readonly errno: number;

  /**
   * Creates the error for an errno.
   *
   * @param errno The errno number.
   * @param call The failing call, for the message.
   */
  constructor(errno: number, call: string) {
    const code = osErrorName(errno) ?? `E${errno}`;
    super(`${call} failed: ${code}`);
    this.code = code;
    this.errno = errno;
    this.name = "SyscallError";
  }
}

/** Throws a {@linkcode SyscallError} when `result` is negative. */
export function check<T extends number | bigint>(result: T, call: string): T {
  if (result < 0) throw new SyscallError(errno(), call);
  return result;
}

/**
 * `openat2(dirfd, path, {flags, mode, resolve})`.
 *
 * @returns The new descriptor.
 * @throws {SyscallError} `EXDEV` for a path that leaves `dirfd` under `RESOLVE_BENEATH`.
 */
export function openat2(
  dirfd: number,
  path: string,
  flags: number,
  mode: number,
  resolve: number,
): number {
  const how = new BigUint64Array([BigInt(flags | F.O_CLOEXEC), BigInt(mode), BigInt(resolve)]);
  const fd = lib().syscall(
    byValue(F.SYS_OPENAT2),
    BigInt(dirfd),
    cString(path),
    new Uint8Array(how.buffer),
    24n,
  );
  return Number(check(fd, "openat2"));
}

/** `openat(dirfd, path, flags | O_CLOEXEC, mode)`. */
export function openat(dirfd: number, path: FileName, flags: number, mode = 0): number {
  return check(lib().openat(byValue(dirfd), cString(path), flags | F.O_CLOEXEC, mode), "openat");
}

/** Closes a descriptor, ignoring errors. */
export function close(fd: number): void {
  lib().close(byValue(fd));
}

/**
 * `flock(fd, operation)`: an advisory lock on the open file (`F.LOCK_SH`,
 * `F.LOCK_EX`, with `F.LOCK_NB` not to wait); it goes with the descriptor.
 *
 * @returns Whether the lock was taken.
 */
export function flock(fd: number, operation: number): boolean {
  return lib().flock(byValue(fd), operation) === 0;
}

/** `mkdirat`. */
export function mkdirat(dirfd: number, name: FileName, mode = 0o777): void {
  check(lib().mkdirat(byValue(dirfd), cString(name), mode), "mkdirat");
}

/** `unlinkat` (`directory`: `AT_REMOVEDIR`). */
export function unlinkat(dirfd: number, name: FileName, directory: boolean): void {
  check(lib().unlinkat(byValue(dirfd), cString(name), directory ? F.AT_REMOVEDIR : 0), "unlinkat");
}

/** `renameat`. */
export function renameat(fromDir: number, from: string, toDir: number, to: string): void {
  check(lib().renameat(byValue(fromDir), cString(from), toDir, cString(to)), "renameat");
}

/** Gives the file open on `fd` (an `O_TMPFILE`) the name `name` in `dirfd`. */
export function linkTmpfile(fd: number, dirfd: number, name: string): void {
  check(
    lib().linkat(
      byValue(F.AT_FDCWD),
      cString(`/proc/self/fd/${fd}`),
      dirfd,
      cString(name),
      F.AT_SYMLINK_FOLLOW,
    ),
    "linkat",
  );
}

/** `symlinkat(target, dirfd, name)`. */
export function symlinkat(target: string, dirfd: number, name: FileName): void {
  const cTarget = cString(target);
  check(lib().symlinkat(byValue(address(cTarget)), dirfd, cString(name)), "symlinkat");
  keepAlive(cTarget);
}

const decoder = new TextDecoder();

/** `readlinkat`; `name` `""` reads the link `dirfd` itself was opened on (`O_PATH`). */
export function readlinkat(dirfd: number, name: FileName): string {
  const buf = new Uint8Array(4096);
  const n = Number(
    check(lib().readlinkat(byValue(dirfd), cString(name), buf, BigInt(buf.length)), "readlinkat"),
  );
  return decoder.decode(buf.subarray(0, n));
}

/** The path the kernel has for an open descriptor (`/proc/self/fd/N`). */
export function fdPath(fd: number): string {
  return readlinkat(F.AT_FDCWD, `/proc/self/fd/${fd}`);
}

/** What {@linkcode fstatat} reports. */
export interface Stat {
  /** `st_mode` (type and permission bits). */
  mode: number;
  /** Owner. */
  uid: number;
  /** Group. */
  gid: number;
  /** Size in bytes. */
  size: number;
  /** Device. */
  dev: bigint;
  /** Inode number. */
  ino: bigint;
}

/** `fstatat`; `undefined` when the name does not exist. */
export function fstatat(dirfd: number, name: FileName, follow: boolean): Stat | undefined {
  const buf = new Uint8Array(256);
  const flags = (follow ? 0 : F.AT_SYMLINK_NOFOLLOW) | (name.length === 0 ? F.AT_EMPTY_PATH : 0);
  if (lib().fstatat(byValue(dirfd), cString(name), buf, flags) !== 0) {
    const code = errno();
    if (code === 2) return undefined;
    throw new SyscallError(code, "fstatat");
  }
  const view = new DataView(buf.buffer);
  // struct stat: dev at 0, ino 8; x86_64 st_mode at 24, uid 28, gid 32, size 48; aarch64 mode 16,
  // uid 24, gid 28, size 48.
  const arm = Deno.build.arch === "aarch64";
  return {
    mode: view.getUint32(arm ? 16 : 24, true),
    uid: view.getUint32(arm ? 24 : 28, true),
    gid: view.getUint32(arm ? 28 : 32, true),
    size: Number(view.getBigInt64(48, true)),
    dev: view.getBigUint64(0, true),
    ino: view.getBigUint64(8, true),
  };
}

/**
 * Whether a mode ({@linkcode Stat} or {@linkcode StatX}) is of an `S_IF*` type; `false` for
 * `undefined` (a missing entry).
 *
 * @example
 * ```ts
 * import { F, isType } from "./fs_syscalls.ts";
 * console.log(isType({ mode: F.S_IFDIR | 0o755 }, F.S_IFDIR)); // true
 * console.log(isType(undefined, F.S_IFREG)); // false
 * ```
 *
 * @param stat What `fstatat` or `statx` reported, or `undefined`.
 * @param type `F.S_IFDIR`, `F.S_IFREG`, `F.S_IFLNK`...
 */
export function isType(stat: { mode: number } | undefined, type: number): boolean {
  return stat !== undefined && (stat.mode & F.S_IFMT) === type;
}

/** What {@linkcode statx} reports: the fields of `fs/getMetadata`. */
export interface StatX {
  /** `stx_mode` (type and permission bits). */
  mode: number;
  /** Size in bytes. */
  size: number;
  /** Last modification, milliseconds since the epoch. */
  modifiedMs: number;
  /** Creation, milliseconds since the epoch; `undefined` where the file system keeps none. */
  createdMs: number | undefined;
}

/** `STATX_BASIC_STATS | STATX_BTIME`. */
const STATX_MASK = 0x7ff | 0x800;

/**
 * The result buffer of every {@linkcode statx} call (the calls are synchronous), read through
 * 32-bit views: little-endian, as on every Linux target Deno runs on (x86_64, aarch64).
 */
const STATX_BUFFER = new Uint8Array(256);
const STATX_U32 = new Uint32Array(STATX_BUFFER.buffer);
const STATX_I32 = new Int32Array(STATX_BUFFER.buffer);

/**
 * The name argument of every {@linkcode statx} call, NUL-terminated: `PATH_MAX` bytes and the
 * NUL (a longer name gets a buffer of its own and the kernel's `ENAMETOOLONG`).
 */
const NAME_BUFFER = new Uint8Array(4096 + 1);
const NAME_ENCODER = new TextEncoder();

/** `name` as a C string, in {@linkcode NAME_BUFFER} when it fits (3 bytes at most per unit). */
function statxName(name: string): Uint8Array<ArrayBuffer> {
  if (name.length * 3 >= NAME_BUFFER.length) return cString(name);
  NAME_BUFFER[NAME_ENCODER.encodeInto(name, NAME_BUFFER).written] = 0;
  return NAME_BUFFER;
}

/** A `struct statx_timestamp` at 32-bit index `at` (i64 seconds, u32 nanoseconds) in ms. */
function statxMs(at: number): number {
  const seconds = STATX_I32[at + 1]! * 2 ** 32 + STATX_U32[at]!;
  return seconds * 1000 + Math.floor(STATX_U32[at + 2]! / 1e6);
}

/**
 * `statx`; `name` `""` describes the descriptor itself (`AT_EMPTY_PATH`). Without an
 * allocation but the result: `fs/getMetadata` makes one or two per request.
 *
 * @throws {SyscallError} Also `ENOENT` when the name does not exist.
 */
export function statx(dirfd: number, name: string, follow: boolean): StatX {
  const flags = (follow ? 0 : F.AT_SYMLINK_NOFOLLOW) | (name === "" ? F.AT_EMPTY_PATH : 0);
  check(statxLib().statx(dirfd, statxName(name), flags, STATX_MASK, STATX_BUFFER), "statx");
  // struct statx: stx_mask at byte 0, stx_mode (u16) 28, stx_size (u64) 40, stx_btime 80,
  // stx_mtime 112.
  return {
    mode: STATX_U32[7]! & 0xffff,
    size: STATX_U32[11] === 0 ? STATX_U32[10]! : STATX_U32[11]! * 2 ** 32 + STATX_U32[10]!,
    modifiedMs: statxMs(28),
    createdMs: (STATX_U32[0]! & 0x800) !== 0 ? statxMs(20) : undefined,
  };
}

/** `fchmod`. */
export function fchmod(fd: number, mode: number): void {
  check(lib().fchmod(byValue(fd), mode), "fchmod");
}

/** `fchown`, ignoring failure (as `chown` of a copy by a user who does not own the original). */
export function fchownQuiet(fd: number, uid: number, gid: number): void {
  lib().fchown(byValue(fd), uid, gid);
}

/**
 * Makes a call on the blocking thread pool (`pooled`). A nonblocking call sets `errno` on the
 * pool's thread, not this one, so a call that failed there (a negative result) is repeated
 * here (`direct`): its error (e.g. `ENOSPC`) is then its own.
 */
async function onPool<T extends number | bigint>(
  call: string,
  pooled: Promise<T>,
  direct: () => T,
): Promise<T> {
  const result = await pooled;
  return result < 0 ? check(direct(), call) : result;
}

/** Writes all of `data` to `fd` (on the blocking thread pool, see {@linkcode onPool}). */
export async function writeAll(fd: number, data: Uint8Array): Promise<void> {
  let written = 0;
  while (written < data.length) {
    const chunk = data.subarray(written, Math.min(data.length, written + (1 << 24)));
    const { writeAsync, write } = lib();
    const size = BigInt(chunk.length);
    written += Number(
      await onPool("write", writeAsync(fd, chunk, size), () => write(byValue(fd), chunk, size)),
    );
  }
}

/** Reads into `buffer` (on the blocking thread pool, see {@linkcode onPool}); `null` at end of file. */
export async function readInto(fd: number, buffer: Uint8Array): Promise<number | null> {
  const { readAsync, read } = lib();
  const size = BigInt(buffer.length);
  const n = await onPool(
    "read",
    readAsync(fd, buffer, size),
    () => read(byValue(fd), buffer, size),
  );
  return n === 0n ? null : Number(n);
}

/**
 * `pread` at `offset` (on the blocking thread pool, see {@linkcode onPool}).
 *
 * @returns The number of bytes read, 0 at the end of the file.
 */
export async function preadAt(fd: number, buffer: Uint8Array, offset: bigint): Promise<number> {
  const { preadAsync, pread } = lib();
  const size = BigInt(buffer.length);
  return Number(
    await onPool(
      "pread",
      preadAsync(fd, buffer, size, offset),
      () => pread(byValue(fd), buffer, size, offset),
    ),
  );
}

/**
 * `pwrite` at `offset` (on the blocking thread pool, see {@linkcode onPool}).
 *
 * @returns The number of bytes written.
 */
export async function pwriteAt(fd: number, data: Uint8Array, offset: bigint): Promise<number> {
  const { pwriteAsync, pwrite } = lib();
  const size = BigInt(data.length);
  return Number(
    await onPool(
      "pwrite",
      pwriteAsync(fd, data, size, offset),
      () => pwrite(byValue(fd), data, size, offset),
    ),
  );
}

/**
 * `fdatasync` (on the blocking thread pool, see {@linkcode onPool}). The kernel reports a
 * writeback error once, so a repeat here that succeeds means `EIO`.
 */
export async function fdatasync(fd: number): Promise<void> {
  await onPool("fdatasync", lib().fdatasyncAsync(fd), () => {
    check(lib().fdatasync(byValue(fd)), "fdatasync");
    throw new SyscallError(5, "fdatasync");
  });
}

/** `.` in a name's bytes. */
const DOT = 0x2e;

/** One entry of {@linkcode listDirectoryEntries}. */
export interface DirectoryEntry {
  /** The name, decoded as UTF-8 (a byte that is not UTF-8 reads as U+FFFD). */
  name: string;
  /** The name's bytes, which reach the entry whether or not they are UTF-8. */
  bytes: Uint8Array;
  /**
   * The type the directory reports (`d_type`) as a file mode's type bits (`F.S_IFREG`, ...), or
   * `0` where the file system does not say.
   */
  type: number;
}

/**
 * The buffer {@linkcode listDirectoryEntries} reads records into, reused (listings are
 * synchronous): 32 KiB holds a few hundred records, so a directory of 1 000 entries takes a
 * handful of calls instead of one per entry.
 */
const direntScratch = new Uint8Array(32 * 1024);
const direntView = new DataView(direntScratch.buffer);

/** A name of plain ASCII bytes as a string, without the decoder's call. */
function asciiName(bytes: Uint8Array): string | undefined {
  for (const byte of bytes) if (byte >= 0x80) return undefined;
  return String.fromCharCode(...bytes);
}

/**
 * The entries of the directory open on `dirfd` (the descriptor stays open, read to its end),
 * without `.` and `..`, with the type the directory itself reports: a name that is not UTF-8
 * cannot be looked up again by its decoded text, its type still tells what it is. The records
 * come from `getdents64` into one reused buffer, many per call.
 */
export function listDirectoryEntries(dirfd: number): DirectoryEntry[] {
  const { getdents64 } = lib();
  const entries: DirectoryEntry[] = [];
  for (;;) {
    const size = Number(
      check(
        getdents64(
          byValue(F.SYS_GETDENTS64),
          BigInt(dirfd),
          direntScratch,
          BigInt(direntScratch.length),
        ),
        "getdents64",
      ),
    );
    if (size === 0) return entries;
    // struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1, then d_name, NUL-padded to
    // d_reclen.
    for (let at = 0; at < size;) {
      const length = direntView.getUint16(at + 16, true);
      const end = direntScratch.indexOf(0, at + 19);
      const bytes = direntScratch.slice(at + 19, end < 0 || end > at + length ? at + length : end);
      // d_type is the mode's type bits shifted right by 12 (DT_REG 8 is S_IFREG >> 12).
      const type = direntScratch[at + 18]! << 12;
      at += length;
      if (bytes.length <= 2 && bytes.every((byte) => byte === DOT)) continue;
      entries.push({ name: asciiName(bytes) ?? decoder.decode(bytes), bytes, type });
    }
  }
}

/** The names in the directory open on `dirfd` (the descriptor stays open), without `.` and `..`. */
export function listDirectory(dirfd: number): string[] {
  return listDirectoryEntries(dirfd).map((entry) => entry.name);
}

/** `MFD_CLOEXEC | MFD_ALLOW_SEALING`. */
const MFD_FLAGS = 0x1 | 0x2;
const F_ADD_SEALS = 1033;
/** `F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE`. */
const ALL_SEALS = 0x1 | 0x2 | 0x4 | 0x8;

/**
 * A sealed, read-only in-memory file holding `data` (`memfd_create`, then
 * every seal): other processes open it as `/proc/<pid>/fd/<fd>` while this
 * process lives, and it disappears with it, even after a SIGKILL.
 *
 * @param name A name for diagnostics (`/memfd:<name>`).
 * @param data The content.
 * @returns The descriptor (close-on-exec).
 */
export function sealedMemoryFile(name: string, data: Uint8Array): number {
  const cName = cString(name);
  const fd = check(lib().memfd_create(byValue(address(cName)), MFD_FLAGS), "memfd_create");
  keepAlive(cName);
  try {
    let written = 0;
    while (written < data.length) {
      const rest = data.subarray(written) as Uint8Array<ArrayBuffer>;
      written += Number(check(lib().write(byValue(fd), rest, BigInt(rest.length)), "write"));
    }
    fchmod(fd, 0o444);
    check(fileControl(fd, F_ADD_SEALS, ALL_SEALS), "fcntl");
    return fd;
  } catch (err) {
    close(fd);
    throw err;
  }
}

/**
 * The buffer {@linkcode readSmallFile} reads into, reused: the server reads
 * `/proc` files for every process it ends (thousands of reads when many end
 * at once), and a fresh 64 KiB buffer per read left that much garbage
 * outside the JavaScript heap each time; the allocator kept the pages.
 */
const readScratch = new Uint8Array(65536);

/** Reads a whole small file (e.g. under `/proc`), bypassing Deno's `/proc` restriction. */
export function readSmallFile(path: string): string {
  const fd = openat(F.AT_FDCWD, path, F.O_RDONLY);
  try {
    const parts: Uint8Array[] = [];
    for (;;) {
      const n = Number(
        check(lib().read(byValue(fd), readScratch, BigInt(readScratch.length)), "read"),
      );
      if (n === 0) break;
      parts.push(readScratch.slice(0, n));
    }
    if (parts.length === 1) return decoder.decode(parts[0]);
    const all = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
    let at = 0;
    for (const part of parts) {
      all.set(part, at);
      at += part.length;
    }
    return decoder.decode(all);
  } finally {
    close(fd);
  }
}

/** Lists a directory by path (e.g. `/proc`). */
export function listDirectoryAt(path: string): string[] {
  const fd = openat(F.AT_FDCWD, path, F.O_RDONLY | F.O_DIRECTORY);
  try {
    return listDirectory(fd);
  } finally {
    close(fd);
  }
}
