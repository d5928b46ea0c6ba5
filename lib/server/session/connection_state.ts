/**
 * The fs and http state of one connection: its file handles, its `fs/watchMissing` watches and
 * its HTTP requests. The modules behind them (the fs operations and the HTTP client, about a
 * quarter of the server's code) load with the first fs or http request the server gets, and a
 * connection makes its tables with its own first such request: neither is on the start-up path
 * to the first `initialize` answer. Once loaded and made, both are returned synchronously, so a
 * synchronous fs operation still answers without a promise.
 *
 * @module
 */

import { internalError } from "../../protocol/errors.ts";
import type { FsContext, runFsOperation } from "../fs/operations.ts";
import type { FileHandleTable } from "../fs/handles.ts";
import type { MissingWatchTable } from "../fs/watch.ts";
import type { HttpRequestTable } from "../http/request.ts";

/** What an fs request needs: the operations table's runner and this connection's fs state. */
export interface FsServices {
  /** Runs one fs request (`runFsOperation` of `fs/operations.ts`). */
  readonly run: typeof runFsOperation;
  /** This connection's file handles, watches and notifications. */
  readonly context: FsContext;
}

interface FsModules {
  run: typeof runFsOperation;
  FileHandleTable: typeof FileHandleTable;
  MissingWatchTable: typeof MissingWatchTable;
}

/** A module set loaded once per server: its value once loaded, else the load in progress. */
function loadOnce<T>(load: () => Promise<T>): () => T | Promise<T> {
  let loaded: { value: T } | undefined;
  let loading: Promise<T> | undefined;
  return () =>
    loaded?.value ?? (loading ??= load().then((value) => {
      loaded = { value };
      return value;
    }));
}

const fsModules = loadOnce(async (): Promise<FsModules> => {
  const [{ runFsOperation }, { FileHandleTable }, { MissingWatchTable }] = await Promise.all([
    import("../fs/operations.ts"),
    import("../fs/handles.ts"),
    import("../fs/watch.ts"),
  ]);
  return { run: runFsOperation, FileHandleTable, MissingWatchTable };
});

const httpModule = loadOnce(async () => (await import("../http/request.ts")).HttpRequestTable);

/** One connection's fs and http state, made on first use and ended with the connection. */
export class ConnectionState {
  readonly #notify: FsContext["notify"];
  #fs: FsServices | undefined;
  #http: HttpRequestTable | undefined;
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
   * The fs operations and this connection's fs state (a promise only while the fs modules load).
   *
   * @throws {RpcError} `-32603` once the connection has ended.
   */
  fs(): FsServices | Promise<FsServices> {
    this.#refuseClosed();
    if (this.#fs !== undefined) return this.#fs;
    const modules = fsModules();
    if (modules instanceof Promise) return modules.then(() => this.fs());
    this.#fs = {
      run: modules.run,
      context: {
        files: new modules.FileHandleTable(),
        watches: new modules.MissingWatchTable(),
        notify: this.#notify,
      },
    };
    return this.#fs;
  }

  /**
   * This connection's HTTP requests and body streams (a promise only while the HTTP client loads).
   *
   * @throws {RpcError} `-32603` once the connection has ended.
   */
  http(): HttpRequestTable | Promise<HttpRequestTable> {
    this.#refuseClosed();
    if (this.#http !== undefined) return this.#http;
    const Table = httpModule();
    if (Table instanceof Promise) return Table.then(() => this.http());
    this.#http = new Table((delta) => this.#notify("http/request/bodyDelta", delta));
    return this.#http;
  }

  /** Ends the connection's file handles, watches and HTTP requests; later use is refused. */
  closeAll(): void {
    this.#closed = true;
    this.#fs?.context.files.closeAll();
    this.#fs?.context.watches.closeAll();
    this.#http?.closeAll();
  }
}
