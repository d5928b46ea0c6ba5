/**
 * The child environment of `process/start` (docs/protocol.md section 8.2): `env` alone, or
 * `envPolicy` applied to the server's environment with `env` on top.
 *
 * @module
 */

import type { ParamsOf } from "../../protocol/methods.ts";

/** The `envPolicy` member of `process/start`. */
export type EnvPolicy = NonNullable<ParamsOf<"process/start">["envPolicy"]>;

/** Server variables kept by `inherit: "core"`. */
export const CORE_VARIABLES: readonly string[] = [
  "HOME",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "LOGNAME",
  "PATH",
  "SHELL",
  "TEMP",
  "TMP",
  "TMPDIR",
  "USER",
];

const DEFAULT_EXCLUDES = ["*KEY*", "*SECRET*", "*TOKEN*"];

/** Variables never passed to children (they configure this server). */
const SERVER_ONLY = ["CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE"];

function globToRegExp(glob: string): RegExp {
  let source = "";
  for (const ch of glob) {
    if (ch === "*") source += ".*";
    else if (ch === "?") source += ".";
    else source += ch.replace(/[\\^$.|+()[\]{}]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "i");
}

function matchesAny(name: string, patterns: RegExp[]): boolean {
  return patterns.some((pattern) => pattern.test(name));
}

/**
 * Computes a child's environment.
 *
 * @param env The request's `env` (always applied last).
 * @param policy The optional `envPolicy`.
 * @param serverEnv The server's environment (defaults to `Deno.env`).
 */
export function childEnvironment(
  env: Record<string, string>,
  policy: EnvPolicy | undefined,
  serverEnv: () => Record<string, string> = () => Deno.env.toObject(),
): Record<string, string> {
  const out = policy ? policyVariables(policy, serverEnv) : new Map<string, string>();
  for (const [name, value] of Object.entries(env)) out.set(name, value);
  for (const name of SERVER_ONLY) out.delete(name);
  return Object.fromEntries(out);
}

/** The variables `policy` gives a child before the request's `env` goes on top. */
function policyVariables(
  policy: EnvPolicy,
  serverEnv: () => Record<string, string>,
): Map<string, string> {
  const out = new Map<string, string>();
  const base = policy.inherit === "none" ? {} : serverEnv();
  for (const [name, value] of Object.entries(base)) {
    if (policy.inherit === "core" && !CORE_VARIABLES.includes(name)) continue;
    out.set(name, value);
  }
  const excludes = [
    ...(policy.ignoreDefaultExcludes ? [] : DEFAULT_EXCLUDES),
    ...policy.exclude,
  ].map(globToRegExp);
  for (const name of [...out.keys()]) {
    if (matchesAny(name, excludes)) out.delete(name);
  }
  for (const [name, value] of Object.entries(policy.set)) out.set(name, value);
  if (policy.includeOnly.length > 0) {
    const includes = policy.includeOnly.map(globToRegExp);
    for (const name of [...out.keys()]) {
      if (!matchesAny(name, includes)) out.delete(name);
    }
  }
  return out;
}
