/**
 * The process tools: `run_command` runs a command to completion (with
 * progress, a timeout, cancellation and bounded output kept for
 * `read_output`); `start_process` starts a long-running one that
 * `read_process_output`, `write_process_stdin`, `signal_process` and
 * `terminate_process` act on later. Each maps to the method table's
 * `process/*` method of the same purpose.
 *
 * @module
 */

import { processEnvironment } from "../client/environment.ts";
import { concatBytes } from "../rpc/bytes.ts";
import { PROCESS_SIGNALS } from "../protocol/methods.ts";
import type { JsonSchema } from "../protocol/schema.ts";
import {
  INLINE_OUTPUT_BYTES,
  KEPT_STREAM_BYTES,
  MAX_KEPT_OUTPUTS,
  StreamCapture,
} from "./output_capture.ts";
import {
  callMethod,
  checkSize,
  contentBytes,
  type ContentEncoding,
  contentOf,
  encodingArgument,
  type ToolContext,
  type ToolDefinition,
  type ToolOutput,
} from "./tool.ts";
import { ToolError } from "./tool_errors.ts";
import { deriveArguments, inputSchema } from "./tool_schema.ts";

/** Default `timeoutMs` of `run_command`: 60 s. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;
/** Largest `timeoutMs` of `run_command`: 1 hour. */
export const MAX_COMMAND_TIMEOUT_MS = 3_600_000;
/** `run_command` calls running at once per MCP connection: 16. */
export const MAX_RUNNING_COMMANDS = 16;
/** Largest `stdin` of `run_command` and `input` of `write_process_stdin`: 1 MiB. */
export const MAX_INPUT_BYTES = 1024 * 1024;
/** How often a running command reports progress: every second. */
export const PROGRESS_INTERVAL_MS = 1000;
/** Default `maxBytes` of `read_process_output` and `read_output`: 64 KiB. */
export const DEFAULT_READ_BYTES = 64 * 1024;
/** Largest `maxBytes` of `read_process_output` and `read_output`: 1 MiB. */
export const MAX_READ_BYTES = 1024 * 1024;
/** Largest `waitMs` of `read_process_output`: 30 s. */
export const MAX_WAIT_MS = 30_000;

/** The shell a `command` string runs in: POSIX `sh -c`. */
const SHELL = ["/bin/sh", "-c"];

const COMMAND_ARGUMENT: JsonSchema = {
  type: "string",
  minLength: 1,
  description: "A shell command line, run with /bin/sh -c (give this or argv).",
};

const ARGV_DESCRIPTION =
  "The program and its arguments, run without a shell (give this or command); a program without / is looked up in PATH.";

const ENV_DESCRIPTION =
  "Variables set on top of the server's environment (which has no variables named like *KEY*, *SECRET* or *TOKEN*).";

interface CommandArgs {
  command?: string;
  argv?: string[];
}

/** The argv of `command` or `argv`, exactly one of which must be given. */
function commandArgv(args: CommandArgs): string[] {
  if ((args.command === undefined) === (args.argv === undefined)) {
    throw new ToolError("invalidArguments", "give exactly one of command and argv");
  }
  if (args.argv !== undefined && args.argv.length === 0) {
    throw new ToolError("invalidArguments", "argv must name a program");
  }
  return args.command === undefined ? args.argv! : [...SHELL, args.command];
}

function boundedInteger(
  description: string,
  minimum: number,
  maximum: number,
  fallback: number,
): JsonSchema {
  return { type: "integer", minimum, maximum, default: fallback, description };
}

// ---------------------------------------------------------------------------
// run_command

interface RunCommandArgs extends CommandArgs {
  cwd?: string;
  env?: Record<string, string>;
  tty?: boolean;
  stdin?: string;
  stdinEncoding?: ContentEncoding;
  timeoutMs?: number;
}

const RUN_COMMAND_ARGUMENTS = deriveArguments<"process/start", RunCommandArgs>("process/start", {
  processId: "omit",
  argv: { description: ARGV_DESCRIPTION, optional: true },
  cwd: {
    optional: true,
    description: "The working directory (default: the server's working directory).",
  },
  envPolicy: "omit",
  env: { optional: true, description: ENV_DESCRIPTION },
  tty: {
    optional: true,
    description: "Run on a pseudo-terminal: stdout and stderr arrive merged, as stdout.",
  },
  pipeStdin: "omit",
  arg0: "omit",
  sandbox: "omit",
  enforceManagedNetwork: "omit",
  managedNetwork: "omit",
  networkProxy: "omit",
  shellSnapshot: "omit",
  metadata: "omit",
  size: "omit",
  output: "omit",
});

