/**
 * Pseudo-terminal child processes for `tty: true` process starts (docs/protocol.md §8.2, §8.3).
 *
 * Deno has no pty API, so this module drives libc through FFI (`libc.ts`): it opens a pty
 * master, spawns the child with `posix_spawn` in a new session whose controlling terminal is
 * the pty slave (fds 0, 1 and 2), and then does all master I/O non-blocking on the JS thread.
 * Waiting happens in one `poll` call shared by all pty processes, run on Deno's blocking thread
 * pool; it watches the masters that have a read or write waiting, a pidfd per process for its
 * exit, and an eventfd used to wake the poll when the set changes.
 *
 * Needs `--allow-ffi` and Linux with glibc; see `ptySupported` (`pty_support.ts`). This module
 * loads with the first tty process.
 *
 * @module
 */

import { requireRun } from "../host/permissions.ts";
import { ptySupported } from "./pty_support.ts";
import { osErrorName } from "../host/os_errors.ts";
import { waitedExit } from "../host/child_exits.ts";
import { spawnErrorFromErrno } from "./spawn_errors.ts";
import { ErrorCode, kindError, type RpcError } from "../../protocol/errors.ts";
import {
  byValue,
  C,
  closeFd,
  errno,
  fileKind,
  getenv,
  isExecutable,
  killProcess,
  type Libc,
  libc,
  osErrorMessage,
  signalForegroundGroup,
  SIGNALS,
  spawnInNewSession,
  strerror,
  waitChild,
} from "../host/libc.ts";

/**
 * The most pty processes alive at once (spawned and not yet both reaped and closed).
 *
 * Each live pty process holds two file descriptors (the pty master and a pidfd) and one kernel
 * pty pair; all of them share a single waiting thread from Deno's blocking thread pool (which
 * Deno 2.9 caps at about 32 threads, also used by file system operations), so the cap guards
 * descriptors and `/dev/pts` entries, not threads. {@linkcode spawnPty} fails with
 * `limitReached` beyond it.
 */
export const MAX_PTY_PROCESSES = 1024;

/** Window size used when {@linkcode PtySpawnOptions} gives none (docs/protocol.md §8.2). */
export const DEFAULT_PTY_SIZE: { readonly rows: number; readonly cols: number } = {
  rows: 24,
  cols: 80,
};

/** Largest chunk a single {@linkcode PtyProcess.read} returns. */
export const PTY_READ_CHUNK = 65536;

/** Options for {@linkcode spawnPty}. */
export interface PtySpawnOptions {
  /**
   * Working directory of the child, a native absolute path. Like the reference, a path that is
   * not a directory falls back to `HOME` from `env`, else this process's `HOME`, else `/`.
   */
  cwd: string;
  /** The child's complete environment; nothing is inherited. */
  env: Record<string, string>;
  /** What the program sees as `argv[0]`; the executed path is still resolved from `argv[0]`. */
  arg0?: string | null;
  /**
   * Terminal rows.
   *
   * @default {24}
   */
  rows?: number;
  /**
   * Terminal columns.
   *
   * @default {80}
   */
  cols?: number;
  /**
   * The most pty processes alive at once, this one included: the spawn fails with `limitReached`
   * when that many already are. Lower than {@linkcode MAX_PTY_PROCESSES} only in tests of the bound.
   *
   * @default {MAX_PTY_PROCESSES}
   */
  maxLive?: number;
}

/** How a pty child ended. */
export interface PtyExitStatus {
  /** Exit code as reported on the wire: the exit status, or `1` for a signal death (docs/protocol.md §8.3). */
  code: number;
  /** The terminating signal number, or `null` after a normal exit. */
  signal: number | null;
}

