/**
 * Reading the server's own environment.
 *
 * @module
 */

/**
 * A variable of the server's environment, or `undefined` when it is unset
 * or the server may not read it (`--allow-env` scoped).
 *
 * @param name The variable's name.
 *
 * @example
 * ```ts
 * import { serverEnv } from "./env.ts";
 * console.log(typeof serverEnv("PATH")); // "string"
 * ```
 */
export function serverEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}
