/**
 * A symmetric JSON-RPC connection over a {@linkcode Transport}: either side
 * sends requests and notifications, answers requests through handlers, and
 * matches responses to its pending calls.
 *
 * @module
 */

import {
  decodeMessage,
  encodeId,
  encodeMessage,
  EnvelopeError,
  type ErrorMessage,
  idKey,
  type Message,
  type RequestId,
  type RequestMessage,
  type ResponseMessage,
  responseParts,
} from "../protocol/envelope.ts";
import { StreamedJson } from "../protocol/streamed_json.ts";
import { ErrorCode, RpcError, toWireError, type WireError } from "../protocol/errors.ts";
import type { Semaphore } from "./semaphore.ts";
import type { Inbound, OutboundText, Transport, TransportFault } from "./transport.ts";

/** The connection closed before the call was answered (a local condition, never a remote error). */
export class ClosedError extends Error {
  /**
   * Creates the error.
   *
   * @param message Detail text.
   */
  constructor(message = "Connection closed") {
    super(message);
    this.name = "ClosedError";
  }
}

/** A call's timeout elapsed; its pending entry was removed. */
export class TimedOutError extends Error {
  /**
   * Creates the error.
   *
   * @param method The method that timed out.
   * @param timeoutMs The timeout.
   */
  constructor(method: string, timeoutMs: number) {
    super(`Call to "${method}" timed out after ${timeoutMs} ms`);
    this.name = "TimedOutError";
  }
}

/** Too many calls are already in flight; the call never reached the wire. */
export class AtCapacityError extends Error {
  /**
   * Creates the error.
   *
   * @param limit The in-flight limit that was reached.
   */
  constructor(limit: number) {
    super(`Cannot send call: ${limit} calls are already in flight`);
    this.name = "AtCapacityError";
  }
}

/**
 * A message from the peer was larger than this side's inbound message limit, so it was not read:
 * the call it answered fails with this error instead of waiting for an answer that will never be
 * read. When the message's first bytes do not show which call it answered, the connection closes
 * and every pending call fails with it. A call that fails with it is not sent again after a
 * reconnect (its answer would be as large).
 *
 * @example Tell an answer too large to read from other failures
 * ```ts
 * import { MessageTooLargeError } from "@exec-server/exec-server";
 * const err = new MessageTooLargeError(1024, "fs/readFile");
 * console.log(err instanceof MessageTooLargeError, err.limit, err.method); // true 1024 "fs/readFile"
 * console.log(err.message);
 * ```
 */
export class MessageTooLargeError extends Error {
  /** The inbound message limit that the answer passed, in bytes. */
  readonly limit: number;
  /** The method of the call whose answer was too large; absent when it is not known. */
  readonly method?: string;

  /**
   * Creates the error.
   *
   * @param limit The inbound message limit, in bytes.
   * @param method The call's method, when the answer's id names the call.
   */
  constructor(limit: number, method?: string) {
    super(
      method === undefined
        ? `A message from the peer exceeded the limit of ${limit} bytes; the connection was closed`
        : `The answer to "${method}" exceeded the message limit of ${limit} bytes`,
    );
    this.name = "MessageTooLargeError";
    this.limit = limit;
    if (method !== undefined) this.method = method;
  }
}

/** The peer answered with an error response. */
export class RemoteError extends Error {
  /** The protocol error code. */
  readonly code: number;
  /** The error's `data` member, if any. */
  readonly data?: unknown;

  /**
   * Creates the error from its wire form.
   *
   * @param error The wire error.
   */
  constructor(error: WireError) {
    super(error.message);
    this.name = "RemoteError";
    this.code = error.code;
    if (error.data !== undefined) this.data = error.data;
  }
}

/** Most regular calls in flight at once (Codex's client uses the same bound). */
export const MAX_IN_FLIGHT_CALLS = 1024;
/** Extra in-flight slots kept for cleanup calls (e.g. `process/terminate`, `fs/close`). */
export const RESERVED_CLEANUP_CALLS = 1;
/**
 * Messages read ahead of processing before the transport stops being read.
 * Requests handed to a semaphore count until they are answered, so the bound
 * holds at every concurrency.
 */
