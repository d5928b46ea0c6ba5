/**
 * Test harness: starts the real server (`main.ts`) over stdio or WebSocket,
 * sends raw lines or messages, collects everything the server sends, and
 * waits for predicates over the collected messages.
 *
 * Everything here is an `AsyncDisposable`: `await using` guarantees the
 * server is stopped (gracefully first: stdin EOF or SIGTERM, so it kills its
 * own process groups), its pipes are drained and its status collected, so
 * Deno's sanitizers stay on.
 *
 * @module
 */

import { decodeJson } from "../../lib/protocol/json_decode.ts";
import { LineSplitStream } from "./line_split_stream.ts";

/** Path of the server entry point. */
export const MAIN_TS: string = new URL("../../main.ts", import.meta.url).pathname;

/** The permission flags of `deno task start`. */
export const SERVER_PERMISSIONS: string[] = [
  "--allow-run",
  "--allow-read",
  "--allow-write",
  "--allow-net",
  "--allow-env",
  "--allow-sys",
  "--allow-ffi",
];

/** A JSON object as decoded by the bounded decoder (big integers are bigint). */
export type Json = Record<string, unknown>;

/** One message the server sent. */
export interface Received {
  /** The exact text (one stdio line or one WebSocket message). */
  text: string;
  /** The decoded value (`decodeJson`, so 64-bit ids stay exact). */
  msg: Json;
  /** Milliseconds since the client was created (for diagnostics only). */
  at: number;
}

/**
 * Encodes a value as compact JSON; bigints are written with all their digits.
 * `verbatim` may return the text of a value to insert as it is (e.g. a
 * deliberately malformed member); it is asked for every value.
 */
export function toJson(value: unknown, verbatim?: (value: unknown) => string | undefined): string {
  const raw = verbatim?.(value);
  if (raw !== undefined) return raw;
  if (typeof value === "bigint") return value.toString();
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map((v) => toJson(v ?? null, verbatim)).join(",")}]`;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return JSON.stringify(value);
  }
  const members: string[] = [];
  for (const [key, member] of Object.entries(value)) {
    if (member === undefined) continue;
    members.push(`${JSON.stringify(key)}:${toJson(member, verbatim)}`);
  }
  return `{${members.join(",")}}`;
}

/** Options for {@linkcode ServerProcess.start}. */
export interface StartServerOptions {
  /**
   * Transport to listen on: `stdio`, `ws` (`ws://127.0.0.1:0`) or a `ws://` URL.
   *
   * @default {"stdio"}
   */
  listen?: "stdio" | "ws" | `ws://${string}`;
  /** Extra command-line flags, e.g. `["--concurrent-requests", "4"]`. */
  args?: string[];
  /**
   * Deno permission flags of the server, e.g. `["--allow-read=/srv"]`.
   *
   * @default {SERVER_PERMISSIONS}
   */
  permissions?: string[];
  /** Extra Deno runtime flags before `main.ts` (e.g. `--v8-flags=...`). */
  denoFlags?: string[];
  /**
   * The program and its leading arguments, instead of `deno run <flags> main.ts`; e.g.
   * `[codexBin, "exec-server"]` to run the reference. `--listen …` and `args` follow.
   */
  command?: readonly string[];
  /**
   * Environment of the server. Replaces the environment entirely.
   *
   * @default {defaultServerEnv()}
   */
  env?: Record<string, string>;
  /**
   * Working directory of the server.
   *
   * @default {"/tmp"}
   */
  cwd?: string;
  /**
   * stdio mode: leave the server's stdout to the test (`child.stdout`) instead
   * of a {@linkcode StdioClient}, e.g. to stop reading it.
   *
   * @default {false}
   */
  manualStdout?: boolean;
}

/**
 * The test runner's Deno cache, for a server or machine whose `HOME` is not the runner's: the
 * npm packages the server loads on first use are there (the test run has fetched them).
 */
export function runnerDenoDir(): string {
  const home = Deno.env.get("HOME") ?? "/root";
  return Deno.env.get("DENO_DIR") ?? `${Deno.env.get("XDG_CACHE_HOME") ?? `${home}/.cache`}/deno`;
}

