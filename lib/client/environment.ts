/**
 * The client's one environment rule, used by `startProcess`, `exec` and
 * `exec-server run` alike: a process gets the server's environment minus the
 * variables whose names match `*KEY*`, `*SECRET*` or `*TOKEN*` (the
 * protocol's default excludes), with the caller's `env` on top.
 * `inheritEnv: false` gives exactly `env`; an explicit `envPolicy` replaces
 * the rule.
 *
 * @module
 */

import type { ParamsOf } from "../protocol/methods.ts";

/** The wire `envPolicy` of `process/start`. */
export type EnvPolicy = NonNullable<ParamsOf<"process/start">["envPolicy"]>;

/** How a process's environment is chosen. */
export interface EnvironmentOptions {
  /** Variables set on top of the inherited ones. */
  env?: Record<string, string>;
  /**
   * Start from the server's environment (minus `*KEY*`, `*SECRET*`,
   * `*TOKEN*`); `false` starts from nothing but `env`.
   *
   * @default {true}
   */
  inheritEnv?: boolean;
  /** The protocol's own policy, used as given instead of the rule. */
  envPolicy?: EnvPolicy;
}

/** The policy of the rule: all the server's variables, minus the default excludes. */
export const INHERIT_SERVER_ENVIRONMENT: Readonly<EnvPolicy> = Object.freeze({
  inherit: "all",
  ignoreDefaultExcludes: false,
  exclude: [],
  set: {},
  includeOnly: [],
});

/**
 * The `env` and `envPolicy` members of `process/start` for the options.
 *
 * @example
 * ```ts
 * import { processEnvironment } from "./environment.ts";
 * console.log(processEnvironment({ env: { A: "1" } }).envPolicy?.inherit); // "all"
 * console.log(processEnvironment({ env: { A: "1" }, inheritEnv: false })); // { env: { A: "1" }, envPolicy: undefined }
 * ```
 *
 * @param options The caller's choices.
 */
export function processEnvironment(
  options: EnvironmentOptions,
): { env: Record<string, string>; envPolicy: EnvPolicy | undefined } {
  const envPolicy = options.envPolicy ??
    (options.inheritEnv === false ? undefined : { ...INHERIT_SERVER_ENVIRONMENT });
  return { env: options.env ?? {}, envPolicy };
}