export const INBOUND_QUEUE_LIMIT = 128;

/** How an incoming request runs: inline (reading waits for its answer) or under a semaphore. */
export type Schedule = "inline" | Semaphore;

/** Callbacks through which a connection hands incoming traffic to its owner. */
export interface ConnectionHandlers {
  /**
   * Answers a request: return the result or throw ({@linkcode RpcError} keeps its code). A
   * {@linkcode StreamedJson} result is sent in parts as its chunks are made.
   */
  request?(method: string, params: unknown, id: RequestId): unknown;
  /** Receives a notification. */
  notification?(method: string, params: unknown): void;
  /** Chooses how a request runs. Default: concurrently, unbounded. */
  schedule?(method: string): Schedule | undefined;
  /** A response or error that matches no pending call. Default: ignored. */
  unmatched?(message: ResponseMessage | ErrorMessage): void;
  /**
   * A request's handler threw something that is not an {@linkcode RpcError}: its reply says only
   * `internal error`, so this is where the cause can be recorded. Default: nothing.
   */
  failed?(method: string, err: unknown): void;
}

/** Options for {@linkcode Connection}. */
export interface ConnectionOptions {
  /** Handlers for incoming traffic. */
  handlers?: ConnectionHandlers;
  /**
   * Admit incoming requests as a client does (docs/protocol.md section 7.3): only non-negative
   * integer ids, no duplicate id while one is in flight, at most
   * `maxIncoming` at once. The server side tracks no ids.
   *
   * @default {false}
   */
  trackIncomingIds?: boolean;
  /**
   * Most incoming requests running at once when `trackIncomingIds` is set.
   *
   * @default {64}
   */
  maxIncoming?: number;
  /**
   * Inbound text (UTF-16 units) that may be held unanswered, queued or
   * waiting for a concurrency permit: a message that would take the held
   * text beyond it waits (read, not yet queued) until answers make room,
   * and the transport is not read meanwhile. A message is always admitted
   * when nothing else is held, whatever its size.
   *
   * @default {Infinity}
   */
  maxHeldUnits?: number;
  /**
   * Most regular outgoing calls in flight.
   *
   * @default {1024}
   */
  maxInFlight?: number;
}

/** Options for one {@linkcode Connection.call}. */
export interface CallOptions {
  /** Fails the call with {@linkcode TimedOutError} after this many ms and forgets it. */
  timeoutMs?: number;
  /** A cleanup call may use the reserved slot when regular calls are at capacity. */
  cleanup?: boolean;
}

interface Pending {
  method: string;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  timer?: ReturnType<typeof setTimeout>;
  cleanup: boolean;
}

type Queued = Message | TransportFault;

/**
 * A JSON-RPC peer. Outgoing calls get integer ids; incoming messages are read
 * into a bounded queue and processed in order; requests run inline or under
 * a semaphore as {@linkcode ConnectionHandlers.schedule} says.
 *
 * When the transport ends, responses already read are delivered first, then
 * every pending call fails with {@linkcode ClosedError}; queued requests are
 * dropped without a reply (docs/protocol.md section 1.1).
 *
 * A message over the transport's size limit fails the call it answers with
 * {@linkcode MessageTooLargeError} (the connection stays open); when its
 * first bytes do not name a pending call and calls are pending, the
 * connection closes and they all fail with it. Otherwise (nothing pending:
 * a server's side) it is answered as a malformed message.
 *
 * @example Two peers over in-memory streams
 * ```ts
 * import { Connection } from "./connection.ts";
 * import { stdioTransport } from "./stdio_transport.ts";
 * const a = new TransformStream<Uint8Array, Uint8Array>();
 * const b = new TransformStream<Uint8Array, Uint8Array>();
 * const server = new Connection(stdioTransport(a.readable, b.writable), {
 *   handlers: { request: (method, params) => ({ method, params }) },
 * });
 * const client = new Connection(stdioTransport(b.readable, a.writable));
 * console.log(await client.call("echo", { x: 1 }));
 * client.close();
 * server.close();
 * ```
 */
