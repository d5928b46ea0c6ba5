/**
 * The exec-server's metrics. Counters and the request-duration histogram
 * count for the whole server process (every listener in it); the gauges are
 * read from one server's live state when its `/metrics` is scraped.
 *
 * | metric | type | what |
 * | --- | --- | --- |
 * | `exec_server_processes_running` | gauge | processes started and not yet exited |
 * | `exec_server_processes_started_total` | counter | successful `process/start` |
 * | `exec_server_sandboxed_processes_started_total{layer}` | counter | of those, sandboxed ones, by the layer that enforces them |
 * | `exec_server_connections` | gauge | open protocol WebSocket connections (not console feeds) |
 * | `exec_server_sessions` | gauge | sessions, attached or waiting for a resume |
 * | `exec_server_output_bytes_total` | counter | bytes of process output (stdout, stderr, pty) |
 * | `exec_server_requests_total{method}` | counter | requests answered, by method |
 * | `exec_server_request_errors_total{method}` | counter | requests answered with an error |
 * | `exec_server_request_duration_seconds{method}` | histogram | time to answer a request |
 * | `exec_server_auth_refused_total` | counter | refused credentials |
 * | `exec_server_permission_denied_total` | counter | requests refused by permissions or sandbox |
 *
 * @module
 */

import { onAudit } from "./audit.ts";
import { Counter, Gauge, Histogram, renderMetrics } from "./metrics.ts";

/** Successful `process/start` requests. */
export const PROCESSES_STARTED: Counter = new Counter(
  "exec_server_processes_started_total",
  "Processes started.",
);
/** Sandboxed processes started, by layer (`bubblewrap`, `bubblewrap-no-proc`, `landlock`). */
export const SANDBOXED_STARTED: Counter = new Counter(
  "exec_server_sandboxed_processes_started_total",
  "Sandboxed processes started, by the sandbox layer that enforces them.",
);
/** The labels of each layer's series, made once (the counter keys series by labels object). */
const LAYER_LABELS = new Map<string, { layer: string }>();

/** Bytes of output of every process. */
export const OUTPUT_BYTES: Counter = new Counter(
  "exec_server_output_bytes_total",
  "Bytes of process output (stdout, stderr and pty).",
);
/** Requests answered, by method. */
export const REQUESTS: Counter = new Counter(
  "exec_server_requests_total",
  "Requests answered, by method.",
);
/** Requests answered with an error, by method. */
export const REQUEST_ERRORS: Counter = new Counter(
  "exec_server_request_errors_total",
  "Requests answered with an error, by method.",
);
/** Bucket bounds of {@linkcode REQUEST_DURATION}, in seconds. */
export const REQUEST_DURATION_BUCKETS: readonly number[] = [
  0.001,
  0.005,
  0.01,
  0.05,
  0.1,
  0.5,
  1,
  5,
  30,
];
/** Time to answer a request, by method. */
export const REQUEST_DURATION: Histogram = new Histogram(
  "exec_server_request_duration_seconds",
  "Time to answer a request, by method.",
  REQUEST_DURATION_BUCKETS,
);
/** Refused credentials. */
export const AUTH_REFUSED: Counter = new Counter(
  "exec_server_auth_refused_total",
  "Credentials refused (WebSocket upgrade, /metrics, console login).",
);
/** Requests refused by the server's permissions or sandbox. */
export const PERMISSION_DENIED: Counter = new Counter(
  "exec_server_permission_denied_total",
  "Requests refused by the server's permissions or sandbox.",
);

onAudit(({ event, fields }) => {
  if (event === "auth.refused") AUTH_REFUSED.inc();
  else if (event === "permission.denied") PERMISSION_DENIED.inc();
  else if (event === "process.start") {
    PROCESSES_STARTED.inc();
    const layer = fields.sandboxLayer;
    if (layer !== null) {
      let labels = LAYER_LABELS.get(layer);
      if (labels === undefined) LAYER_LABELS.set(layer, labels = { layer });
      SANDBOXED_STARTED.inc(1, labels);
    }
  }
});

/** What one server's gauges read. */
export interface ServerState {
  /** Processes started and not yet exited. */
  processesRunning(): number;
  /** Open protocol WebSocket connections (console feeds are not counted). */
  connections(): number;
  /** Live sessions. */
  sessions(): number;
}

/**
 * The body of `GET /metrics` for one server.
 *
 * @example
 * ```ts
 * import { metricsText } from "./server_metrics.ts";
 * const text = metricsText({ processesRunning: () => 0, connections: () => 1, sessions: () => 1 });
 * console.log(text.includes("exec_server_connections 1")); // true
 * ```
 *
 * @param state The server's live state.
 * @returns The Prometheus text exposition.
 */
export function metricsText(state: ServerState): string {
  return renderMetrics([
    new Gauge(
      "exec_server_processes_running",
      "Processes started and not yet exited.",
      state.processesRunning,
    ),
    PROCESSES_STARTED,
    SANDBOXED_STARTED,
    new Gauge(
      "exec_server_connections",
      "Open protocol WebSocket connections (console feeds not counted).",
      state.connections,
    ),
    new Gauge(
      "exec_server_sessions",
      "Sessions, attached or waiting for a resume.",
      state.sessions,
    ),
    OUTPUT_BYTES,
    REQUESTS,
    REQUEST_ERRORS,
    REQUEST_DURATION,
    AUTH_REFUSED,
    PERMISSION_DENIED,
  ]);
}
