/**
 * `environmentInfo`: what this executor is and what it can do (docs/protocol.md §9).
 *
 * @module
 */

import { type EnvironmentInfo, type ExtensionName, EXTENSIONS } from "../../protocol/methods.ts";
import { serverEnv } from "../host/env.ts";
import { uriFromPath } from "../host/path_uri.ts";
import { ptySupported } from "../process/pty_support.ts";
import { sandboxCapability } from "../sandbox/availability.ts";
import { confines } from "../sandbox/server_policy.ts";

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

/** What the capability flags depend on that can change while the server runs. */
interface CapabilityState {
  processSandbox: boolean;
  serverSandbox: boolean;
  ptyProcesses: boolean;
}

function capabilityState(): CapabilityState {
  return {
    processSandbox: sandboxCapability(),
    serverSandbox: confines(),
    ptyProcesses: ptySupported({ probe: false }),
  };
}

function capabilitiesFor(state: CapabilityState): Record<string, boolean> {
  return {
    networkProxyLaunch: false,
    networkProxyReviewDomains: false,
    networkProxyTransparentTcp: false,
    credentialMasking: false,
    credentialMaskingCustomProviders: false,
    capabilityDiscoverySandbox: false,
    fsWatchMissing: true,
    capabilityDiscoveryV2: false,
    environmentConfigRead: false,
    httpHeaderEnvVars: true,
    sandboxedFileStreaming: true,
    fileWriteStreaming: true,
    shellSnapshotV2: false,
    windowsMxc: false,
    linuxRootWritePreservesDevices: false,
    linuxApprovedRootWritePreservesRestrictions: false,
    processSandbox: state.processSandbox,
    serverSandbox: state.serverSandbox,
    ptyProcesses: state.ptyProcesses,
    ...Object.fromEntries(extensionsFor(state.ptyProcesses).map((name) => [name, true])),
  };
}

/**
 * The capability flags this server really implements. Everything Codex may
 * ask for that we do not do is `false`, so a client never relies on it.
 * `serverSandbox` is `true` when the server's own `--sandbox` confines every
 * process and `fs/*` call (details in `protocol/describe`).
 */
export function capabilities(): Record<string, boolean> {
  return capabilitiesFor(capabilityState());
}

/**
 * The extensions of {@linkcode EXTENSIONS} this server offers here (resizing
 * needs pseudo-terminals). Each is announced as a capability flag.
 */
export function supportedExtensions(): ExtensionName[] {
  return extensionsFor(ptySupported({ probe: false }));
}

function extensionsFor(pty: boolean): ExtensionName[] {
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
    temporaryDirectories: trimmedTmp ? [safeUri(trimmedTmp, "/tmp")] : [],
    tempDir: safeUri(trimmedTmp, "/tmp"),
  };
}

/** The last `environmentInfo` built (frozen, shared by every answer) and the state it was built for. */
let built: { state: CapabilityState; info: EnvironmentInfo } | undefined;

function sameState(a: CapabilityState, b: CapabilityState): boolean {
  return a.processSandbox === b.processSandbox && a.serverSandbox === b.serverSandbox &&
    a.ptyProcesses === b.ptyProcesses;
}

/** Freezes `value` and everything it holds. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * The server's `environmentInfo`, deeply frozen: one object shared by every
 * `initialize` answer while the capability flags stay the same (each
 * `initialize` used to build and copy it: about 25 objects per connection).
 * The environment's part (shell, directories, OS) is read on the first call
 * (a passwd read and a few env reads); the flags are asked each time, since
 * the sandbox probe can change them, and a change builds a new one.
 *
 * @example
 * ```ts
 * import { environmentInfo } from "./environment.ts";
 * const info = environmentInfo();
 * console.log(Object.isFrozen(info.capabilities), info === environmentInfo()); // true true
 * ```
 */
export function environmentInfo(): EnvironmentInfo {
  const state = capabilityState();
  if (built === undefined || !sameState(built.state, state)) {
    described ??= describeEnvironment();
    built = {
      state,
      info: deepFreeze({ ...described, capabilities: capabilitiesFor(state) }),
    };
  }
  return built.info;
}