export class Connection {
  #transport: Transport;
  #handlers: ConnectionHandlers;
  #pending = new Map<string, Pending>();
  #regularInFlight = 0;
  #cleanupInFlight = 0;
  #maxInFlight: number;
  #nextId = 1;
  #queue: { item: Queued; units: number }[] = [];
  /** Requests taken off the queue to run concurrently and not yet answered. */
  #admitted = 0;
  /** Text units of queued and admitted messages. */
  #heldUnits = 0;
  #maxHeldUnits: number;
  #wake: (() => void) | undefined;
  #space: (() => void) | undefined;
  #closed = false;
  #closedPromise: Promise<void>;
  #resolveClosed!: () => void;
  #maxIncoming: number;
  /** Ids of the incoming requests in flight, tracked only with `trackIncomingIds` (a client's side). */
  #incoming: Set<string> | undefined;

  /**
   * Starts reading from the transport.
   *
   * @param transport The channel.
   * @param options Handlers and limits.
   */
  constructor(transport: Transport, options: ConnectionOptions = {}) {
    this.#transport = transport;
    this.#handlers = options.handlers ?? {};
    if (options.trackIncomingIds) this.#incoming = new Set();
    this.#maxIncoming = options.maxIncoming ?? 64;
    this.#maxInFlight = options.maxInFlight ?? MAX_IN_FLIGHT_CALLS;
    this.#maxHeldUnits = options.maxHeldUnits ?? Infinity;
    this.#closedPromise = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.#read();
    this.#process();
  }

  /** The transport's label (for logs). */
  get label(): string {
    return this.#transport.label;
  }

  /** True once the connection has closed. */
  get isClosed(): boolean {
    return this.#closed;
  }

  /** Resolves when the connection has closed. */
  get closed(): Promise<void> {
    return this.#closedPromise;
  }

  /** Calls currently awaiting a response. */
  get pendingCalls(): number {
    return this.#pending.size;
  }

  /** Replaces the handlers (used when a session attaches to a connection). */
  setHandlers(handlers: ConnectionHandlers): void {
    this.#handlers = handlers;
  }