/** A child process running on its own pseudo-terminal. */
export interface PtyProcess {
  /** OS process id; also the id of the child's session and process group. */
  readonly pid: number;
  /**
   * Returns the next chunk of terminal output (at most 64 KiB), or `null` at EOF (every slave
   * fd closed) or after {@linkcode PtyProcess.close}. Concurrent calls are served in order.
   */
  read(): Promise<Uint8Array | null>;
  /**
   * Writes all bytes to the terminal input. Calls are serialized in call order. Rejects if the
   * pty was closed or the kernel refuses the write (e.g. every slave fd is gone).
   */
  write(bytes: Uint8Array): Promise<void>;
  /** Sets the window size; the kernel sends `SIGWINCH` to the foreground process group. */
  resize(rows: number, cols: number): void;
  /**
   * Sends a signal to the child's whole process group (`kill(-pid, sig)`). A group that is
   * already gone is ignored.
   */
  kill(signal: Deno.Signal | number): void;
  /**
   * Sends `SIGINT` to the terminal's foreground process group, as a typed Ctrl-C does, without
   * the echoed `^C`, and also when the program turned the terminal's signal keys off (`stty
   * raw`). An interactive shell's foreground job is the group hit, not the shell. Where the kernel
   * cannot (no `TIOCSIG`), the child's own group gets it. A group that is gone is ignored.
   */
  interrupt(): void;
  /** Resolves once the child has been reaped; never rejects. */
  readonly status: Promise<PtyExitStatus>;
  /**
   * Releases the pty master: pending and later reads return `null`, pending and later writes
   * reject. Closing the master of a running child hangs up its terminal (the kernel sends
   * `SIGHUP` to it). The exit is still tracked until the child is reaped. Idempotent. Call it
   * once output is no longer wanted, or file descriptors leak.
   */
  close(): void;
}

let liveCount = 0;

/**
 * How many pty processes are alive now (spawned and not yet both reaped and closed), the count
 * {@linkcode MAX_PTY_PROCESSES} bounds.
 */
export function livePtyProcesses(): number {
  return liveCount;
}

/**
 * Spawns `argv` on a new pseudo-terminal.
 *
 * A program without `/` is searched only in the `PATH` of `options.env`, as the reference does
 * for tty processes; `./x` and `../x` are taken relative to the working directory. Failures
 * throw an {@linkcode RpcError} `-32603` whose `data.kind` is `spawnNotFound`,
 * `spawnPermissionDenied` or `spawnFailed` (docs/protocol.md §8.2).
 *
 * @param argv The program and its arguments; `argv[0]` must not be empty.
 * @param options Working directory, environment, `arg0` and window size.
 *
 * @example Run a command and collect its output
 * ```ts ignore
 * const child = spawnPty(["/bin/echo", "hi"], { cwd: "/", env: {} });
 * let out = "";
 * for (let c = await child.read(); c !== null; c = await child.read()) {
 *   out += new TextDecoder().decode(c);
 * }
 * console.log(out, await child.status); // "hi\r\n" { code: 0, signal: null }
 * child.close();
 * ```
 */
export function spawnPty(argv: readonly string[], options: PtySpawnOptions): PtyProcess {
  if (!ptySupported()) {
    throw kindError(
      "spawnFailed",
      "Cannot spawn a pty process: pseudo-terminals need Linux and the FFI permission",
    );
  }
  const maxLive = Math.min(options.maxLive ?? MAX_PTY_PROCESSES, MAX_PTY_PROCESSES);
  if (liveCount >= maxLive) {
    throw kindError(
      "limitReached",
      `Cannot spawn a pty process: the limit of ${maxLive} live pty processes is reached`,
      ErrorCode.InternalError,
    );
  }
  const program = argv[0];
  if (program === undefined || program === "") {
    throw kindError("spawnFailed", "missing program for PTY spawn");
  }
  if (argv.some((arg) => arg.includes("\0")) || options.arg0?.includes("\0")) {
    throw kindError("spawnFailed", "nul byte found in provided data");
  }
  const envEntries = Object.entries(options.env).map(([key, value]) => `${key}=${value}`);
  if (envEntries.some((entry) => entry.includes("\0")) || options.cwd.includes("\0")) {
    throw kindError("spawnFailed", "data provided contains a nul byte");
  }
  const cwd = effectiveCwd(options.cwd, options.env);
  const path = resolveProgram(program, cwd, options.env);
  // The run permission covers what is executed, after the PATH lookup (FFI spawns bypass Deno).
  requireRun(path);
  const childArgv = [options.arg0 ?? program, ...argv.slice(1)];
  const { master, pid } = openAndSpawn(path, childArgv, envEntries, cwd, {
    rows: options.rows ?? DEFAULT_PTY_SIZE.rows,
    cols: options.cols ?? DEFAULT_PTY_SIZE.cols,
  });
  return new PtyChild(libc(), pid, master);
}

