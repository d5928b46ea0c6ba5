/**
 * Launching a sandboxed command on the layer the probe chose (`layer.ts`):
 * the command line that runs it under bubblewrap with its seccomp filter, or
 * under the Landlock launcher, and the clean-up once it exited.
 *
 * @module
 */

import { invalidParams, kindError } from "../../protocol/errors.ts";
import { statOrNull } from "../host/stat.ts";
import {
  type BubblewrapAvailability,
  type LandlockAvailability,
  type SandboxAvailability,
  sandboxAvailable,
} from "./availability.ts";
import { bwrapArgs, SECCOMP_SHIM, SHIM_SHELL } from "./bubblewrap.ts";
import { landlockRules, landlockSpec } from "./landlock.ts";
import { launcherArgs, launcherCommand, launcherEnv } from "./landlock_exec.ts";
import type { SandboxLayer } from "./layer.ts";
import { filterModeFor } from "./unix_sockets.ts";
import {
  acquireSyntheticMountPoints,
  mountAt,
  pathIsUnder,
  releaseSyntheticMountPoints,
  type SandboxPlan,
} from "./policy.ts";
import { holdCoverDirectories } from "./mount_locks.ts";
import { trackNetworkSandbox } from "./peer.ts";
import { filterDirectory, filterFile } from "./seccomp_files.ts";

/** Options for {@linkcode launchSandboxed}. */
export interface SandboxLaunchOptions {
  /** Working directory of the command (native absolute path). */
  cwd: string;
  /** The command's complete environment. */
  env: Record<string, string>;
  /** What the command sees as `argv[0]` (needs bubblewrap's `--argv0`). */
  arg0?: string | null;
  /**
   * The executable, resolved and checked against `--allow-run`.
   *
   * @default {`argv[0]`, looked up on the environment's `PATH` inside the sandbox}
   */
  program?: string;
  /**
   * Whether sandboxing works, and on which layer.
   *
   * @default {sandboxAvailable()}
   */
  availability?: SandboxAvailability;
}

/** What to spawn for a sandboxed command. */
export interface SandboxLaunch {
  /**
   * `true` when {@linkcode argv} wraps the command in a sandbox: spawn it
   * without `arg0` (the sandbox applies it). `false` when the plan restricts
   * nothing: spawn the command as usual.
   */
  readonly wrapped: boolean;
  /** The layer that enforces the sandbox (when wrapped). */
  readonly layer?: SandboxLayer;
  /** The argv to spawn; `argv[0]` is an absolute path when wrapped. */
  readonly argv: string[];
  /**
   * The environment to spawn {@linkcode argv} with, when it is not the
   * command's (the Landlock launcher's own; the command's travels in its arguments).
   */
  readonly env?: Record<string, string>;
  /** Removes what the sandbox left on the host (synthetic mount points); idempotent. */
  release(): void;
}

/**
 * Prepares a sandboxed spawn: the command line to run instead of `argv`.
 * Call {@linkcode SandboxLaunch.release} once the process has exited (or
 * failed to start).
 *
 * @param plan The request's plan.
 * @param argv The requested command.
 * @param options Working directory, environment, `arg0`.
 * @throws {RpcError} `-32603` (`data.kind: "sandboxUnavailable"`) when no
 * layer can enforce the plan here, naming what each misses; `-32603`
 * (`spawnPermissionDenied`) when the sandbox hides the working directory;
 * `-32602` for an `arg0` this bubblewrap cannot set.
 */
export function launchSandboxed(
  plan: SandboxPlan,
  argv: string[],
  options: SandboxLaunchOptions,
): SandboxLaunch {
  if (plan.isolation === "none") return { wrapped: false, argv: [...argv], release() {} };
  const availability = options.availability ?? sandboxAvailable();
  if (!availability.ok) {
    throw kindError(
      "sandboxUnavailable",
      `cannot start a sandboxed process: ${availability.reason}`,
    );
  }
  const hidden = whyHidden(plan, options.cwd);
  if (hidden !== undefined) {
    throw kindError(
      "spawnPermissionDenied",
      `the working directory ${options.cwd} is hidden by the sandbox (${hidden})`,
    );
  }
  if (availability.layer === "landlock") return launchLandlock(plan, argv, options, availability);
  return launchBubblewrap(plan, argv, options, availability);
}

/**
 * Why the plan hides the directory `cwd` from its process, which then cannot start there, or
 * `undefined` when it does not: it lies in the host's `/tmp` under a private one (and no mount
 * shows it), or in a denied directory that is not kept traversable. A `cwd` that cannot be resolved
 * is left to the spawn to report.
 */
function whyHidden(plan: SandboxPlan, cwd: string): string | undefined {
  if (plan.isolation !== "filesystem") return undefined;
  let path: string;
  try {
    path = Deno.realPathSync(cwd);
  } catch {
    return undefined;
  }
  const mount = mountAt(plan, path);
  if (plan.privateTmp && pathIsUnder(path, "/tmp")) {
    if (mount === undefined || !pathIsUnder(mount.path, "/tmp")) {
      return "its processes get a private /tmp";
    }
  }
  return mount?.access === "deny" && mount.traversable !== true ? "a denied path" : undefined;
}

