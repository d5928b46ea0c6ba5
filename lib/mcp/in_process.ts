/**
 * The exec-server of `exec-server mcp` without `--url`: a server in the
 * same process, served on a pair of in-memory streams, which the client
 * library connects to as to any other server (the MCP layer has no other way
 * in). The server's own sandbox is the process's (`setServerSandbox`).
 *
 * @module
 */

import type { StreamTarget } from "../client/dial.ts";
import {
  type ListenOptions,
  type RunningServer,
  serveStdio,
} from "../server/listen/stdio_listen.ts";

/** A server in this process and the streams a client connects to it over. */
export interface InProcessServer {
  /** The server: its one connection is the client's. */
  readonly server: RunningServer;
  /** What to pass to `connect` or `createClient`. */
  readonly target: StreamTarget;
}

/**
 * Starts a server in this process on in-memory streams. It stops when the
 * client closes (its session ends and its processes are killed) or on
 * `server.shutdown()`.
 *
 * @example
 * ```ts
 * import { connect } from "../client/client.ts";
 * import { startInProcessServer } from "./in_process.ts";
 * const { server, target } = startInProcessServer();
 * const client = await connect(target);
 * console.log((await client.exec(["echo", "in process"])).stdout); // "in process\n"
 * await client.close();
 * await server.finished;
 * ```
 *
 * @param options Concurrency, retention and limits of the server.
 */
export function startInProcessServer(options: ListenOptions = {}): InProcessServer {
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const server = serveStdio(options, toServer.readable, fromServer.writable);
  return {
    server,
    target: { readable: fromServer.readable, writable: toServer.writable, label: "in-process" },
  };
}
