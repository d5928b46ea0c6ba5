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

import { ErrorCode } from "../protocol/errors.ts";
import {
  type ClientRequestName,
  type EnvironmentInfo,
  EXTENSIONS,
  type MethodName,
  METHODS,
  type Methods,
  type MethodSpec,
  type NotificationSpec,
  type ParamsOf,
  type ResultOf,
} from "../protocol/methods.ts";
import { ClosedError, Connection, RemoteError, TimedOutError } from "../rpc/connection.ts";
import { stdioTransport } from "../rpc/stdio_transport.ts";
import type { Transport } from "../rpc/transport.ts";
import { websocketTransport } from "../rpc/websocket_transport.ts";
import { ConnectError, SessionLostError } from "./errors.ts";
import { type ProcessHandle, type ProcessHost, TrackedProcess } from "./process_handle.ts";

/** Client → server requests callable on a connected client (`initialize` is the client's own). */
export type SessionRequestName = Exclude<ClientRequestName, "initialize">;

/** Options for one request. */
export interface RequestOptions {
  /** Fails the call with `TimedOutError` after this many ms. */
  timeoutMs?: number;
  /**
   * If the connection is lost before the answer, send the request again
   * once the client has reconnected. Only for idempotent requests.
   *
   * @default {false}
   */
  retry?: boolean;
}

/** The arguments of a request: params may be left out for methods without params. */
export type RequestArgs<M extends SessionRequestName> = null extends ParamsOf<M>
  ? [params?: ParamsOf<M> | null, options?: RequestOptions]
  : [params: ParamsOf<M>, options?: RequestOptions];

/** One typed function per client → server request, keyed by wire name. */
export type RequestMethods = {
  readonly [M in SessionRequestName]: (...args: RequestArgs<M>) => Promise<ResultOf<M>>;
};

/**
 * Server → client notifications: every notification of the method table
 * except `initialized`, the only one a client sends (spec §6).
 */
export type NotificationName = Exclude<
  { [K in MethodName]: Methods[K] extends NotificationSpec<unknown> ? K : never }[MethodName],
  "initialized"
>;

/** A listener for a server → client notification. */
export type NotificationListener<N extends NotificationName> = (params: ParamsOf<N>) => void;

/** A server command to spawn and talk to over its stdin and stdout (`--listen stdio`). */
export interface StdioCommand {
  /** The program, e.g. `exec-server` or `deno`. */
  command: string;
  /** Its arguments, e.g. `["--listen", "stdio"]`. */
  args?: string[];
  /** Working directory of the server process. */
  cwd?: string;
  /** Extra environment variables of the server process. */
  env?: Record<string, string>;
  /**
   * Where the server's stderr goes.
   *
   * @default {"inherit"}
   */
  stderr?: "inherit" | "null";
}

/** Options for {@linkcode connect} and {@linkcode createClient}. */
export interface ConnectOptions {
  /** Bearer token sent as `Authorization: Bearer <token>` on the WebSocket upgrade. */
  token?: string;
  /**
   * The `clientName` sent in `initialize`.
   *
   * @default {"exec-server-client"}
   */
  clientName?: string;
  /** Resume this (detached) session on the first connect instead of opening a new one. */
  resumeSessionId?: string;
  /**
   * Reconnect (WebSocket only) when the connection is lost: the next call, or
   * a live process handle, opens a new connection and resumes the session.
   *
   * @default {true}
   */
  reconnect?: boolean;
  /**
   * How long one reconnect attempt keeps retrying before it gives up.
   *
   * @default {30000}
   */
  reconnectTimeoutMs?: number;
  /**
   * Timeout of opening a connection and of its `initialize` call.
   *
   * @default {10000}
   */
  connectTimeoutMs?: number;
  /**
   * Output bytes a process handle buffers for a slow consumer before it
   * leaves output on the server and reads it back when the consumer catches up.
   *
   * @default {4194304}
   */
  maxBufferedBytes?: number;
  /**
   * The protocol extensions to opt in to (sent in `initialize`); the server
   * grants those it has, see {@linkcode ExecClient.extensions}. `[]` asks
   * for none: the server then behaves exactly like the reference.
   *
   * @default {every extension this client knows}
   */
  extensions?: readonly string[];
}

/**
 * Params of {@linkcode ExecClient.startProcess}: the `process/start` params
 * with defaults for the required members.
 */
