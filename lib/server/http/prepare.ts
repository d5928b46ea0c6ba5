/**
 * Checking `http/request` params in the reference's order (method, URL,
 * scheme, then each header), with `valueEnvVar` resolved and URL
 * credentials turned into `authorization`.
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import type { ParamsOf } from "../../protocol/methods.ts";
import { invalid } from "./errors.ts";
import { headerGet, type HeaderMap, headerSet, isValidHeaderValue } from "./headers.ts";
import { percentDecode, urlErrorReason } from "./url.ts";
import { isToken } from "./wire.ts";

/** A validated request, ready for the first hop. */
export interface PreparedRequest {
  /** The method, as given. */
  method: string;
  /** The URL, without credentials. */
  url: URL;
  /** The request headers. */
  headers: HeaderMap;
  /** The body; `null` when empty. */
  body: Uint8Array | null;
  /** The redirect policy. */
  redirects: "follow" | "stop";
}

/**
 * Validates the params in the reference's order: method, URL, scheme, then each header.
 *
 * @param params The request's params.
 * @throws {RpcError} `-32602` with the reference's message; `permissionDenied` for a
 * `valueEnvVar` outside the server's `--allow-env`.
 *
 * @example
 * ```ts
 * import { prepareRequest } from "./prepare.ts";
 * const prepared = prepareRequest({ method: "GET", url: "http://u:p@127.0.0.1/", requestId: "" });
 * console.log(prepared.url.href, prepared.headers[0]?.name); // "http://127.0.0.1/" "authorization"
 * ```
 */
export function prepareRequest(params: ParamsOf<"http/request">): PreparedRequest {
  if (!isToken(params.method)) throw invalid("http/request method is invalid: invalid HTTP method");
  let url: URL;
  try {
    url = new URL(params.url);
  } catch {
    throw invalid(`http/request url is invalid: ${urlErrorReason(params.url)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== "http" && scheme !== "https") {
    throw invalid(`http/request only supports http and https URLs, got ${scheme}`);
  }
  const headers: HeaderMap = [];
  if (url.username !== "" || url.password !== "") {
    const credentials = `${percentDecode(url.username)}:${percentDecode(url.password)}`;
    headers.push({
      name: "authorization",
      values: [`Basic ${new TextEncoder().encode(credentials).toBase64()}`],
    });
    url.username = "";
    url.password = "";
  }
  const given = new Set<string>();
  const list = params.headers ?? [];
  for (let i = 0; i < list.length; i++) {
    const header = list[i]!;
    if (!isToken(header.name)) {
      throw invalid("http/request header name is invalid: invalid HTTP header name");
    }
    let value = header.value;
    if (header.valueEnvVar !== null && header.valueEnvVar !== undefined) {
      value += envValue(header.name, header.valueEnvVar);
    }
    if (!isValidHeaderValue(value)) {
      throw invalid(
        `http/request header value is invalid for ${header.name}: failed to parse header value`,
      );
    }
    const name = header.name.toLowerCase();
    if (given.has(name)) headerGet(headers, name)!.push(value);
    else headerSet(headers, name, value);
    given.add(name);
  }
  return {
    method: params.method,
    url,
    headers,
    body: params.bodyBase64 && params.bodyBase64.length > 0 ? params.bodyBase64 : null,
    redirects: params.redirectPolicy === "stop" ? "stop" : "follow",
  };
}

/** Reads `valueEnvVar` for header `header`, with the reference's messages when it is unset or empty. */
function envValue(header: string, variable: string): string {
  let value: string | undefined;
  if (variable !== "" && !/[=\0]/.test(variable)) {
    const state = Deno.permissions.querySync({ name: "env", variable }).state;
    if (state !== "granted") {
      throw new RpcError(
        ErrorCode.InvalidRequest,
        `env access to "${variable}" is denied by the server's permissions; ` +
          `start it with --allow-env=${variable}`,
        {
          data: {
            kind: "permissionDenied",
            permission: "env",
            resource: variable,
            flag: "--allow-env",
          },
        },
      );
    }
    value = Deno.env.get(variable);
  }
  if (value === undefined) {
    throw invalid(
      `http/request header ${header} requires executor environment variable ${variable}`,
    );
  }
  if (value === "") {
    throw invalid(
      `http/request header ${header} requires a non-empty executor environment variable ${variable}`,
    );
  }
  return value;
}
