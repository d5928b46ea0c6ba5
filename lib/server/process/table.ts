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

import {
  ErrorCode,
  internalError,
  invalidParams,
  invalidRequest,
  kindError,
  RpcError,
} from "../../protocol/errors.ts";
import {
  type ExtensionName,
  type ParamsOf,
  PROCESS_SIGNALS,
  type ResultOf,
  type SignalName,
} from "../../protocol/methods.ts";
import { childEnvironment } from "./env_policy.ts";
import { osErrorMessage } from "../host/os_errors.ts";
import { cwdPathFromUri } from "../host/path_uri.ts";
import { permissionDenied, requireRun, requireSafeLoaderEnv } from "../host/permissions.ts";
import { OutputCoalescer } from "./output_coalescer.ts";
import { spawnPty } from "./pty.ts";
import { launchSandboxed, looksSandboxDenied, OutputTail } from "../sandbox/bubblewrap.ts";
import { effectivePlan } from "../sandbox/server_policy.ts";
import { SIGNALS } from "../host/libc.ts";

/** Most bytes of output retained per process (oldest whole chunks are evicted). */
export const RETAINED_OUTPUT_BYTES = 1024 * 1024;
/** Most output chunks retained per process. */
export const RETAINED_OUTPUT_CHUNKS = 50_000;
/** How many accepted writeIds are remembered per process. */
export const REMEMBERED_WRITE_IDS = 4096;
/** Default time a closed process stays readable, in ms (the reference's ≈ 80 s). */
export const DEFAULT_PROCESS_RETENTION_MS = 80_000;
/**
 * How many evicted chunks a process remembers the boundaries of, so that
 * `evictedBytes` is exact for a read whose `afterSeq` is among them (older
 * cursors get a lower bound).
 */
export const EVICTION_HISTORY_CHUNKS = RETAINED_OUTPUT_CHUNKS;

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
  /** Ends the input: closes the pipe after queued writes, or types EOF on a tty. */
  closeStdin(): Promise<void>;
  /** `interrupt` is Ctrl-C on a tty; every signal goes to the whole process group. */
  signal(name: SignalName): void;
  kill(signal: Deno.Signal): void;
  resize(rows: number, cols: number): void;
}

/** Which extensions the attached client opted in to (read when a message is built). */
type ExtensionsOf = () => ReadonlySet<ExtensionName>;

type ReadResponse = ResultOf<"process/read">;

function killGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** Like {@linkcode killGroup}, but an OS failure other than "no such process" is an error. */
function signalGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || (err as { code?: string }).code === "ESRCH") return;
    throw internalError(`failed to signal process: ${(err as Error).message}`);
  }
}

/** The POSIX name of a signal number (`SIGTERM`), or `SIG<n>` for an unnamed one. */
function signalNameOf(signal: number): string {
  for (const [name, number] of Object.entries(SIGNALS)) {
    if (number === signal) return name;
  }
  return `SIG${signal}`;
}

/**
 * Evicted chunk boundaries: for the latest evicted chunks, their seq and the
 * number of output bytes produced up to and including them.
 */
class EvictionHistory {
  #seqs: number[] = [];
  #ends: number[] = [];
  #head = 0;
  /** Bytes produced before the oldest remembered boundary (0 while nothing was forgotten). */
  #base = 0;

  add(seq: number, end: number): void {
    this.#seqs.push(seq);
    this.#ends.push(end);
    if (this.#seqs.length - this.#head > EVICTION_HISTORY_CHUNKS) {
      this.#base = this.#ends[this.#head]!;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#seqs.length) {
      this.#seqs = this.#seqs.slice(this.#head);
      this.#ends = this.#ends.slice(this.#head);
      this.#head = 0;
    }
  }

