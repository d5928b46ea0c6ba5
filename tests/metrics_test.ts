/**
 * The operator's HTTP routes: `/healthz` answers without authentication,
 * `/metrics` is Prometheus text behind the WebSocket's authentication, with
 * the gauges read from the live server and counters that count what ran.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readUntilClosed, tokenAuth } from "./helpers/observe.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { call, sh, startProcess } from "./helpers/rpc.ts";
import { handshake } from "./helpers/server_harness.ts";
import { sandboxValue } from "./helpers/attack.ts";
import { TEST_LAYERS, withLayer } from "./helpers/sandbox_layers.ts";
import { onAudit } from "../lib/server/observe/audit.ts";

const TOKEN = "metrics-token-0123456789";

function httpOf(server: InProcessServer): string {
  return server.url.replace(/^ws/, "http");
}

/** The value of one sample line (`name{labels} value`) of an exposition. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

Deno.test("/healthz answers 200 without a token while auth is on; /metrics needs the token", async () => {
  await using server = await InProcessServer.websocket({
    authorize: await tokenAuth(TOKEN),
  });
  const health = await fetch(`${httpOf(server)}/healthz`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), "ok\n");
  const anonymous = await fetch(`${httpOf(server)}/metrics`);
  assert.equal(anonymous.status, 401);
  await anonymous.body?.cancel();
  const wrong = await fetch(`${httpOf(server)}/metrics`, {
    headers: { authorization: "Bearer not-the-token" },
  });
  assert.equal(wrong.status, 401);
  await wrong.body?.cancel();
  const scraped = await fetch(`${httpOf(server)}/metrics`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(scraped.status, 200);
  assert.match(scraped.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await scraped.text();
  for (
    const name of [
      "exec_server_processes_running gauge",
      "exec_server_processes_started_total counter",
      "exec_server_connections gauge",
      "exec_server_sessions gauge",
      "exec_server_output_bytes_total counter",
      "exec_server_requests_total counter",
      "exec_server_request_duration_seconds histogram",
    ]
  ) {
    assert.ok(text.includes(`# TYPE ${name}\n`), `missing ${name}`);
  }
});

Deno.test("/metrics: gauges follow the live connections, sessions and processes; counters count starts and requests", async () => {
  await using server = await InProcessServer.websocket();
  const scrape = async () => await (await fetch(`${httpOf(server)}/metrics`)).text();
  const before = await scrape();
  assert.equal(sample(before, "exec_server_connections"), 0);
  assert.equal(sample(before, "exec_server_sessions"), 0);
  const startsBefore = sample(before, "exec_server_processes_started_total") ?? 0;
  const outputBefore = sample(before, "exec_server_output_bytes_total") ?? 0;
  const startRequestsBefore =
    sample(before, 'exec_server_requests_total{method="process/start"}') ??
      0;
  await using client = await server.connect();
  await handshake(client);
  await startProcess(client, "sleeper", sh("sleep 30"));
  await startProcess(client, "echo", sh("printf 12345"));
  await readUntilClosed(client, "echo");
  const during = await scrape();
  assert.equal(sample(during, "exec_server_connections"), 1);
  assert.equal(sample(during, "exec_server_sessions"), 1);
  assert.equal(sample(during, "exec_server_processes_running"), 1);
  assert.equal(sample(during, "exec_server_output_bytes_total"), outputBefore + 5);
  assert.equal(sample(during, "exec_server_processes_started_total"), startsBefore + 2);
  assert.equal(
    sample(during, 'exec_server_requests_total{method="process/start"}'),
    startRequestsBefore + 2,
  );
  assert.equal(
    sample(during, 'exec_server_request_duration_seconds_count{method="process/start"}'),
    startRequestsBefore + 2,
  );
  assert.equal(
    sample(during, 'exec_server_request_duration_seconds_bucket{method="process/start",le="+Inf"}'),
    startRequestsBefore + 2,
  );
  await call(client, "process/terminate", { processId: "sleeper" });
});

for (const t of TEST_LAYERS) {
  Deno.test({
    name:
      `/metrics counts sandboxed starts by layer, and the process.start audit event names the layer${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    fn: () =>
      withLayer(t.layer, async () => {
        await using server = await InProcessServer.websocket();
        const scrape = async () => await (await fetch(`${httpOf(server)}/metrics`)).text();
        const series = `exec_server_sandboxed_processes_started_total{layer="${t.layer}"}`;
        const before = sample(await scrape(), series) ?? 0;
        const events: { sandboxLayer: string | null }[] = [];
        const stop = onAudit((event) => {
          if (event.event === "process.start") events.push(event.fields);
        });
        try {
          await using client = await server.connect();
          await handshake(client);
          const sandbox = sandboxValue(["/var/tmp"], "restricted");
          await startProcess(client, "boxed", sh("true"), { sandbox });
          await startProcess(client, "plain", sh("true"));
          await readUntilClosed(client, "boxed");
          await readUntilClosed(client, "plain");
        } finally {
          stop();
        }
        const text = await scrape();
        assert.ok(
          text.includes("# TYPE exec_server_sandboxed_processes_started_total counter\n"),
          text,
        );
        assert.equal(sample(text, series), before + 1, text);
        assert.deepEqual(events.map((fields) => fields.sandboxLayer), [t.layer, null]);
      }),
  });
}
