/**
 * `exec-server run`: runs one command on a remote exec-server and behaves
 * like it locally (output, stdin and its end, signals, terminal size, exit
 * code).
 *
 * @module
 */

import { constants as osConstants } from "node:os";
import { defineFlags, FlagError, parseFlags, renderFlagHelp } from "./flags.ts";
import { errorKind } from "../protocol/errors.ts";
import { ClosedError, RemoteError, TimedOutError } from "../rpc/connection.ts";
import { connect, type ExecClient } from "../client/client.ts";
import { ConnectError, SessionLostError } from "../client/errors.ts";
import type { ProcessHandle } from "../client/process_handle.ts";
import { CONNECT_FLAGS, type RemoteServer, remoteServerFromFlags } from "./connect_flags.ts";
import { toPathUri } from "../client/paths.ts";

/** Exit code for a bad command line. */
export const RUN_USAGE_EXIT = 2;
/** Exit code when the command could not be run remotely (connection, token or protocol failure). */
export const RUN_FAILURE_EXIT = 255;

const SIGPIPE_EXIT = 141;

/** Exit code when the program was found but could not be executed (as a shell reports it). */
export const RUN_NOT_EXECUTABLE_EXIT = 126;
/** Exit code when the program (or the working directory) was not found (as a shell reports it). */
export const RUN_NOT_FOUND_EXIT = 127;

/** The flags of `exec-server run`: its parser and its help's option list come from here. */
const RUN_FLAGS = defineFlags({
  ...CONNECT_FLAGS,
  stdin: {
    kind: "boolean",
    short: "i",
    help: "forward local stdin to CMD (without it CMD's stdin is empty)",
  },
  tty: {
    kind: "boolean",
    short: "t",
    help: "run CMD on a pseudo-terminal and pass TERM; with -i on a local\n" +
      "terminal, that terminal is put in raw mode and restored on exit",
  },
  env: {
    kind: "list",
    short: "e",
    value: "K=V|K",
    help: "set a variable in CMD's environment (K alone: pass the local value\n" +
      "of K, if set); CMD inherits the server's environment minus\n" +
      "variables named like *KEY*, *SECRET* or *TOKEN*",
  },
  workdir: {
    kind: "string",
    short: "w",
    value: "DIR",
    help: "remote working directory (absolute path or file: URI;\n" +
      "default: the server's working directory)",
  },
  help: { kind: "boolean", short: "h", help: "print this help" },
});

/** The help text of `exec-server run`. */
export const RUN_HELP: string =
  `Usage: exec-server run [--url ws://HOST:PORT] [options] -- CMD [ARGS...]

Runs CMD on an exec-server, like kubectl exec / docker exec: streams its stdout
and stderr (raw bytes) to the local ones, forwards stdin (with -i) and signals,
and exits with the remote exit code.

Options:
${renderFlagHelp(RUN_FLAGS)}

With -i, local stdin is forwarded until it ends, then CMD's stdin is closed (on
a terminal: an end-of-file character, Ctrl-D, is typed). -t without a terminal
on stdin (e.g. piped input with -it) prints a warning and runs without one.
SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to CMD's process group; with
-t the remote terminal follows the local terminal's size. No output is dropped:
a slow local reader slows CMD down. (Against a server without these
extensions, local EOF leaves CMD's stdin open; SIGTERM, SIGHUP and SIGQUIT
kill CMD.) When the connection drops, one "reconnecting" line is printed and
the session is resumed; if the server is not back within --reconnect-timeout,
run exits with a message.
Exit status: CMD's exit code (128+N when signal N ended it), ${RUN_NOT_FOUND_EXIT} when CMD (or
the working directory) was not found, ${RUN_NOT_EXECUTABLE_EXIT} when CMD is not executable,
${RUN_USAGE_EXIT} for a bad command line, ${RUN_FAILURE_EXIT} when the command could not be run
(unreachable server, refused token, lost connection or session).
`;

interface RunFlags extends RemoteServer {
  tty: boolean;
  cwd?: string;
  env: Record<string, string>;
  stdin: boolean;
  argv: string[];
}

class UsageError extends Error {}

/**
 * Runs `exec-server run ARGS` and resolves with the exit code to exit with
 * (the remote command's, or {@linkcode RUN_USAGE_EXIT} /
 * {@linkcode RUN_FAILURE_EXIT}). Errors are printed as one line on stderr.
 * Local stdin may still be being read when it resolves, so the caller
 * should exit the process with the code.
 *
 * @example Print the help text
 * ```ts
 * import { runCommand } from "./run_command.ts";
 * const code = await runCommand(["--help"]);
 * console.log(code); // 0
 * ```
 *
 * @param args The arguments after `run`.
 */
