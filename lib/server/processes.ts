/**
 * The process RPCs (spec §8): a session's table of processes, their output
 * ring, seq numbering, long-poll reads, idempotent stdin writes, signals.
 *
 * Pipe processes run through `node:child_process` (Deno's own `Deno.Command`
 * cannot start a child in its own process group or set `argv[0]`); tty
 * processes run on a real pseudo-terminal from {@linkcode spawnPty}.
 *
 * @module
 */

import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import {
  ErrorCode,
  internalError,
  invalidParams,
  invalidRequest,
  RpcError,
} from "../protocol/errors.ts";
import type { ParamsOf, ResultOf } from "../protocol/methods.ts";
import { childEnvironment } from "./env_policy.ts";
import { osErrorMessage } from "./os_errors.ts";
import { pathFromUri } from "./path_uri.ts";
import { permissionDenied, requireRun } from "./policy.ts";
import { spawnPty } from "./pty.ts";

/** Most bytes of output retained per process (oldest whole chunks are evicted). */
export const RETAINED_OUTPUT_BYTES = 1024 * 1024;
/** Most output chunks retained per process. */
export const RETAINED_OUTPUT_CHUNKS = 50_000;
/** How many accepted writeIds are remembered per process. */
export const REMEMBERED_WRITE_IDS = 4096;
/** Default time a closed process stays readable, in ms (the reference's ≈ 80 s). */
export const DEFAULT_PROCESS_RETENTION_MS = 80_000;

/**
 * Where a process's notifications go. Returns a promise only when the
 * connection's outbound buffer is full: the process then stops reading its
 * child's output until it resolves (backpressure reaches the child's pipe).
 */
export type NotificationSink = (text: string) => Promise<void> | void;

/** Options for {@linkcode ProcessTable}. */
export interface ProcessTableOptions {
  /**
   * How long a closed process stays readable, in ms.
   *
   * @default {80000}
   */
  retentionMs?: number;
}

type Stream = "stdout" | "stderr" | "pty";

interface Chunk {
  seq: number;
  stream: Stream;
  chunk: string;
}

interface Backend {
  readonly pid: number;
  readonly tty: boolean;
  readonly stdin: boolean;
  write(bytes: Uint8Array): Promise<void>;
  interrupt(): void;
  kill(signal: Deno.Signal): void;
}

type ReadResponse = ResultOf<"process/read">;

function killGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

class ManagedProcess {
  readonly id: string;
  readonly idJson: string;
  nextSeq = 1;
  #ring: Chunk[] = [];
  #head = 0;
  #sizes: number[] = [];
  #bytes = 0;
  exitCode: number | null = null;
  closed = false;
  openStreams: number;
  #waiters = new Set<() => void>();
  #writeIds = new Set<string>();
  backend!: Backend;
  #sink: () => NotificationSink | undefined;
  removalTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(id: string, streams: number, sink: () => NotificationSink | undefined) {
    this.id = id;
    this.idJson = JSON.stringify(id);
    this.openStreams = streams;
    this.#sink = sink;
  }

  get exited(): boolean {
    return this.exitCode !== null;
  }

  #emit(text: string): Promise<void> | void {
    return this.#sink()?.(text);
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  output(stream: Stream, bytes: Uint8Array): Promise<void> | void {
    const seq = this.nextSeq++;
    const chunk = bytes.toBase64();
    this.#ring.push({ seq, stream, chunk });
    this.#sizes.push(bytes.length);
    this.#bytes += bytes.length;
    while (
      this.#ring.length - this.#head > RETAINED_OUTPUT_CHUNKS ||
      (this.#bytes > RETAINED_OUTPUT_BYTES && this.#ring.length - this.#head > 1)
    ) {
      this.#bytes -= this.#sizes[this.#head]!;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#ring.length) {
      this.#ring = this.#ring.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
    this.#wake();
    return this.#emit(
      `{"method":"process/output","params":{"processId":${this.idJson},"seq":${seq},"stream":"${stream}","chunk":"${chunk}"}}`,
    );
  }

  exit(code: number): void {
    if (this.exited) return;
    this.exitCode = code;
    const seq = this.nextSeq++;
    this.#emit(
      `{"method":"process/exited","params":{"processId":${this.idJson},"seq":${seq},"exitCode":${code},"sandboxDenied":false}}`,
    );
    this.#wake();
    this.#maybeClose();
  }

  streamEnded(): void {
    this.openStreams--;
    this.#maybeClose();
  }

  onClosed: () => void = () => {};

