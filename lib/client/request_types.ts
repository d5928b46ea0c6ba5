/**
 * The shapes of the client's requests: which requests a connected client
 * makes, the arguments and options a caller gives them, and the params of
 * `startProcess`. The facade (`client.ts`) and the helpers built on it
 * (`exec.ts`, `fs.ts`) all speak them, so they live below all three.
 *
 * @module
 */

import type { ClientRequestName, ParamsOf, ResultOf } from "../protocol/methods.ts";
import type { EnvironmentOptions } from "./environment.ts";
import type { RemotePath } from "./paths.ts";

/** Client → server requests callable on a connected client (`initialize` is the client's own). */
export type SessionRequestName = Exclude<ClientRequestName, "initialize">;

/** Options for one request. */
export interface RequestOptions {
  /** Fails the call with `TimedOutError` after this many ms. */
  timeoutMs?: number;
  /**
   * If the connection is lost before the answer, send the request again
   * once the client has reconnected. Only for idempotent requests.
   *
   * @default {false}
   */
  retry?: boolean;
}

/** The arguments of a request: params may be left out for methods without params. */
export type RequestArgs<M extends SessionRequestName> = null extends ParamsOf<M>
  ? [params?: RequestParams<M> | null, options?: RequestOptions]
  : [params: RequestParams<M>, options?: RequestOptions];

/**
 * A byte member as a caller may give it: a `Uint8Array` (sent as base64) or
 * the base64 text itself. Byte members are those the method table decodes
 * as bytes and the `…Base64` strings.
 */
export type ByteInput<K, T> = T extends Uint8Array ? Uint8Array | string
  : K extends `${string}Base64` ? T extends string ? T | Uint8Array : T
  : T;

/** The params of a request as a caller gives them: byte members also take a `Uint8Array`. */
export type RequestParams<M extends SessionRequestName> = ParamsOf<M> extends infer P
  ? P extends object ? { [K in keyof P]: ByteInput<K, P[K]> } : P
  : never;

/** One typed function per client → server request, keyed by wire name. */
export type RequestMethods = {
  readonly [M in SessionRequestName]: (...args: RequestArgs<M>) => Promise<ResultOf<M>>;
};

/**
 * Params of {@linkcode ExecClient.startProcess}: the `process/start` params
 * with defaults for the required members.
 */
export type StartProcessParams =
  & Omit<ParamsOf<"process/start">, "processId" | "cwd" | "env" | "envPolicy" | "tty">
  & EnvironmentOptions
  & {
    /** The session-scoped id; a random UUID by default. */
    processId?: string;
    /**
     * Working directory: an absolute path or a `file:` URL; the server's cwd
     * (or temp dir) by default.
     */
    cwd?: RemotePath;
    /** Run on a pseudo-terminal; `false` by default. */
    tty?: boolean;
  };