export async function runCommand(args: string[]): Promise<number> {
  let flags: RunFlags | undefined;
  try {
    flags = await parseRunArgs(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`exec-server run: ${err.message}\nTry "exec-server run --help".`);
    return RUN_USAGE_EXIT;
  }
  if (flags === undefined) {
    console.log(RUN_HELP);
    return 0;
  }
  let client: ExecClient | undefined;
  const connection = { lost: false };
  try {
    client = await connect(flags.url, {
      token: flags.token,
      caCerts: flags.caCerts,
      clientName: "exec-server run",
      reconnectTimeoutMs: flags.reconnectTimeoutMs,
      onConnectionChange: (change) => {
        connection.lost = change === "reconnecting";
        if (connection.lost) {
          console.error(`exec-server run: lost the connection to ${flags!.url}; reconnecting…`);
        }
      },
    });
    return await runRemote(client, flags);
  } catch (err) {
    if (err instanceof RemoteError) {
      const kind = errorKind(err.data);
      const program = JSON.stringify(flags.argv[0]);
      if (kind === "spawnNotFound") {
        console.error(
          `exec-server run: ${program}: not found (no such program, or no such working directory)`,
        );
        return RUN_NOT_FOUND_EXIT;
      }
      if (kind === "spawnPermissionDenied") {
        console.error(
          `exec-server run: ${program}: permission denied (not executable, or in a working directory the sandbox hides)`,
        );
        return RUN_NOT_EXECUTABLE_EXIT;
      }
    }
    const message = connection.lost
      ? `the server at ${flags.url} did not come back within ${
        flags.reconnectTimeoutMs / 1000
      } s (${describeFailure(err, flags.url)})`
      : describeFailure(err, flags.url);
    console.error(`exec-server run: ${message}`);
    return RUN_FAILURE_EXIT;
  } finally {
    await client?.close();
  }
}

async function parseRunArgs(args: string[]): Promise<RunFlags | undefined> {
  let parsed;
  try {
    parsed = parseFlags(RUN_FLAGS, args, { rest: true });
  } catch (err) {
    if (err instanceof FlagError) throw new UsageError(err.message);
    throw err;
  }
  const values = parsed.flags;
  if (values.help) return undefined;
  let remote;
  try {
    remote = await remoteServerFromFlags(values);
  } catch (err) {
    if (err instanceof FlagError) throw new UsageError(err.message);
    throw err;
  }
  if (remote === undefined) throw new UsageError("--url (or EXEC_SERVER_URL) is required");
  if (parsed.rest.length === 0) throw new UsageError("no command given after --");
  const env: Record<string, string> = {};
  for (const pair of values.env) {
    const eq = pair.indexOf("=");
    if (eq === 0) throw new UsageError(`--env expects K=V or K, got "${pair}"`);
    if (eq > 0) {
      env[pair.slice(0, eq)] = pair.slice(eq + 1);
      continue;
    }
    const local = Deno.env.get(pair);
    if (local !== undefined) env[pair] = local;
  }
  let cwd: string | undefined;
  if (values.workdir !== undefined) {
    try {
      cwd = toPathUri(values.workdir);
    } catch {
      throw new UsageError(
        `--workdir must be an absolute path or a file: URI, got "${values.workdir}"`,
      );
    }
  }
  let tty = values.tty;
  if (tty && values.stdin && !Deno.stdin.isTerminal()) {
    console.error(
      "exec-server run: warning: stdin is not a terminal, so -t is ignored (drop -t to silence this)",
    );
    tty = false;
  }
  if (tty && env.TERM === undefined) env.TERM = Deno.env.get("TERM") || "xterm";
  return { ...remote, tty, cwd, env, stdin: values.stdin, argv: parsed.rest };
}

