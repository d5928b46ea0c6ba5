/**
 * Where this machine keeps Codex's own files, as the reference finds them: what
 * `environmentConfig/read` reads its layers from and `capabilities/discoverV2` its plugins and
 * skills.
 *
 * @module
 */

import { joinPath } from "./path_uri.ts";
import { serverEnv } from "./env.ts";

/** The places of Codex's files on this machine. */
export interface CodexPlaces {
  /** The system directory: `/etc/codex`. */
  systemDir: string;
  /** Codex's home: `$CODEX_HOME`, else `~/.codex`. */
  codexHome: string;
  /** The user's home directory (`$HOME`), when known. */
  userHome: string | undefined;
}

/**
 * This machine's places, from the server's environment.
 *
 * @example
 * ```ts
 * import { codexPlaces } from "./codex_places.ts";
 * console.log(codexPlaces().systemDir); // "/etc/codex"
 * ```
 */
export function codexPlaces(): CodexPlaces {
  const userHome = serverEnv("HOME") || undefined;
  return {
    systemDir: "/etc/codex",
    codexHome: serverEnv("CODEX_HOME") || joinPath(userHome ?? "/", ".codex"),
    userHome,
  };
}
