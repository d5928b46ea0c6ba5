/**
 * Dialling: opens one transport to an exec-server, over WebSocket (`ws://`,
 * `wss://`), over the stdio pipes of a server it spawns, or over a pair of
 * byte streams it is given (a server in the same process). Knows nothing of
 * sessions; {@linkcode SessionLink} decides when to dial again.
 *
 * @module
 */

import { ClosedError } from "../rpc/connection.ts";
import { stdioTransport } from "../rpc/stdio_transport.ts";
import type { Transport } from "../rpc/transport.ts";
import { websocketTransport } from "../rpc/websocket_transport.ts";
import { ConnectError } from "./errors.ts";

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

/**
 * A server reached over a pair of byte streams that carry newline-delimited
 * JSON, as over stdio: e.g. `serveStdio` of a server in the same process,
 * given the other ends. The streams carry one connection: when it ends, the
 * client does not reconnect.
 */
export interface StreamTarget {
  /** Bytes from the server (its output). */
  readable: ReadableStream<Uint8Array>;
  /** Bytes to the server (its input); closed when the client closes. */
  writable: WritableStream<Uint8Array>;
  /**
   * The name of the server in errors and logs.
   *
   * @default {"in-process server"}
   */
  label?: string;
}

/**
 * Where the bearer token comes from: called before every WebSocket dial (the
 * first connect and each reconnect), so a token file that was rotated, or a
 * token that must be fresh, is read again each time. `undefined` sends none.
 */
export type TokenSource = () => string | undefined | Promise<string | undefined>;

/** How to reach a server: a `ws://`/`wss://` URL, a command to spawn, or a pair of streams. */
export type ServerTarget = string | URL | StdioCommand | StreamTarget;

/** How a WebSocket dial proves who it is and whom it trusts. */
export interface DialCredentials {
  /**
   * Bearer token sent as `Authorization: Bearer <token>` on the WebSocket
   * upgrade, or a {@linkcode TokenSource} asked before every dial.
   */
  token?: string | TokenSource;
  /** Extra CA certificates (PEM text) trusted for `wss://`, e.g. a self-signed server's. */
  caCerts?: readonly string[];
}

/** Options of one dial. */
export interface DialOptions extends DialCredentials {
  /** Fail after this many ms without an open connection. */
  timeoutMs: number;
  /** Aborting fails a dial in progress with `ClosedError`. */
  signal: AbortSignal;
  /**
   * Largest inbound message in bytes.
   *
   * @default {67108864}
   */
  maxMessageBytes?: number;
}

/** An open transport and how to take it down. */
export interface Dialed {
  /** The message transport. */
  transport: Transport;
  /** Closes the transport and waits (bounded) for the socket or child process to go. */
  dispose(): Promise<void>;
}

/** A checked target: a WebSocket URL, or a command with its display label. */
export type Endpoint =
  | { kind: "websocket"; url: string; label: string }
  | { kind: "stdio"; command: StdioCommand; label: string }
  | { kind: "streams"; streams: StreamTarget; label: string };

/**
 * Checks a target: a URL must be `ws:` or `wss:`.
 *
 * @example
 * ```ts
 * import { endpointOf } from "./dial.ts";
 * console.log(endpointOf("ws://127.0.0.1:8765").label); // "ws://127.0.0.1:8765/"
 * console.log(endpointOf({ command: "exec-server", args: ["--listen", "stdio"] }).label);
 * ```
 *
 * @param target The URL or command.
 * @throws {TypeError} For a URL of another scheme.
 */
export function endpointOf(target: ServerTarget): Endpoint {
  if (typeof target === "string" || target instanceof URL) {
    const url = new URL(target);
    if (url.protocol !== "ws:" && url.protocol !== "wss:") {
      throw new TypeError(`Cannot connect to "${url.href}": expected a ws:// or wss:// URL`);
    }
    return { kind: "websocket", url: url.href, label: url.href };
  }
  if ("readable" in target) {
    return { kind: "streams", streams: target, label: target.label ?? "in-process server" };
  }
  return {
    kind: "stdio",
    command: target,
    label: [target.command, ...(target.args ?? [])].join(" "),
  };
}

/**
 * Opens one transport to the endpoint.
 *
 * @param endpoint Where to.
 * @param options Token, trust, timeout and cancellation.
 * @throws {ConnectError} When the server cannot be reached or refuses the upgrade.
 */
export async function dial(endpoint: Endpoint, options: DialOptions): Promise<Dialed> {
  const limit = options.maxMessageBytes;
  if (endpoint.kind === "stdio") return dialStdio(endpoint.command, endpoint.label, limit);
  if (endpoint.kind === "streams") return dialStreams(endpoint.streams, endpoint.label, limit);
  const token = typeof options.token === "function" ? await options.token() : options.token;
  return dialWebSocket(endpoint.url, token, options);
}

async function dialWebSocket(
  url: string,
  token: string | undefined,
  options: DialOptions,
): Promise<Dialed> {
  const { timeoutMs, signal } = options;
  const client = options.caCerts?.length
    ? Deno.createHttpClient({ caCerts: [...options.caCerts] })
    : undefined;
  const socket = new WebSocket(url, {
    headers: token === undefined ? undefined : { Authorization: `Bearer ${token}` },
    client,
  });
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
    client?.close();
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
      if (signal.aborted) reject(new ClosedError("Client is closed"));
      signal.addEventListener("abort", () => reject(new ClosedError("Client is closed")), {
        once: true,
      });
    });
  } catch (err) {
    await dispose();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const transport = websocketTransport(socket, {
    label: `exec-server ${url}`,
    maxMessageBytes: options.maxMessageBytes,
  });
  return { transport, dispose };
}

function dialStreams(streams: StreamTarget, label: string, maxLineBytes?: number): Dialed {
  if (streams.readable.locked || streams.writable.locked) {
    throw new ConnectError(label, "its streams already carried a connection");
  }
  const transport = stdioTransport(streams.readable, streams.writable, {
    label: `exec-server ${label}`,
    maxLineBytes,
  });
  return {
    transport,
    dispose: () => {
      transport.close();
      return Promise.resolve();
    },
  };
}

function dialStdio(target: StdioCommand, label: string, maxLineBytes?: number): Dialed {
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
  const transport = stdioTransport(child.stdout, child.stdin, {
    label: `exec-server ${label}`,
    maxLineBytes,
  });
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