/** The environment servers start with: the test runner's PATH and HOME, and a UTF-8 locale. */
export function defaultServerEnv(): Record<string, string> {
  return {
    PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    LANG: "C.UTF-8",
  };
}

/**
 * Reads a child's stdout up to its first line (the URL a WebSocket server
 * prints, a client's ready line) and keeps draining the rest in `rest`.
 * Resolves `line` with `undefined` when stdout ended first.
 */
export async function firstLine(
  stdout: ReadableStream<Uint8Array>,
): Promise<{ line: string | undefined; rest: Promise<void> }> {
  const lines = stdout.pipeThrough(new LineSplitStream()).getReader();
  const first = await lines.read();
  const rest = (async () => {
    if (first.done) return;
    while (!(await lines.read()).done) { /* nothing else is expected on stdout */ }
  })();
  return { line: typeof first.value === "string" ? first.value.trim() : undefined, rest };
}

/** Collects messages and lets tests wait for them. */
export class MessageLog {
  /** Everything received so far, in arrival order. */
  readonly received: Received[] = [];
  #eof = false;
  #waiters = new Set<() => void>();
  #start = performance.now();

  /** True once the peer closed its side. */
  get eof(): boolean {
    return this.#eof;
  }

  /** Records one message. */
  push(text: string): void {
    let msg: Json;
    try {
      msg = decodeJson(text) as Json;
    } catch (err) {
      msg = { unparsable: text, error: String(err) };
    }
    this.received.push({ text, msg, at: Math.round(performance.now() - this.#start) });
    this.#notify();
  }

  /** Records the end of the stream. */
  end(): void {
    this.#eof = true;
    this.#notify();
  }

  #notify(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /**
   * Waits until `predicate` returns a value other than `undefined`/`false`
   * (re-evaluated on every new message and at EOF); throws after `timeoutMs`
   * with a dump of what was received.
   */
  async waitUntil<T>(
    predicate: () => T | undefined | false,
    what: string,
    timeoutMs = 15_000,
  ): Promise<T> {
    const first = predicate();
    if (first !== undefined && first !== false) return first;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let wake!: () => void;
    try {
      return await new Promise<T>((resolve, reject) => {
        wake = () => {
          try {
            const value = predicate();
            if (value !== undefined && value !== false) resolve(value);
          } catch (err) {
            reject(err);
          }
        };
        this.#waiters.add(wake);
        timer = setTimeout(() => {
          reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}\n${this.dump()}`));
        }, timeoutMs);
      });
    } finally {
      this.#waiters.delete(wake);
      clearTimeout(timer);
    }
  }

  /** Waits for a message matching `match` (searching from index `from`). */
  waitFor(match: (msg: Json) => boolean, what: string, timeoutMs?: number): Promise<Json> {
    return this.waitUntil(() => this.received.find((r) => match(r.msg))?.msg, what, timeoutMs);
  }

  /** Waits for the response (result or error) with this id. */
  response(id: unknown, timeoutMs?: number): Promise<Json> {
    return this.waitFor(
      (m) => !("method" in m) && m.id === id,
      `the response to id ${String(id)}`,
      timeoutMs,
    );
  }

  /** Waits for the end of the stream. */
  async waitEof(timeoutMs?: number): Promise<void> {
    await this.waitUntil(() => this.#eof, "EOF", timeoutMs);
  }

  /** Notifications received so far, optionally of one method. */
  notifications(method?: string): Json[] {
    return this.received.map((r) => r.msg).filter((m) =>
      typeof m.method === "string" && !("id" in m) && (method === undefined || m.method === method)
    );
  }

  /** Notifications of one process, in arrival order. */
  processEvents(processId: string): Json[] {
    return this.notifications().filter((m) =>
      String(m.method).startsWith("process/") &&
      (m.params as { processId?: unknown }).processId === processId
    );
  }

  /** Waits for `process/closed` of a process and returns all its notifications. */
  async processClosed(processId: string, timeoutMs?: number): Promise<Json[]> {
    await this.waitFor(
      (m) =>
        m.method === "process/closed" &&
        (m.params as { processId?: unknown }).processId === processId,
      `process/closed of ${processId}`,
      timeoutMs,
    );
    return this.processEvents(processId);
  }

  /** The concatenated output bytes of one process and stream, from notifications. */
  output(processId: string, stream = "stdout"): Uint8Array {
    const parts = this.processEvents(processId)
      .filter((m) => m.method === "process/output")
      .map((m) => m.params as { stream: string; chunk: string })
      .filter((p) => p.stream === stream)
      .map((p) => Uint8Array.fromBase64(p.chunk));
    return concat(parts);
  }

  /** The concatenated output of one process and stream as text. */
  outputText(processId: string, stream = "stdout"): string {
    return new TextDecoder().decode(this.output(processId, stream));
  }

  /** A readable dump of the last messages, for failure messages. */
  dump(last = 40): string {
    const lines = this.received.slice(-last).map((r) => `  [${r.at}ms] ${r.text.slice(0, 400)}`);
    return `received ${this.received.length} messages${this.#eof ? " + EOF" : ""}:\n${
      lines.join("\n")
    }`;
  }
}

/** Concatenates byte arrays. */
export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A protocol client over some transport: send text, read the {@linkcode MessageLog}. */
export interface ProtocolClient extends AsyncDisposable {
  /** Everything the server sent. */
  readonly log: MessageLog;
  /** Sends one message's raw text (a line on stdio, a text frame on ws). */
  sendRaw(text: string): Promise<void>;
  /** Sends a message object (bigints keep their digits). */
  send(msg: unknown): Promise<void>;
  /** Sends a request with this id and waits for its response. */
  request(id: unknown, method: string, params?: unknown, timeoutMs?: number): Promise<Json>;
  /** Closes the client's side (stdin EOF or WebSocket close). */
  close(): Promise<void>;
}

abstract class BaseClient implements ProtocolClient {
  readonly log: MessageLog = new MessageLog();
  abstract sendRaw(text: string): Promise<void>;
  abstract close(): Promise<void>;

  send(msg: unknown): Promise<void> {
    return this.sendRaw(toJson(msg));
  }

  async request(id: unknown, method: string, params?: unknown, timeoutMs?: number): Promise<Json> {
    const before = this.log.received.length;
    await this.send(params === undefined ? { id, method } : { id, method, params });
    return await this.log.waitUntil(
      () =>
        this.log.received.slice(before).find((r) => !("method" in r.msg) && r.msg.id === id)?.msg,
      `the response to ${method} id ${String(id)}`,
      timeoutMs,
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** A running server process (`main.ts`). */
export class ServerProcess implements AsyncDisposable {
  /** The child process. */
  readonly child: Deno.ChildProcess;
  /** `stdio` or the printed `ws://` URL. */
  readonly url: string;
  /** Resolves with everything the server wrote to stderr once it exits. */
  readonly stderr: Promise<string>;
  /** Resolves with the exit status. */
  readonly status: Promise<Deno.CommandStatus>;
  /** In stdio mode: the protocol client on the server's stdin/stdout. */
  readonly stdio: StdioClient | undefined;
  #stdoutDone: Promise<void>;
  #stopped: Promise<Deno.CommandStatus> | undefined;

  private constructor(
    child: Deno.ChildProcess,
    url: string,
    stdio: StdioClient | undefined,
    stdoutDone: Promise<void>,
    stderr: Promise<string>,
  ) {
    this.child = child;
    this.url = url;
    this.stdio = stdio;
    this.status = child.status;
    this.#stdoutDone = stdoutDone;
    this.stderr = stderr;
  }

  /** The server's pid. */
  get pid(): number {
    return this.child.pid;
  }

  /** The port of a WebSocket server (0 in stdio mode). */
  get port(): number {
    return this.url.startsWith("ws") ? Number(new URL(this.url).port) : 0;
  }

  /** Starts `main.ts` with the given transport, permissions and flags. */
  static async start(options: StartServerOptions = {}): Promise<ServerProcess> {
    const listen = options.listen ?? "stdio";
    const [program, ...leading] = options.command ?? [
      Deno.execPath(),
      "run",
      ...(options.denoFlags ?? []),
      ...(options.permissions ?? SERVER_PERMISSIONS),
      MAIN_TS,
    ];
    const child = new Deno.Command(program!, {
      args: [
        ...leading,
        "--listen",
        listen === "ws" ? "ws://127.0.0.1:0" : listen,
        ...(options.args ?? []),
      ],
      cwd: options.cwd ?? "/tmp",
      env: options.env ?? defaultServerEnv(),
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text().catch(() => "");
    if (listen === "stdio" && options.manualStdout) {
      return new ServerProcess(child, "stdio", undefined, Promise.resolve(), stderr);
    }
    if (listen === "stdio") {
      const stdio = new StdioClient(child);
      return new ServerProcess(child, "stdio", stdio, stdio.done, stderr);
    }
    // WebSocket: the first stdout line is the URL.
    const { line, rest } = await firstLine(child.stdout);
    if (line === undefined) {
      child.kill("SIGKILL");
      await child.status;
      throw new Error(`server printed no URL; stderr:\n${await stderr}`);
    }
    return new ServerProcess(child, line, undefined, rest, stderr);
  }

  /** Connects a new WebSocket client (ws mode only). */
  connect(): Promise<WsClient> {
    return WsClient.connect(this.url);
  }

  /** Sends a signal to the server process (ignored when it is gone). */
  kill(signal: Deno.Signal = "SIGTERM"): void {
    try {
      this.child.kill(signal);
    } catch {
      // Already gone.
    }
  }

  /**
   * Stops the server: stdin EOF (stdio) or stdin EOF and SIGTERM (ws), then
   * SIGKILL after 5 s; collects its status, stdout and stderr.
   */
  stop(): Promise<Deno.CommandStatus> {
    return this.#stopped ??= this.#stop();
  }

  async #stop(): Promise<Deno.CommandStatus> {
    if (this.stdio) await this.stdio.close();
    else {
      await this.child.stdin.close().catch(() => {});
      if (this.url !== "stdio") this.kill("SIGTERM");
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const status = await Promise.race([
      this.status,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 5000))),
    ]);
    clearTimeout(timer);
    if (status === undefined) this.kill("SIGKILL");
    const final = await this.status;
    await this.#stdoutDone;
    await this.stderr;
    return final;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** The stdio protocol client of a {@linkcode ServerProcess}. */
export class StdioClient extends BaseClient {
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #encoder = new TextEncoder();
  #closed = false;
  /** Resolves when stdout reached EOF. */
  readonly done: Promise<void>;

  /** Wraps a server's input and output: a child's pipes, or in-memory streams. */
  constructor(pipes: { stdin: WritableStream<Uint8Array>; stdout: ReadableStream<Uint8Array> }) {
    super();
    this.#writer = pipes.stdin.getWriter();
    this.done = (async () => {
      try {
        for await (const line of pipes.stdout.pipeThrough(new LineSplitStream())) {
          if (typeof line === "string") this.log.push(line);
          else this.log.push(JSON.stringify({ transportFault: line.fault }));
        }
      } catch {
        // Pipe error: treat as EOF.
      }
      this.log.end();
    })();
  }

  /** Writes `text` and a newline to the server's stdin. */
  async sendRaw(text: string): Promise<void> {
    await this.#writer.write(this.#encoder.encode(`${text}\n`));
  }

  /** Writes raw bytes to the server's stdin. */
  async sendBytes(bytes: Uint8Array): Promise<void> {
    await this.#writer.write(bytes);
  }

  /** Closes the server's stdin (the server then ends the session and exits). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#writer.close();
    } catch {
      // The server already exited.
    }
  }
}

/** A WebSocket protocol client. */
export class WsClient extends BaseClient {
  /** The socket. */
  readonly socket: WebSocket;
  #closed: Promise<void>;

  private constructor(socket: WebSocket) {
    super();
    this.socket = socket;
    socket.binaryType = "arraybuffer";
    socket.onmessage = (event) => {
      this.log.push(
        typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data),
      );
    };
    this.#closed = new Promise((resolve) => {
      socket.addEventListener("close", () => {
        this.log.end();
        resolve();
      });
    });
  }

  /** Opens a connection to `url`, offering `protocols` (e.g. the bearer-token subprotocol). */
  static async connect(url: string, protocols?: string[]): Promise<WsClient> {
    const socket = new WebSocket(url, protocols);
    const client = new WsClient(socket);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", () => reject(new Error(`cannot connect to ${url}`)), {
        once: true,
      });
    });
    return client;
  }

  /** Sends one text frame. */
  sendRaw(text: string): Promise<void> {
    this.socket.send(text);
    return Promise.resolve();
  }

  /** Sends one binary frame. */
  sendBinary(bytes: Uint8Array): void {
    this.socket.send(bytes);
  }

  /** Closes the socket and waits until it is closed. */
  async close(): Promise<void> {
    if (this.socket.readyState === WebSocket.CLOSED) return await this.#closed;
    this.socket.close();
    await this.#closed;
  }
}

/** Sends `initialize` + `initialized` and returns the session id. */
export async function handshake(
  client: ProtocolClient,
  options: { id?: unknown; resumeSessionId?: string; clientName?: string } = {},
): Promise<string> {
  const response = await client.request(options.id ?? 0, "initialize", {
    clientName: options.clientName ?? "harness",
    ...(options.resumeSessionId ? { resumeSessionId: options.resumeSessionId } : {}),
  });
  if (!response.result) throw new Error(`initialize failed: ${toJson(response)}`);
  await client.send({ method: "initialized", params: {} });
  return (response.result as { sessionId: string }).sessionId;
}

/** Resolves after `ms` milliseconds (for letting a recorded intent happen, never for assertions). */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface PsEntry {
  pid: number;
  state: string;
  args: string;
}

/**
 * Lists processes with `ps` (reading `/proc` directly would need `--allow-all`;
 * the test task only grants `--allow-run`).
 */
function ps(args: string[]): PsEntry[] {
  const { stdout } = new Deno.Command("ps", { args, stdout: "piped", stderr: "null" })
    .outputSync();
  const out: PsEntry[] = [];
  for (const line of new TextDecoder().decode(stdout).split("\n")) {
    const match = /^\s*(\d+)\s+(\S+)\s?(.*)$/.exec(line);
    if (match) out.push({ pid: Number(match[1]), state: match[2]!, args: match[3]! });
  }
  return out;
}

/** True when a process with this pid exists and is not a zombie (`Z` counts as dead). */
export function pidAlive(pid: number): boolean {
  const [entry] = ps(["-o", "pid=,stat=,args=", "-p", String(pid)]);
  return entry !== undefined && !entry.state.startsWith("Z") && !entry.state.startsWith("X");
}

/** Pids of live (non-zombie) processes whose command line contains `needle`. */
export function pidsMatching(needle: string | RegExp): number[] {
  return ps(["-eo", "pid=,stat=,args="])
    .filter((e) => !e.state.startsWith("Z") && !e.state.startsWith("X"))
    .filter((e) => typeof needle === "string" ? e.args.includes(needle) : needle.test(e.args))
    .filter((e) => !e.args.startsWith("ps "))
    .map((e) => e.pid);
}

/** Polls `condition` every 20 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function eventually(condition: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await delay(20);
  }
  return condition();
}

/** A stdio server process with its client. */
export type StdioServer = ServerProcess & { stdio: StdioClient };

/** Starts a stdio server and returns it with its client. */
export async function startStdio(
  options: Omit<StartServerOptions, "listen" | "manualStdout"> = {},
): Promise<StdioServer> {
  return await ServerProcess.start({ ...options, listen: "stdio" }) as StdioServer;
}