  #maybeClose(): void {
    if (this.closed || !this.exited || this.openStreams > 0) return;
    this.closed = true;
    const seq = this.nextSeq++;
    this.#emit(`{"method":"process/closed","params":{"processId":${this.idJson},"seq":${seq}}}`);
    this.#wake();
    this.onClosed();
  }

  /** Resolves on the next output, exit or close (or never, if none comes). */
  changed(): { promise: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const promise = new Promise<void>((resolve) => (wake = resolve));
    this.#waiters.add(wake);
    return { promise, cancel: () => this.#waiters.delete(wake) };
  }

  snapshot(afterSeq: number, maxBytes: number | undefined): ReadResponse {
    const ring = this.#ring;
    let lo = this.#head;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ring[mid]!.seq <= afterSeq) lo = mid + 1;
      else hi = mid;
    }
    let chunks: Chunk[];
    if (maxBytes === undefined) {
      chunks = ring.slice(lo);
    } else {
      chunks = [];
      let total = 0;
      for (let i = lo; i < ring.length; i++) {
        const size = this.#sizes[i]!;
        if (chunks.length > 0 && total + size > maxBytes) break;
        chunks.push(ring[i]!);
        total += size;
        if (total >= maxBytes) break;
      }
    }
    const last = chunks[chunks.length - 1];
    return {
      chunks,
      nextSeq: maxBytes !== undefined && last ? last.seq + 1 : this.nextSeq,
      exited: this.exited,
      exitCode: this.exitCode,
      closed: this.closed,
      failure: null,
      sandboxDenied: false,
    };
  }

  /** Returns true when the writeId is new (and remembers it). */
  rememberWrite(writeId: string): boolean {
    if (this.#writeIds.has(writeId)) return false;
    this.#writeIds.add(writeId);
    if (this.#writeIds.size > REMEMBERED_WRITE_IDS) {
      this.#writeIds.delete(this.#writeIds.values().next().value!);
    }
    return true;
  }
}

function spawnError(kind: string, message: string): RpcError {
  return new RpcError(ErrorCode.InternalError, message, { data: { kind } });
}

function errnoSpawnError(code: string | undefined): RpcError {
  const message = (code && osErrorMessage(code)) ?? "failed to spawn process";
  const kind = code === "ENOENT"
    ? "spawnNotFound"
    : code === "EACCES"
    ? "spawnPermissionDenied"
    : "spawnFailed";
  return spawnError(kind, message);
}

/** Why `path` cannot be executed (an errno name), `undefined` if it can, "unknown" if we may not look. */
function isExecutableFile(path: string): string | undefined {
  try {
    const info = Deno.statSync(path);
    if (info.isDirectory) return "EACCES";
    if (info.mode !== null && (info.mode & 0o111) === 0) return "EACCES";
    return undefined;
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) return "unknown";
    return (err as { code?: string }).code ?? "ENOENT";
  }
}

function mayRun(path: string): boolean {
  return Deno.permissions.querySync({ name: "run", command: path }).state === "granted";
}

/**
 * Resolves `argv[0]` like execvp, against the given PATH, and checks the run
 * permission on the result before anything is executed. Where the server may
 * not read a directory, a candidate it may run is taken and the spawn itself
 * reports a missing file. Throws the reference's spawn errors, or a typed
 * permission error naming the program.
 */
function resolveProgram(program: string, cwd: string, path: string | undefined): string {
  if (program.includes("/")) {
    const full = program.startsWith("/") ? program : `${cwd}/${program}`;
    requireRun(full);
    const problem = isExecutableFile(full);
    if (problem && problem !== "unknown") throw errnoSpawnError(problem);
    return full;
  }
  let sawDenied = false;
  let sawHidden = false;
  for (const dir of (path ?? "").split(":")) {
    const candidate = `${dir || "."}/${program}`;
    const full = candidate.startsWith("/") ? candidate : `${cwd}/${candidate}`;
    const problem = isExecutableFile(full);
    if (problem === "unknown") {
      if (mayRun(full)) return full;
      sawHidden = true;
      continue;
    }
    if (!problem) {
      requireRun(full);
      return full;
    }
    if (problem === "EACCES") sawDenied = true;
  }
  if (sawHidden) requireRun(program);
  throw errnoSpawnError(sawDenied ? "EACCES" : "ENOENT");
}

