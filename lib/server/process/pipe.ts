/**
 * The backend of pipe processes (`tty: false`). The child is spawned with
 * `posix_spawn` through FFI (`spawnInNewSession` in `host/libc.ts`) in a new
 * session, its pipes are read and written as `node:net` sockets (Deno polls
 * them on its event loop) and its exit is collected on `SIGCHLD`
 * (`host/child_exits.ts`).
 *
 * Without FFI the child is spawned with `node:child_process` (`detached`).
 * That costs more with every MiB the server holds: `detached` means
 * `setsid()` in the child, which Deno runs from a `pre_exec` hook, and a
 * `pre_exec` hook makes Rust's spawner `fork()` the whole server instead of
 * using glibc's `posix_spawn` (a `vfork`-like clone that copies no page
 * tables). Measured on this project's 2-core VM, 200 spawns of `true`:
 * 2.0 ms of server CPU per spawn at 50 MB RSS and 6.4 ms at 150 MB with
 * `node:child_process`, 0.7 ms at either size with `posix_spawn`. Deno's own
 * `Deno.Command` (also `fork()` with `detached`) cannot set `argv[0]`.
 *
 * @module
 */

import type { Readable, Writable } from "node:stream";
import { internalError, invalidRequest } from "../../protocol/errors.ts";
import { PROCESS_SIGNALS } from "../../protocol/methods.ts";
import { watchChildExit } from "../host/child_exits.ts";
import { deadline } from "../host/deadline.ts";
import {
  bytesReadable,
  C,
  closeFd,
  errno,
  fileControl,
  libcAvailable,
  openDevNull,
  pipeFds,
  spawnInNewSession,
  type SpawnStdio,
  writeFd,
} from "../host/libc.ts";
import { osErrorName } from "../host/os_errors.ts";
import { grantedEverywhere, requireRun } from "../host/permissions.ts";
import type { Backend, BackendEvents } from "./backend.ts";
import { BulkGate } from "./bulk_gate.ts";
import { IoTurn } from "./io_turn.ts";
import { OutputCoalescer, REAL_PACING } from "./output_coalescer.ts";
import { killGroup, signalExitCode, signalGroup, signalNameOf } from "./signals.ts";
import { hasExecutableFormat } from "./exec_format.ts";
import { spawnErrorFromErrno } from "./spawn_errors.ts";
import { StdinWriter } from "./stdin_writer.ts";

type ChildProcessModule = typeof import("node:child_process");
type NetModule = typeof import("node:net");
let childProcess: ChildProcessModule | undefined;
/** Between two turns of the bulk gate, once `node:net` is loaded (pipes are read through it). */
let ioTurn: IoTurn | undefined;
/** The turns of this server's bulk pipe readers (`bulk_gate.ts`). */
const PIPE_BULK_GATE = new BulkGate({
  now: () => performance.now(),
  after: (ms) => new Promise((resolve) => deadline(ms, resolve)),
  poll: () => ioTurn?.next() ?? new Promise((resolve) => deadline(0, resolve)),
  idle: () => ioTurn?.close(),
});
/** Set once FFI spawning was found available. */
let posix = false;
let net: NetModule | undefined;
let netLoad: Promise<NetModule> | undefined;

/**
 * Loads `node:net` (the pipes' sockets) once; the first spawn does not wait
 * for it (see {@linkcode spawnPosix}).
 */
function loadNet(): Promise<NetModule> {
  return netLoad ??= import("node:net").then((module) => {
    ioTurn = new IoTurn(module);
    return net = module;
  });
}

/**
 * Resolves on a later turn of the event loop than the current one (a timer's). On the
 * runtime's own timers ({@linkcode deadline}): the first `setTimeout` of a process compiles
 * Deno's Node timer functions (about 0.2 ms), which the first `process/start` answer would wait
 * for.
 */
function afterThisTurn(): Promise<void> {
  return new Promise((resolve) => deadline(0, resolve));
}

/**
 * Prepares what {@linkcode startPipe} needs: with FFI, only the spawn's libc
 * bindings (`node:net`, for the pipes, loads after the first spawn's answer);
 * without it `node:child_process`. Node compatibility costs tens of ms of
 * start-up, which a server that never starts a pipe process (or has not
 * yet) should not pay before its first `initialize` answer.
 */
export async function loadChildProcess(): Promise<void> {
  // The FFI grant is checked first: opening libc without it could prompt.
  if (posix || (Deno.build.os === "linux" && grantedEverywhere("ffi") && libcAvailable())) {
    posix = true;
  } else {
    childProcess ??= await import("node:child_process");
  }
}

