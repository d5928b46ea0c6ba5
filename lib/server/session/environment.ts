/**
 * `environmentInfo`: what this executor is and what it can do (docs/protocol.md section 9).
 *
 * @module
 */

import { type EnvironmentInfo, type ExtensionName, EXTENSIONS } from "../../protocol/methods.ts";
import { serverEnv } from "../host/env.ts";
import { uriFromPath } from "../host/path_uri.ts";
import { ptySupported } from "../process/pty_support.ts";
import { sandboxCapability } from "../sandbox/availability.ts";
import { activeServerSandbox, confines } from "../sandbox/server_policy.ts";

/** This server's version, reported as `executorVersion`. */
export const VERSION = "0.1.0";

function loginShell(): { name: string; path: string } {
  let path: string | undefined;
  try {
    const user = serverEnv("USER") ?? serverEnv("LOGNAME");
    const uid = Deno.uid();
    const passwd = Deno.readTextFileSync("/etc/passwd");
    for (const line of passwd.split("\n")) {
      const fields = line.split(":");
      if (fields.length >= 7 && (fields[2] === String(uid) || (user && fields[0] === user))) {
        path = fields[6];
        break;
      }
    }
  } catch {
    // No passwd access: fall back below.
  }
  path ||= serverEnv("SHELL") || "/bin/sh";
  return { name: path.slice(path.lastIndexOf("/") + 1), path };
}

function platformOs(): string {
  return Deno.build.os === "darwin" ? "macos" : Deno.build.os;
}

function safeUri(path: string | undefined, fallback: string): string {
  try {
    return uriFromPath(path ?? fallback);
  } catch {
    return uriFromPath(fallback);
  }
}

/**
 * The capability flags this server really implements. Everything Codex may
 * ask for that we do not do is `false`, so a client never relies on it.
 * `serverSandbox` is `true` when the server's own `--sandbox` confines every
 * process and `fs/*` call (details in `protocol/describe`).
 */
export function capabilities(): Record<string, boolean> {
  return {
    networkProxyLaunch: false,
    networkProxyReviewDomains: false,
    networkProxyTransparentTcp: false,
    credentialMasking: false,
    credentialMaskingCustomProviders: false,
    capabilityDiscoverySandbox: true,
    fsWatchMissing: true,
    capabilityDiscoveryV2: true,
    environmentConfigRead: true,
    httpHeaderEnvVars: true,
    sandboxedFileStreaming: true,
    fileWriteStreaming: true,
    shellSnapshotV2: false,
    windowsMxc: false,
    linuxRootWritePreservesDevices: false,
    linuxApprovedRootWritePreservesRestrictions: false,
    processSandbox: sandboxCapability(),
    serverSandbox: confines(),
    ptyProcesses: ptySupported({ probe: false }),
    ...Object.fromEntries(supportedExtensions().map((name) => [name, true])),
  };
}

/**
 * The extensions of {@linkcode EXTENSIONS} this server offers here (resizing
 * needs pseudo-terminals). Each is announced as a capability flag.
 */
export function supportedExtensions(): ExtensionName[] {
  const pty = ptySupported({ probe: false });
  return (Object.keys(EXTENSIONS) as ExtensionName[]).filter((name) =>
    name !== "processResize" || pty
  );
}

/**
 * The extensions granted to a client that asked for `requested` in
 * `initialize`: the supported ones it named, in table order. Unknown names
 * are ignored.
 *
 * @param requested The names the client sent.
 */
export function grantExtensions(requested: readonly string[]): ExtensionName[] {
  return supportedExtensions().filter((name) => requested.includes(name));
}

/** What the server's environment says: read once (the server changes neither its environment nor its directory). */
let described: Omit<EnvironmentInfo, "capabilities"> | undefined;

function describeEnvironment(): Omit<EnvironmentInfo, "capabilities"> {
  const tmpdir = serverEnv("TMPDIR");
  let cwd: string | undefined;
  try {
    cwd = Deno.cwd();
  } catch {
    cwd = undefined;
  }
  const trimmedTmp = tmpdir && tmpdir.length > 1 ? tmpdir.replace(/\/+$/, "") : tmpdir;
  return {
    shell: loginShell(),
    executorVersion: VERSION,
    cwd: cwd === undefined ? undefined : safeUri(cwd, "/"),
    userHomeDir: safeUri(serverEnv("HOME"), "/"),
    platformOs: platformOs(),
    prependPathDirs: [],
    ...temporaryDirectories(trimmedTmp),
  };
}

/**
 * `tempDir` and `temporaryDirectories`: the server's `TMPDIR` (the
 * reference's), or under a confining `--sandbox` the sandbox's own
 * temporary directory, which its processes and fs calls can write.
 */
function temporaryDirectories(
  tmpdir: string | undefined,
): Pick<EnvironmentInfo, "tempDir" | "temporaryDirectories"> {
  const own = activeServerSandbox().tempDir;
  if (own !== undefined) {
    return { tempDir: uriFromPath(own), temporaryDirectories: [uriFromPath(own)] };
  }
  return {
    temporaryDirectories: tmpdir ? [safeUri(tmpdir, "/tmp")] : [],
    tempDir: safeUri(tmpdir, "/tmp"),
  };
}

/**
 * Builds a fresh `environmentInfo`. The environment's part (shell, directories, OS) is read on
 * the first call (a passwd read and a few env reads, about 0.1 ms: each `initialize` paid it);
 * the capabilities are asked each time, since the sandbox probe can change them.
 */
export function environmentInfo(): EnvironmentInfo {
  described ??= describeEnvironment();
  return {
    ...described,
    shell: { ...described.shell },
    prependPathDirs: [...described.prependPathDirs],
    temporaryDirectories: [...described.temporaryDirectories],
    capabilities: capabilities(),
  };
}