/** Holds what every layer holds while a sandbox runs: cover locks, mount points, the peer count. */
function holdSandbox(plan: SandboxPlan, synthetic: readonly string[]): () => void {
  // Before a mount point is created: no other server removes one next to it meanwhile.
  const unhold = plan.isolation === "filesystem"
    ? holdCoverDirectories(
      plan.mounts.filter((mount) => mount.access !== "write").map((mount) => mount.path),
    )
    : () => {};
  acquireSyntheticMountPoints(synthetic);
  // A sandbox with network reaches the server's port: the listener checks such peers.
  const untrack = plan.network === "enabled" ? trackNetworkSandbox() : () => {};
  let released = false;
  return () => {
    if (released) return;
    released = true;
    untrack();
    unhold();
    releaseSyntheticMountPoints(synthetic);
  };
}

function launchBubblewrap(
  plan: SandboxPlan,
  argv: string[],
  options: SandboxLaunchOptions,
  availability: BubblewrapAvailability,
): SandboxLaunch {
  const arg0 = options.arg0;
  if (arg0 !== undefined && arg0 !== null && arg0 !== argv[0] && !availability.argv0) {
    throw invalidParams(
      `arg0 is not supported in a sandbox with bubblewrap ${availability.version} ` +
        "(it needs bubblewrap 0.9 or later for --argv0)",
    );
  }
  const filter = filterFile(filterModeFor(plan.network));
  const synthetic = plan.isolation === "filesystem"
    ? plan.mounts.filter((mount) => mount.node === "missing").map((mount) => mount.path)
    : [];
  const directory = filterDirectory();
  const args = bwrapArgs(plan, argv, {
    ...options,
    proc: availability.layer === "bubblewrap",
    filterDirectory: directory,
    deniedFile: directory === undefined ? undefined : `${directory}/denied`,
  });
  return {
    wrapped: true,
    layer: availability.layer,
    argv: [SHIM_SHELL, "-c", SECCOMP_SHIM, filter, availability.bwrap, ...args],
    release: holdSandbox(plan, synthetic),
  };
}

/**
 * A fresh directory for a Landlock sandbox's private `/tmp`, under the host's
 * `/tmp` (else the server's `TMPDIR`); `undefined` where neither can be
 * written (a read-only container): the sandbox then has no temporary
 * directory, and the host's `/tmp` stays denied.
 */
function makePrivateTmp(): string | undefined {
  for (const dir of ["/tmp", undefined]) {
    try {
      return Deno.realPathSync(Deno.makeTempDirSync({ dir, prefix: "exec-server-sandbox-tmp-" }));
    } catch {
      // Not writable here: the next.
    }
  }
  return undefined;
}

/**
 * The Landlock layer: the launcher with the plan's rules. A private `/tmp`
 * is a fresh directory under the host's `/tmp` (which is denied), named by
 * `TMPDIR`, removed when the sandbox is released.
 */
function launchLandlock(
  plan: SandboxPlan,
  argv: string[],
  options: SandboxLaunchOptions,
  availability: LandlockAvailability,
): SandboxLaunch {
  // As bubblewrap: PWD names the working directory.
  const env = { ...options.env };
  if (statOrNull(options.cwd)?.isDirectory) env.PWD = options.cwd;
  let privateTmp: string | undefined;
  let effective = plan;
  if (plan.privateTmp) {
    privateTmp = makePrivateTmp();
    if (privateTmp !== undefined) env.TMPDIR = privateTmp;
    const own: SandboxPlan["mounts"] = privateTmp === undefined
      ? []
      : [{ path: privateTmp, access: "write", node: "directory" }];
    effective = {
      ...plan,
      mounts: [{ path: "/tmp", access: "deny", node: "directory" }, ...plan.mounts, ...own],
    };
  }
  const removeTmp = () => {
    if (privateTmp === undefined) return;
    try {
      Deno.removeSync(privateTmp, { recursive: true });
    } catch {
      // Already gone.
    }
  };
  let rules;
  try {
    rules = landlockRules(effective);
  } catch (err) {
    removeTmp();
    throw kindError(
      "sandboxUnavailable",
      `cannot start a sandboxed process: ${(err as Error).message}`,
    );
  }
  const spec = landlockSpec(rules, availability.abi, plan.network);
  const seen = options.arg0 ?? argv[0]!;
  const args = launcherArgs(spec, env, options.program ?? argv[0]!, [seen, ...argv.slice(1)]);
  const release = holdSandbox(plan, []);
  return {
    wrapped: true,
    layer: "landlock",
    argv: [...launcherCommand(), ...args],
    env: launcherEnv(),
    release() {
      release();
      removeTmp();
    },
  };
}
