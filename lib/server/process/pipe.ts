/**
 * The backend of pipe processes (`tty: false`): `node:child_process`, since
 * Deno's own `Deno.Command` cannot start a child in its own process group
 * or set `argv[0]`.
 *
 * @module
 */

import { internalError, invalidRequest } from "../../protocol/errors.ts";
import { PROCESS_SIGNALS } from "../../protocol/methods.ts";
import type { Backend, BackendEvents } from "./backend.ts";
import { OutputCoalescer } from "./output_coalescer.ts";
import { killGroup, signalExitCode, signalGroup } from "./signals.ts";
import { hasExecutableFormat } from "./exec_format.ts";
import { spawnErrorFromErrno } from "./spawn_errors.ts";

type ChildProcessModule = typeof import("node:child_process");
let childProcess: ChildProcessModule | undefined;

/**
 * Loads `node:child_process`; {@linkcode startPipe} needs it loaded. Node
 * compatibility costs about 10 ms of start-up, which a server that never
 * starts a pipe process (or has not yet) should not pay before its first
 * `initialize` answer.
 */
export async function loadChildProcess(): Promise<void> {
  childProcess ??= await import("node:child_process");
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
 * @throws {RpcError} `spawnFailed` (ENOEXEC) for a file that is neither an ELF
 *   binary nor a `#!` script.
 * @returns The backend, or (when the spawn failed) a promise that rejects with
 *   the spawn error for the errno the OS reported (`spawnNotFound` for ENOENT,
 *   `spawnPermissionDenied` for EACCES, `spawnFailed` with the OS message for
 *   E2BIG, EMFILE, ENOEXEC...).
 */
export function startPipe(
  events: BackendEvents,
  program: string,
  argv: string[],
  options: PipeOptions,
): Backend | Promise<never> {
  if (!hasExecutableFormat(program)) throw spawnErrorFromErrno("ENOEXEC");
  const child = childProcess!.spawn(program, argv.slice(1), {
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
  const pid = child.pid;
  for (const [name, stream] of [["stdout", child.stdout!], ["stderr", child.stderr!]] as const) {
    let ended = false;
    const merge = new OutputCoalescer((bytes) => events.output(name, bytes), {
      pause: () => stream.pause(),
      resume: () => stream.resume(),
    });
    const end = () => {
      if (ended) return;
      ended = true;
      merge.end().then(() => events.streamEnded());
    };
    stream.on("data", (data: Uint8Array) => void merge.push(data));
    stream.on("end", end);
    stream.on("close", end);
    stream.on("error", end);
  }
  child.on("error", () => {});
  child.on("exit", (code, signal) => events.exit(code ?? signalExitCode(signal), signal ?? null));
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
