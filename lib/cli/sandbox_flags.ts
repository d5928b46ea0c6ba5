/**
 * The server's own sandbox from its flags (`--sandbox`, `--writable-root`,
 * `--deny-read`, `--network-access`), checked before the server starts: by
 * `exec-server` and by `exec-server mcp`'s in-process server alike.
 *
 * @module
 */

import { sandboxAvailable } from "../server/sandbox/availability.ts";
import { setSandboxLayerChoice } from "../server/sandbox/layer.ts";
import { setSandboxUnixSockets } from "../server/sandbox/unix_sockets.ts";
import {
  confines,
  type ServerSandbox,
  serverSandbox,
  withSandboxTempDir,
} from "../server/sandbox/server_policy.ts";
import type { ServerFlags } from "./server_flags.ts";

/** The flags the sandbox is made of. */
export type SandboxFlags = Pick<
  ServerFlags,
  | "sandbox"
  | "writable-root"
  | "deny-read"
  | "network-access"
  | "sandbox-layer"
  | "sandbox-unix-sockets"
>;

/**
 * Builds the server's sandbox from its flags. A confining mode that cannot
 * be enforced here (no bubblewrap, no user namespaces) stops the server: it
 * never runs processes unconfined when told to confine them.
 *
 * @example
 * ```ts
 * import { sandboxFromFlags } from "./sandbox_flags.ts";
 * import { parseServerFlags } from "./server_flags.ts";
 * const fail = (message: string): never => {
 *   throw new Error(message);
 * };
 * const flags = parseServerFlags(["--sandbox", "read-only"]);
 * console.log(sandboxFromFlags(flags, [], fail).mode); // "read-only" (or an Error without bubblewrap)
 * ```
 *
 * @param flags The parsed flags.
 * @param secretFiles The server's secret files (denied in every sandbox).
 * @param fail Called with the message and the exit code (2: a bad command line; 1: a sandbox this
 *   machine cannot enforce); it does not return.
 */
export function sandboxFromFlags(
  flags: SandboxFlags,
  secretFiles: string[],
  fail: (message: string, code: 1 | 2) => never,
): ServerSandbox {
  setSandboxLayerChoice(flags["sandbox-layer"]);
  setSandboxUnixSockets(flags["sandbox-unix-sockets"]);
  let sandbox: ServerSandbox;
  try {
    sandbox = serverSandbox({
      mode: flags.sandbox,
      writableRoots: flags["writable-root"],
      denyRead: flags["deny-read"],
      networkAccess: flags["network-access"],
      secretFiles,
    });
  } catch (err) {
    fail((err as Error).message, 2);
  }
  for (const root of sandbox.writableRoots) {
    let directory = false;
    try {
      directory = Deno.statSync(root).isDirectory;
    } catch {
      // Reported below.
    }
    if (!directory) fail(`--writable-root ${root} is not an existing directory`, 2);
  }
  if (confines(sandbox)) {
    const availability = sandboxAvailable();
    if (!availability.ok) {
      fail(
        `--sandbox ${sandbox.mode} cannot be enforced here, so the server does not start: ${availability.reason}`,
        1,
      );
    }
  }
  return withSandboxTempDir(sandbox);
}