/** How to spawn a pipe process. */
export interface PipeOptions {
  /** Working directory (native absolute path). */
  cwd: string;
  /** The complete environment. */
  env: Record<string, string>;
  /** What the child sees as `argv[0]`; default `argv[0]`. */
  arg0?: string;
  /** Give the child a stdin pipe (else `/dev/null`). */
  pipeStdin: boolean;
}

/**
 * Spawns `program` in a new process group with stdout and stderr piped,
 * reporting to `events`. Call {@linkcode loadChildProcess} first.
 *
 * @param events Receives the output, the end of each stream and the exit.
 * @param program The executable's path.
 * @param argv The command line (`argv[0]` is replaced by `arg0` when given).
 * @param options Working directory, environment, `arg0`, stdin.
 * @throws {RpcError} `spawnFailed` (ENOEXEC) for a file the kernel cannot
 *   execute: `posix_spawn`'s own errno; without FFI, a file that is neither an
 *   ELF binary nor a `#!` script ({@linkcode hasExecutableFormat}).
 * @throws {RpcError} The spawn error for the errno the OS reported
 *   (`spawnNotFound` for ENOENT, `spawnPermissionDenied` for EACCES,
 *   `spawnFailed` with the OS message for E2BIG, EMFILE, ENOEXEC...).
 * @returns The backend; without FFI, a failed spawn returns a promise that
 *   rejects with that error instead (Node reports the errno asynchronously).
 */
export function startPipe(
  events: BackendEvents,
  program: string,
  argv: string[],
  options: PipeOptions,
): Backend | Promise<never> {
  // posix_spawn reports ENOEXEC itself (glibc >= 2.15 runs no shell for it): `spawnPosix`'s errno.
  return posix
    ? spawnPosix(events, program, argv, options)
    : spawnChildProcess(events, program, argv, options);
}

/**
 * Spawns with `node:child_process` (without FFI). A file `execve` refuses
 * with ENOEXEC is refused before the spawn ({@linkcode hasExecutableFormat}):
 * Node's spawn would run it through `/bin/sh`.
 */
