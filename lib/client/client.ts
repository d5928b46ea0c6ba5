/**
 * A typed client for an exec-server, over WebSocket (`ws://`, `wss://`) or
 * over the stdio pipes of a server it spawns.
 *
 * Every client → server request of the method table is available, typed, as
 * `client.methods["<wire name>"](params)` (built by iterating
 * {@linkcode METHODS}, not from a hand-written list) or as
 * `client.request("<wire name>", params)`; every server → client
 * notification can be subscribed to with `client.on("<wire name>", fn)`.
 *
 * @module
 */

import { errorKind } from "../protocol/errors.ts";
import {
  type EnvironmentInfo,
  type MethodName,
  METHODS,
  type Methods,
  type MethodSpec,
  type NotificationSpec,
  type ParamsOf,
  type ResultOf,
} from "../protocol/methods.ts";
import { ClosedError, RemoteError } from "../rpc/connection.ts";
import { endpointOf, type ServerTarget } from "./dial.ts";
import { exec, type ExecOptions, type ExecResult } from "./exec.ts";
import { RemoteFs } from "./fs.ts";
import { processEnvironment } from "./environment.ts";
import { toPathUri } from "./paths.ts";
import { type ProcessHandle, type ProcessHost, TrackedProcess } from "./process_handle.ts";
import { SessionLink, type SessionLinkOptions } from "./session_link.ts";
import type {
  RequestArgs,
  RequestMethods,
  RequestOptions,
  SessionRequestName,
  StartProcessParams,
} from "./request_types.ts";
import { parseResult, toWire } from "./wire.ts";

/**
 * Server → client notifications: every notification of the method table
 * except `initialized`, the only one a client sends (docs/protocol.md §6).
 */
export type NotificationName = Exclude<
  { [K in MethodName]: Methods[K] extends NotificationSpec<unknown> ? K : never }[MethodName],
  "initialized"
>;

/** A listener for a server → client notification. */
export type NotificationListener<N extends NotificationName> = (params: ParamsOf<N>) => void;

/** Options for {@linkcode connect} and {@linkcode createClient}. */
export interface ConnectOptions extends SessionLinkOptions {
  /**
   * Told when the connection is lost while processes are live and the
   * client starts reconnecting (`"reconnecting"`), and when it has resumed
   * the session (`"resumed"`). If reconnecting fails, the live handles fail.
   */
  onConnectionChange?: (change: "reconnecting" | "resumed") => void;
  /**
   * Output bytes a process handle buffers for a slow consumer before it
   * leaves output on the server and reads it back when the consumer catches up.
   *
   * @default {4194304}
   */
  maxBufferedBytes?: number;
}

/** Options for {@linkcode ExecClient.attachProcess}. */
export interface AttachProcessOptions {
  /**
   * Output with a seq up to this one is skipped.
   *
   * @default {0}
   */
  afterSeq?: number;
  /**
   * The `output` mode the process was started with: with `"block"` the
   * handle tells the server (by reading) how far it has taken the output, so
   * the server can let the process write more.
   *
   * @default {"drop"}
   */
  output?: "drop" | "block";
}

const CLIENT_CLOSED = "Client is closed";

