/**
 * A deliberately small JSON-RPC client for the benchmark: numeric ids, `JSON.stringify` out,
 * `JSON.parse` in, except for `process/output` notifications, which are sliced out of the text
 * without parsing (they carry almost all of the bytes).
 *
 * @module
 */

import type { Transport } from "./transport.ts";

/** Receives the events of one process, keyed by `processId`. */
export interface ProcessListener {
  /** One `process/output` chunk; `chunk` is the base64 text, `seq` its sequence number. */
  onOutput?(chunk: string, seq: number): void;
  /** `process/exited` arrived. */
  onExited?(exitCode: number): void;
  /** `process/closed` arrived; the last event of a process. */
  onClosed?(): void;
}

/** The error object of a JSON-RPC error response. */
export class RpcError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;

  /**
   * Creates an error from a response's `error` member.
   * @param code the JSON-RPC code
   * @param message the server's message
   */
  constructor(code: number, message: string) {
    super(message);
    this.name = "RpcError";
    this.code = code;
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

const OUTPUT_PREFIX = '{"method":"process/output"';
const PID_KEY = '"processId":"';
const SEQ_KEY = '"seq":';
const CHUNK_KEY = '"chunk":"';

/** JSON-RPC client over a {@linkcode Transport}. */
export class RpcClient {
  #transport: Transport;
  #nextId = 1;
  #pending = new Map<number, Pending>();
  #processes = new Map<string, ProcessListener>();
  /** Number of `process/output` notifications handled by the fast path. */
  fastPathMessages = 0;

  /**
   * Wraps a transport; the client installs itself as the transport's message handler.
   * @param transport an open transport
   */
  constructor(transport: Transport) {
    this.#transport = transport;
    transport.onMessage = (text) => this.handle(text);
    transport.closed.then(() => {
      for (const p of this.#pending.values()) p.reject(new Error("Connection closed"));
      this.#pending.clear();
    });
  }

  /** Resolves when the underlying transport has ended. */
  get closed(): Promise<void> {
    return this.#transport.closed;
  }

  /**
   * Sends a request and resolves with its `result` (rejects with {@linkcode RpcError}).
   * @param method the method name
   * @param params the params object
   */
  call<T = unknown>(method: string, params: unknown): Promise<T> {
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<unknown>();
    this.#pending.set(id, { resolve, reject });
    this.#transport.send(JSON.stringify({ id, method, params }));
    return promise as Promise<T>;
  }

  /**
   * Sends a notification.
   * @param method the method name
   * @param params the params object
   */
  notify(method: string, params: unknown): void {
    this.#transport.send(JSON.stringify({ method, params }));
  }

  /**
   * Routes the events of `processId` to `listener` until {@linkcode RpcClient.unwatch}.
   * @param processId the client-chosen process id
   * @param listener the event handlers
   */
  watch(processId: string, listener: ProcessListener): void {
    this.#processes.set(processId, listener);
  }

  /**
   * Stops routing events of `processId`.
   * @param processId the client-chosen process id
   */
  unwatch(processId: string): void {
    this.#processes.delete(processId);
  }

  /** Performs the `initialize` + `initialized` handshake. */
  async initialize(clientName = "exec-server-bench"): Promise<void> {
    await this.call("initialize", { clientName });
    this.notify("initialized", {});
  }

  /** Closes the transport. */
  close(): void {
    this.#transport.close();
  }

  /**
   * Handles one inbound message (public so the client's own cost can be measured offline).
   * @param text one JSON document
   */
  handle(text: string): void {
    if (text.startsWith(OUTPUT_PREFIX) && this.#fastOutput(text)) return;
    const msg = JSON.parse(text);
    if (typeof msg.id === "number" && msg.method === undefined) {
      const pending = this.#pending.get(msg.id);
      if (pending === undefined) return;
      this.#pending.delete(msg.id);
      if (msg.error) pending.reject(new RpcError(msg.error.code, msg.error.message));
      else pending.resolve(msg.result);
      return;
    }
    const params = msg.params;
    if (params === undefined || typeof params.processId !== "string") return;
    const listener = this.#processes.get(params.processId);
    if (listener === undefined) return;
    if (msg.method === "process/output") listener.onOutput?.(params.chunk, params.seq);
    else if (msg.method === "process/exited") listener.onExited?.(params.exitCode);
    else if (msg.method === "process/closed") listener.onClosed?.();
  }

  /** Extracts processId, seq and chunk by position; false means "parse it properly". */
  #fastOutput(text: string): boolean {
    const p = text.indexOf(PID_KEY, OUTPUT_PREFIX.length);
    if (p < 0) return false;
    const pEnd = text.indexOf('"', p + PID_KEY.length);
    const processId = text.slice(p + PID_KEY.length, pEnd);
    if (processId.includes("\\")) return false;
    const s = text.indexOf(SEQ_KEY, pEnd);
    const c = text.indexOf(CHUNK_KEY, pEnd);
    if (s < 0 || c < 0) return false;
    const cEnd = text.indexOf('"', c + CHUNK_KEY.length);
    if (cEnd < 0) return false;
    this.fastPathMessages++;
    const listener = this.#processes.get(processId);
    if (listener?.onOutput === undefined) return true;
    const seq = parseInt(text.slice(s + SEQ_KEY.length, s + SEQ_KEY.length + 20), 10);
    listener.onOutput(text.slice(c + CHUNK_KEY.length, cEnd), seq);
    return true;
  }
}

/**
 * Number of bytes a standard (padded) base64 string decodes to, without decoding it.
 * @param b64 base64 text
 */
export function base64DecodedLength(b64: string): number {
  const n = b64.length;
  if (n === 0) return 0;
  const pad = b64.charCodeAt(n - 1) === 61 ? (b64.charCodeAt(n - 2) === 61 ? 2 : 1) : 0;
  return (n / 4) * 3 - pad;
}

/**
 * Decodes standard base64 to bytes.
 * @param b64 base64 text
 */
export function decodeBase64(b64: string): Uint8Array {
  return Uint8Array.fromBase64(b64);
}

/**
 * Encodes bytes as standard base64.
 * @param bytes the data
 */
export function encodeBase64(bytes: Uint8Array): string {
  return bytes.toBase64();
}
