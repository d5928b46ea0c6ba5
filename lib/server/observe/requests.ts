/**
 * What a served request tells the operator: its count and duration by
 * method, and the audit events of the requests that change things
 * ({@linkcode REQUEST_AUDITS}: `session.open`, `fs.write`, `fs.remove`,
 * `fs.copy`, `http.request`) or that the server refused (`permission.denied`).
 *
 * @module
 */

import { ErrorCode, errorKind, RpcError } from "../../protocol/errors.ts";
import {
  type ClientRequestName,
  lookupMethod,
  type ParamsOf,
  type ResultOf,
} from "../../protocol/methods.ts";
import { pathFromUri } from "../host/path_uri.ts";
import { keptClientName } from "../session/registry.ts";
import { type AnsweredRequest, REQUEST_ANSWERED } from "../session/request_events.ts";
import { audit } from "./audit.ts";
import type { Labels } from "./metrics.ts";
import { REQUEST_DURATION, REQUEST_ERRORS, REQUESTS } from "./server_metrics.ts";

/** A `file:` URI as a path for the log (the URI itself when it names no local path). */
function pathOf(uri: string): string {
  try {
    return pathFromUri(uri);
  } catch {
    return uri;
  }
}

/** The last URL {@linkcode originOf} parsed and its origin. */
const lastOrigin = { url: "", origin: "" };

/**
 * The origin of an `http/request` URL (the URL itself when it does not parse). A client's
 * requests mostly go to one URL (an MCP server's endpoint), so the last answer is kept.
 */
function originOf(url: string): string {
  if (url === lastOrigin.url) return lastOrigin.origin;
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    origin = url;
  }
  lastOrigin.url = url;
  lastOrigin.origin = origin;
  return origin;
}

/** Audits one request: `result` is its result, or `undefined` when it failed. */
type RequestAudit<M extends ClientRequestName> = (
  params: ParamsOf<M>,
  session: string,
  result: ResultOf<M> | undefined,
) => void;

/** An audit that only a successful request makes. */
function onSuccess<M extends ClientRequestName>(
  record: (params: ParamsOf<M>, session: string, result: ResultOf<M>) => void,
): RequestAudit<M> {
  return (params, session, result) => {
    if (result !== undefined) record(params, session, result);
  };
}

/**
 * The requests that make an audit event, by method (typed from the method
 * table). `process/start` is audited by the process's `ProcessWatch`, once
 * the child runs.
 */
const REQUEST_AUDITS: { readonly [M in ClientRequestName]?: RequestAudit<M> } = {
  "initialize": onSuccess((params, session) =>
    audit("session.open", {
      session,
      clientName: keptClientName(params.clientName),
      resumed: params.resumeSessionId !== undefined,
    })
  ),
  "fs/writeFile": onSuccess((params, session) =>
    audit("fs.write", { session, method: "fs/writeFile", path: pathOf(params.path) })
  ),
  "fs/createDirectory": onSuccess((params, session) =>
    audit("fs.write", { session, method: "fs/createDirectory", path: pathOf(params.path) })
  ),
  "fs/open": onSuccess((params, session) => {
    if (params.mode !== "replace") return;
    audit("fs.write", { session, method: "fs/open", path: pathOf(params.path) });
  }),
  "fs/remove": onSuccess((params, session) =>
    audit("fs.remove", { session, path: pathOf(params.path), recursive: params.recursive ?? true })
  ),
  "fs/copy": onSuccess((params, session) =>
    audit("fs.copy", {
      session,
      sourcePath: pathOf(params.sourcePath),
      destinationPath: pathOf(params.destinationPath),
    })
  ),
  "http/request": (params, session, result) =>
    audit("http.request", {
      session,
      method: params.method,
      origin: originOf(params.url),
      status: result?.status ?? null,
    }),
};

/** Audits a request that was answered (`result`) or refused (`error`). */
function auditRequest(
  method: string,
  params: unknown,
  session: string | undefined,
  outcome: { result: unknown } | { error: unknown },
): void {
  const error = "error" in outcome ? outcome.error : undefined;
  if (error instanceof RpcError && errorKind(error.data) === "permissionDenied") {
    const data = error.data as { permission?: unknown; resource?: unknown };
    audit("permission.denied", {
      session: session ?? null,
      method,
      permission: String(data.permission),
      resource: String(data.resource),
    });
    return;
  }
  // Invalid params name nothing worth auditing (and cannot be read as the method's params).
  if (error instanceof RpcError && error.code === ErrorCode.InvalidParams) return;
  const record = REQUEST_AUDITS[method as ClientRequestName] as
    | RequestAudit<ClientRequestName>
    | undefined;
  if (record === undefined || session === undefined || lookupMethod(method) === undefined) return;
  record(
    params as ParamsOf<ClientRequestName>,
    session,
    "result" in outcome ? outcome.result as ResultOf<ClientRequestName> : undefined,
  );
}

const METHOD_LABELS = new Map<string, Labels>();
const UNKNOWN_METHOD: Labels = { method: "unknown" };

/** The `{method}` labels of a request, one object per method of the table (bounded). */
function methodLabels(method: string): Labels {
  let labels = METHOD_LABELS.get(method);
  if (labels !== undefined) return labels;
  if (lookupMethod(method) === undefined) return UNKNOWN_METHOD;
  labels = { method };
  METHOD_LABELS.set(method, labels);
  return labels;
}

/**
 * Counts, times and audits an answered request: by method (methods outside
 * the method table count as `unknown`, so the label stays bounded).
 *
 * @example
 * ```ts
 * import { recordRequest } from "./requests.ts";
 * import { metricsText } from "./server_metrics.ts";
 * recordRequest({
 *   method: "environment/status", params: {}, session: undefined,
 *   started: performance.now(), outcome: { result: { status: "ready" } },
 * });
 * const state = { processesRunning: () => 0, connections: () => 0, sessions: () => 0 };
 * console.log(metricsText(state).includes('method="environment/status"')); // true
 * ```
 *
 * @param request The request and its answer.
 */
export function recordRequest(request: AnsweredRequest): void {
  const label = methodLabels(request.method);
  if ("error" in request.outcome) REQUEST_ERRORS.inc(1, label);
  auditRequest(request.method, request.params, request.session, request.outcome);
  REQUESTS.inc(1, label);
  REQUEST_DURATION.observe((performance.now() - request.started) / 1000, label);
}

let observing = false;

/**
 * Subscribes {@linkcode recordRequest} to the requests connections answer,
 * once per server process (the audit log and the metrics are the process's
 * own). The listeners call it before they serve; calling it again does
 * nothing.
 */
export function observeRequests(): void {
  if (observing) return;
  observing = true;
  REQUEST_ANSWERED.subscribe(recordRequest);
}