/**
 * Opens a client and waits until it has connected and initialized.
 *
 * `target` is a `ws://`/`wss://` URL, a {@linkcode StdioCommand} to spawn
 * a server and talk to it over its pipes, or a `StreamTarget`: the
 * two ends of a pair of byte streams to a server in the same process.
 *
 * @example Connect over stdio to a server it spawns
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * // `exec-server --listen stdio` of the same version, run by Deno (or any installed exec-server).
 * const cli = import.meta.resolve("@exec-server/exec-server/cli");
 * await using client = await connect({
 *   command: Deno.execPath(),
 *   args: ["run", "-A", cli, "--listen", "stdio"],
 * });
 * console.log(client.environmentInfo.platformOs); // "linux"
 * console.log(await client.methods["environment/status"]()); // { status: "ready" }
 * ```
 *
 * @example Connect over WebSocket
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * import { serveWebSocket } from "@exec-server/exec-server/server";
 * const server = await serveWebSocket(); // normally elsewhere, e.g. `exec-server --listen ws://…`
 * try {
 *   // A server started with --ws-auth wants a token: connect(url, { token }).
 *   await using client = await connect(server.url);
 *   const { dataBase64 } = await client.methods["fs/readFile"]({ path: "file:///etc/hostname" });
 *   console.log(new TextDecoder().decode(Uint8Array.fromBase64(dataBase64)));
 * } finally {
 *   await server.shutdown();
 * }
 * ```
 *
 * @example Connect to a server in the same process, over a pair of streams
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * import { serveStdio } from "@exec-server/exec-server/server";
 * const toServer = new TransformStream<Uint8Array, Uint8Array>();
 * const fromServer = new TransformStream<Uint8Array, Uint8Array>();
 * const server = serveStdio({}, toServer.readable, fromServer.writable);
 * const client = await connect({ readable: fromServer.readable, writable: toServer.writable });
 * console.log(await client.methods["environment/status"]()); // { status: "ready" }
 * await client.close(); // The server sees its input end: the session and its processes end.
 * await server.finished;
 * ```
 *
 * @param target The server URL or command.
 * @param options Token, names and reconnection.
 */
export async function connect(
  target: ServerTarget,
  options: ConnectOptions = {},
): Promise<ExecClient> {
  const client = new ExecClient(target, options);
  try {
    await client.ready();
  } catch (err) {
    await client.close();
    throw err;
  }
  return client;
}

/**
 * Creates a client without connecting: it connects on its first call (or
 * {@linkcode ExecClient.ready}).
 *
 * @example A lazy client does no I/O until used
 * ```ts
 * import { createClient } from "@exec-server/exec-server";
 * const client = createClient("ws://127.0.0.1:1");
 * console.log(client.connected); // false
 * await client.close();
 * ```
 *
 * @param target The server URL or command.
 * @param options Token, names and reconnection.
 */
export function createClient(
  target: ServerTarget,
  options: ConnectOptions = {},
): ExecClient {
  return new ExecClient(target, options);
}

/**
 * A connection to an exec-server that initializes itself, reconnects and
 * resumes its session after a WebSocket outage, and tracks processes.
 *
 * Errors: a lost connection fails pending calls with `ClosedError` (a call
 * made after {@linkcode ExecClient.close} fails at once with it), timeouts
 * with `TimedOutError`, too many calls in flight with `AtCapacityError`, an
 * answer larger than `maxMessageBytes` with `MessageTooLargeError`, and
 * error responses with `RemoteError` (carrying `code`). Connecting fails with
 * {@linkcode ConnectError}.
 *
 * @example Typed requests and subscriptions
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * import { serveWebSocket } from "@exec-server/exec-server/server";
 * const server = await serveWebSocket();
 * try {
 *   await using client = await connect(server.url);
 *   const off = client.on("process/exited", ({ processId, exitCode }) => {
 *     console.log(processId, "exited with", exitCode);
 *   });
 *   const proc = await client.startProcess({ argv: ["/bin/sh", "-c", "exit 3"] });
 *   console.log(await proc.exited); // 3
 *   off();
 * } finally {
 *   await server.shutdown();
 * }
 * ```
 */
export class ExecClient {
  /**
   * One function per client → server request, keyed by wire name, e.g.
   * `client.methods["fs/readDirectory"]({ path: "file:///tmp" })`.
   */
  readonly methods: RequestMethods;
  /**
   * The server's files with Deno's names and shapes: `client.fs.readTextFile("/etc/hostname")`.
   */
  readonly fs: RemoteFs;
  #link: SessionLink;
  #options: ConnectOptions;
  #listeners = new Map<string, Set<(params: unknown) => void>>();
  #processes = new Map<string, Set<TrackedProcess>>();
  #host: ProcessHost;