/** `run_command`'s result, its structured content. */
interface RunResult extends Record<string, unknown> {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  outputId?: string;
  outputLost?: true;
}

const runCommand: ToolDefinition = {
  name: "run_command",
  title: "Run a command",
  description:
    `Runs a command on the server to completion and returns its exit code, stdout and stderr. Give command (a shell line) or argv. Each stream shows up to ${INLINE_OUTPUT_BYTES} bytes (its first and last half when longer); then outputId names the kept output (${KEPT_STREAM_BYTES} bytes per stream, the ${MAX_KEPT_OUTPUTS} most recent) for read_output. The command is killed after timeoutMs (default ${DEFAULT_COMMAND_TIMEOUT_MS}, at most ${MAX_COMMAND_TIMEOUT_MS}) or when the call is cancelled; progress is reported every second. For a server or a watcher, use start_process.`,
  inputSchema: inputSchema({
    derived: RUN_COMMAND_ARGUMENTS,
    extra: {
      command: COMMAND_ARGUMENT,
      stdin: {
        type: "string",
        description:
          `The command's input, then end of input (at most ${MAX_INPUT_BYTES} bytes; without it stdin is empty).`,
      },
      stdinEncoding: encodingArgument("stdin"),
      timeoutMs: boundedInteger(
        "Kill the command after this many ms.",
        1,
        MAX_COMMAND_TIMEOUT_MS,
        DEFAULT_COMMAND_TIMEOUT_MS,
      ),
    },
  }),
  annotations: { destructiveHint: true, openWorldHint: true },
  async run(raw, context) {
    const args = raw as RunCommandArgs;
    const argv = commandArgv(args);
    const input = args.stdin === undefined
      ? undefined
      : contentBytes(args.stdin, args.stdinEncoding ?? "text", "stdin");
    if (input !== undefined) checkSize(input.length, MAX_INPUT_BYTES, "stdin");
    const state = context.connection;
    if (state.runningCommands >= MAX_RUNNING_COMMANDS) {
      throw new ToolError(
        "tooManyCommands",
        `${MAX_RUNNING_COMMANDS} commands are already running on this connection`,
      );
    }
    state.runningCommands++;
    try {
      return await runToCompletion(argv, args, input, context);
    } finally {
      state.runningCommands--;
    }
  },
};

async function runToCompletion(
  argv: string[],
  args: RunCommandArgs,
  input: Uint8Array | undefined,
  context: ToolContext,
): Promise<ToolOutput> {
  const { client } = context;
  await client.ready();
  const params = RUN_COMMAND_ARGUMENTS.params(args, context) as {
    cwd?: string;
    env?: Record<string, string>;
    tty?: boolean;
  };
  const started = Date.now();
  const proc = await client.startProcess({
    argv,
    cwd: params.cwd,
    env: params.env,
    tty: params.tty ?? false,
    pipeStdin: input !== undefined,
    output: client.extensions.has("processLosslessOutput") ? "block" : undefined,
  });
  const stdout = new StreamCapture();
  const stderr = new StreamCapture();
  let lost = false;
  let timedOut = false;
  const kill = () => proc.terminate().catch(() => {});
  const timeoutMs = args.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, timeoutMs);
  const progress = setInterval(() => {
    const bytes = stdout.total + stderr.total;
    const seconds = Math.round((Date.now() - started) / 1000);
    context.progress(Date.now() - started, `running for ${seconds} s, ${bytes} bytes of output`);
  }, PROGRESS_INTERVAL_MS);
  context.signal.addEventListener("abort", kill, { once: true });
  if (context.signal.aborted) kill();
  try {
    if (input !== undefined) {
      (async () => {
        if (input.length > 0) await proc.write(input);
        await proc.closeStdin();
      })().catch(() => {}); // A command that exits without reading its input is fine.
    }
    for await (const event of proc) {
      if (event.kind === "gap") lost = true;
      else (event.stream === "stderr" ? stderr : stdout).add(event.data);
    }
    const exitCode = await proc.exited;
    const result: RunResult = {
      exitCode: timedOut ? null : exitCode,
      signal: proc.exitSignal ?? null,
      timedOut,
      durationMs: Date.now() - started,
      stdout: "",
      stderr: "",
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      truncated: false,
    };
    if (lost) result.outputLost = true;
    const long = stdout.total > INLINE_OUTPUT_BYTES || stderr.total > INLINE_OUTPUT_BYTES;
    if (long) result.outputId = context.outputs.keep({ stdout, stderr });
    for (const [name, capture] of [["stdout", stdout], ["stderr", stderr]] as const) {
      const preview = capture.preview(
        INLINE_OUTPUT_BYTES,
        (offset, count) =>
          `\n[... ${count} bytes omitted; read_output ${
            JSON.stringify({ outputId: result.outputId, stream: name, offset })
          } reads them ...]\n`,
      );
      result[name] = preview.text;
      result.truncated ||= preview.truncated;
    }
    const output: ToolOutput = { structured: result, text: [describeRun(result)] };
    if (timedOut) {
      throw new ToolError(
        "timedOut",
        `the command ran longer than ${timeoutMs} ms and was killed`,
        result,
      );
    }
    return output;
  } finally {
    clearTimeout(timer);
    clearInterval(progress);
    context.signal.removeEventListener("abort", kill);
  }
}