/** The spawn error for an errno libc returned, worded as the pipe spawner's (musl's texts). */
function errnoError(code: number): RpcError {
  const name = osErrorName(code);
  return name === undefined
    ? kindError("spawnFailed", osErrorMessage(code))
    : spawnErrorFromErrno(name);
}

/** The reference runs a tty child in its home directory when `cwd` is not a directory. */
function effectiveCwd(cwd: string, env: Record<string, string>): string {
  if (fileKind(cwd) === "directory") return cwd;
  return env["HOME"] ?? getenv("HOME") ?? "/";
}

function joinPath(dir: string, name: string): string {
  if (dir === "") return name;
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** Resolves the program the way the reference's pty spawner does (observed, docs/protocol.md §8.2). */
function resolveProgram(program: string, cwd: string, env: Record<string, string>): string {
  if (program.startsWith("/")) return program;
  if (
    program === "." || program === ".." || program.startsWith("./") || program.startsWith("../")
  ) {
    const candidate = joinPath(cwd, program);
    if (fileKind(candidate) === "missing") {
      throw kindError("spawnFailed", `Unable to spawn ${candidate} because it does not exist`);
    }
    return candidate;
  }
  const searchPath = env["PATH"];
  if (searchPath === undefined) {
    throw kindError(
      "spawnFailed",
      `Unable to spawn ${program} because:\nUnable to resolve the PATH`,
    );
  }
  let reasons = "";
  for (const dir of searchPath.split(":")) {
    const joined = joinPath(dir, program);
    const candidate = joined.startsWith("/") ? joined : joinPath(cwd, joined);
    const kind = fileKind(candidate);
    if (kind === "missing") continue;
    if (kind === "directory") {
      reasons += `${candidate} exists but is a directory.\n`;
    } else if (!isExecutable(candidate)) {
      reasons += `${candidate} exists but is not executable.\n`;
    } else {
      return candidate;
    }
  }
  throw kindError(
    "spawnFailed",
    `Unable to spawn ${program} because:\n${reasons}No viable candidates found in PATH "${searchPath}"`,
  );
}

/** Opens a pty pair and spawns the child on it; returns the master fd and the pid. */
function openAndSpawn(
  path: string,
  argv: string[],
  envEntries: string[],
  cwd: string,
  size: { rows: number; cols: number },
): { master: number; pid: number } {
  const lib = libc();
  const master = lib.posix_openpt(byValue(C.O_RDWR | C.O_NOCTTY | C.O_CLOEXEC | C.O_NONBLOCK));
  if (master < 0) throw errnoError(errno());
  try {
    if (lib.grantpt(byValue(master)) !== 0 || lib.unlockpt(byValue(master)) !== 0) {
      throw errnoError(errno());
    }
    const nameBuf = new Uint8Array(128);
    const rc = lib.ptsname_r(byValue(master), nameBuf, BigInt(nameBuf.length));
    if (rc !== 0) throw errnoError(rc);
    const slavePath = nameBuf.subarray(0, nameBuf.indexOf(0) + 1);
    setWindowSize(lib, master, size.rows, size.cols);
    let pid: number;
    try {
      // The slave opened without O_NOCTTY after setsid() becomes the controlling terminal.
      const slave = { open: slavePath, flags: C.O_RDWR };
      pid = spawnInNewSession(path, argv, envEntries, cwd, [slave, { dup: 0 }, { dup: 0 }]);
    } catch (err) {
      throw errnoError((err as { code: number }).code);
    }
    return { master, pid };
  } catch (err) {
    closeFd(master);
    throw err;
  }
}

function setWindowSize(lib: Libc, fd: number, rows: number, cols: number): void {
  for (const value of [rows, cols]) {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff) {
      throw new RangeError(`Cannot resize pty: size ${value} is out of range 0..65535`);
    }
  }
  const winsize = new Uint16Array([rows, cols, 0, 0]);
  if (lib.ioctl(byValue(fd), BigInt(C.TIOCSWINSZ), winsize) !== 0) {
    throw new Error(`Cannot resize pty: ${strerror(errno())}`);
  }
}

