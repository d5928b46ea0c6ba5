/**
 * One exchange of `http/request`: its deadline, its cancellation when the
 * connection goes away, and the network connection it currently uses.
 *
 * @module
 */

import { bareHost, effectivePort } from "./url.ts";

/** setTimeout's upper bound; larger timeouts are treated as no timeout. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Deadline and cancellation for one request, plus the connection it currently uses. */
export class Exchange {
  readonly requestId: string;
  #conn: Deno.Conn | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #cancelled = false;
  #stopListeners = new Set<() => void>();

  constructor(requestId: string) {
    this.requestId = requestId;
  }

  /** Whether the connection that owns this exchange went away. */
  get cancelled(): boolean {
    return this.#cancelled;
  }

  startDeadline(timeoutMs: number | null | undefined): void {
    if (timeoutMs === null || timeoutMs === undefined || timeoutMs > MAX_TIMER_MS) return;
    this.#timer = setTimeout(() => this.#stop(), timeoutMs);
  }

  cancel(): void {
    this.#cancelled = true;
    this.dispose();
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#stop();
  }

  #stop(): void {
    this.#stopped = true;
    this.closeConn();
    for (const listener of this.#stopListeners) listener();
    this.#stopListeners.clear();
  }

  closeConn(): void {
    const conn = this.#conn;
    this.#conn = null;
    try {
      conn?.close();
    } catch {
      // Already closed.
    }
  }

  /** Connects to `url`'s origin, giving up when the deadline expires or the exchange is cancelled. */
  async connect(url: URL): Promise<Deno.Conn> {
    if (this.#stopped) throw new Error("exchange stopped");
    const hostname = bareHost(url.hostname);
    const port = effectivePort(url);
    const pending = url.protocol === "https:"
      ? Deno.connectTls({ hostname, port, alpnProtocols: ["http/1.1"] })
      : Deno.connect({ hostname, port });
    const stopped = Promise.withResolvers<null>();
    const listener = (): void => stopped.resolve(null);
    this.#stopListeners.add(listener);
    try {
      const conn = await Promise.race([pending, stopped.promise]);
      if (conn === null) {
        pending.then((late) => late.close(), () => {});
        throw new Error("exchange stopped");
      }
      this.#conn = conn;
      return conn;
    } finally {
      this.#stopListeners.delete(listener);
    }
  }
}