async function runRemote(client: ExecClient, flags: RunFlags): Promise<number> {
  const raw = flags.tty && flags.stdin && Deno.stdin.isTerminal();
  const extensions = client.extensions;
  const cleanups: (() => void)[] = [];
  let restored = false;
  const restore = (): void => {
    if (restored) return;
    restored = true;
    for (const cleanup of cleanups.reverse()) {
      try {
        cleanup();
      } catch {
        // Keep restoring the rest.
      }
    }
  };
  try {
    const handle = await client.startProcess({
      argv: flags.argv,
      cwd: flags.cwd,
      env: flags.env, // The client's environment rule, as for the library.
      tty: flags.tty,
      pipeStdin: flags.stdin && !flags.tty,
      size: flags.tty && extensions.has("processResize") ? terminalSize() : undefined,
      output: extensions.has("processLosslessOutput") ? "block" : undefined,
    });
    if (raw) {
      Deno.stdin.setRaw(true);
      cleanups.push(() => Deno.stdin.setRaw(false));
      await disableOutputProcessing();
      globalThis.addEventListener("unload", restore);
      cleanups.push(() => globalThis.removeEventListener("unload", restore));
    }
    const { promise: stopped, resolve: stop } = Promise.withResolvers<number>();
    const onInterrupt = (): void => {
      handle.interrupt().catch(() => {});
    };
    Deno.addSignalListener("SIGINT", onInterrupt);
    cleanups.push(() => Deno.removeSignalListener("SIGINT", onInterrupt));
    const forwarded = [["SIGTERM", "terminate"], ["SIGHUP", "hangup"], [
      "SIGQUIT",
      "quit",
    ]] as const;
    for (const [signal, name] of forwarded) {
      const onSignal = extensions.has("processSignals")
        ? (): void => {
          // CMD decides: its exit (or not) ends this command as usual.
          handle.signal(name).catch(() => {});
        }
        : (): void => {
          restore();
          handle.terminate().catch(() => {}).finally(() => stop(128 + signalNumber(signal)));
        };
      Deno.addSignalListener(signal, onSignal);
      cleanups.push(() => Deno.removeSignalListener(signal, onSignal));
    }
    if (flags.tty && extensions.has("processResize") && terminalSize() !== undefined) {
      const onResize = (): void => {
        const size = terminalSize();
        if (size) handle.resize(size.rows, size.cols).catch(() => {});
      };
      Deno.addSignalListener("SIGWINCH", onResize);
      cleanups.push(() => Deno.removeSignalListener("SIGWINCH", onResize));
    }
    if (flags.stdin) forwardStdin(handle, extensions.has("processStdinClose"));
    const code = await Promise.race([pumpOutput(handle), stopped]);
    return code & 0xff;
  } finally {
    restore();
  }
}

/** The local terminal's size, or `undefined` when no standard stream is a terminal. */
function terminalSize(): { rows: number; cols: number } | undefined {
  try {
    const { rows, columns } = Deno.consoleSize();
    return { rows, cols: columns };
  } catch {
    return undefined;
  }
}

function signalNumber(name: string): number {
  return (osConstants.signals as Record<string, number>)[name] ?? 0;
}

/**
 * `setRaw` leaves output post-processing on (`\n` becomes `\r\n`); the remote
 * pty already did that, so turn it off as well (best effort, with `stty`).
 * `setRaw(false)` restores the original mode, including this flag.
 */
async function disableOutputProcessing(): Promise<void> {
  try {
    await new Deno.Command("stty", {
      args: ["-opost"],
      stdin: "inherit",
      stdout: "null",
      stderr: "null",
    })
      .output();
  } catch {
    // No stty: keep the terminal's output processing.
  }
}

async function pumpOutput(handle: ProcessHandle): Promise<number> {
  for await (const event of handle) {
    if (event.kind === "gap") {
      console.error(
        `exec-server run: output seqs ${event.fromSeq}-${event.toSeq} were evicted on the server before they could be read`,
      );
      continue;
    }
    try {
      await writeAll(event.stream === "stderr" ? Deno.stderr : Deno.stdout, event.data);
    } catch (err) {
      if (!(err instanceof Deno.errors.BrokenPipe)) throw err;
      // The local reader went away (e.g. `| head`): stop the command, exit as SIGPIPE would.
      await handle.terminate().catch(() => {});
      return SIGPIPE_EXIT;
    }
  }
  const code = await handle.exited;
  // A tty process killed by a signal reports exit code 1; exit the way a local one would.
  return handle.exitSignal ? 128 + signalNumber(handle.exitSignal) : code;
}

async function writeAll(sink: { write(p: Uint8Array): Promise<number> }, data: Uint8Array) {
  let offset = 0;
  while (offset < data.length) offset += await sink.write(data.subarray(offset));
}

async function forwardStdin(handle: ProcessHandle, canClose: boolean): Promise<void> {
  const buffer = new Uint8Array(64 * 1024);
  try {
    while (true) {
      const n = await Deno.stdin.read(buffer);
      if (n === null) {
        // EOF; without the extension the remote stdin cannot be closed.
        if (canClose) await handle.closeStdin();
        return;
      }
      await handle.write(buffer.slice(0, n));
    }
  } catch {
    // The process exited or stdin is gone: stop forwarding.
  }
}

function describeFailure(err: unknown, url: string): string {
  if (err instanceof ConnectError) {
    if (err.status === 401 || err.status === 403) {
      return `the server at ${url} refused the token (HTTP ${err.status})`;
    }
    return `cannot connect to ${url}: ${err.message.replace(/^Cannot connect to \S+: /, "")}`;
  }
  if (err instanceof RemoteError) return `the server refused the command: ${err.message}`;
  if (err instanceof SessionLostError) return `lost the connection and the session: ${err.message}`;
  if (err instanceof ClosedError || err instanceof TimedOutError) {
    return `lost the connection to ${url}: ${err.message}`;
  }
  return (err as Error)?.message ?? String(err);
}