function spawnChildProcess(
  events: BackendEvents,
  program: string,
  argv: string[],
  options: PipeOptions,
): Backend | Promise<never> {
  if (childProcess === undefined) throw internalError("node:child_process is not loaded");
  if (!hasExecutableFormat(program)) throw spawnErrorFromErrno("ENOEXEC");
  const child = childProcess.spawn(program, argv.slice(1), {
    cwd: options.cwd,
    env: options.env,
    argv0: options.arg0 ?? argv[0],
    detached: true,
    stdio: [options.pipeStdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) {
    // The spawn failed; its errno (E2BIG, EMFILE, ENOEXEC, EACCES...) arrives with the error event.
    return new Promise<never>((_, reject) => {
      child.once("error", (err: Error & { code?: string }) => {
        reject(spawnErrorFromErrno(err.code ?? "ENOENT"));
      });
    });
  }
  child.on("error", () => {});
  child.stdin?.on("error", () => {});
  child.on("exit", (code, signal) => events.exit(code ?? signalExitCode(signal), signal ?? null));
  readOutput(events, "stdout", child.stdout!);
  readOutput(events, "stderr", child.stderr!);
  return pipeBackend(child.pid, child.stdin !== null, () => child.stdin);
}

/**
 * Spawns with `posix_spawn`: pipes made here, the child's ends closed once it
 * has them. Their sockets are made once `node:net` is loaded: on the first
 * spawn that is after the answer (until then the child's output waits in the
 * pipes, its exit is not collected, and stdin writes wait for the socket).
 */
function spawnPosix(
  events: BackendEvents,
  program: string,
  argv: string[],
  options: PipeOptions,
): Backend {
  // FFI spawns bypass Deno's checks: the run permission covers what is executed.
  requireRun(program);
  const opened: number[] = [];
  // Typed on the name, so that a call ends the flow for the compiler.
  /** Closes what was opened and throws the spawn error of `code` (an errno value). */
  const failed: (code: number) => never = (code) => {
    for (const fd of opened) closeFd(fd);
    throw spawnErrorFromErrno(osErrorName(code));
  };
  const pipe = (): [number, number] => {
    const fds = new Int32Array(2);
    // Close-on-exec on both ends: the child gets its ends through dup2, which clears it there.
    if (pipeFds(fds, C.O_CLOEXEC) !== 0) failed(errno());
    opened.push(fds[0]!, fds[1]!);
    return [fds[0]!, fds[1]!];
  };
  // Without a stdin pipe the child reads /dev/null, opened read-only.
  const devNull = (): number => {
    const fd = openDevNull(C.O_RDONLY);
    if (fd < 0) failed(errno());
    opened.push(fd);
    return fd;
  };
  const stdin = options.pipeStdin ? pipe() : null;
  const childStdin = stdin === null ? devNull() : stdin[0];
  const stdout = pipe();
  const stderr = pipe();
  const stdio: [SpawnStdio, SpawnStdio, SpawnStdio] = [
    { dup: childStdin },
    { dup: stdout[1] },
    { dup: stderr[1] },
  ];
  const env = Object.entries(options.env).map(([key, value]) => `${key}=${value}`);
  const childArgv = [options.arg0 ?? argv[0]!, ...argv.slice(1)];
  let pid: number;
  try {
    pid = spawnInNewSession(program, childArgv, env, options.cwd, stdio);
  } catch (err) {
    failed((err as { code: number }).code);
  }
  // The child has its own copies now.
  for (const fd of [childStdin, stdout[1], stderr[1]]) closeFd(fd);
  // Our end of stdin only (the child's is another open file): a full pipe refuses a write
  // (EAGAIN) instead of blocking the server in it.
  if (stdin !== null) fileControl(stdin[1], C.F_SETFL, C.O_NONBLOCK);
  let readers: OutputReader[] = [];
  let writer: Writable | null = null;
  const attach = (net: NetModule): void => {
    const reader = (fd: number, name: "stdout" | "stderr") => {
      const socket = new net.Socket({ fd, readable: true, writable: false });
      return { fd, socket, merge: readOutput(events, name, socket, () => growPipe(fd)) };
    };
    readers = [reader(stdout[0], "stdout"), reader(stderr[0], "stderr")];
    if (stdin === null) return;
    writer = new net.Socket({ fd: stdin[1], readable: false, writable: true });
    writer.on("error", () => {});
  };
  // The exit is reported once the output the child left is read, so it is watched from when
  // the sockets exist: until then the exited child stays a zombie, its pid taken.
  const watchExit = () =>
    watchChildExit(pid, ({ code, signal }) => {
      const name = signal === null ? null : signalNameOf(signal);
      afterDrained(readers, () => events.exit(code ?? signalExitCode(name), name));
    });
  // `node:net` evaluates synchronously inside `import()`: a turn later, the answer is out first,
  // and so is the first SIGCHLD listener's set-up.
  const attached = net === undefined
    ? afterThisTurn().then(loadNet).then(attach).then(watchExit)
    : undefined;
  if (net !== undefined) {
    attach(net);
    watchExit();
  }
  return pipeBackend(
    pid,
    stdin !== null,
    () => attached === undefined ? writer : attached.then(() => writer),
    stdin === null ? undefined : (bytes) => {
      // An ended or destroyed socket may have closed the fd, whose number may be reused since.
      if (writer !== null && (writer.destroyed || writer.writableEnded)) throw stdinWriteFailed();
      const taken = writeFd(stdin[1], bytes as Uint8Array<ArrayBuffer>);
      if (taken >= 0) return taken;
      const code = errno();
      if (code === C.EAGAIN || code === C.EINTR) return 0;
      throw stdinWriteFailed();
    },
  );
}

/** Most event-loop turns an exit waits for the output its child left in the pipes. */
const MAX_DRAIN_TURNS = 20;

/**
 * Calls `done` once the output the child left in its pipes has been read (as
 * `node:child_process` reports an exit after it, mostly), waiting at most
 * {@linkcode MAX_DRAIN_TURNS} turns of the event loop, and not for a stream
 * whose reader waits for room or one kept open by another process.
 */
function afterDrained(readers: OutputReader[], done: () => void): void {
  const unread = ({ fd, socket, merge }: OutputReader): boolean => {
    if (socket.destroyed || socket.readableEnded || merge.congested) return false;
    return bytesReadable(fd) > 0;
  };
  let turns = 0;
  const check = (): void => {
    if (++turns < MAX_DRAIN_TURNS && readers.some(unread)) setTimeout(check, 0);
    else done();
  };
  // One turn first: reads that completed with the SIGCHLD are delivered in it.
  setTimeout(check, 0);
}

/** One output pipe of a child, read by its socket into its coalescer. */
interface OutputReader {
  fd: number;
  socket: Readable;
  merge: OutputCoalescer;
}

/** A read this large (the size of `node:net`'s reads) found the pipe full or nearly so. */
const FULL_READ_BYTES = 64 * 1024;

/**
 * The capacity (`F_SETPIPE_SZ`) an output pipe gets at its first full read
 * ({@linkcode FULL_READ_BYTES}): a child that writes faster than it is read
 * then fills 1 MiB before it waits for the server instead of 64 KiB, and the
 * server finds data at every read. A stream that trickles keeps the default
 * 64 KiB. Linux caps it at `/proc/sys/fs/pipe-max-size` (1 MiB by default)
 * and, for an unprivileged user, by the user's total pipe allowance
 * (`pipe-user-pages-soft`, 64 MiB by default); a pipe the kernel does not grow
 * keeps its size.
 */
export const BULK_PIPE_BYTES = 1024 * 1024;

/**
 * Most output pipes of {@linkcode BULK_PIPE_BYTES} at once in this server
 * process (streams not ended): 16 MiB, a quarter of an unprivileged user's
 * default pipe allowance, beyond which Linux gives every new pipe of that user
 * its minimum size (a page or two). The allowance is per user, not per
 * server: four busy servers of one user, or one beside other heavy pipe
 * users, can still reach it.
 */
export const MAX_BULK_PIPES = 16;

let bulkPipes = 0;

/**
 * Grows the pipe that `fd` reads to {@linkcode BULK_PIPE_BYTES} unless
 * {@linkcode MAX_BULK_PIPES} are; returns the release to call when its
 * stream has ended, or `undefined` when it was not grown.
 */
function growPipe(fd: number): (() => void) | undefined {
  if (bulkPipes >= MAX_BULK_PIPES) return undefined;
  if (fileControl(fd, C.F_SETPIPE_SZ, BULK_PIPE_BYTES) < 0) return undefined;
  bulkPipes++;
  return () => void bulkPipes--;
}

/**
 * Reports a child's output stream to `events` (paced: see {@linkcode OutputCoalescer}).
 *
 * @param grow Called once, at the first read of {@linkcode FULL_READ_BYTES};
 *   returns the release to call at the end of the stream.
 */
function readOutput(
  events: BackendEvents,
  name: "stdout" | "stderr",
  stream: Readable,
  grow?: () => (() => void) | undefined,
): OutputCoalescer {
  let ended = false;
  let release: (() => void) | undefined;
  // Paused while the coalescer or the gate holds it (each pauses at most once at a time).
  let holds = 0;
  const hold = () => void (holds++ === 0 && stream.pause());
  const letGo = () => void (--holds === 0 && stream.resume());
  const merge = new OutputCoalescer(
    (bytes) => events.output(name, bytes),
    { pause: hold, resume: letGo },
    REAL_PACING,
  );
  const gate = PIPE_BULK_GATE.stream();
  const end = () => {
    if (ended) return;
    ended = true;
    gate.end();
    release?.();
    merge.end().then(() => events.streamEnded());
  };
  stream.on("data", (data: Uint8Array) => {
    const bulk = data.length >= FULL_READ_BYTES;
    if (grow !== undefined && bulk) {
      release = grow();
      grow = undefined;
    }
    const rest = gate.read(bulk);
    if (rest !== undefined) {
      hold();
      rest.then(letGo);
    }
    merge.push(data);
  });
  stream.on("end", end);
  stream.on("close", end);
  stream.on("error", end);
  return merge;
}

/**
 * The backend of a spawned child whose group `pid` leads (its output is read by {@linkcode readOutput}).
 *
 * @param hasStdin Whether the child has a stdin pipe.
 * @param stdin Its writer, or the promise of it while the socket is not made yet (writes and
 *   the close wait for it in order).
 * @param tryWrite Writes to the pipe without waiting (`StdinSink.tryWrite`);
 *   by default nothing is, and every write goes through `stdin`.
 */
function pipeBackend(
  pid: number,
  hasStdin: boolean,
  stdin: () => Writable | null | Promise<Writable | null>,
  tryWrite: (bytes: Uint8Array) => number = () => 0,
): Backend {
  const withStdin = <T>(use: (stdin: Writable | null) => Promise<T>): Promise<T> => {
    const ready = stdin();
    return ready instanceof Promise ? ready.then(use) : use(ready);
  };
  const writer = new StdinWriter({
    tryWrite,
    write: (bytes) => withStdin((stdin) => writeStdin(stdin, bytes)),
    end: () => withStdin(closeStdin),
  });
  return {
    pid,
    tty: false,
    stdin: hasStdin,
    write: (bytes) => writer.write(bytes),
    closeStdin: () => writer.close(),
    signal: (name) => signalGroup(pid, PROCESS_SIGNALS[name]),
    kill: (signal) => killGroup(pid, signal),
    resize() {
      throw invalidRequest("only tty processes can be resized");
    },
  };
}

function stdinWriteFailed(): Error {
  return internalError("failed to write to process stdin");
}

function writeStdin(stdin: Writable | null, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      reject(stdinWriteFailed());
      return;
    }
    stdin.write(bytes, (err) => (err ? reject(stdinWriteFailed()) : resolve()));
  });
}

function closeStdin(stdin: Writable | null): Promise<void> {
  return new Promise((resolve) => {
    if (!stdin || stdin.destroyed || stdin.writableEnded) resolve();
    else stdin.end(() => resolve());
  });
}
