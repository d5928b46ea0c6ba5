/**
 * What a served request tells the operator: its count and duration by
 * method, and the audit events of the requests that change things
 * (`fs.write`, `fs.remove`, `fs.copy`, `http.request`; a process's are
 * audited by its `ProcessWatch`) or
 * that the server refused (`permission.denied`).
 *
 * @module
 */

import { errorKind, RpcError } from "../../protocol/errors.ts";
import { lookupMethod } from "../../protocol/methods.ts";
import { pathFromUri } from "../host/path_uri.ts";
import { audit } from "./audit.ts";
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

type Params = Record<string, unknown>;

/** A `file:` URI as a path for the log (the URI itself when it names no local path). */
function pathOf(uri: unknown): string {
  if (typeof uri !== "string") return String(uri);
  try {
    return pathFromUri(uri);
  } catch {
    return uri;
  }
}

function originOf(url: unknown): string {
  try {
    return new URL(String(url)).origin;
  } catch {
    return String(url);
  }
}

/** The audit event of a request that succeeded, if it has one. */
function auditSuccess(method: string, params: Params, result: unknown, session: string): void {
  switch (method) {
    case "fs/writeFile":
    case "fs/createDirectory":
      audit("fs.write", { session, method, path: pathOf(params.path) });
      return;
    case "fs/open":
      if (params.mode === "replace") {
        audit("fs.write", { session, method, path: pathOf(params.path) });
      }
      return;
    case "fs/remove":
      audit("fs.remove", {
        session,
        path: pathOf(params.path),
        recursive: params.recursive !== false,
      });
      return;
    case "fs/copy":
      audit("fs.copy", {
        session,
        sourcePath: pathOf(params.sourcePath),
        destinationPath: pathOf(params.destinationPath),
      });
      return;
    case "http/request":
      audit("http.request", {
        session,
        method: String(params.method),
        origin: originOf(params.url),
        status: Number((result as { status?: unknown }).status),
      });
  }
}

function auditFailure(
  method: string,
  params: Params,
  err: unknown,
  session: string | undefined,
): void {
  if (!(err instanceof RpcError)) return;
  const data = err.data as { permission?: unknown; resource?: unknown } | undefined;
  if (errorKind(err.data) === "permissionDenied") {
    audit("permission.denied", {
      session: session ?? null,
      method,
      permission: String(data?.permission ?? ""),
      resource: String(data?.resource ?? ""),
    });
  } else if (method === "http/request" && session !== undefined) {
    audit("http.request", {
      session,
      method: String(params.method),
      origin: originOf(params.url),
      status: null,
    });
  }
}

/**
 * Runs a request's handler and records it: counts and times it by method
 * (methods outside the method table count as `unknown`, so the label stays
 * bounded) and audits it.
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
 * @returns The handler's result.
 * @throws What the handler throws.
 */
export async function observeRequest<T>(
  request: ObservedRequest,
  handle: () => T,
): Promise<Awaited<T>> {
  const label = { method: lookupMethod(request.method) ? request.method : "unknown" };
  const started = performance.now();
  const params =
    (typeof request.params === "object" && request.params !== null ? request.params : {}) as Params;
  try {
    const result = await handle();
    const session = request.session();
    if (session !== undefined) auditSuccess(request.method, params, result, session);
    return result;
  } catch (err) {
    REQUEST_ERRORS.inc(1, label);
    auditFailure(request.method, params, err, request.session());
    throw err;
  } finally {
    REQUESTS.inc(1, label);
    REQUEST_DURATION.observe((performance.now() - started) / 1000, label);
  }
}
