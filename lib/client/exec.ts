/**
 * One-call command execution: `client.exec(argv, options)` starts a process,
 * feeds its stdin, collects its output and resolves with the exit status.
 *
 * @module
 */

import type { ProcessHandle } from "./process_handle.ts";
import type { StartProcessParams } from "./request_types.ts";
import type { EnvironmentOptions } from "./environment.ts";
import type { RemotePath } from "./paths.ts";

/** Output each stream may collect by default before `exec` gives up: 64 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

/** Options of {@linkcode ExecClient.exec}. */
export interface ExecOptions extends EnvironmentOptions {
  /** Working directory: an absolute path or a `file:` URL; the server's cwd by default. */
  cwd?: RemotePath;
  /**
   * The process's input, then end of input (the end needs the server's
   * `processStdinClose` extension; without it stdin stays open). Without
   * `stdin` the process's stdin is `/dev/null` from the start.
   */
  stdin?: string | Uint8Array | ReadableStream<Uint8Array>;
  /**
   * Terminate the process group (SIGKILL) after this many ms and reject with
   * {@linkcode ExecTimeoutError}, which carries the output so far.
   */
  timeoutMs?: number;
  /** Run on a pseudo-terminal: stdout and stderr arrive merged, as `stdout`. */
  tty?: boolean;
  /** Aborting terminates the process group and rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * `"text"`: stdout and stderr as UTF-8 text (invalid bytes become U+FFFD;
   * a character is never split). `"bytes"`: as `Uint8Array`s.
   *
   * @default {"text"}
   */
  encoding?: "text" | "bytes";
  /**
   * Output bytes collected per stream; beyond it the process group is
   * terminated and the call rejects with {@linkcode ExecOutputLimitError}.
   *
   * @default {67108864}
   */
  maxOutputBytes?: number;
}

/** What {@linkcode ExecClient.exec} resolves with. */
export interface ExecResult<T extends string | Uint8Array = string> {
  /** The exit code (a non-zero code resolves too; it is not an error). */
  exitCode: number;
  /** The signal that ended the process (e.g. `SIGTERM`), when the server reports one. */
  signal?: string;
  /** Everything written to stdout (with `tty`: to the terminal). */
  stdout: T;
  /** Everything written to stderr (empty with `tty`). */
  stderr: T;
}

/** {@linkcode ExecClient.exec} ran out of time; the process group was terminated. */
export class ExecTimeoutError extends Error {
  /** The timeout that passed. */
  readonly timeoutMs: number;
  /** The output until the timeout. */
  readonly partial: ExecResult<string | Uint8Array>;

  /**
   * Creates the error.
   *
   * @param argv The command.
   * @param timeoutMs The timeout.
   * @param partial The output so far (exit code -1).
   */
  constructor(
    argv: readonly string[],
    timeoutMs: number,
    partial: ExecResult<string | Uint8Array>,
  ) {
    super(`Command ${JSON.stringify(argv[0])} did not finish within ${timeoutMs} ms`);
    this.name = "ExecTimeoutError";
    this.timeoutMs = timeoutMs;
    this.partial = partial;
  }
}

/** A stream of {@linkcode ExecClient.exec} exceeded `maxOutputBytes`; the process group was terminated. */
export class ExecOutputLimitError extends Error {
  /** The limit. */
  readonly maxOutputBytes: number;

  /**
   * Creates the error.
   *
   * @param argv The command.
   * @param maxOutputBytes The limit.
   */
  constructor(argv: readonly string[], maxOutputBytes: number) {
    super(`Command ${JSON.stringify(argv[0])} wrote more than ${maxOutputBytes} bytes to a stream`);
    this.name = "ExecOutputLimitError";
    this.maxOutputBytes = maxOutputBytes;
  }
}

/** Output of {@linkcode ExecClient.exec} was evicted on the server before it could be read. */
export class ExecOutputLostError extends Error {
  /**
   * Creates the error.
   *
   * @param argv The command.
   */
  constructor(argv: readonly string[]) {
    super(
      `Output of ${
        JSON.stringify(argv[0])
      } was evicted on the server before it could be read (the server lacks processLosslessOutput)`,
    );
    this.name = "ExecOutputLostError";
  }
}

