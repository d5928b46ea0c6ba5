/**
 * Request helpers shared by the protocol tests: a request that must succeed
 * ({@linkcode call}), one that must fail ({@linkcode callError}) and a
 * `process/start` with the tests' usual defaults ({@linkcode startProcess}).
 * They work on any {@linkcode ProtocolClient}: a subprocess server's or an
 * in-process one's.
 *
 * @module
 */

import type { Json, ProtocolClient } from "./server_harness.ts";
import { toJson } from "./server_harness.ts";

/** An error response's `error` member. */
export interface WireError {
  /** The JSON-RPC error code. */
  code: number;
  /** The message text. */
  message: string;
  /** Structured details (`data.kind` and friends). */
  data?: Json;
}

/** The error {@linkcode call} throws for an error response; `error` is the response's. */
export class CallFailed extends Error {
  /** The response's `error` member. */
  readonly error: WireError;

  /** @param method The method called. @param error The error response. */
  constructor(method: string, error: WireError) {
    super(`${method} failed: ${toJson(error)}`);
    this.name = "CallFailed";
    this.error = error;
  }
}

let lastId = 1000;

/** A request id no other request of this test process used (ids count up from 1001). */
export function nextRequestId(): number {
  return ++lastId;
}

/** Sends a request and returns its result; throws {@linkcode CallFailed} on an error response. */
export async function call(
  client: ProtocolClient,
  method: string,
  params?: unknown,
): Promise<Json> {
  const response = await client.request(nextRequestId(), method, params);
  if (response.error !== undefined) throw new CallFailed(method, response.error as WireError);
  return response.result as Json;
}

/** Sends a request that must fail and returns its error; throws when it succeeds. */
export async function callError(
  client: ProtocolClient,
  method: string,
  params?: unknown,
): Promise<WireError> {
  const response = await client.request(nextRequestId(), method, params);
  if (response.error === undefined) {
    throw new Error(`${method} should fail, got ${toJson(response.result)}`);
  }
  return response.error as WireError;
}

/** The environment {@linkcode startProcess} gives a process unless told otherwise. */
export const PROCESS_ENV: Record<string, string> = { PATH: "/usr/local/bin:/usr/bin:/bin" };

/** The argv of `/bin/sh -c script`. */
export function sh(script: string): string[] {
  return ["/bin/sh", "-c", script];
}

/**
 * The params of a pipe process in `/tmp` with {@linkcode PROCESS_ENV};
 * `extra` overrides or adds members.
 */
export function startParams(processId: string, argv: string[], extra: Json = {}): Json {
  return { processId, argv, cwd: "file:///tmp", env: PROCESS_ENV, tty: false, ...extra };
}

/** Starts a process with {@linkcode startParams} and returns the result. */
export function startProcess(
  client: ProtocolClient,
  processId: string,
  argv: string[],
  extra: Json = {},
): Promise<Json> {
  return call(client, "process/start", startParams(processId, argv, extra));
}
