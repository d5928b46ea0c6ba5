/**
 * Whether sandboxed processes can run here: the cheap checks (Linux, a
 * supported architecture, `bwrap` installed and runnable) and a trial
 * sandbox with the flags a real one uses, run once and cached.
 *
 * @module
 */

import { statOrNull } from "../host/stat.ts";
import { serverEnv } from "../host/env.ts";
import { grantedEverywhere } from "../host/permissions.ts";
import { COMMON_FLAGS, SECCOMP_SHIM, SHIM_SHELL } from "./bubblewrap.ts";
import { seccompArch } from "./seccomp.ts";
import { filterFile } from "./seccomp_files.ts";

/** Whether sandboxed processes can run here, and why not. */
export type SandboxAvailability =
  | {
    /** bubblewrap works. */
    ok: true;
    /** Absolute path of `bwrap`. */
    bwrap: string;
    /** Its version, e.g. `"0.8.0"`. */
    version: string;
    /** It has `--argv0` (0.9 and later), needed for `arg0` in a sandbox. */
    argv0: boolean;
  }
  | {
    /** Sandboxed requests fail. */
    ok: false;
    /** The cause, e.g. `bubblewrap (bwrap) is not installed: ...`. */
    reason: string;
  };

let probed: SandboxAvailability | undefined;

function isFile(path: string): boolean {
  return statOrNull(path)?.isFile === true;
}

/** Where `bwrap` is looked for after the server's `PATH`. */
const USUAL_DIRS = ["/usr/bin", "/usr/local/bin", "/bin"];

function findBwrap(): string | undefined {
  const dirs = (serverEnv("PATH") ?? "").split(":").filter((dir) => dir.startsWith("/"));
  for (const dir of [...dirs, ...USUAL_DIRS]) {
    const candidate = `${dir}/bwrap`;
    if (isFile(candidate)) return candidate;
  }
  return undefined;
}

/**
 * A `bwrap` the cheap checks can stand for {@linkcode findBwrap}'s: when the
 * server may run any program, which `bwrap` comes first does not change their
 * answer, only whether there is one, so the usual directories are looked in
 * first. Each directory without it is a failed `stat`, which throws: at
 * start-up the error Deno builds costs more than the call (about 0.2 ms each,
 * eight of them on a `PATH` with `bwrap` in `/usr/bin` near its end).
 */
function someBwrap(): string | undefined {
  if (!grantedEverywhere("run")) return findBwrap();
  for (const dir of USUAL_DIRS) {
    if (isFile(`${dir}/bwrap`)) return `${dir}/bwrap`;
  }
  return findBwrap();
}

function mayRun(command: string): boolean {
  try {
    return Deno.permissions.querySync({ name: "run", command }).state === "granted";
  } catch {
    return false;
  }
}

function firstLine(text: string): string {
  return text.trim().split("\n")[0]?.trim() ?? "";
}

/** Options for {@linkcode probeSandbox}. */
export interface ProbeSandboxOptions {
  /**
   * The `bwrap` to try.
   *
   * @default {the first `bwrap` on the server's `PATH`, else in `/usr/bin`}
   */
  bwrap?: string;
}

/**
 * Checks, without caching, whether sandboxed processes can run; see
 * {@linkcode sandboxAvailable}.
 *
 * @param options Which `bwrap` to try.
 */
export function probeSandbox(options: ProbeSandboxOptions = {}): SandboxAvailability {
  const trial = prepareTrial(options);
  if ("reason" in trial) return trial;
  try {
    const version = trial.version.outputSync();
    const run = trial.run.outputSync();
    return judgeTrial(trial.bwrap, version, run);
  } catch (err) {
    return { ok: false, reason: `cannot run bubblewrap: ${(err as Error).message}` };
  }
}

/**
 * {@linkcode probeSandbox} without blocking the event loop.
 *
 * @param options Which `bwrap` to try.
 */
export async function probeSandboxAsync(
  options: ProbeSandboxOptions = {},
): Promise<SandboxAvailability> {
  const trial = prepareTrial(options);
  if ("reason" in trial) return trial;
  try {
    const [version, run] = await Promise.all([trial.version.output(), trial.run.output()]);
    return judgeTrial(trial.bwrap, version, run);
  } catch (err) {
    return { ok: false, reason: `cannot run bubblewrap: ${(err as Error).message}` };
  }
}