  /**
   * Creates a client; use {@linkcode connect} or {@linkcode createClient}.
   *
   * @param target A `ws://`/`wss://` URL or a server command.
   * @param options Token, names and reconnection.
   */
  constructor(target: ServerTarget, options: ConnectOptions = {}) {
    this.#options = options;
    this.#link = new SessionLink(endpointOf(target), options, {
      notification: (method, params) => this.#onNotification(method, params),
      disconnected: () => {
        // Live handles are waiting for output: reconnect now rather than on the next call.
        if (this.#processes.size === 0) return;
        options.onConnectionChange?.("reconnecting");
        this.#link.connection().catch(() => {});
      },
      resumed: () => {
        for (const handle of this.#handles()) handle.resync();
        options.onConnectionChange?.("resumed");
      },
      lost: (error) => {
        for (const handle of this.#handles()) handle.fail(error);
      },
    });
    this.methods = buildMethods(this);
    this.fs = new RemoteFs(this, options.maxMessageBytes);
    const call = (method: string, params: unknown, cleanup = false) =>
      this.#link.call(method, params, { retry: true, cleanup });
    this.#host = {
      read: async (processId, afterSeq, maxBytes) =>
        parseResult("process/read", await call("process/read", { processId, afterSeq, maxBytes })),
      write: async (processId, chunk, writeId) =>
        parseResult(
          "process/write",
          await call("process/write", { processId, chunk: chunk.toBase64(), writeId }),
        ),
      closeStdin: async (processId, writeId) => {
        await this.#require("processStdinClose", "close stdin");
        return parseResult(
          "process/write",
          await call("process/write", { processId, chunk: "", writeId, closeStdin: true }),
        );
      },
      signal: async (processId, signal) => {
        if (signal !== "interrupt") await this.#require("processSignals", `send ${signal}`);
        await call("process/signal", { processId, signal });
      },
      terminate: async (processId, graceMs) => {
        if (graceMs !== undefined) {
          await this.#require("processSignals", "terminate with a grace period");
        }
        return parseResult(
          "process/terminate",
          await call("process/terminate", { processId, graceMs }, true),
        ).running;
      },
      resize: async (processId, rows, cols) => {
        await this.#require("processResize", "resize a terminal");
        await call("process/resize", { processId, rows, cols });
      },
      release: (handle) => this.#release(handle),
    };
  }

  /** True while a connection is open and initialized. */
  get connected(): boolean {
    return this.#link.connected;
  }

  /** The session id, once connected. */
  get sessionId(): string | undefined {
    return this.#link.sessionId;
  }

  /** The server's `environmentInfo` from the latest `initialize`; throws before the first connect. */
  get environmentInfo(): EnvironmentInfo {
    const info = this.#link.environmentInfo;
    if (!info) throw new Error("Cannot read environmentInfo: the client has not connected yet");
    return info;
  }

  /**
   * The protocol extensions the server granted at the latest `initialize`
   * (empty before the first connect, and with a server that has none).
   */
  get extensions(): ReadonlySet<string> {
    return this.#link.extensions;
  }

  /** Connects (if not connected) and initializes; concurrent callers share one attempt. */
  async ready(): Promise<void> {
    await this.#link.connection();
  }

  /**
   * Sends a client → server request, typed by the method table. Byte params
   * (`Uint8Array`) are sent as base64; the result is validated.
   *
   * @param method The wire name.
   * @param args The params (optional for methods without params) and options.
   */
  async request<M extends SessionRequestName>(
    method: M,
    ...args: RequestArgs<M>
  ): Promise<ResultOf<M>> {
    const [params, options = {}] = args as [unknown, RequestOptions | undefined];
    const raw = await this.#link.call(method, toWire(params ?? undefined), options);
    return parseResult(method, raw);
  }