function describeRun(result: RunResult): string {
  const status = result.timedOut
    ? `timed out and was killed (${result.signal ?? "SIGKILL"})`
    : result.signal
    ? `killed by ${result.signal}`
    : `exit code ${result.exitCode}`;
  const parts = [`${status} after ${result.durationMs} ms`];
  if (result.stdoutBytes > 0) parts.push(`stdout (${result.stdoutBytes} bytes):\n${result.stdout}`);
  if (result.stderrBytes > 0) parts.push(`stderr (${result.stderrBytes} bytes):\n${result.stderr}`);
  if (result.stdoutBytes + result.stderrBytes === 0) parts.push("(no output)");
  if (result.outputLost) parts.push("(some output was evicted on the server before it was read)");
  return parts.join("\n");
}

// ---------------------------------------------------------------------------
// read_output

interface ReadOutputArgs {
  outputId: string;
  stream?: "stdout" | "stderr";
  offset?: number;
  maxBytes?: number;
  encoding?: ContentEncoding;
}

const readOutput: ToolDefinition = {
  name: "read_output",
  title: "Read kept command output",
  description:
    `Reads the output of a run_command whose result was truncated, by its outputId: maxBytes (at most ${MAX_READ_BYTES}) bytes of stdout or stderr from offset. Of a stream over ${KEPT_STREAM_BYTES} bytes the first and last half are kept.`,
  inputSchema: inputSchema({
    extra: {
      outputId: { type: "string", description: "The outputId of a run_command result." },
      stream: {
        type: "string",
        enum: ["stdout", "stderr"],
        default: "stdout",
        description: "Which stream.",
      },
      offset: { type: "integer", minimum: 0, default: 0, description: "The first byte to read." },
      maxBytes: boundedInteger("Bytes to read at most.", 1, MAX_READ_BYTES, DEFAULT_READ_BYTES),
      encoding: { ...encodingArgument("the output"), description: "text (UTF-8) or base64." },
    },
    extraRequired: ["outputId"],
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  run(raw, context) {
    const args = raw as unknown as ReadOutputArgs;
    const capture = context.outputs.get(args.outputId)[args.stream ?? "stdout"];
    const offset = args.offset ?? 0;
    const bytes = capture.range(offset, args.maxBytes ?? DEFAULT_READ_BYTES);
    const { content, encoding } = contentOf(bytes, args.encoding ?? "text");
    const end = offset + bytes.length;
    return Promise.resolve({
      structured: {
        content,
        encoding,
        offset,
        bytesRead: bytes.length,
        totalBytes: capture.total,
        eof: end >= capture.total,
      },
      text: [content],
    });
  },
};

// ---------------------------------------------------------------------------
// start_process and the tools on a started process

interface StartProcessArgs extends CommandArgs {
  cwd?: string;
  env?: Record<string, string>;
  tty?: boolean;
  pipeStdin?: boolean;
  size?: { rows: number; cols: number };
  output?: "drop" | "block";
}

const START_PROCESS_ARGUMENTS = deriveArguments<"process/start", StartProcessArgs>(
  "process/start",
  {
    processId: "omit",
    argv: { description: ARGV_DESCRIPTION, optional: true },
    cwd: {
      optional: true,
      description: "The working directory (default: the server's working directory).",
    },
    envPolicy: "omit",
    env: { optional: true, description: ENV_DESCRIPTION },
    tty: { optional: true },
    pipeStdin: {
      description: "Give the process a stdin pipe for write_process_stdin (default true).",
    },
    arg0: "take",
    sandbox: "omit",
    enforceManagedNetwork: "omit",
    managedNetwork: "omit",
    networkProxy: "omit",
    shellSnapshot: "omit",
    metadata: "omit",
    size: { description: "With tty: the terminal's size." },
    output: {
      description:
        "drop (default): the server keeps the newest output of a process nobody reads; block: it keeps all unread output and pauses the process while its buffer is full.",
    },
  },
);

const startProcess: ToolDefinition = {
  name: "start_process",
  title: "Start a process",
  description:
    "Starts a long-running process on the server (a dev server, a watcher, an interactive program) and returns its processId at once. Read its output with read_process_output, write its stdin with write_process_stdin, stop it with signal_process or terminate_process. It is terminated when this MCP connection ends.",
  inputSchema: inputSchema({
    derived: START_PROCESS_ARGUMENTS,
    extra: { command: COMMAND_ARGUMENT },
  }),
  annotations: { destructiveHint: true, openWorldHint: true },
  async run(raw, context) {
    const args = raw as StartProcessArgs;
    const argv = commandArgv(args);
    const { client } = context;
    await client.ready();
    const tty = args.tty ?? false;
    const processId = crypto.randomUUID();
    const info = client.environmentInfo;
    const cwd = args.cwd === undefined ? info.cwd ?? info.tempDir : context.resolvePath(args.cwd);
    const started = await callMethod(context, START_PROCESS_ARGUMENTS, args, {
      processId,
      argv,
      cwd,
      ...processEnvironment({ env: args.env }),
      tty,
      pipeStdin: tty ? undefined : args.pipeStdin ?? true,
    });
    context.connection.startedProcesses.add(processId);
    return { structured: { processId, sandboxType: started.sandboxType } };
  },
};

const PROCESS_ID_DESCRIPTION = "The processId start_process returned.";

interface ReadProcessArgs {
  processId: string;
  afterSeq?: number;
  maxBytes?: number;
  waitMs?: number;
}

const READ_PROCESS_ARGUMENTS = deriveArguments<"process/read", ReadProcessArgs>("process/read", {
  processId: { description: PROCESS_ID_DESCRIPTION },
  afterSeq: {
    description: "Return output after this seq: 0 at first, then the nextSeq of the last read.",
  },
  maxBytes: {
    schema: boundedInteger(
      "Stop adding chunks beyond this many bytes.",
      1,
      MAX_READ_BYTES,
      DEFAULT_READ_BYTES,
    ),
  },
  waitMs: {
    schema: boundedInteger(
      "Wait up to this many ms for new output before answering.",
      0,
      MAX_WAIT_MS,
      0,
    ),
  },
});

const readProcessOutput: ToolDefinition = {
  name: "read_process_output",
  title: "Read a process's output",
  description:
    `Reads a started process's output after afterSeq (about maxBytes, at most ${MAX_READ_BYTES}; optionally waiting up to ${MAX_WAIT_MS} ms for more) and whether it has exited. Pass the returned nextSeq as afterSeq next time. Output the server evicted before it was read shows as a jump in seq.`,
  inputSchema: inputSchema({ derived: READ_PROCESS_ARGUMENTS }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as ReadProcessArgs;
    const read = await callMethod(context, READ_PROCESS_ARGUMENTS, args, {
      maxBytes: args.maxBytes ?? DEFAULT_READ_BYTES,
    });
    // Consecutive chunks of one stream are decoded together (a character split across them stays whole).
    const groups: { stream: string; bytes: Uint8Array[] }[] = [];
    for (const chunk of read.chunks) {
      const bytes = Uint8Array.fromBase64(chunk.chunk);
      const last = groups.at(-1);
      if (last?.stream === chunk.stream) last.bytes.push(bytes);
      else groups.push({ stream: chunk.stream, bytes: [bytes] });
    }
    const output = groups.map(({ stream, bytes }) => ({
      stream,
      text: new TextDecoder().decode(concatBytes(bytes)),
    }));
    const status = read.exited
      ? `exited (${read.signal ? `killed by ${read.signal}` : `exit code ${read.exitCode}`})`
      : "running";
    const structured = {
      output,
      nextSeq: read.nextSeq,
      exited: read.exited,
      exitCode: read.exitCode,
      signal: read.signal ?? null,
      closed: read.closed,
      failure: read.failure,
      ...(read.evictedBytes === undefined ? {} : { evictedBytes: read.evictedBytes }),
    };
    return {
      structured,
      text: [
        ...output.map((group) => `${group.stream}:\n${group.text}`),
        `[${status}; nextSeq ${read.nextSeq}]`,
      ],
    };
  },
};

interface WriteStdinArgs {
  processId: string;
  input?: string;
  encoding?: ContentEncoding;
  closeStdin?: boolean;
}

const WRITE_STDIN_ARGUMENTS = deriveArguments<"process/write", WriteStdinArgs>("process/write", {
  processId: { description: PROCESS_ID_DESCRIPTION },
  chunk: {
    as: "input",
    optional: true,
    schema: { type: "string" },
    description: `The bytes to write (at most ${MAX_INPUT_BYTES}; none with closeStdin alone).`,
  },
  writeId: "omit",
  closeStdin: { description: "Close stdin after the input (end of input)." },
});

const writeProcessStdin: ToolDefinition = {
  name: "write_process_stdin",
  title: "Write to a process's stdin",
  description:
    `Writes input (at most ${MAX_INPUT_BYTES} bytes) to a started process's stdin, optionally closing it afterwards.`,
  inputSchema: inputSchema({
    derived: WRITE_STDIN_ARGUMENTS,
    extra: { encoding: encodingArgument("input") },
  }),
  annotations: { destructiveHint: false, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as WriteStdinArgs;
    if (args.input === undefined && !args.closeStdin) {
      throw new ToolError("invalidArguments", "give input, closeStdin or both");
    }
    const bytes = args.input === undefined
      ? new Uint8Array(0)
      : contentBytes(args.input, args.encoding ?? "text", "input");
    checkSize(bytes.length, MAX_INPUT_BYTES, "input");
    const written = await callMethod(context, WRITE_STDIN_ARGUMENTS, args, {
      chunk: bytes.toBase64(),
      writeId: crypto.randomUUID(),
    });
    if (written.status !== "accepted") {
      throw new ToolError("processNotAccepted", `the server answered ${written.status}`, {
        status: written.status,
      });
    }
    return { structured: { status: written.status } };
  },
};

interface SignalArgs {
  processId: string;
  signal: keyof typeof PROCESS_SIGNALS;
}

const SIGNAL_ARGUMENTS = deriveArguments<"process/signal", SignalArgs>("process/signal", {
  processId: { description: PROCESS_ID_DESCRIPTION },
  signal: {
    description: `The signal: ${
      Object.entries(PROCESS_SIGNALS).map(([name, posix]) => `${name} (${posix})`).join(", ")
    }.`,
  },
});

const signalProcess: ToolDefinition = {
  name: "signal_process",
  title: "Signal a process",
  description: "Sends a signal to a started process's process group (interrupt is Ctrl-C).",
  inputSchema: inputSchema({ derived: SIGNAL_ARGUMENTS }),
  annotations: { destructiveHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as SignalArgs;
    await callMethod(context, SIGNAL_ARGUMENTS, args);
    return { structured: { sent: args.signal } };
  },
};

interface TerminateArgs {
  processId: string;
  graceMs?: number;
}

const TERMINATE_ARGUMENTS = deriveArguments<"process/terminate", TerminateArgs>(
  "process/terminate",
  {
    processId: { description: PROCESS_ID_DESCRIPTION },
    graceMs: {
      schema: boundedInteger(
        "Send SIGTERM first and SIGKILL only after this many ms (default: SIGKILL at once).",
        0,
        MAX_WAIT_MS,
        0,
      ),
    },
  },
);

const terminateProcess: ToolDefinition = {
  name: "terminate_process",
  title: "Terminate a process",
  description:
    `Kills a started process's process group (SIGKILL, or SIGTERM first with graceMs up to ${MAX_WAIT_MS}) and says whether it was running.`,
  inputSchema: inputSchema({ derived: TERMINATE_ARGUMENTS }),
  annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as TerminateArgs;
    const { running } = await callMethod(context, TERMINATE_ARGUMENTS, args);
    context.connection.startedProcesses.delete(args.processId);
    return { structured: { running } };
  },
};

/** The process tools, in the order `tools/list` shows them. */
export const PROCESS_TOOLS: readonly ToolDefinition[] = [
  runCommand,
  readOutput,
  startProcess,
  readProcessOutput,
  writeProcessStdin,
  signalProcess,
  terminateProcess,
];