function checkCwd(cwd: string): void {
  try {
    if (!Deno.statSync(cwd).isDirectory) throw errnoSpawnError("ENOTDIR");
  } catch (err) {
    if (err instanceof RpcError) throw err;
    if (err instanceof Deno.errors.NotCapable) throw permissionDenied("read", cwd);
    throw errnoSpawnError((err as { code?: string }).code ?? "ENOENT");
  }
}

function signalExitCode(signal: string | null): number {
  if (!signal) return 1;
  const number = (osConstants.signals as Record<string, number>)[signal];
  return 128 + (number ?? 0);
}

function startPipe(
  proc: ManagedProcess,
  program: string,
  argv: string[],
  options: { cwd: string; env: Record<string, string>; arg0?: string; pipeStdin: boolean },
): Backend {
  const child = spawn(program, argv.slice(1), {
    cwd: options.cwd,
    env: options.env,
    argv0: options.arg0 ?? argv[0],
    detached: true,
    stdio: [options.pipeStdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) {
    child.on("error", () => {});
    throw errnoSpawnError("ENOENT");
  }
  const pid = child.pid;
  for (const [name, stream] of [["stdout", child.stdout!], ["stderr", child.stderr!]] as const) {
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      proc.streamEnded();
    };
    stream.on("data", (data: Uint8Array) => {
      const pending = proc.output(name, data);
      if (pending) {
        stream.pause();
        pending.then(() => stream.resume());
      }
    });
    stream.on("end", end);
    stream.on("close", end);
    stream.on("error", end);
  }
  child.on("error", () => {});
  child.on("exit", (code, signal) => proc.exit(code ?? signalExitCode(signal)));
  const stdin = child.stdin;
  stdin?.on("error", () => {});
  return {
    pid,
    tty: false,
    stdin: options.pipeStdin,
    write(bytes) {
      return new Promise((resolve, reject) => {
        if (!stdin || stdin.destroyed || stdin.writableEnded) {
          reject(internalError("failed to write to process stdin"));
          return;
        }
        stdin.write(
          bytes,
          (err) => (err ? reject(internalError("failed to write to process stdin")) : resolve()),
        );
      });
    },
    interrupt: () => killGroup(pid, "SIGINT"),
    kill: (signal) => killGroup(pid, signal),
  };
}

function startTty(
  proc: ManagedProcess,
  argv: string[],
  options: { cwd: string; env: Record<string, string>; arg0?: string },
): Backend {
  const pty = spawnPty(argv, { cwd: options.cwd, env: options.env, arg0: options.arg0 });
  (async () => {
    try {
      while (true) {
        const bytes = await pty.read();
        if (bytes === null) break;
        const pending = proc.output("pty", bytes);
        if (pending) await pending;
      }
    } finally {
      pty.close();
      proc.streamEnded();
    }
  })();
  pty.status.then((status) => proc.exit(status.code));
  const ctrlC = new Uint8Array([3]);
  return {
    pid: pty.pid,
    tty: true,
    stdin: true,
    write: (bytes) => pty.write(bytes),
    interrupt: () => {
      pty.write(ctrlC).catch(() => {});
    },
    kill: (signal) => pty.kill(signal),
  };
}

/**
 * The processes of one session. Processes belong to the session, not to a
 * connection: they keep running (and retaining output) while it is detached.
 */
export class ProcessTable {
  #processes = new Map<string, ManagedProcess>();
  #sink: NotificationSink | undefined;
  #retentionMs: number;

  /**
   * Creates an empty table.
   *
   * @param options Retention of closed processes.
   */
  constructor(options: ProcessTableOptions = {}) {
    this.#retentionMs = options.retentionMs ?? DEFAULT_PROCESS_RETENTION_MS;
  }

  /** Sets where notifications go (`undefined` while the session is detached: they are dropped). */
  set sink(sink: NotificationSink | undefined) {
    this.#sink = sink;
  }

  /** Number of processes in the table (running or retained). */
  get size(): number {
    return this.#processes.size;
  }

  /** Pids of processes that have not exited. */
  runningPids(): number[] {
    return [...this.#processes.values()].filter((p) => !p.exited).map((p) => p.backend.pid);
  }

  #get(id: string): ManagedProcess {
    const proc = this.#processes.get(id);
    if (!proc) throw invalidRequest(`unknown process id ${id}`);
    return proc;
  }

  /** `process/start`. */
  start(params: ParamsOf<"process/start">): ResultOf<"process/start"> {
    if (params.argv.length === 0) throw invalidParams("argv must not be empty");
    if (params.sandbox !== undefined) {
      throw invalidParams("sandboxed process/start is not supported by this server");
    }
    if (params.networkProxy !== undefined || params.shellSnapshot !== undefined) {
      throw invalidParams("networkProxy and shellSnapshot are not supported by this server");
    }
    const cwd = pathFromUri(params.cwd);
    if (this.#processes.has(params.processId)) {
      throw invalidRequest(`process ${params.processId} already exists`);
    }
    const env = childEnvironment(params.env, params.envPolicy);
    for (const [key, value] of Object.entries(env)) {
      if (key.includes("\0") || value.includes("\0")) {
        throw spawnError("spawnFailed", "data provided contains a nul byte");
      }
    }
    if (params.argv.some((arg) => arg.includes("\0")) || params.arg0?.includes("\0")) {
      throw spawnError("spawnFailed", "nul byte found in provided data");
    }
    const program = params.argv[0]!;
    if (program === "") throw spawnError("spawnFailed", "missing program for pipe spawn");
    if (!params.tty) checkCwd(cwd);
    const proc = new ManagedProcess(params.processId, 1, () => this.#sink);
    if (params.tty) {
      if (!env.SHELL) env.SHELL = Deno.env.get("SHELL") ?? "/bin/sh";
      requireRun(program);
      proc.backend = startTty(proc, params.argv, { cwd, env, arg0: params.arg0 });
    } else {
      const resolved = resolveProgram(program, cwd, env.PATH ?? Deno.env.get("PATH"));
      proc.openStreams = 2;
      proc.backend = startPipe(proc, resolved, params.argv, {
        cwd,
        env,
        arg0: params.arg0,
        pipeStdin: params.pipeStdin ?? false,
      });
    }
    proc.onClosed = () => {
      const timer = setTimeout(() => {
        if (this.#processes.get(proc.id) === proc) this.#processes.delete(proc.id);
      }, this.#retentionMs);
      Deno.unrefTimer(timer);
      proc.removalTimer = timer;
    };
    this.#processes.set(params.processId, proc);
    return { processId: params.processId, sandboxType: "none" };
  }

  /** `process/read`, including the long poll. */
  async read(params: ParamsOf<"process/read">): Promise<ReadResponse> {
    const proc = this.#get(params.processId);
    const afterSeq = params.afterSeq ?? 0;
    const waitMs = params.waitMs ?? 0;
    const deadline = Date.now() + waitMs;
    while (true) {
      const response = proc.snapshot(afterSeq, params.maxBytes);
      const ready = response.chunks.length > 0 || response.closed ||
        (response.exited && afterSeq < response.nextSeq - 1);
      const remaining = deadline - Date.now();
      if (ready || remaining <= 0) return response;
      const change = proc.changed();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        change.promise,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining))),
      ]);
      clearTimeout(timer);
      change.cancel();
    }
  }

  /** `process/write`: a repeated writeId is accepted without writing again. */
  write(params: ParamsOf<"process/write">): ResultOf<"process/write"> {
    if (params.writeId === "") throw invalidParams("writeId must not be empty");
    const proc = this.#processes.get(params.processId);
    if (!proc) return { status: "unknownProcess" };
    if (!proc.backend.stdin) return { status: "stdinClosed" };
    if (!proc.rememberWrite(params.writeId)) return { status: "accepted" };
    if (proc.closed && !proc.backend.tty) {
      throw internalError("failed to write to process stdin");
    }
    // Accepted means queued for the child, in request order; not consumed.
    if (params.chunk.length > 0) proc.backend.write(params.chunk).catch(() => {});
    return { status: "accepted" };
  }

  /** `process/signal`: `interrupt` is SIGINT to the group (Ctrl-C on a tty). */
  signal(params: ParamsOf<"process/signal">): ResultOf<"process/signal"> {
    const proc = this.#processes.get(params.processId);
    if (proc && !proc.exited) proc.backend.interrupt();
    return {};
  }

  /** `process/terminate`: SIGKILL to the whole process group. */
  terminate(params: ParamsOf<"process/terminate">): ResultOf<"process/terminate"> {
    const proc = this.#processes.get(params.processId);
    if (!proc || proc.exited) return { running: false };
    proc.backend.kill("SIGKILL");
    return { running: true };
  }

  /** Kills every process group of the table and forgets them (session end). */
  killAll(): void {
    for (const proc of this.#processes.values()) {
      if (!proc.exited) proc.backend.kill("SIGKILL");
      clearTimeout(proc.removalTimer);
    }
    this.#processes.clear();
  }
}