function signalNumber(signal: Deno.Signal | number): number {
  if (typeof signal === "number") return signal;
  const value = SIGNALS[signal];
  if (value === undefined) throw new TypeError(`Cannot send signal "${signal}": unknown on Linux`);
  return value;
}

interface PendingWrite {
  bytes: Uint8Array;
  offset: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

type ReadResult = Uint8Array | null | "again";

/** Adds one `struct pollfd` to the poll set; returns its slot. */
type AddPollFd = (fd: number, events: number) => number;

/**
 * The single wait loop shared by every pty process.
 *
 * Deno runs non-blocking FFI calls on its blocking thread pool, which Deno 2.9 caps at about
 * 32 threads that file system operations also need. So instead of one waiting thread per
 * process, one `poll` call watches every process at once (the masters that have a waiting read
 * or write, the pidfds, and an eventfd that wakes the poll when the set must change). It holds
 * one pool thread while any pty process needs waiting on, and none otherwise.
 */
class PtyReactor {
  #lib: Libc;
  #children = new Set<PtyChild>();
  #dirty = new Set<PtyChild>();
  #wakeFd = -1;
  #running = false;
  #polling = false;
  #pollFds = new Uint8Array(8 * 64);
  #wakeBuf = new BigUint64Array(1);

  constructor(lib: Libc) {
    this.#lib = lib;
  }

  /** Whether a `poll` call is in flight (its fds must not be closed yet). */
  get polling(): boolean {
    return this.#polling;
  }

  register(child: PtyChild): void {
    this.#children.add(child);
    this.kick(child);
  }

  /** Marks a child for servicing and makes sure the loop runs and sees it. */
  kick(child: PtyChild): void {
    this.#dirty.add(child);
    if (this.#polling) {
      this.#wakeBuf[0] = 1n;
      this.#lib.write(byValue(this.#wakeFd), this.#wakeBuf, 8n);
    } else if (!this.#running) {
      void this.#run();
    }
  }

