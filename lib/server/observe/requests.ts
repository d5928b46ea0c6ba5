/**
 * What a served request tells the operator: its count and duration by
 * method, and the audit events of the requests that change things
 * ({@linkcode REQUEST_AUDITS}: `fs.write`, `fs.remove`, `fs.copy`,
 * `http.request`) or that the server refused (`permission.denied`).
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
import { audit } from "./audit.ts";
import type { Labels } from "./metrics.ts";
import { REQUEST_DURATION, REQUEST_ERRORS, REQUESTS } from "./server_metrics.ts";

/** A request as {@linkcode observeRequest} sees it. */
export interface ObservedRequest {
  /** The wire method. */
  method: string;
  /** The request's params as received (only read once the request succeeded or was refused). */
  params: unknown;
  /** The session of the connection at the time of the answer, if any. */
  session(): string | undefined;
}

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

/** Counts, times and audits a request that was answered (`result`) or refused (`error`). */
function record(
  request: ObservedRequest,
  label: Labels,
  started: number,
  outcome: { result: unknown } | { error: unknown },
): void {
  if ("error" in outcome) REQUEST_ERRORS.inc(1, label);
  auditRequest(request.method, request.params, request.session(), outcome);
  REQUESTS.inc(1, label);
  REQUEST_DURATION.observe((performance.now() - started) / 1000, label);
}

/**
 * Runs a request's handler and records it: counts and times it by method
 * (methods outside the method table count as `unknown`, so the label stays
 * bounded) and audits it. A synchronous handler's result is recorded and
 * returned at once (no promise is made for it); an asynchronous one's when
 * it settles.
 *
 * @example
 * ```ts
 * import { observeRequest } from "./requests.ts";
 * const result = await observeRequest(
 *   { method: "environment/status", params: {}, session: () => undefined },
 *   () => ({ status: "ready" }),
 * );
 * console.log(result); // { status: "ready" }
 * ```
 *
 * @param request The request.
 * @param handle Answers it.
 * @returns The handler's result (a promise when the handler returned one).
 * @throws What the handler throws.
 */
export function observeRequest<T>(request: ObservedRequest, handle: () => T): T {
  const label = methodLabels(request.method);
  const started = performance.now();
  let result: T;
  try {
    result = handle();
  } catch (error) {
    record(request, label, started, { error });
    throw error;
  }
  if (!(result instanceof Promise)) {
    record(request, label, started, { result });
    return result;
  }
  return result.then(
    (value) => {
      record(request, label, started, { result: value });
      return value;
    },
    (error) => {
      record(request, label, started, { error });
      throw error;
    },
  ) as T;
}
