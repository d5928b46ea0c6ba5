/**
 * The errors of `http/request`, with the reference's codes and wording.
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import { displayUrl } from "./url.ts";

/** The message of a body that failed to decode (or to arrive). */
export const BODY_DECODE_ERROR = "error decoding response body";

/**
 * `-32602` for invalid params.
 *
 * @param message The message.
 */
export function invalid(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidParams, message);
}

/**
 * `-32603 http/request failed: <reason>`.
 *
 * @param reason What went wrong.
 */
export function failed(reason: string): RpcError {
  return new RpcError(ErrorCode.InternalError, `http/request failed: ${reason}`);
}

/**
 * `-32603 failed to read http/request response body: <reason>`.
 *
 * @param reason What went wrong.
 */
export function bodyFailed(reason: string): RpcError {
  return new RpcError(
    ErrorCode.InternalError,
    `failed to read http/request response body: ${reason}`,
  );
}

/**
 * The transport failure of one hop, naming its URL.
 *
 * @param url The hop's URL.
 */
export function sendFailed(url: URL): RpcError {
  return failed(`error sending request for url (${displayUrl(url)})`);
}