  /**
   * Output bytes produced up to and including `seq` (an evicted seq), or, for
   * a seq older than the history, the most that can be (a lower bound for
   * the bytes after it).
   */
  bytesThrough(seq: number): number {
    let lo = this.#head;
    let hi = this.#seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#seqs[mid]! <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo === this.#head ? this.#base : this.#ends[lo - 1]!;
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
  /** Output bytes produced through each retained chunk (parallel to the ring). */
  #ends: number[] = [];
  #produced = 0;
  #evicted = 0;
  #history = new EvictionHistory();
  /** `output: "block"`: retained chunks are evicted only once a read has passed them. */
  #block: boolean;
  /** The highest `afterSeq` of any `process/read` (output up to it has been read). */
  #readCursor = 0;
  #roomWaiters: (() => void)[] = [];
  exitCode: number | null = null;
  /** The POSIX name of the signal that ended the process (`null`: it exited, or is running). */
  exitSignal: string | null = null;
  closed = false;
  /** The client closed stdin (`closeStdin`): later writes get `stdinClosed`. */
  stdinClosed = false;
  openStreams: number;
  #waiters = new Set<() => void>();
  #writeIds = new Set<string>();
  backend!: Backend;
  #sink: () => NotificationSink | undefined;
  #extensions: ExtensionsOf;
  removalTimer: ReturnType<typeof setTimeout> | undefined;
  killTimer: { timer: ReturnType<typeof setTimeout>; deadline: number } | undefined;

  constructor(
    id: string,
    streams: number,
    sink: () => NotificationSink | undefined,
    options: { extensions: ExtensionsOf; block: boolean },
  ) {
    this.id = id;
    this.idJson = JSON.stringify(id);
    this.openStreams = streams;
    this.#sink = sink;
    this.#extensions = options.extensions;
    this.#block = options.block;
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

  /**
   * Records a chunk of output. Returns a promise when the reader of the
   * child's output must wait before reading more: the connection is
   * congested, or (`output: "block"`) the ring is full of unread output.
   */
  output(stream: Stream, bytes: Uint8Array): Promise<void> | void {
    this.tail?.push(bytes);
    const seq = this.nextSeq++;
    const chunk = bytes.toBase64();
    this.#produced += bytes.length;
    this.#ring.push({ seq, stream, chunk });
    this.#sizes.push(bytes.length);
    this.#ends.push(this.#produced);
    this.#bytes += bytes.length;
    this.#evict();
    this.#wake();
    const sent = this.#emit(
      `{"method":"process/output","params":{"processId":${this.idJson},"seq":${seq},"stream":"${stream}","chunk":"${chunk}"}}`,
    );
    if (!this.#full()) return sent;
    const room = new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    return sent ? Promise.all([sent, room]).then(() => {}) : room;
  }

  /** Whether the ring holds more than its limits (more than one chunk, for the byte limit). */
  #full(): boolean {
    const count = this.#ring.length - this.#head;
    return count > RETAINED_OUTPUT_CHUNKS || (this.#bytes > RETAINED_OUTPUT_BYTES && count > 1);
  }

  /** Evicts the oldest chunks while the ring is over its limits (in block mode: read ones only). */
  #evict(): void {
    while (this.#full() && (!this.#block || this.#ring[this.#head]!.seq <= this.#readCursor)) {
      const size = this.#sizes[this.#head]!;
      this.#bytes -= size;
      this.#evicted += size;
      this.#history.add(this.#ring[this.#head]!.seq, this.#ends[this.#head]!);
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#ring.length) {
      this.#ring = this.#ring.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#ends = this.#ends.slice(this.#head);
      this.#head = 0;
    }
  }

  /** A `process/read` with this `afterSeq` happened: output up to it may be evicted. */
  readPast(afterSeq: number): void {
    if (afterSeq <= this.#readCursor) return;
    this.#readCursor = afterSeq;
    if (!this.#block) return;
    this.#evict();
    if (!this.#full()) this.#releaseRoom();
  }

  /** Switches to drop-oldest (the session ends): a blocked reader resumes. */
  unblock(): void {
    this.#block = false;
    this.#evict();
    this.#releaseRoom();
  }

  #releaseRoom(): void {
    for (const resume of this.#roomWaiters.splice(0)) resume();
  }

  /** Set for a sandboxed process: the end of its output, for `sandboxDenied`. */
  tail: OutputTail | undefined;
  sandboxDenied = false;
  /** Removes what a sandbox left on the host; runs once the process has exited. */
  release: () => void = () => {};
  #pendingExit: [number, string | null] | undefined;

  exit(code: number, signal: string | null): void {
    if (this.exited) return;
    this.release();
    if (this.tail !== undefined && this.openStreams > 0) {
      // Sandboxed: judge sandboxDenied on the whole output (the pipes close with the sandbox).
      this.#pendingExit = [code, signal];
      return;
    }
    this.sandboxDenied = this.tail !== undefined && looksSandboxDenied(code, this.tail.text());
    this.exitCode = code;
    this.exitSignal = signal;
    clearTimeout(this.killTimer?.timer);
    const seq = this.nextSeq++;
    const extra = this.#extensions().has("processSignals")
      ? `,"signal":${signal === null ? "null" : JSON.stringify(signal)}`
      : "";
    this.#emit(
      `{"method":"process/exited","params":{"processId":${this.idJson},"seq":${seq},"exitCode":${code},"sandboxDenied":${this.sandboxDenied}${extra}}}`,
    );
    this.#wake();
    this.#maybeClose();
  }

  streamEnded(): void {
    this.openStreams--;
    if (this.#pendingExit !== undefined && this.openStreams === 0) {
      const [code, signal] = this.#pendingExit;
      this.#pendingExit = undefined;
      this.exit(code, signal);
      return;
    }
    this.#maybeClose();
  }

  onClosed: () => void = () => {};

  #maybeClose(): void {
    if (this.closed || !this.exited || this.openStreams > 0) return;
    this.closed = true;
    clearTimeout(this.killTimer?.timer);
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
    const response: ReadResponse = {
      chunks,
      nextSeq: maxBytes !== undefined && last ? last.seq + 1 : this.nextSeq,
      exited: this.exited,
      exitCode: this.exitCode,
      closed: this.closed,
      failure: null,
      sandboxDenied: this.sandboxDenied,
    };
    const extensions = this.#extensions();
    if (extensions.has("processLosslessOutput")) {
      response.evictedBytes = Math.max(0, this.#evicted - this.#history.bytesThrough(afterSeq));
    }
    if (extensions.has("processSignals")) response.signal = this.exitSignal;
    return response;
  }

  /** Returns true when the writeId was accepted before (and is still remembered). */
  knowsWrite(writeId: string): boolean {
    return this.#writeIds.has(writeId);
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
  const number = SIGNALS[signal];
  return 128 + (number ?? 0);
}

type ChildProcessModule = typeof import("node:child_process");
let childProcess: ChildProcessModule | undefined;

/**
 * Loads `node:child_process` on first use: Node compatibility costs about
 * 10 ms of start-up, which a server that never starts a pipe process (or has
 * not yet) should not pay before its first `initialize` answer.
 */
async function loadChildProcess(): Promise<ChildProcessModule> {
  childProcess ??= await import("node:child_process");
  return childProcess;
}

function startPipe(
  proc: ManagedProcess,
  program: string,
  argv: string[],
  options: { cwd: string; env: Record<string, string>; arg0?: string; pipeStdin: boolean },
): Backend {
  const child = childProcess!.spawn(program, argv.slice(1), {
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
    const merge = new OutputCoalescer((bytes) => proc.output(name, bytes), {
      pause: () => stream.pause(),
      resume: () => stream.resume(),
    });
    const end = () => {
      if (ended) return;
      ended = true;
      merge.end().then(() => proc.streamEnded());
    };
    stream.on("data", (data: Uint8Array) => void merge.push(data));
    stream.on("end", end);
    stream.on("close", end);
    stream.on("error", end);
  }
  child.on("error", () => {});
  child.on("exit", (code, signal) => proc.exit(code ?? signalExitCode(signal), signal ?? null));
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
    closeStdin() {
      return new Promise((resolve) => {
        if (!stdin || stdin.destroyed || stdin.writableEnded) resolve();
        else stdin.end(() => resolve());
      });
    },
    signal: (name) => signalGroup(pid, PROCESS_SIGNALS[name]),
    kill: (signal) => killGroup(pid, signal),
    resize() {
      throw invalidRequest("only tty processes can be resized");
    },
  };
}

function startTty(
  proc: ManagedProcess,
  argv: string[],
  options: {
    cwd: string;
    env: Record<string, string>;
    arg0?: string;
    size?: { rows: number; cols: number };
  },
): Backend {
  const pty = spawnPty(argv, {
    cwd: options.cwd,
    env: options.env,
    arg0: options.arg0,
    rows: options.size?.rows,
    cols: options.size?.cols,
  });
  const merge = new OutputCoalescer((bytes) => proc.output("pty", bytes), {});
  (async () => {
    try {
      while (true) {
        const bytes = await pty.read();
        if (bytes === null) break;
        const pending = merge.push(bytes);
        if (pending) await pending;
      }
      await merge.end();
    } finally {
      pty.close();
      proc.streamEnded();
    }
  })();
  pty.status.then((status) =>
    proc.exit(status.code, status.signal === null ? null : signalNameOf(status.signal))
  );
  const ctrlC = new Uint8Array([3]);
  // Whether the terminal's current input line is empty, as far as our writes tell.
  let atLineStart = true;
  return {
    pid: pty.pid,
    tty: true,
    stdin: true,
    write(bytes) {
      if (bytes.length > 0) {
        const last = bytes[bytes.length - 1];
        atLineStart = last === 0x0a || last === 0x0d;
      }
      return pty.write(bytes);
    },
    closeStdin() {
      // ^D (VEOF) ends the input at the start of a line; after a partial line the first one
      // only hands the line to the reader, so a second one is needed.
      const eof = atLineStart ? new Uint8Array([4]) : new Uint8Array([4, 4]);
      atLineStart = true;
      return pty.write(eof);
    },
    signal(name) {
      if (name === "interrupt") {
        pty.write(ctrlC).catch(() => {});
        return;
      }
      try {
        pty.kill(PROCESS_SIGNALS[name]);
      } catch (err) {
        throw internalError(`failed to signal process: ${(err as Error).message}`);
      }
    },
    kill: (signal) => pty.kill(signal),
    resize: (rows, cols) => pty.resize(rows, cols),
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
  #extensions: ReadonlySet<ExtensionName> = new Set();

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

  /**
   * The extensions the attached client opted in to (set at each `initialize`,
   * so a resume by another client applies its own). Without them every
   * reference request is answered exactly as the reference does.
   */
  set extensions(extensions: ReadonlySet<ExtensionName>) {
    this.#extensions = extensions;
  }

  /** The extensions the attached client opted in to. */
  get extensions(): ReadonlySet<ExtensionName> {
    return this.#extensions;
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
  async start(params: ParamsOf<"process/start">): Promise<ResultOf<"process/start">> {
    // Before any check: nothing below awaits, so the id check and the insert stay atomic.
    if (!params.tty) await loadChildProcess();
    if (params.argv.length === 0) throw invalidParams("argv must not be empty");
    if (params.networkProxy !== undefined || params.shellSnapshot !== undefined) {
      throw invalidParams("networkProxy and shellSnapshot are not supported by this server");
    }
    const cwd = cwdPathFromUri(params.cwd);
    if (this.#processes.has(params.processId)) {
      throw kindError("processExists", `process ${params.processId} already exists`);
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
    // The client's sandbox narrowed by the server's own (`--sandbox`).
    const sandbox = effectivePlan(params.sandbox, { cwd, env });
    const program = params.argv[0]!;
    if (program === "") throw spawnError("spawnFailed", "missing program for pipe spawn");
    // Extension params are ignored, as the reference ignores unknown members, unless opted in to.
    const size = this.#extensions.has("processResize") ? params.size : undefined;
    if (size !== undefined && !params.tty) {
      throw invalidParams("process/start size is only valid for tty processes (tty: true)");
    }
    const block = this.#extensions.has("processLosslessOutput") && params.output === "block";
    if (!params.tty) checkCwd(cwd);
    const proc = new ManagedProcess(params.processId, 1, () => this.#sink, {
      extensions: () => this.#extensions,
      block,
    });
    requireSafeLoaderEnv(env);
    if (params.tty && !env.SHELL) env.SHELL = Deno.env.get("SHELL") ?? "/bin/sh";
    const resolved = params.tty
      ? program
      : resolveProgram(program, cwd, env.PATH ?? Deno.env.get("PATH"));
    // Sandboxed: the command runs under bubblewrap (launch.argv), which applies arg0.
    const launch = sandbox &&
      launchSandboxed(sandbox, params.argv, { cwd, env, arg0: params.arg0 });
    const wrapped = launch?.wrapped === true;
    const argv = wrapped ? launch.argv : params.argv;
    const arg0 = wrapped ? undefined : params.arg0;
    if (sandbox) proc.tail = new OutputTail();
    try {
      if (params.tty) {
        proc.backend = startTty(proc, argv, { cwd, env, arg0, size });
      } else {
        proc.openStreams = 2;
        proc.backend = startPipe(proc, wrapped ? argv[0]! : resolved, argv, {
          cwd,
          env,
          arg0,
          pipeStdin: params.pipeStdin ?? false,
        });
      }
    } catch (err) {
      launch?.release();
      throw err;
    }
    if (launch) proc.release = launch.release;
    proc.onClosed = () => {
      const timer = setTimeout(() => {
        if (this.#processes.get(proc.id) === proc) this.#processes.delete(proc.id);
      }, this.#retentionMs);
      Deno.unrefTimer(timer);
      proc.removalTimer = timer;
    };
    this.#processes.set(params.processId, proc);
    return { processId: params.processId, sandboxType: sandbox?.type ?? "none" };
  }

  /** `process/read`, including the long poll. */
  async read(params: ParamsOf<"process/read">): Promise<ReadResponse> {
    const proc = this.#get(params.processId);
    const afterSeq = params.afterSeq ?? 0;
    proc.readPast(afterSeq);
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

  /**
   * `process/write`: a repeated writeId is accepted without writing again.
   * With `closeStdin` (extension `processStdinClose`) the input ends after
   * the chunk; later writes with new writeIds get `stdinClosed`.
   */
  write(params: ParamsOf<"process/write">): ResultOf<"process/write"> {
    if (params.writeId === "") throw invalidParams("writeId must not be empty");
    const proc = this.#processes.get(params.processId);
    if (!proc) return { status: "unknownProcess" };
    if (!proc.backend.stdin) return { status: "stdinClosed" };
    if (proc.stdinClosed) {
      return { status: proc.knowsWrite(params.writeId) ? "accepted" : "stdinClosed" };
    }
    if (!proc.rememberWrite(params.writeId)) return { status: "accepted" };
    if (proc.closed && !proc.backend.tty) {
      throw internalError("failed to write to process stdin");
    }
    // Accepted means queued for the child, in request order; not consumed.
    if (params.chunk.length > 0) proc.backend.write(params.chunk).catch(() => {});
    if (params.closeStdin === true && this.#extensions.has("processStdinClose")) {
      proc.stdinClosed = true;
      proc.backend.closeStdin().catch(() => {});
    }
    return { status: "accepted" };
  }

  /**
   * `process/signal`: the named signal to the process group (`interrupt` is
   * Ctrl-C on a tty). Names other than `interrupt` need `processSignals`;
   * without it they get the reference's error.
   */
  signal(params: ParamsOf<"process/signal">): ResultOf<"process/signal"> {
    if (params.signal !== "interrupt" && !this.#extensions.has("processSignals")) {
      throw new RpcError(
        ErrorCode.InvalidParams,
        `unknown variant \`${params.signal}\`, expected \`interrupt\``,
        { data: { field: "signal" } },
      );
    }
    const proc = this.#processes.get(params.processId);
    if (proc && !proc.exited) proc.backend.signal(params.signal);
    return {};
  }

  /**
   * `process/terminate`: SIGKILL to the whole process group; with `graceMs`
   * (extension `processSignals`) SIGTERM first, and SIGKILL once the grace
   * has passed and the process has not closed.
   */
  terminate(params: ParamsOf<"process/terminate">): ResultOf<"process/terminate"> {
    const proc = this.#processes.get(params.processId);
    if (!proc) return { running: false };
    if (proc.exited) {
      // The leader is gone, but background jobs of its group may still hold its output open.
      if (!proc.closed) proc.backend.kill("SIGKILL");
      return { running: false };
    }
    const graceMs = this.#extensions.has("processSignals") ? params.graceMs : undefined;
    if (graceMs === undefined) {
      proc.backend.kill("SIGKILL");
      return { running: true };
    }
    const deadline = Date.now() + graceMs;
    if (proc.killTimer && proc.killTimer.deadline <= deadline) {
      proc.backend.kill("SIGTERM");
      return { running: true };
    }
    clearTimeout(proc.killTimer?.timer);
    const timer = setTimeout(() => {
      proc.killTimer = undefined;
      try {
        if (!proc.closed) proc.backend.kill("SIGKILL");
      } catch {
        // The group is beyond reach; nothing more to do.
      }
    }, graceMs);
    proc.killTimer = { timer, deadline };
    proc.backend.kill("SIGTERM");
    return { running: true };
  }

  /** `process/resize` (extension `processResize`): sets a tty process's terminal size. */
  resize(params: ParamsOf<"process/resize">): ResultOf<"process/resize"> {
    const proc = this.#get(params.processId);
    if (!proc.backend.tty) {
      throw invalidRequest(
        `process ${params.processId} is not a tty process: only tty processes can be resized`,
      );
    }
    try {
      proc.backend.resize(params.rows, params.cols);
    } catch (err) {
      // The terminal is already released once the process's output has ended.
      if (!proc.exited) throw internalError(`failed to resize process: ${(err as Error).message}`);
    }
    return {};
  }

  /** Kills every process group of the table and forgets them (session end). */
  killAll(): void {
    for (const proc of this.#processes.values()) {
      // Also after the leader exited: its background jobs may live on in the group.
      if (!proc.closed) proc.backend.kill("SIGKILL");
      clearTimeout(proc.removalTimer);
      clearTimeout(proc.killTimer?.timer);
      proc.unblock();
    }
    this.#processes.clear();
  }
}
