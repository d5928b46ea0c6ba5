/**
 * A bare WebSocket endpoint on 127.0.0.1 for transport and connection tests:
 * every request is upgraded and its server-side socket handed to the test.
 *
 * @module
 */

/** A listening endpoint; disposing it stops the HTTP server. */
export interface UpgradeServer extends AsyncDisposable {
  /** `ws://127.0.0.1:PORT/`. */
  readonly url: string;
}

/**
 * Listens on `127.0.0.1:0` and upgrades every request, calling `onSocket`
 * with the server side of each connection.
 */
export async function serveUpgrades(onSocket: (socket: WebSocket) => void): Promise<UpgradeServer> {
  const ac = new AbortController();
  const listening = Promise.withResolvers<Deno.NetAddr>();
  const httpServer = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: ac.signal,
    onListen: (addr) => listening.resolve(addr as Deno.NetAddr),
  }, (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    onSocket(socket);
    return response;
  });
  const addr = await listening.promise;
  return {
    url: `ws://127.0.0.1:${addr.port}/`,
    async [Symbol.asyncDispose]() {
      ac.abort();
      await httpServer.finished;
    },
  };
}