/** What `exec` needs from the client. */
export interface ExecHost {
  /** Starts the process. */
  startProcess(params: StartProcessParams): Promise<ProcessHandle>;
  /** The extensions the server granted (after connecting). */
  readonly extensions: ReadonlySet<string>;
  /** Connects if not connected. */
  ready(): Promise<void>;
}

/**
 * Runs `argv` to completion on the host; see {@linkcode ExecClient.exec}.
 *
 * @param host The client.
 * @param argv The program and its arguments.
 * @param options Input, environment, limits.
 */
export async function exec(
  host: ExecHost,
  argv: readonly string[],
  options: ExecOptions = {},
): Promise<ExecResult<string | Uint8Array>> {
  options.signal?.throwIfAborted();
  await host.ready();
  const lossless = host.extensions.has("processLosslessOutput");
  const proc = await host.startProcess({
    argv: [...argv],
    cwd: options.cwd,
    env: options.env,
    inheritEnv: options.inheritEnv,
    envPolicy: options.envPolicy,
    tty: options.tty ?? false,
    pipeStdin: options.stdin !== undefined,
    output: lossless ? "block" : undefined,
  });
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const collected = { stdout: new Collector(), stderr: new Collector() };
  const result = (exitCode: number): ExecResult<string | Uint8Array> => {
    const out: ExecResult<string | Uint8Array> = {
      exitCode,
      stdout: collected.stdout.take(options.encoding),
      stderr: collected.stderr.take(options.encoding),
    };
    if (proc.exitSignal) out.signal = proc.exitSignal;
    return out;
  };
  const { promise: stopped, reject: stop } = Promise.withResolvers<never>();
  const terminate = (reason: () => unknown): void => {
    proc.terminate().catch(() => {}).finally(() => stop(reason()));
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (options.timeoutMs !== undefined) {
    const timeoutMs = options.timeoutMs;
    timer = setTimeout(
      () => terminate(() => new ExecTimeoutError(argv, timeoutMs, result(-1))),
      timeoutMs,
    );
  }
  const onAbort = () => terminate(() => options.signal!.reason);
  options.signal?.addEventListener("abort", onAbort, { once: true });
  // Aborted while the process was starting: the listener came too late to hear it.
  if (options.signal?.aborted) onAbort();
  try {
    const feeding = options.stdin === undefined ? undefined : feed(proc, options.stdin);
    feeding?.catch(() => {}); // A process that exits without reading its input is fine.
    const collecting = (async () => {
      for await (const event of proc) {
        if (event.kind === "gap") throw new ExecOutputLostError(argv);
        const stream = event.stream === "stderr" ? collected.stderr : collected.stdout;
        if (!stream.add(event.data, limit)) {
          await proc.terminate().catch(() => {});
          throw new ExecOutputLimitError(argv, limit);
        }
      }
      return result(await proc.exited);
    })();
    collecting.catch(() => {}); // After a timeout or abort its outcome no longer matters.
    return await Promise.race([collecting, stopped]);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

async function feed(
  proc: ProcessHandle,
  stdin: string | Uint8Array | ReadableStream<Uint8Array>,
): Promise<void> {
  if (stdin instanceof ReadableStream) {
    for await (const chunk of stdin) await proc.write(chunk);
  } else if (stdin.length > 0) {
    await proc.write(stdin);
  }
  await proc.closeStdin();
}

/** One stream's output, kept as chunks until the end. */
class Collector {
  #chunks: Uint8Array[] = [];
  #bytes = 0;

  /** Adds a chunk; false when it would pass the limit. */
  add(chunk: Uint8Array, limit: number): boolean {
    if (this.#bytes + chunk.length > limit) return false;
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    return true;
  }

  take(encoding: "text" | "bytes" = "text"): string | Uint8Array {
    const bytes = new Uint8Array(this.#bytes);
    let offset = 0;
    for (const chunk of this.#chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
    return encoding === "bytes" ? bytes : new TextDecoder().decode(bytes);
  }
}
