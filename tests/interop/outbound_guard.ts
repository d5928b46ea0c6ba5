/**
 * A trap for outbound HTTP(S) traffic.
 *
 * Codex is started with `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` pointing here and `NO_PROXY`
 * covering 127.0.0.1, so any request it tries to send off the machine reaches this listener
 * instead of the network (and without a DNS lookup). The guard records the request line
 * (`CONNECT chatgpt.com:443 HTTP/1.1`) and closes the connection; a test asserts that nothing
 * was recorded.
 *
 * @module
 */

/** A running guard; dispose it to stop listening. */
export interface OutboundGuard extends AsyncDisposable {
  /** The proxy URL, e.g. `http://127.0.0.1:41236`. */
  readonly proxyUrl: string;
  /** The first line of every request that reached the guard. */
  readonly attempts: readonly string[];
  /** The environment variables that route a client's outbound traffic to the guard. */
  proxyEnv(): Record<string, string>;
  /** Stops listening and waits for pending connections to be dropped. */
  close(): Promise<void>;
}

/**
 * Starts an outbound guard on an ephemeral 127.0.0.1 port.
 *
 * @returns The running guard.
 */
export function startOutboundGuard(): OutboundGuard {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const attempts: string[] = [];
  const pending = new Set<Promise<void>>();

  async function handle(conn: Deno.Conn): Promise<void> {
    try {
      const buffer = new Uint8Array(4096);
      const read = await conn.read(buffer);
      const head = new TextDecoder().decode(buffer.subarray(0, read ?? 0));
      attempts.push(head.split("\r\n")[0] ?? "");
    } catch {
      attempts.push("<connection without a request line>");
    } finally {
      conn.close();
    }
  }

  const accepting = (async () => {
    try {
      for await (const conn of listener) {
        const task = handle(conn);
        pending.add(task);
        task.finally(() => pending.delete(task));
      }
    } catch {
      // The listener was closed.
    }
  })();

  const proxyUrl = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= shutdown();
    return closing;
  }
  async function shutdown(): Promise<void> {
    listener.close();
    await accepting;
    await Promise.all(pending);
  }

  return {
    proxyUrl,
    attempts,
    proxyEnv(): Record<string, string> {
      const noProxy = "127.0.0.1,localhost,::1";
      return {
        HTTP_PROXY: proxyUrl,
        HTTPS_PROXY: proxyUrl,
        ALL_PROXY: proxyUrl,
        http_proxy: proxyUrl,
        https_proxy: proxyUrl,
        all_proxy: proxyUrl,
        NO_PROXY: noProxy,
        no_proxy: noProxy,
      };
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