  /**
   * Subscribes to a server → client notification; returns the unsubscribe
   * function. Params are validated against the method table first.
   *
   * @param name The notification's wire name.
   * @param listener Called with the params.
   */
  on<N extends NotificationName>(name: N, listener: NotificationListener<N>): () => void {
    let set = this.#listeners.get(name);
    if (!set) this.#listeners.set(name, set = new Set());
    const entry = listener as (params: unknown) => void;
    set.add(entry);
    return () => {
      set.delete(entry);
    };
  }

  /**
   * Starts a process and returns its handle. The handle is registered before
   * the request is sent, so no output is missed.
   *
   * @param params The `process/start` params; `processId`, `cwd`, `env` and `tty` have defaults.
   */
  async startProcess(params: StartProcessParams): Promise<ProcessHandle> {
    if (this.#link.closed) throw new ClosedError(CLIENT_CLOSED);
    const processId = params.processId ?? crypto.randomUUID();
    const block = params.output === "block";
    const handle = new TrackedProcess(processId, this.#host, {
      maxBufferedBytes: this.#options.maxBufferedBytes,
      acknowledge: block,
    });
    this.#track(handle);
    try {
      if (params.size !== undefined) {
        await this.#require("processResize", "start a process with a terminal size");
      }
      if (block) {
        await this.#require("processLosslessOutput", 'start a process with output "block"');
      }
      let cwd = params.cwd === undefined ? undefined : toPathUri(params.cwd);
      if (cwd === undefined) {
        await this.ready();
        cwd = this.environmentInfo.cwd ?? this.environmentInfo.tempDir;
      }
      const { inheritEnv: _, ...rest } = params;
      const wire = toWire({
        ...rest,
        processId,
        cwd,
        ...processEnvironment(params),
        tty: params.tty ?? false,
      });
      let retried = false;
      while (true) {
        try {
          parseResult("process/start", await this.#link.call("process/start", wire));
          break;
        } catch (err) {
          if (
            retried && err instanceof RemoteError && errorKind(err.data) === "processExists"
          ) {
            // The first attempt reached the server before the connection was lost.
            handle.resync();
            break;
          }
          if (!(err instanceof ClosedError) || !this.#link.canReconnect || this.#link.closed) {
            throw err;
          }
          retried = true;
        }
      }
    } catch (err) {
      this.#release(handle);
      throw err;
    }
    return handle;
  }

  /**
   * Runs a command to completion and resolves with its exit code and output
   * (text by default; `{ encoding: "bytes" }` for `Uint8Array`s). A non-zero
   * exit code resolves too. The environment follows the client's rule (the
   * server's environment minus `*KEY*`/`*SECRET*`/`*TOKEN*`, then `env`).
   *
   * Rejects with {@linkcode ExecTimeoutError} after `timeoutMs`, with the
   * `signal`'s reason when aborted (both terminate the process group first),
   * with {@linkcode ExecOutputLimitError} beyond `maxOutputBytes`, and with
   * the client's errors (`RemoteError` with `data.kind` `spawnNotFound`, …)
   * when it cannot start.
   *
   * @example Run a command with input, a working directory and a timeout
   * ```ts
   * import { connect } from "@exec-server/exec-server";
   * import { serveWebSocket } from "@exec-server/exec-server/server";
   * const server = await serveWebSocket();
   * try {
   *   await using client = await connect(server.url);
   *   const { exitCode, stdout } = await client.exec(["sh", "-c", "pwd; tr a-z A-Z"], {
   *     cwd: "/tmp",
   *     stdin: "hello\n",
   *     timeoutMs: 10_000,
   *   });
   *   console.log(exitCode, stdout); // 0 "/tmp\nHELLO\n"
   * } finally {
   *   await server.shutdown();
   * }
   * ```
   *
   * @param argv The program (searched in the process's `PATH`) and its arguments.
   * @param options Input, working directory, environment, timeout, encoding.
   */
  exec(
    argv: readonly string[],
    options: ExecOptions & { encoding: "bytes" },
  ): Promise<ExecResult<Uint8Array>>;
  /**
   * Runs a command to completion; its output as text.
   *
   * @param argv The program and its arguments.
   * @param options Input, working directory, environment, timeout.
   */
  exec(argv: readonly string[], options?: ExecOptions & { encoding?: "text" }): Promise<ExecResult>;
  exec(
    argv: readonly string[],
    options: ExecOptions = {},
  ): Promise<ExecResult<string | Uint8Array>> {
    return exec(this, argv, options);
  }

  /**
   * Returns a handle for a process of this session that was started
   * elsewhere (e.g. by an earlier client whose session this one resumed). It
   * reads the retained output first, then follows notifications.
   *
   * @param processId The process id.
   * @param options Where in the output to start.
   */
  attachProcess(processId: string, options: AttachProcessOptions = {}): ProcessHandle {
    if (this.#link.closed) throw new ClosedError(CLIENT_CLOSED);
    const handle = new TrackedProcess(processId, this.#host, {
      afterSeq: options.afterSeq ?? 0,
      maxBufferedBytes: this.#options.maxBufferedBytes,
      catchUp: true,
      acknowledge: options.output === "block",
    });
    this.#track(handle);
    return handle;
  }

  /**
   * Closes the client: pending and later calls fail with `ClosedError`, live
   * process handles fail, and a spawned server is stopped (over stdio that
   * ends the session and kills its processes).
   */
  async close(): Promise<void> {
    if (!this.#link.closed) {
      const error = new ClosedError(CLIENT_CLOSED);
      const closing = this.#link.close();
      for (const handle of this.#handles()) handle.fail(error);
      await closing;
    }
    await this.#link.close();
  }

  /** Closes the client. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Fails unless the server granted `extension`. */
  async #require(extension: string, what: string): Promise<void> {
    await this.ready();
    if (!this.extensions.has(extension)) {
      throw new Error(
        `Cannot ${what}: the server did not grant the ${extension} extension (see environmentInfo.capabilities)`,
      );
    }
  }

  #handles(): TrackedProcess[] {
    return [...this.#processes.values()].flatMap((set) => [...set]);
  }

  #track(handle: TrackedProcess): void {
    let set = this.#processes.get(handle.processId);
    if (!set) this.#processes.set(handle.processId, set = new Set());
    set.add(handle);
  }

