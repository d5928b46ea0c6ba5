/**
 * The server in the test's own process: `serveStdio` over in-memory streams,
 * or `serveWebSocket` on 127.0.0.1, with the same clients as a subprocess
 * server ({@linkcode StdioClient}, {@linkcode WsClient}). For protocol tests
 * where a subprocess adds nothing; the CLI, the exit paths and the leftovers
 * checks keep `ServerProcess`.
 *
 * Disposing one ends its sessions (killing their processes) and waits until
 * the server has stopped, so Deno's sanitizers see nothing left behind.
 *
 * @module
 */

import {
  type ListenOptions,
  type RunningServer,
  serveStdio,
  serveWebSocket,
  type WebSocketListenOptions,
} from "../../lib/server/listen/listen.ts";
import { handshake, StdioClient, WsClient } from "./server_harness.ts";

/** A server running in this process. */
export class InProcessServer implements AsyncDisposable {
  /** The server. */
  readonly server: RunningServer;
  /** In stdio mode: the client on the server's in-memory stdin/stdout. */
  readonly stdio: StdioClient | undefined;
  #stopped: Promise<void> | undefined;

  private constructor(server: RunningServer, stdio: StdioClient | undefined) {
    this.server = server;
    this.stdio = stdio;
  }

  /** `stdio` or the bound `ws://127.0.0.1:PORT`. */
  get url(): string {
    return this.server.url;
  }

  /** Serves one stdio connection over in-memory streams. */
  static stdio(options: ListenOptions = {}): InProcessServer & { stdio: StdioClient } {
    const toServer = new TransformStream<Uint8Array, Uint8Array>();
    const fromServer = new TransformStream<Uint8Array, Uint8Array>();
    const server = serveStdio(options, toServer.readable, fromServer.writable);
    const client = new StdioClient({ stdin: toServer.writable, stdout: fromServer.readable });
    return new InProcessServer(server, client) as InProcessServer & { stdio: StdioClient };
  }

  /** Serves WebSocket connections on `ws://127.0.0.1:0`. */
  static async websocket(options: WebSocketListenOptions = {}): Promise<InProcessServer> {
    return new InProcessServer(await serveWebSocket(options), undefined);
  }

  /** Connects a new WebSocket client (WebSocket mode only). */
  connect(): Promise<WsClient> {
    return WsClient.connect(this.url);
  }

  /** Stops the server: stdin EOF (stdio) or shutdown (WebSocket); waits until it finished. */
  stop(): Promise<void> {
    return this.#stopped ??= this.#stop();
  }

  async #stop(): Promise<void> {
    if (this.stdio) {
      await this.stdio.close();
      await this.server.finished;
      await this.stdio.done;
    } else {
      await this.server.shutdown();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** An in-process stdio server whose client has completed the handshake. */
export async function inProcessSession(
  options: ListenOptions = {},
): Promise<InProcessServer & { stdio: StdioClient }> {
  const server = InProcessServer.stdio(options);
  await handshake(server.stdio);
  return server;
}