  async #run(): Promise<void> {
    this.#running = true;
    this.#wakeFd = this.#lib.eventfd(byValue(0), C.EFD_CLOEXEC | C.EFD_NONBLOCK);
    try {
      for (;;) {
        for (const child of this.#dirty) {
          if (child.service()) this.#children.delete(child);
        }
        this.#dirty.clear();
        const owners: PtyChild[] = [];
        let count = 0;
        const add: AddPollFd = (fd, events) => {
          if ((count + 1) * 8 > this.#pollFds.length) {
            const bigger = new Uint8Array(this.#pollFds.length * 2);
            bigger.set(this.#pollFds);
            this.#pollFds = bigger;
          }
          const view = new DataView(this.#pollFds.buffer);
          view.setInt32(count * 8, fd, true);
          view.setInt16(count * 8 + 4, events, true);
          view.setInt16(count * 8 + 6, 0, true);
          return count++;
        };
        add(this.#wakeFd, C.POLLIN);
        let timer = false;
        for (const child of this.#children) {
          const before = count;
          if (child.addPollFds(add)) timer = true;
          for (let slot = before; slot < count; slot++) owners[slot] = child;
        }
        if (count === 1 && !timer) break;
        this.#polling = true;
        try {
          await this.#lib.poll(this.#pollFds, BigInt(count), timer ? 20 : -1);
        } finally {
          this.#polling = false;
        }
        this.#lib.read(byValue(this.#wakeFd), this.#wakeBuf, 8n);
        const view = new DataView(this.#pollFds.buffer);
        for (let slot = 1; slot < count; slot++) {
          const revents = view.getInt16(slot * 8 + 6, true);
          const child = owners[slot]!;
          child.onPolled(view.getInt32(slot * 8, true), revents);
          if (revents !== 0) this.#dirty.add(child);
        }
        if (timer) {
          for (const child of this.#children) if (child.needsTimer()) this.#dirty.add(child);
        }
      }
    } finally {
      closeFd(this.#wakeFd);
      this.#wakeFd = -1;
      this.#running = false;
    }
  }
}

let reactor: PtyReactor | null = null;

function getReactor(lib: Libc): PtyReactor {
  reactor ??= new PtyReactor(lib);
  return reactor;
}

class PtyChild implements PtyProcess {
  readonly pid: number;
  readonly status: Promise<PtyExitStatus>;
  #lib: Libc;
  #reactor: PtyReactor;
  #master: number;
  #pidFd: number;
  #resolveStatus: (status: PtyExitStatus) => void;
  #readers: PromiseWithResolvers<Uint8Array | null>[] = [];
  #writes: PendingWrite[] = [];
  #eof = false;
  #reaped = false;
  #exitSignaled = false;
  #masterHungUp = false;
  #masterInPoll = false;
  #closed = false;
  #released = false;
  #readBuf = new Uint8Array(PTY_READ_CHUNK);

  constructor(lib: Libc, pid: number, master: number) {
    this.#lib = lib;
    this.pid = pid;
    this.#master = master;
    liveCount++;
    const { promise, resolve } = Promise.withResolvers<PtyExitStatus>();
    this.status = promise;
    this.#resolveStatus = resolve;
    // Without pidfd (Linux < 5.3) the reactor polls waitpid every 20 ms instead.
    this.#pidFd = lib.pidfd_open === null ? -1 : lib.pidfd_open(byValue(pid), 0);
    this.#exitSignaled = true;
    this.#reactor = getReactor(lib);
    this.#reactor.register(this);
  }

  read(): Promise<Uint8Array | null> {
    if (this.#closed || this.#eof) return Promise.resolve(null);
    if (this.#readers.length === 0) {
      const result = this.#readOnce();
      if (result !== "again") return Promise.resolve(result);
    }
    const waiter = Promise.withResolvers<Uint8Array | null>();
    this.#readers.push(waiter);
    this.#reactor.kick(this);
    return waiter.promise;
  }

  write(bytes: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("Cannot write to pty: it is closed"));
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#writes.push({ bytes, offset: 0, resolve, reject });
    this.#flushWrites();
    if (this.#writes.length > 0) this.#reactor.kick(this);
    return promise;
  }

  resize(rows: number, cols: number): void {
    if (this.#closed) throw new Error("Cannot resize pty: it is closed");
    setWindowSize(this.#lib, this.#master, rows, cols);
  }

  kill(signal: Deno.Signal | number): void {
    if (killProcess(-this.pid, signalNumber(signal)) === 0) return;
    const code = errno();
    if (code !== C.ESRCH) {
      throw new Error(`Cannot signal process group ${this.pid}: ${strerror(code)}`);
    }
  }

  interrupt(): void {
    if (!this.#closed && signalForegroundGroup(this.#master, signalNumber("SIGINT")) === 0) return;
    this.kill("SIGINT");
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const reader of this.#readers.splice(0)) reader.resolve(null);
    for (const pending of this.#writes.splice(0)) {
      pending.reject(new Error("Cannot write to pty: it is closed"));
    }
    // A poll in flight may be watching the master: the reactor closes it once the poll returns.
    if (!(this.#masterInPoll && this.#reactor.polling)) this.#closeMaster();
    this.#reactor.kick(this);
  }

  /** Adds this child's fds to the poll set; returns whether it needs a timed poll instead. */
  addPollFds(add: AddPollFd): boolean {
    this.#masterInPoll = false;
    if (!this.#reaped && this.#pidFd >= 0) add(this.#pidFd, C.POLLIN);
    if (this.#master >= 0 && !this.#closed) {
      const events = (this.#readers.length > 0 ? C.POLLIN : 0) |
        (this.#writes.length > 0 ? C.POLLOUT : 0);
      if (events !== 0) {
        add(this.#master, events);
        this.#masterInPoll = true;
      }
    }
    return this.needsTimer();
  }

  /** Whether the exit must be checked on a timer (no pidfd). */
  needsTimer(): boolean {
    return !this.#reaped && this.#pidFd < 0;
  }

  /** Records what `poll` reported for one of this child's fds. */
  onPolled(fd: number, revents: number): void {
    if (fd === this.#pidFd && revents !== 0) this.#exitSignaled = true;
    if (fd === this.#master) {
      this.#masterHungUp = (revents & (C.POLLHUP | C.POLLERR | C.POLLNVAL)) !== 0;
    }
  }

  /** Does all non-blocking work that is due; returns true once the child is fully released. */
  service(): boolean {
    if (this.#closed) this.#closeMaster();
    if (!this.#reaped && (this.#exitSignaled || this.#pidFd < 0)) this.#tryReap();
    this.#flushWrites();
    this.#serveReaders();
    if (this.#released || !this.#reaped || this.#master >= 0) return this.#released;
    this.#released = true;
    liveCount--;
    if (this.#pidFd >= 0) closeFd(this.#pidFd);
    this.#pidFd = -1;
    return true;
  }

  /** Reads once without blocking. */
  #readOnce(): ReadResult {
    for (;;) {
      const n = Number(
        this.#lib.read(byValue(this.#master), this.#readBuf, BigInt(PTY_READ_CHUNK)),
      );
      if (n > 0) return this.#readBuf.slice(0, n);
      if (n === 0) break;
      const code = errno();
      if (code === C.EINTR) continue;
      if (code === C.EAGAIN) return "again";
      // EIO: every slave fd is closed. Anything else is treated as the end of output too.
      break;
    }
    this.#eof = true;
    return null;
  }

  #serveReaders(): void {
    while (this.#readers.length > 0 && !this.#closed) {
      const result = this.#eof ? null : this.#readOnce();
      if (result === "again") return;
      this.#readers.shift()!.resolve(result);
    }
  }

  #flushWrites(): void {
    while (this.#writes.length > 0 && !this.#closed) {
      const head = this.#writes[0]!;
      if (head.offset >= head.bytes.length) {
        this.#writes.shift();
        head.resolve();
        continue;
      }
      const rest = head.bytes.subarray(head.offset);
      const n = Number(this.#lib.write(byValue(this.#master), rest, BigInt(rest.length)));
      if (n >= 0) {
        head.offset += n;
        continue;
      }
      const code = errno();
      if (code === C.EINTR) continue;
      if (code === C.EAGAIN && !this.#masterHungUp) return;
      this.#writes.shift();
      head.reject(new Error(`Cannot write to pty: ${strerror(code === C.EAGAIN ? C.EIO : code)}`));
    }
  }

  #tryReap(): void {
    this.#exitSignaled = false;
    const statusBuf = new Int32Array(1);
    const rc = waitChild(this.pid, statusBuf, C.WNOHANG);
    if (rc === 0) return;
    if (rc < 0 && errno() === C.EINTR) {
      this.#exitSignaled = true;
      return;
    }
    this.#reaped = true;
    const { code, signal } = waitedExit(rc, this.pid, statusBuf[0]!);
    this.#resolveStatus({ code: code ?? 1, signal });
  }

  #closeMaster(): void {
    if (this.#master < 0) return;
    closeFd(this.#master);
    this.#master = -1;
    this.#masterInPoll = false;
  }
}
