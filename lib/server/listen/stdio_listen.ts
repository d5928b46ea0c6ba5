/**
 * The stdio listener: one connection on the process's stdin and stdout, whose
 * session ends with it. One listener per module: `listen.ts` is the WebSocket
 * one, and re-exports this one for the package's `./server` entry.
 *
 * @module
 */

import { type ByteSink, type ByteSource, stdioTransport } from "../../rpc/stdio_transport.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../rpc/transport.ts";
import { serveConnection } from "../session/serve_connection.ts";
import { watchProcesses } from "../observe/process_watch.ts";
import { observeRequests } from "../observe/requests.ts";
import { SessionRegistry, type SessionRegistryOptions } from "../session/registry.ts";

/** Options shared by both listeners. */
export interface ListenOptions extends SessionRegistryOptions {
  /**
   * Requests run at once per lane after `initialized`.
   *
   * @default {1}
   */
  concurrentRequests?: number;
  /**
   * Largest inbound message in bytes.
   *
   * @default {64 MiB}
   */
  maxMessageBytes?: number;
}

/** A running server. */
export interface RunningServer {
  /** `stdio` or the bound `ws://host:port` URL. */
  readonly url: string;
  /** The sessions of this server. */
  readonly sessions: SessionRegistry;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
  /** Stops listening, ends every session (killing its processes) and closes connections. */
  shutdown(): Promise<void>;
}

/**
 * Serves one connection on the given byte channels (the process's stdin and
 * stdout by default, read and written directly: no web streams). When the
 * input ends, every process of the session is killed and `finished` resolves.
 *
 * @param options Concurrency and limits.
 * @param input Bytes from the client.
 * @param output Bytes to the client.
 */
export function serveStdio(
  options: ListenOptions = {},
  input: ByteSource = Deno.stdin,
  output: ByteSink = Deno.stdout,
): RunningServer {
  watchProcesses();
  observeRequests();
  const sessions = new SessionRegistry(options);
  const transport = stdioTransport(input, output, { maxLineBytes: options.maxMessageBytes });
  const served = serveConnection(transport, {
    sessions,
    concurrentRequests: options.concurrentRequests,
    onClose: "end",
    maxHeldUnits: 2 * (options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
  });
  const finished = served.finished.then(() => sessions.endAll());
  return {
    url: "stdio",
    sessions,
    finished,
    shutdown() {
      served.connection.close();
      return finished;
    },
  };
}
