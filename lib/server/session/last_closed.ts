/**
 * The last connection that closed, kept until the next one closes, so that a server whose
 * clients come and go (or pause) keeps its compiled request path.
 *
 * Why: V8's optimized code refers weakly to the objects it was specialized for, above all the
 * hidden classes ("maps") of the objects it reads (a `Connection`, its transport and byte
 * reader, the handler context...). A class's later maps are reachable from its first one only
 * through weak transitions, so they live exactly as long as some object that has them. Every
 * connection's objects have the same maps, and any one live connection keeps them; when the
 * last connection has closed and a full collection runs (V8 runs them while the process is
 * idle), the maps die and the code that embeds them is thrown away ("embedded weak objects
 * cleared" under `--trace-deopt`): the next connection runs the request path in the
 * interpreter and compiles it again. Keeping the most recent closed connection's objects
 * keeps those maps, and so the code (the benchmark notes: `git show fbec4dc:docs/benchmarks.md`,
 * "Keeping the last closed connection").
 *
 * What is kept is one closed connection, replaced by the next: its socket is already closed,
 * its outbound buffers dropped ({@linkcode Connection.close}), its fs handles and HTTP requests
 * ended, and its session is detached or ended as without this module (the session's own
 * timers, not this reference, decide when its processes go). The cost is that connection's
 * read buffer (at most 64 KiB) and a few small objects.
 *
 * @module
 */

import type { Connection } from "../../rpc/connection.ts";

let kept: Connection | undefined;

/**
 * Keeps `connection` (which must have closed), instead of the one kept before.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Connection } from "../../rpc/connection.ts";
 * import { stdioTransport } from "../../rpc/stdio_transport.ts";
 * import { keepLastClosed, lastClosed } from "./last_closed.ts";
 *
 * const closedConnection = () => {
 *   const pipe = new TransformStream<Uint8Array, Uint8Array>();
 *   const connection = new Connection(stdioTransport(pipe.readable, pipe.writable));
 *   connection.close();
 *   return connection;
 * };
 * const first = closedConnection();
 * keepLastClosed(first);
 * const second = closedConnection();
 * keepLastClosed(second);
 * assert.equal(lastClosed(), second);
 * ```
 *
 * @param connection A closed connection.
 * @throws {TypeError} When `connection` is still open (keeping it would keep nothing alive
 *   that is not already alive, and would hide a caller's bug).
 */
export function keepLastClosed(connection: Connection): void {
  if (!connection.isClosed) throw new TypeError("Cannot keep an open connection");
  kept = connection;
}

/**
 * The connection {@linkcode keepLastClosed} keeps, if any.
 *
 * @returns The last closed connection kept, or `undefined` before the first.
 */
export function lastClosed(): Connection | undefined {
  return kept;
}
