/**
 * What a connection publishes about each request it answers, for whoever
 * watches requests (the operator's view, `observe/requests.ts`, counts,
 * times and audits them; nothing here knows it).
 *
 * @module
 */

import { Hook } from "../host/hook.ts";

/** A request that was answered (`result`) or refused (`error`). */
export interface AnsweredRequest {
  /** The wire method. */
  readonly method: string;
  /** The request's params as received. */
  readonly params: unknown;
  /** The session of the connection at the time of the answer, if any. */
  readonly session: string | undefined;
  /** When the handler was called (`performance.now()`). */
  readonly started: number;
  /** What the handler returned (or its promise resolved with), or what it threw. */
  readonly outcome: { readonly result: unknown } | { readonly error: unknown };
}

/** Published once per request, when its answer is known (before it is sent). */
export const REQUEST_ANSWERED: Hook<[request: AnsweredRequest]> = new Hook();

/**
 * Runs a request's handler and publishes its answer on
 * {@linkcode REQUEST_ANSWERED}. A synchronous handler's result is published
 * and returned at once (no promise is made for it); an asynchronous one's
 * when it settles. With nobody subscribed the handler just runs.
 *
 * @example
 * ```ts
 * import { answerRequest, REQUEST_ANSWERED } from "./request_events.ts";
 * const stop = REQUEST_ANSWERED.subscribe((request) => console.log(request.method));
 * const result = answerRequest("environment/status", {}, () => undefined, () => ({ status: "ready" }));
 * console.log(result); // logs "environment/status", then { status: "ready" }
 * stop();
 * ```
 *
 * @param method The wire method.
 * @param params The params as received.
 * @param session The connection's session at the time of the answer.
 * @param handle Answers the request.
 * @returns The handler's result (a promise when the handler returned one).
 * @throws What the handler throws.
 */
export function answerRequest<T>(
  method: string,
  params: unknown,
  session: () => string | undefined,
  handle: () => T,
): T {
  if (!REQUEST_ANSWERED.subscribed) return handle();
  const started = performance.now();
  const publish = (outcome: AnsweredRequest["outcome"]) =>
    REQUEST_ANSWERED.publish({ method, params, session: session(), started, outcome });
  let result: T;
  try {
    result = handle();
  } catch (error) {
    publish({ error });
    throw error;
  }
  if (!(result instanceof Promise)) {
    publish({ result });
    return result;
  }
  return result.then(
    (value) => {
      publish({ result: value });
      return value;
    },
    (error) => {
      publish({ error });
      throw error;
    },
  ) as T;
}