  /**
   * Sends a request and waits for its response.
   *
   * @param method Method name.
   * @param params Params value (omitted from the wire when undefined).
   * @param options Timeout and cleanup slot.
   */
  call(method: string, params?: unknown, options: CallOptions = {}): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ClosedError());
    const cleanup = options.cleanup ?? false;
    if (this.#regularInFlight >= this.#maxInFlight) {
      if (!cleanup || this.#cleanupInFlight >= RESERVED_CLEANUP_CALLS) {
        return Promise.reject(new AtCapacityError(this.#maxInFlight));
      }
    }
    const usesReserved = this.#regularInFlight >= this.#maxInFlight;
    const id = this.#nextId++;
    const key = idKey(id);
    return new Promise((resolve, reject) => {
      const entry: Pending = { method, resolve, reject, cleanup: usesReserved };
      if (usesReserved) this.#cleanupInFlight++;
      else this.#regularInFlight++;
      this.#pending.set(key, entry);
      if (options.timeoutMs !== undefined) {
        entry.timer = setTimeout(() => {
          if (this.#settle(key)) reject(new TimedOutError(method, options.timeoutMs!));
        }, options.timeoutMs);
      }
      this.#transport.send(encodeMessage({ kind: "request", id, method, params })).catch(
        () => {},
      );
    });
  }

  /**
   * Sends a notification; resolves when the transport has room again
   * (await it to get backpressure).
   *
   * @param method Method name.
   * @param params Params value.
   */
  notify(method: string, params?: unknown): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return this.#transport.send(encodeMessage({ kind: "notification", method, params }));
  }

  /** Sends pre-encoded message text, whole or in parts (used for hot paths that build JSON themselves). */
  sendRaw(text: OutboundText): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return this.#transport.send(text);
  }

  /** Closes the connection: pending calls fail with {@linkcode ClosedError}, queued requests are dropped. */
  close(): void {
    this.#close(() => new ClosedError());
  }

  /** Closes the connection, failing each pending call with `error()`. */
  #close(error: () => Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#transport.close();
    this.#queue = [];
    this.#wake?.();
    this.#space?.();
    const pending = [...this.#pending.keys()];
    for (const key of pending) {
      const entry = this.#pending.get(key)!;
      this.#settle(key);
      entry.reject(error());
    }
    this.#resolveClosed();
  }

  /**
   * Fails what an over-limit message answered: the pending call its id names, else (its id
   * unknown, calls pending) the connection. False when it answered no call of this side.
   */
  #oversized(fault: TransportFault & { limit: number }): boolean {
    const { limit, responseId } = fault;
    if (responseId === undefined) {
      if (this.#pending.size === 0) return false;
      this.#close(() => new MessageTooLargeError(limit));
      return true;
    }
    const key = idKey(responseId);
    const entry = this.#pending.get(key);
    if (!entry) return false;
    this.#settle(key);
    entry.reject(new MessageTooLargeError(limit, entry.method));
    return true;
  }

  #settle(key: string): boolean {
    const entry = this.#pending.get(key);
    if (!entry) return false;
    this.#pending.delete(key);
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    if (entry.cleanup) this.#cleanupInFlight--;
    else this.#regularInFlight--;
    return true;
  }

  /** The next inbound message, `null` at the end (through `receive` when the transport has it). */
  #next: () => Inbound | null | Promise<Inbound | null> = () => {
    const transport = this.#transport;
    if (transport.receive !== undefined) {
      this.#next = () => transport.receive!();
    } else {
      const messages = transport.readable[Symbol.asyncIterator]();
      this.#stopReading = () => void messages.return?.().catch(() => {});
      this.#next = async () => {
        const { done, value } = await messages.next();
        return done ? null : value;
      };
    }
    return this.#next();
  };

  /** Lets go of the transport's stream when reading stops before its end. */
  #stopReading = () => {};

  async #read(): Promise<void> {
    try {
      while (!this.#closed) {
        const next = this.#next();
        const item = next instanceof Promise ? await next : next;
        if (item === null || this.#closed) break;
        const units = typeof item === "string" ? item.length : 0;
        while (!this.#closed && this.#full(units)) {
          await new Promise<void>((resolve) => (this.#space = resolve));
          this.#space = undefined;
        }
        if (this.#closed) break;
        this.#heldUnits += units;
        this.#queue.push({ item: typeof item === "string" ? decodeOrFault(item) : item, units });
        this.#wake?.();
      }
      if (this.#closed) this.#stopReading();
    } catch {
      // A transport error ends the connection like EOF.
    }
    // The peer is gone: deliver responses already read, drop queued requests.
    for (const { item } of this.#queue) {
      if ("kind" in item && (item.kind === "response" || item.kind === "error")) {
        this.#onResponse(item);
      } else if ("fault" in item && item.limit !== undefined) {
        this.#oversized({ ...item, limit: item.limit });
      }
    }
    this.close();
  }

  /** True while a message of `units` must wait: it would be the 129th held, or take the held text past the bound. */
  #full(units: number): boolean {
    const held = this.#queue.length + this.#admitted;
    return held >= INBOUND_QUEUE_LIMIT ||
      (held > 0 && this.#heldUnits + units > this.#maxHeldUnits);
  }

  #release(units: number): void {
    this.#heldUnits -= units;
    this.#space?.();
  }

  async #process(): Promise<void> {
    while (!this.#closed) {
      const entry = this.#queue.shift();
      if (entry === undefined) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      this.#space?.();
      if (!(await this.#handle(entry.item, entry.units))) this.#release(entry.units);
    }
  }

  /** Handles one message; true when it was admitted to run later (its units are released then). */
  async #handle(item: Queued, units: number): Promise<boolean> {
    if ("fault" in item) {
      if (item.limit !== undefined && this.#oversized({ ...item, limit: item.limit })) return false;
      await this.#reply({
        kind: "error",
        id: -1,
        error: {
          code: ErrorCode.InvalidRequest,
          message: `${this.#transport.parseErrorPrefix}: ${item.fault}`,
        },
      });
      return false;
    }
    switch (item.kind) {
      case "request": {
        const schedule = this.#handlers.schedule?.(item.method);
        if (schedule === "inline") {
          await this.#run(item, 0);
          return false;
        }
        this.#admitted++;
        const running = schedule
          ? schedule.acquire().then((release) => this.#run(item, 1).finally(release))
          : this.#run(item, 1);
        running.finally(() => {
          this.#admitted--;
          this.#release(units);
        });
        return true;
      }
      case "notification":
        this.#handlers.notification?.(item.method, item.params);
        return false;
      default:
        this.#onResponse(item);
        return false;
    }
  }

  #onResponse(message: ResponseMessage | ErrorMessage): void {
    const key = idKey(message.id);
    const entry = this.#pending.get(key);
    if (!entry) {
      this.#handlers.unmatched?.(message);
      return;
    }
    this.#settle(key);
    if (message.kind === "response") entry.resolve(message.result);
    else entry.reject(new RemoteError(message.error));
  }

  /** Runs a request and sends its answer; `counted` is 1 when it is counted in `#admitted`. */
  async #run(request: RequestMessage, counted: 0 | 1): Promise<void> {
    if (this.#closed) return;
    const incoming = this.#incoming;
    const key = incoming === undefined ? "" : idKey(request.id);
    if (incoming !== undefined) {
      const refusal = this.#admit(incoming, request.id, key);
      if (refusal) {
        await this.#reply({ kind: "error", id: request.id, error: refusal }, counted);
        return;
      }
      incoming.add(key);
    }
    let reply: Message;
    try {
      const handler = this.#handlers.request;
      if (!handler) {
        throw new RpcError(ErrorCode.MethodNotFound, `method \`${request.method}\` is not handled`);
      }
      // A synchronous handler's result is answered without a wait for it.
      const answer = handler(request.method, request.params, request.id);
      const result = answer instanceof Promise ? await answer : answer;
      reply = { kind: "response", id: request.id, result };
    } catch (err) {
      if (!(err instanceof RpcError)) this.#handlers.failed?.(request.method, err);
      reply = { kind: "error", id: request.id, error: toWireError(err) };
    } finally {
      incoming?.delete(key);
    }
    await this.#reply(reply, counted);
  }

  #admit(incoming: Set<string>, id: RequestId, key: string): WireError | undefined {
    const valid = (typeof id === "number" && id >= 0) || (typeof id === "bigint" && id >= 0n);
    if (!valid) {
      return {
        code: ErrorCode.InvalidRequest,
        message: "request ids from the server must be non-negative integers",
      };
    }
    if (incoming.has(key)) {
      return { code: ErrorCode.InvalidRequest, message: `request id ${id} is already in flight` };
    }
    if (incoming.size >= this.#maxIncoming) {
      return {
        code: ErrorCode.InvalidRequest,
        message: `at most ${this.#maxIncoming} requests may run at once`,
      };
    }
    return undefined;
  }

  /**
   * Sends an answer. With `counted` (0 or 1: whether the request it answers is counted in
   * `#admitted`), it tells the transport when it answers the only request held, so a lone
   * call's answer is not held back to be batched with answers that are not coming.
   */
  async #reply(message: Message, counted?: 0 | 1): Promise<void> {
    if (this.#closed) {
      if (message.kind === "response" && message.result instanceof StreamedJson) {
        message.result.string.discard();
      }
      return;
    }
    const alone = counted !== undefined && this.#queue.length === 0 &&
      this.#admitted === counted;
    const text = message.kind !== "response"
      ? encodeMessage(message)
      : message.result instanceof StreamedJson
      ? message.result.within(`{"id":${encodeId(message.id)},"result":`, "}")
      : responseParts(message.id, message.result);
    await this.#transport.send(text, alone).catch(ignore);
    // A streamed reply the transport dropped unsent lets go of its source (an open file).
    if (text instanceof StreamedJson) text.string.discard();
  }
}

/** Ignores a failed send (a transport that cannot write closes itself). */
function ignore(): void {}

function decodeOrFault(text: string): Queued {
  try {
    return decodeMessage(text);
  } catch (err) {
    if (err instanceof EnvelopeError) return { fault: err.message };
    return { fault: "message could not be decoded" };
  }
}
