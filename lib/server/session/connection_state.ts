/**
 * The fs and http state of one connection: its file handles, its `fs/watchMissing` watches and
 * its HTTP requests. The modules behind them (the fs operations and the HTTP client, about a
 * quarter of the server's code) load with the first fs or http request of the server, and each
 * connection makes its tables with its own first such request: neither is part of the start-up
 * path to the first `initialize` answer.
 *
 * @module
 */

import { internalError } from "../../protocol/errors.ts";
import type { FsContext, runFsOperation } from "../fs/operations.ts";
import type { HttpRequestTable } from "../http/request.ts";

/** What an fs request needs: the operations table's runner and this connection's fs state. */
export interface FsServices {
  /** Runs one fs request (`runFsOperation` of `fs/operations.ts`). */
  readonly run: typeof runFsOperation;
  /** This connection's file handles, watches and notifications. */
  readonly context: FsContext;
}

async function loadFs(notify: FsContext["notify"]): Promise<FsServices> {
  const [{ runFsOperation }, { FileHandleTable }, { MissingWatchTable }] = await Promise.all([
    import("../fs/operations.ts"),
    import("../fs/handles.ts"),
    import("../fs/watch.ts"),
  ]);
  return {
    run: runFsOperation,
    context: { files: new FileHandleTable(), watches: new MissingWatchTable(), notify },
  };
}

async function loadHttp(notify: FsContext["notify"]): Promise<HttpRequestTable> {
  const { HttpRequestTable } = await import("../http/request.ts");
  return new HttpRequestTable((delta) => notify("http/request/bodyDelta", delta));
}

/** One connection's fs and http state, made on first use and ended with the connection. */
export class ConnectionState {
  readonly #notify: FsContext["notify"];
  #fs: Promise<FsServices> | undefined;
  #http: Promise<HttpRequestTable> | undefined;
  #closed = false;

  /**
   * Creates the (still empty) state of a connection.
   *
   * @param notify Sends a notification to the connection (watches, HTTP body deltas).
   */
  constructor(notify: FsContext["notify"]) {
    this.#notify = notify;
  }

  #refuseClosed(): void {
    if (this.#closed) throw internalError("connection closed");
  }

  /**
   * The fs operations and this connection's fs state.
   *
   * @throws {RpcError} `-32603` once the connection has ended.
   */
  fs(): Promise<FsServices> {
    this.#refuseClosed();
    this.#fs ??= loadFs(this.#notify);
    return this.#fs;
  }

  /**
   * This connection's HTTP requests and body streams.
   *
   * @throws {RpcError} `-32603` once the connection has ended.
   */
  http(): Promise<HttpRequestTable> {
    this.#refuseClosed();
    this.#http ??= loadHttp(this.#notify);
    return this.#http;
  }

  /** Ends the connection's file handles, watches and HTTP requests; later use is refused. */
  async closeAll(): Promise<void> {
    this.#closed = true;
    const [fs, http] = await Promise.all([
      this.#fs?.catch(() => undefined),
      this.#http?.catch(() => undefined),
    ]);
    fs?.context.files.closeAll();
    fs?.context.watches.closeAll();
    http?.closeAll();
  }
}