export type StartProcessParams =
  & Omit<ParamsOf<"process/start">, "processId" | "cwd" | "env" | "tty">
  & {
    /** The session-scoped id; a random UUID by default. */
    processId?: string;
    /** Working directory (`file:` URI); the server's cwd (or temp dir) by default. */
    cwd?: string;
    /** The child's environment (exactly this, unless `envPolicy` is set); `{}` by default. */
    env?: Record<string, string>;
    /** Run on a pseudo-terminal; `false` by default. */
    tty?: boolean;
  };

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
const CONNECTION_LOST = "Connection to the exec-server was lost";
const SESSION_ATTACHED = -32010;

interface Dialed {
  transport: Transport;
  dispose(): Promise<void>;
}

/**
 * Opens a client and waits until it has connected and initialized.
 *
 * `target` is a `ws://`/`wss://` URL, or a {@linkcode StdioCommand} to spawn
 * a server and talk to it over its pipes.
 *
 * @example Connect over stdio to a spawned server
 * ```ts ignore
 * import { connect } from "./client.ts";
 * await using client = await connect({
 *   command: "deno",
 *   args: ["run", "-A", "main.ts", "--listen", "stdio"],
 * });
 * console.log(client.environmentInfo.platformOs);
 * console.log(await client.methods["environment/status"]());
 * ```
 *
 * @example Connect over WebSocket with a token
 * ```ts ignore
 * import { connect } from "./client.ts";
 * await using client = await connect("ws://127.0.0.1:8765", { token: "secret" });
 * const { dataBase64 } = await client.methods["fs/readFile"]({ path: "file:///etc/hostname" });
 * console.log(new TextDecoder().decode(Uint8Array.fromBase64(dataBase64)));
 * ```
 *
 * @param target The server URL or command.
 * @param options Token, names and reconnection.
 */
