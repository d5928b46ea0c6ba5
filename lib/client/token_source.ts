/**
 * Token sources for the `token` option of `connect`: a bearer token kept
 * in a file or an environment variable, for either `--ws-auth` mode (a
 * capability token or a signed JWT). Each is read again before every dial,
 * so an orchestrator that rewrites the file with a fresh short-lived JWT is
 * picked up at the next reconnect.
 *
 * @module
 */

import type { TokenSource } from "./dial.ts";

/**
 * A token read from a file before every dial: its content, trimmed of
 * surrounding whitespace. The first read happens when this is called, so a
 * missing or empty file fails at once.
 *
 * @example
 * ```ts
 * import { tokenFromFile } from "@exec-server/exec-server";
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "eyJhbGciOiJIUzI1NiJ9.e30.sig\n");
 * const token = await tokenFromFile(path);
 * console.log(await token()); // "eyJhbGciOiJIUzI1NiJ9.e30.sig"
 * await Deno.remove(path);
 * ```
 *
 * @param path The token file.
 * @returns The source, to pass as `token` to `connect`.
 * @throws {TypeError} When the file cannot be read or holds only whitespace.
 */
export async function tokenFromFile(path: string): Promise<TokenSource> {
  const read = async (): Promise<string> => {
    let content: string;
    try {
      content = await Deno.readTextFile(path);
    } catch (err) {
      throw new TypeError(`Cannot read token file "${path}": ${(err as Error).message}`);
    }
    const token = content.trim();
    if (token === "") throw new TypeError(`Cannot use token file "${path}": it is empty`);
    return token;
  };
  await read();
  return read;
}

/**
 * A token read from an environment variable before every dial, trimmed. It
 * is checked when this is called, so an unset or empty variable fails at once.
 *
 * @example
 * ```ts
 * import { tokenFromEnv } from "@exec-server/exec-server";
 * Deno.env.set("EXAMPLE_EXEC_SERVER_TOKEN", "a-capability-token");
 * const token = tokenFromEnv("EXAMPLE_EXEC_SERVER_TOKEN");
 * console.log(await token()); // "a-capability-token"
 * ```
 *
 * @param name The variable's name.
 * @returns The source, to pass as `token` to `connect`.
 * @throws {TypeError} When the variable is unset or holds only whitespace.
 */
export function tokenFromEnv(name: string): TokenSource {
  const read = (): string => {
    const token = Deno.env.get(name)?.trim();
    if (!token) throw new TypeError(`Cannot use token variable ${name}: it is unset or empty`);
    return token;
  };
  read();
  return read;
}