  #release(handle: TrackedProcess): void {
    const set = this.#processes.get(handle.processId);
    if (!set?.delete(handle)) return;
    if (set.size === 0) this.#processes.delete(handle.processId);
  }

  #onNotification(method: string, raw: unknown): void {
    if (!Object.hasOwn(METHODS, method)) return;
    const spec = (METHODS as Record<string, MethodSpec>)[method]!;
    if (spec.kind !== "notification" || spec.direction !== "serverToClient") return;
    let params: unknown;
    try {
      params = spec.params.parse(raw);
    } catch {
      return;
    }
    if (method === "process/output" || method === "process/exited" || method === "process/closed") {
      const processId = (params as { processId: string }).processId;
      const handles = this.#processes.get(processId);
      if (handles) {
        const event = { method, params } as Parameters<TrackedProcess["notify"]>[0];
        for (const handle of [...handles]) handle.notify(event);
      }
    }
    const listeners = this.#listeners.get(method);
    if (!listeners) return;
    for (const listener of [...listeners]) {
      try {
        listener(params);
      } catch (err) {
        reportError(err);
      }
    }
  }
}

function buildMethods(client: ExecClient): RequestMethods {
  const methods: Record<string, (params?: unknown, options?: RequestOptions) => Promise<unknown>> =
    {};
  for (const [name, spec] of Object.entries(METHODS) as [string, MethodSpec][]) {
    if (spec.kind !== "request" || spec.direction !== "clientToServer") continue;
    if (name === "initialize") continue;
    const method = name as SessionRequestName;
    methods[name] = (params, options) =>
      (client.request as (m: string, p: unknown, o?: RequestOptions) => Promise<unknown>)(
        method,
        params,
        options,
      );
  }
  return Object.freeze(methods) as unknown as RequestMethods;
}