export async function connect(
  target: string | URL | StdioCommand,
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
 * import { createClient } from "./client.ts";
 * const client = createClient("ws://127.0.0.1:1");
 * console.log(client.connected); // false
 * await client.close();
 * ```
 *
 * @param target The server URL or command.
 * @param options Token, names and reconnection.
 */
export function createClient(
  target: string | URL | StdioCommand,
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
 * with `TimedOutError`, too many calls in flight with `AtCapacityError`, and
 * error responses with `RemoteError` (carrying `code`). Connecting fails with
 * {@linkcode ConnectError}.
 *
 * @example Typed requests and subscriptions
 * ```ts ignore
 * import { connect } from "./client.ts";
 * await using client = await connect("ws://127.0.0.1:8765");
 * const off = client.on("process/exited", ({ processId, exitCode }) => {
 *   console.log(processId, "exited with", exitCode);
 * });
 * const proc = await client.startProcess({ argv: ["/bin/sh", "-c", "exit 3"] });
 * console.log(await proc.exited); // 3
 * off();
 * ```
 */
export class ExecClient {
  /**
   * One function per client → server request, keyed by wire name, e.g.
   * `client.methods["fs/readDirectory"]({ path: "file:///tmp" })`.
   */
  readonly methods: RequestMethods;
  #target: string | StdioCommand;
  #label: string;
  #options: ConnectOptions;
  #canReconnect: boolean;
  #conn: Connection | undefined;
  #opening: Connection | undefined;
  #dispose: (() => Promise<void>) | undefined;
  #disposing = new Set<Promise<void>>();
  #connecting: Promise<Connection> | undefined;
  #everConnected = false;
  #closed = false;
  #sessionId: string | undefined;
  #environmentInfo: EnvironmentInfo | undefined;
  #extensions: ReadonlySet<string> = new Set();
  #listeners = new Map<string, Set<(params: unknown) => void>>();
  #processes = new Map<string, Set<TrackedProcess>>();
  #sleep: { timer: ReturnType<typeof setTimeout>; resolve(): void } | undefined;
  #abort = new AbortController();
  #host: ProcessHost;

  /**
   * Creates a client; use {@linkcode connect} or {@linkcode createClient}.
   *
   * @param target A `ws://`/`wss://` URL or a server command.
   * @param options Token, names and reconnection.
   */
  constructor(target: string | URL | StdioCommand, options: ConnectOptions = {}) {
    if (typeof target === "string" || target instanceof URL) {
      const url = new URL(target);
      if (url.protocol !== "ws:" && url.protocol !== "wss:") {
        throw new TypeError(`Cannot connect to "${url.href}": expected a ws:// or wss:// URL`);
      }
      this.#target = url.href;
      this.#label = url.href;
      this.#canReconnect = options.reconnect ?? true;
    } else {
      this.#target = target;
      this.#label = [target.command, ...(target.args ?? [])].join(" ");
      this.#canReconnect = false;
    }
    this.#options = options;
    this.#sessionId = options.resumeSessionId;
    this.methods = buildMethods(this);
    this.#host = {
      read: async (processId, afterSeq, maxBytes) =>
        parseResult(
          "process/read",
          await this.#call("process/read", { processId, afterSeq, maxBytes }, { retry: true }),
        ),
      write: async (processId, chunk, writeId) =>
        parseResult(
          "process/write",
          await this.#call("process/write", { processId, chunk: chunk.toBase64(), writeId }, {
            retry: true,
          }),
        ),
      closeStdin: async (processId, writeId) => {
        await this.#require("processStdinClose", "close stdin");
        return parseResult(
          "process/write",
          await this.#call("process/write", { processId, chunk: "", writeId, closeStdin: true }, {
            retry: true,
          }),
        );
      },
      signal: async (processId, signal) => {
        if (signal !== "interrupt") await this.#require("processSignals", `send ${signal}`);
        await this.#call("process/signal", { processId, signal }, { retry: true });
      },
      terminate: async (processId, graceMs) => {
        if (graceMs !== undefined) {
          await this.#require("processSignals", "terminate with a grace period");
        }
        return parseResult(
          "process/terminate",
          await this.#call("process/terminate", { processId, graceMs }, {
            retry: true,
            cleanup: true,
          }),
        ).running;
      },
      resize: async (processId, rows, cols) => {
        await this.#require("processResize", "resize a terminal");
        await this.#call("process/resize", { processId, rows, cols }, { retry: true });
      },
      release: (handle) => this.#release(handle),
    };
  }

  /** True while a connection is open and initialized. */
  get connected(): boolean {
    return this.#conn !== undefined && !this.#conn.isClosed;
  }

  /** The session id, once connected. */
  get sessionId(): string | undefined {
    return this.#sessionId;
  }

  /** The server's `environmentInfo` from the latest `initialize`; throws before the first connect. */
  get environmentInfo(): EnvironmentInfo {
    if (!this.#environmentInfo) {
      throw new Error("Cannot read environmentInfo: the client has not connected yet");
    }
    return this.#environmentInfo;
  }

  /**
   * The protocol extensions the server granted at the latest `initialize`
   * (empty before the first connect, and with a server that has none).
   */
  get extensions(): ReadonlySet<string> {
    return this.#extensions;
  }

  /** Connects (if not connected) and initializes; concurrent callers share one attempt. */
  async ready(): Promise<void> {
    await this.#connection();
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
    const raw = await this.#call(method, toWire(params ?? undefined), options);
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
    if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
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
      let cwd = params.cwd;
      if (cwd === undefined) {
        await this.ready();
        cwd = this.environmentInfo.cwd ?? this.environmentInfo.tempDir;
      }
      const wire = toWire({
        ...params,
        processId,
        cwd,
        env: params.env ?? {},
        tty: params.tty ?? false,
      });
      let retried = false;
      while (true) {
        try {
          parseResult("process/start", await this.#call("process/start", wire, {}));
          break;
        } catch (err) {
          if (
            retried && err instanceof RemoteError && err.code === ErrorCode.InvalidRequest &&
            err.message === `process ${processId} already exists`
          ) {
            // The first attempt reached the server before the connection was lost.
            handle.resync();
            break;
          }
          if (!(err instanceof ClosedError) || !this.#canReconnect || this.#closed) throw err;
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
   * Returns a handle for a process of this session that was started
   * elsewhere (e.g. by an earlier client whose session this one resumed). It
   * reads the retained output first, then follows notifications.
   *
   * @param processId The process id.
   * @param options Where in the output to start.
   */
  attachProcess(processId: string, options: AttachProcessOptions = {}): ProcessHandle {
    if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
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
    if (!this.#closed) {
      this.#closed = true;
      this.#abort.abort();
      if (this.#sleep) {
        clearTimeout(this.#sleep.timer);
        this.#sleep.resolve();
      }
      const error = new ClosedError(CLIENT_CLOSED);
      for (const set of [...this.#processes.values()]) {
        for (const handle of [...set]) handle.fail(error);
      }
      this.#conn?.close();
      this.#opening?.close();
      if (this.#dispose) this.#disposing.add(this.#dispose());
      this.#dispose = undefined;
      await this.#connecting?.catch(() => {});
    }
    await Promise.all(this.#disposing);
  }

  /** Closes the client. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Fails unless the server granted `extension`. */
  async #require(extension: string, what: string): Promise<void> {
    await this.ready();
    if (!this.#extensions.has(extension)) {
      throw new Error(
        `Cannot ${what}: the server did not grant the ${extension} extension (see environmentInfo.capabilities)`,
      );
    }
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

  async #call(
    method: string,
    params: unknown,
    options: RequestOptions & { cleanup?: boolean },
  ): Promise<unknown> {
    while (true) {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      const conn = await this.#connection();
      try {
        return await conn.call(method, params, {
          timeoutMs: options.timeoutMs,
          cleanup: options.cleanup,
        });
      } catch (err) {
        if (!(err instanceof ClosedError)) throw err;
        if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
        if (!options.retry || !this.#canReconnect) throw new ClosedError(CONNECTION_LOST);
      }
    }
  }

  #connection(): Promise<Connection> {
    if (this.#closed) return Promise.reject(new ClosedError(CLIENT_CLOSED));
    if (this.#conn && !this.#conn.isClosed) return Promise.resolve(this.#conn);
    if (this.#everConnected && !this.#canReconnect) {
      return Promise.reject(new ClosedError(CONNECTION_LOST));
    }
    this.#connecting ??= this.#establish().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  async #establish(): Promise<Connection> {
    const reconnecting = this.#everConnected;
    const deadline = Date.now() + (this.#options.reconnectTimeoutMs ?? 30_000);
    let delay = 25;
    while (true) {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      try {
        return await this.#open();
      } catch (err) {
        if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
        const retriable = reconnecting && this.#canReconnect && Date.now() < deadline &&
          isTransient(err);
        if (!retriable) {
          if (reconnecting) this.#failProcesses(err);
          throw err;
        }
      }
      await this.#pause(delay);
      delay = Math.min(delay * 2, 1000);
    }
  }

  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#sleep = undefined;
        resolve();
      }, ms);
      this.#sleep = { timer, resolve };
    });
  }

  async #open(): Promise<Connection> {
    const timeoutMs = this.#options.connectTimeoutMs ?? 10_000;
    const dialed = typeof this.#target === "string"
      ? await dialWebSocket(this.#target, this.#options.token, timeoutMs, this.#abort.signal)
      : dialStdio(this.#target, this.#label);
    const conn: Connection = new Connection(dialed.transport, {
      handlers: { notification: (method, params) => this.#onNotification(conn, method, params) },
    });
    this.#opening = conn;
    try {
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      const clientName = this.#options.clientName ?? "exec-server-client";
      const wanted = this.#options.extensions ?? Object.keys(EXTENSIONS);
      const extensions = wanted.length > 0 ? wanted : undefined;
      let raw: unknown;
      try {
        raw = await conn.call(
          "initialize",
          { clientName, resumeSessionId: this.#sessionId, extensions },
          { timeoutMs },
        );
      } catch (err) {
        const lost = this.#sessionId !== undefined && this.#everConnected &&
          err instanceof RemoteError && err.code === ErrorCode.InvalidRequest &&
          err.message.startsWith("unknown session id");
        if (!lost) throw err;
        // The session expired while we were away: its processes are gone.
        this.#failProcesses(new SessionLostError(this.#sessionId!, { cause: err }));
        this.#sessionId = undefined;
        raw = await conn.call("initialize", { clientName, extensions }, { timeoutMs });
      }
      const result = parseResult("initialize", raw);
      await conn.notify("initialized", {});
      if (conn.isClosed) throw new ClosedError(CONNECTION_LOST);
      if (this.#closed) throw new ClosedError(CLIENT_CLOSED);
      this.#sessionId = result.sessionId;
      this.#environmentInfo = result.environmentInfo;
      this.#extensions = new Set(result.extensions ?? []);
    } catch (caught) {
      let err = caught;
      if (!this.#closed && (err instanceof ClosedError || err instanceof TimedOutError)) {
        err = new ConnectError(this.#label, `no answer to initialize: ${err.message}`, {
          cause: err,
        });
      }
      this.#opening = undefined;
      conn.close();
      const disposal = dialed.dispose();
      this.#disposing.add(disposal);
      disposal.finally(() => this.#disposing.delete(disposal));
      await disposal;
      throw err;
    }
    this.#opening = undefined;
    const reconnected = this.#everConnected;
    this.#conn = conn;
    this.#dispose = dialed.dispose;
    this.#everConnected = true;
    conn.closed.then(() => this.#onClosed(conn));
    if (reconnected) {
      for (const set of this.#processes.values()) for (const handle of set) handle.resync();
    }
    return conn;
  }

  #onClosed(conn: Connection): void {
    if (conn !== this.#conn) return;
    this.#conn = undefined;
    if (this.#dispose) {
      const disposal = this.#dispose();
      this.#dispose = undefined;
      this.#disposing.add(disposal);
      disposal.finally(() => this.#disposing.delete(disposal));
    }
    if (this.#closed) return;
    if (!this.#canReconnect) {
      this.#failProcesses(new ClosedError(CONNECTION_LOST));
      return;
    }
    // Live handles are waiting for output: reconnect now rather than on the next call.
    if (this.#processes.size > 0) this.#connection().catch(() => {});
  }

  #failProcesses(error: unknown): void {
    for (const set of [...this.#processes.values()]) {
      for (const handle of [...set]) handle.fail(error);
    }
  }

  #onNotification(conn: Connection, method: string, raw: unknown): void {
    if (conn !== this.#conn && conn !== this.#opening) return;
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

function parseResult<M extends ClientRequestName>(method: M, raw: unknown): ResultOf<M> {
  return (METHODS[method] as unknown as MethodSpec & { result: { parse(v: unknown): unknown } })
    .result.parse(raw) as ResultOf<M>;
}

/** Converts params to their wire form: `Uint8Array` members become base64 strings. */
function toWire(value: unknown): unknown {
  if (value instanceof Uint8Array) return value.toBase64();
  if (Array.isArray(value)) return value.map(toWire);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) out[key] = toWire(member);
    return out;
  }
  return value;
}

function isTransient(err: unknown): boolean {
  if (err instanceof ConnectError) return err.status === undefined || err.status >= 500;
  if (err instanceof RemoteError) return err.code === SESSION_ATTACHED;
  return err instanceof ClosedError || err instanceof TimedOutError;
}

async function dialWebSocket(
  url: string,
  token: string | undefined,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Dialed> {
  const socket = new WebSocket(
    url,
    token === undefined ? undefined : { headers: { Authorization: `Bearer ${token}` } },
  );
  const closed = new Promise<void>((resolve) =>
    socket.addEventListener("close", () => resolve(), { once: true })
  );
  const dispose = async (): Promise<void> => {
    if (socket.readyState !== WebSocket.CLOSED) {
      try {
        socket.close();
      } catch {
        // Already closing.
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([closed, new Promise<void>((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", (event) => {
        const message = (event as ErrorEvent).message ?? "connection failed";
        reject(new ConnectError(url, message.replace(/^NetworkError: /, "")));
      }, { once: true });
      socket.addEventListener("close", () => reject(new ConnectError(url, "connection closed")), {
        once: true,
      });
      timer = setTimeout(
        () => reject(new ConnectError(url, `no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      if (signal.aborted) reject(new ClosedError(CLIENT_CLOSED));
      signal.addEventListener("abort", () => reject(new ClosedError(CLIENT_CLOSED)), {
        once: true,
      });
    });
  } catch (err) {
    await dispose();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return { transport: websocketTransport(socket, { label: `exec-server ${url}` }), dispose };
}

function dialStdio(target: StdioCommand, label: string): Dialed {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(target.command, {
      args: target.args ?? [],
      cwd: target.cwd,
      env: target.env,
      stdin: "piped",
      stdout: "piped",
      stderr: target.stderr ?? "inherit",
    }).spawn();
  } catch (err) {
    throw new ConnectError(label, (err as Error).message, { cause: err });
  }
  const transport = stdioTransport(child.stdout, child.stdin, { label: `exec-server ${label}` });
  let disposed: Promise<void> | undefined;
  const dispose = (): Promise<void> => {
    disposed ??= (async () => {
      transport.close();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const exited = await Promise.race([
        child.status.then(() => true),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 3000))),
      ]);
      clearTimeout(timer);
      if (!exited) {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already gone.
        }
        await child.status;
      }
    })();
    return disposed;
  };
  return { transport, dispose };
}
