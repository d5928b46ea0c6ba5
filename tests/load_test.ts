/**
 * Load: 1 000 processes across 50 connections, and 200 concurrent
 * connections, against one WebSocket server on 127.0.0.1. Every process's
 * output and exit code is checked, every connection must be served, and
 * afterwards the server has no child left and no more open descriptors than
 * before. The figures (wall time, peak RSS) are printed for docs/contributing/testing.md (Suites).
 *
 * CI runs 250 processes (5 per connection); `EXEC_SERVER_LONG_TESTS=1` runs
 * the full 1 000 (`deno task test:load`). The 10-minute soak is
 * `tests/soak.ts` (`deno task soak`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type Json, ServerProcess, type WsClient } from "./helpers/server_harness.ts";
import {
  descendants,
  describeProcs,
  fdCount,
  fdTargets,
  rssKib,
  waitUntil,
} from "./helpers/reliability_proc.ts";

const LONG = Deno.env.get("EXEC_SERVER_LONG_TESTS") === "1";
const CONNECTIONS = 50;
const PROCESSES_PER_CONNECTION = LONG ? 20 : 5;
const CONCURRENT_CONNECTIONS = 200;

/** Samples the server's RSS every 100 ms until stopped; returns the peak. */
function sampleRss(pid: number): { stop(): number } {
  let peak = rssKib(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssKib(pid));
    } catch {
      // The server is gone; the test will say so.
    }
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

/**
 * Runs one process on one connection, so that the server's lazily created
 * descriptors (the child-process reaper's) exist before the idle count.
 */
async function warmUp(server: ServerProcess): Promise<void> {
  const client = await server.connect();
  await handshake(client);
  await client.request("warm", "process/start", {
    processId: "warm",
    argv: ["/bin/true"],
    cwd: "file:///tmp",
    env: {},
    tty: false,
  });
  await client.log.processClosed("warm");
  await client.close();
  await waitUntil(() => descendants(server.pid).length === 0);
}

/** A warmed-up WebSocket server (retention and TTL 5 s) with its idle descriptor count and RSS. */
async function idleServer(
  args: string[] = [],
): Promise<ServerProcess & { idleFds: number; idleRss: number }> {
  const server = await ServerProcess.start({
    listen: "ws",
    args: [...args, "--process-retention", "5", "--session-ttl", "5"],
  });
  await warmUp(server);
  return Object.assign(server, { idleFds: fdCount(server.pid), idleRss: rssKib(server.pid) });
}

async function assertNothingLeft(pid: number, idleFds: number, what: string): Promise<void> {
  await waitUntil(() => descendants(pid).length === 0, 15_000);
  assert.deepEqual(
    descendants(pid),
    [],
    `${what}: processes left: ${describeProcs(descendants(pid))}`,
  );
  await waitUntil(() => fdCount(pid) <= idleFds, 15_000);
  assert.ok(
    fdCount(pid) <= idleFds,
    `${what}: ${fdCount(pid)} descriptors open, ${idleFds} when idle:\n${
      fdTargets(pid).join("\n")
    }`,
  );
}

Deno.test(`${CONNECTIONS * PROCESSES_PER_CONNECTION} processes across ${CONNECTIONS} connections all run to completion with their own output`, async () => {
  await using server = await idleServer();
  const { idleFds, idleRss } = server;
  const sampler = sampleRss(server.pid);
  const started = performance.now();
  const clients: WsClient[] = [];
  try {
    for (let c = 0; c < CONNECTIONS; c++) clients.push(await server.connect());
    await Promise.all(clients.map((client) => handshake(client)));
    await Promise.all(clients.map(async (client, c) => {
      const ids: string[] = [];
      // Pipelined: all starts are sent at once; the connection answers them in order.
      const starts = [];
      for (let i = 0; i < PROCESSES_PER_CONNECTION; i++) {
        const processId = `c${c}-p${i}`;
        ids.push(processId);
        starts.push(client.request(`start-${processId}`, "process/start", {
          processId,
          argv: [
            "/bin/sh",
            "-c",
            'echo "$0 out"; echo "$0 err" >&2; exit $(($1 % 7))',
            processId,
            String(i),
          ],
          cwd: "file:///tmp",
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
        }, 60_000));
      }
      for (const response of await Promise.all(starts)) {
        assert.ok(response.result, JSON.stringify(response));
      }
      for (const [i, processId] of ids.entries()) {
        const events = await client.log.processClosed(processId, 60_000);
        const exited = events.find((m) => m.method === "process/exited")!;
        assert.equal((exited.params as Json).exitCode, i % 7, `${processId} exit code`);
        assert.equal(client.log.outputText(processId), `${processId} out\n`);
        assert.equal(client.log.outputText(processId, "stderr"), `${processId} err\n`);
      }
    }));
    const ms = Math.round(performance.now() - started);
    const peak = sampler.stop();
    console.log(`load ${
      JSON.stringify({
        scenario: "processes across connections",
        processes: CONNECTIONS * PROCESSES_PER_CONNECTION,
        connections: CONNECTIONS,
        ms,
        idleRssKib: idleRss,
        peakRssKib: peak,
      })
    }`);
  } finally {
    sampler.stop();
    await Promise.all(clients.map((client) => client.close()));
  }
  await assertNothingLeft(
    server.pid,
    idleFds,
    `after ${CONNECTIONS * PROCESSES_PER_CONNECTION} processes`,
  );
});

Deno.test("200 concurrent connections are all served at once", async () => {
  await using server = await idleServer(["--concurrent-requests", "4"]);
  const { idleFds, idleRss } = server;
  const sampler = sampleRss(server.pid);
  const started = performance.now();
  const clients: WsClient[] = [];
  try {
    const opened = await Promise.allSettled(
      Array.from({ length: CONCURRENT_CONNECTIONS }, () => server.connect()),
    );
    for (const result of opened) if (result.status === "fulfilled") clients.push(result.value);
    assert.equal(clients.length, CONCURRENT_CONNECTIONS, "every connection was accepted");
    const sessions = await Promise.all(clients.map((client) => handshake(client)));
    assert.equal(new Set(sessions).size, CONCURRENT_CONNECTIONS, "one session per connection");
    // All connections open at once, each with a request and a process in flight.
    await Promise.all(clients.map(async (client, c) => {
      const [status, start] = await Promise.all([
        client.request(`s${c}`, "environment/status", undefined, 60_000),
        client.request(`p${c}`, "process/start", {
          processId: "p",
          argv: ["/bin/echo", `conn ${c}`],
          cwd: "file:///tmp",
          env: {},
          tty: false,
        }, 60_000),
      ]);
      assert.deepEqual(status.result, { status: "ready" });
      assert.ok(start.result, JSON.stringify(start));
      await client.log.processClosed("p", 60_000);
      assert.equal(client.log.outputText("p"), `conn ${c}\n`);
      const info = await client.request(`i${c}`, "environment/info", undefined, 60_000);
      assert.ok((info.result as Json).capabilities);
    }));
    const ms = Math.round(performance.now() - started);
    const peak = sampler.stop();
    console.log(`load ${
      JSON.stringify({
        scenario: "concurrent connections",
        connections: CONCURRENT_CONNECTIONS,
        ms,
        idleRssKib: idleRss,
        peakRssKib: peak,
        peakFds: fdCount(server.pid),
      })
    }`);
  } finally {
    sampler.stop();
    await Promise.all(clients.map((client) => client.close()));
  }
  await assertNothingLeft(server.pid, idleFds, "after 200 connections closed");
});
