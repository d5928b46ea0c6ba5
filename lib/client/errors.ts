/**
 * Client-side errors that the RPC layer does not already define. Together
 * with `ClosedError`, `TimedOutError`, `AtCapacityError`, `MessageTooLargeError`
 * and `RemoteError` from the connection module, every failure of the client has its own class.
 *
 * @module
 */

/**
 * The client could not open a connection: the URL is unreachable, the server
 * refused the WebSocket upgrade (e.g. a bad bearer token), or the server
 * command could not be spawned.
 *
 * @example Tell a refused token from an unreachable server
 * ```ts
 * import { ConnectError } from "@exec-server/exec-server";
 * const err = new ConnectError("ws://127.0.0.1:1", "Invalid status code: 401");
 * console.log(err.status, err.message);
 * ```
 */
export class ConnectError extends Error {
  /** The target that could not be reached (a URL or a command). */
  readonly target: string;
  /** The HTTP status of a refused WebSocket upgrade (401 for a refused token), if any. */
  readonly status?: number;

  /**
   * Creates the error.
   *
   * @param target The URL or command.
   * @param detail Why the connection failed.
   * @param options The underlying cause.
   */
  constructor(target: string, detail: string, options?: ErrorOptions) {
    super(`Cannot connect to ${target}: ${detail}`, options);
    this.name = "ConnectError";
    this.target = target;
    const status = /status code:? (\d{3})/i.exec(detail);
    if (status) this.status = Number(status[1]);
  }
}

/**
 * The session could not be resumed after a reconnect (its detach TTL expired
 * or the server restarted), so its processes are gone. Live process handles
 * fail with this error; the client itself continues in a new session.
 *
 * @example
 * ```ts
 * import { SessionLostError } from "@exec-server/exec-server";
 * console.log(new SessionLostError("6564152f").message);
 * ```
 */
export class SessionLostError extends Error {
  /** The session that was lost. */
  readonly sessionId: string;

  /**
   * Creates the error.
   *
   * @param sessionId The session that was lost.
   * @param options The underlying cause (the server's refusal).
   */
  constructor(sessionId: string, options?: ErrorOptions) {
    super(`Cannot resume session "${sessionId}": the server no longer has it`, options);
    this.name = "SessionLostError";
    this.sessionId = sessionId;
  }
}