/** The cheap checks (no process started); `undefined` when they pass. */
function staticCheck(bwrap: string | undefined): { ok: false; reason: string } | undefined {
  if (Deno.build.os !== "linux") {
    return {
      ok: false,
      reason: `sandboxing needs Linux and bubblewrap (this is ${Deno.build.os})`,
    };
  }
  if (seccompArch() === undefined) {
    return { ok: false, reason: `the seccomp filter does not support ${Deno.build.arch}` };
  }
  if (bwrap === undefined || !isFile(bwrap)) {
    return {
      ok: false,
      reason: "bubblewrap (bwrap) is not installed: install the bubblewrap package",
    };
  }
  if (!isFile(SHIM_SHELL)) return { ok: false, reason: `${SHIM_SHELL} does not exist` };
  for (const command of [bwrap, SHIM_SHELL]) {
    if (!mayRun(command)) {
      return { ok: false, reason: `the server may not run ${command}: start it with --allow-run` };
    }
  }
  return undefined;
}

/** The two commands of a probe: `bwrap --version` and a trial sandbox with a real one's flags. */
function prepareTrial(
  options: ProbeSandboxOptions,
): { bwrap: string; version: Deno.Command; run: Deno.Command } | { ok: false; reason: string } {
  const bwrap = options.bwrap ?? findBwrap();
  const problem = staticCheck(bwrap);
  if (problem !== undefined) return problem;
  let filter: string;
  try {
    filter = filterFile("restricted");
  } catch (err) {
    return { ok: false, reason: `cannot write the seccomp filter: ${(err as Error).message}` };
  }
  const flags = [
    ...COMMON_FLAGS,
    ...["--unshare-net", "--unshare-pid", "--unshare-ipc", "--ro-bind", "/", "/"],
    ...["--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"],
    ...["--seccomp", "3", "--", SHIM_SHELL, "-c", "exit 0"],
  ];
  return {
    bwrap: bwrap!,
    version: new Deno.Command(bwrap!, { args: ["--version"], stdin: "null", stderr: "null" }),
    run: new Deno.Command(SHIM_SHELL, {
      args: ["-c", SECCOMP_SHIM, filter, bwrap!, ...flags],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
    }),
  };
}

function judgeTrial(
  bwrap: string,
  versionOutput: Deno.CommandOutput,
  run: Deno.CommandOutput,
): SandboxAvailability {
  if (!run.success) {
    const detail = firstLine(new TextDecoder().decode(run.stderr)) || `exit code ${run.code}`;
    return {
      ok: false,
      reason: `bubblewrap cannot create a sandbox here (are user namespaces enabled?): ${detail}`,
    };
  }
  const version = firstLine(new TextDecoder().decode(versionOutput.stdout))
    .replace(/^bubblewrap\s+/, "");
  const [major = 0, minor = 0] = version.split(".").map(Number);
  // bubblewrap 0.9.0 added --argv0.
  const argv0 = major > 0 || minor >= 9;
  return { ok: true, bwrap, version, argv0 };
}

/**
 * Checks once (then caches) that sandboxed processes can run: Linux, a
 * supported architecture, `bwrap` on `PATH` (or in `/usr/bin`), permission to
 * run it and `/bin/sh`, and a trial sandbox with the flags a real one uses
 * (user namespaces must be available). The first call costs about 30 ms;
 * {@linkcode warmSandboxProbe} runs it in the background instead.
 *
 * @returns `{ok: true, ...}` or `{ok: false, reason}` naming the cause.
 */
export function sandboxAvailable(): SandboxAvailability {
  probed ??= probeSandbox();
  return probed;
}

let warming: Promise<SandboxAvailability> | undefined;

/**
 * Starts the probe of {@linkcode sandboxAvailable} in the background (for
 * example at server start), so neither `initialize` nor the first sandboxed
 * `process/start` waits for it.
 *
 * @returns The result, also cached for {@linkcode sandboxAvailable}.
 */
export function warmSandboxProbe(): Promise<SandboxAvailability> {
  if (probed !== undefined) return Promise.resolve(probed);
  warming ??= probeSandboxAsync().then((result) => (probed ??= result));
  return warming;
}

/**
 * The capability flag for `environmentInfo`: the probe's result once it has
 * run, else the cheap checks only (Linux, architecture, `bwrap` installed and
 * runnable), so `initialize` never waits for a trial sandbox.
 */
export function sandboxCapability(): boolean {
  if (probed !== undefined) return probed.ok;
  // Made once: looking for `bwrap` along PATH is a failed stat per directory, per `initialize`.
  staticallyAvailable ??= staticCheck(someBwrap()) === undefined;
  return staticallyAvailable;
}

let staticallyAvailable: boolean | undefined;
