/**
 * Whether sandboxed processes can run here, and on which layer (`layer.ts`):
 * the cheap checks (Linux, a supported architecture, `bwrap` installed and
 * runnable, the kernel's Landlock ABI) and a trial sandbox with the flags a
 * real one uses, layer by layer in the order of preference, run once and
 * cached. Where bubblewrap fails to mount a fresh `/proc` the probe tries it
 * without one, and says so in the log once.
 *
 * @module
 */

import { statOrNull } from "../host/stat.ts";
import { serverEnv } from "../host/env.ts";
import { grantedEverywhere } from "../host/permissions.ts";
import { log } from "../host/log.ts";
import { COMMON_FLAGS, NO_PROC_FLAGS, SECCOMP_SHIM, SHIM_SHELL } from "./bubblewrap.ts";
import { landlockAbi, landlockSpec, READ_ONLY_RULES } from "./landlock.ts";
import { launcherArgs, launcherCommand, launcherEnv } from "./landlock_exec.ts";
import { type SandboxLayerChoice, sandboxLayerChoice } from "./layer.ts";
import { seccompArch } from "./seccomp.ts";
import { filterFile } from "./seccomp_files.ts";

/** A working bubblewrap layer. */
export interface BubblewrapAvailability {
  /** bubblewrap works. */
  ok: true;
  /** With a fresh `/proc`, or without one (the kernel refused to mount it). */
  layer: "bubblewrap" | "bubblewrap-no-proc";
  /** Absolute path of `bwrap`. */
  bwrap: string;
  /** Its version, e.g. `"0.8.0"`. */
  version: string;
  /** It has `--argv0` (0.9 and later), needed for `arg0` in a sandbox. */
  argv0: boolean;
}

/** A working Landlock layer. */
export interface LandlockAvailability {
  /** Landlock, seccomp and the launcher work. */
  ok: true;
  /** The layer. */
  layer: "landlock";
  /** The kernel's Landlock ABI (at least {@linkcode MIN_LANDLOCK_ABI}). */
  abi: number;
  /** The launcher sets `argv[0]` itself. */
  argv0: true;
}

/** Whether sandboxed processes can run here, on which layer, and why not. */
export type SandboxAvailability =
  | BubblewrapAvailability
  | LandlockAvailability
  | {
    /** Sandboxed requests fail. */
    ok: false;
    /** The cause, naming what is missing for each layer tried. */
    reason: string;
  };

/** The probe's results, by the layer choice they were made for (one choice per server). */
const probed = new Map<SandboxLayerChoice, SandboxAvailability>();

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
  /**
   * Which layer to try: one, or `auto` for the first that works of
   * `bubblewrap`, `bubblewrap-no-proc` (only when bubblewrap failed to mount
   * `/proc`) and `landlock`.
   *
   * @default {the operator's `--sandbox-layer` ({@linkcode sandboxLayerChoice})}
   */
  layer?: SandboxLayerChoice;
}

/**
 * The probe as steps: each yields the trial commands to run and receives
 * their outputs, so that {@linkcode probeSandbox} and
 * {@linkcode probeSandboxAsync} share it.
 */
function* probeSteps(
  options: ProbeSandboxOptions,
): Generator<Deno.Command[], SandboxAvailability, Deno.CommandOutput[]> {
  const choice = options.layer ?? sandboxLayerChoice();
  const problems: string[] = [];
  if (choice !== "landlock") {
    const bwrap = options.bwrap ?? findBwrap();
    const problem = bubblewrapCheck(bwrap);
    if (problem === undefined) {
      const tryProc = choice === "auto" || choice === "bubblewrap";
      let procFailure: string | undefined;
      if (tryProc) {
        const [version, run] = yield [versionCommand(bwrap!), trialCommand(bwrap!, true)];
        const judged = judgeTrial(bwrap!, version!, run!, "bubblewrap");
        if (judged.ok) return judged;
        problems.push(judged.reason);
        procFailure = judged.reason;
      }
      const noProc = choice === "bubblewrap-no-proc" ||
        (choice === "auto" && procFailure !== undefined && PROC_FAILURE.test(procFailure));
      if (noProc) {
        const [version, run] = yield [versionCommand(bwrap!), trialCommand(bwrap!, false)];
        const judged = judgeTrial(bwrap!, version!, run!, "bubblewrap-no-proc");
        if (judged.ok) {
          if (procFailure !== undefined) {
            log(
              "warn",
              `bubblewrap cannot mount a fresh /proc here (${
                procFailure.slice(Math.max(0, procFailure.indexOf("bwrap:")))
              }): sandboxed processes ` +
                "see this host's /proc, read-only (layer bubblewrap-no-proc)",
            );
          }
          return judged;
        }
        problems.push(judged.reason);
      }
    } else {
      problems.push(problem.reason);
    }
  }
  if (choice === "auto" || choice === "landlock") {
    const version = landlockCheck();
    if (typeof version !== "number") {
      problems.push(`landlock: ${version.reason}`);
    } else {
      const [run] = yield [landlockTrialCommand(version)];
      if (run!.success) return { ok: true, layer: "landlock", abi: version, argv0: true };
      const detail = firstLine(new TextDecoder().decode(run!.stderr)) || `exit code ${run!.code}`;
      problems.push(`landlock: the trial sandbox failed: ${detail}`);
    }
  }
  const what = choice === "auto"
    ? "no sandbox layer works here"
    : `--sandbox-layer ${choice} does not work here`;
  return { ok: false, reason: `${what}: ${problems.join("; ")}` };
}

/** bubblewrap's message when the kernel refuses it a fresh `/proc`. */
const PROC_FAILURE = /mount proc/i;

function runSync(steps: Generator<Deno.Command[], SandboxAvailability, Deno.CommandOutput[]>) {
  let next = steps.next([]);
  while (!next.done) next = steps.next(next.value.map((command) => command.outputSync()));
  return next.value;
}

/**
 * Checks, without caching, whether sandboxed processes can run, and on which
 * layer; see {@linkcode sandboxAvailable}.
 *
 * @param options Which `bwrap` and which layer to try.
 */
export function probeSandbox(options: ProbeSandboxOptions = {}): SandboxAvailability {
  try {
    return runSync(probeSteps(options));
  } catch (err) {
    return { ok: false, reason: `cannot run a trial sandbox: ${(err as Error).message}` };
  }
}

/**
 * {@linkcode probeSandbox} without blocking the event loop.
 *
 * @param options Which `bwrap` and which layer to try.
 */
export async function probeSandboxAsync(
  options: ProbeSandboxOptions = {},
): Promise<SandboxAvailability> {
  try {
    const steps = probeSteps(options);
    let next = steps.next([]);
    while (!next.done) {
      next = steps.next(await Promise.all(next.value.map((command) => command.output())));
    }
    return next.value;
  } catch (err) {
    return { ok: false, reason: `cannot run a trial sandbox: ${(err as Error).message}` };
  }
}

/** Linux and an architecture the seccomp filter knows; `undefined` when they hold. */
function platformCheck(): { ok: false; reason: string } | undefined {
  if (Deno.build.os !== "linux") {
    return { ok: false, reason: `sandboxing needs Linux (this is ${Deno.build.os})` };
  }
  if (seccompArch() === undefined) {
    return { ok: false, reason: `the seccomp filter does not support ${Deno.build.arch}` };
  }
  return undefined;
}

/** The cheap checks of the bubblewrap layers (no process started); `undefined` when they pass. */
function bubblewrapCheck(bwrap: string | undefined): { ok: false; reason: string } | undefined {
  const platform = platformCheck();
  if (platform !== undefined) return platform;
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

/** The cheap checks of the Landlock layer: the kernel's ABI, or why it cannot be used. */
function landlockCheck(): number | { reason: string } {
  const platform = platformCheck();
  if (platform !== undefined) return platform;
  const version = landlockAbi();
  if (typeof version !== "number") return version;
  const launcher = launcherCommand()[0]!;
  if (!mayRun(launcher)) {
    return {
      reason:
        `the server may not run ${launcher} (the layer's launcher): start it with --allow-run`,
    };
  }
  return version;
}

function versionCommand(bwrap: string): Deno.Command {
  return new Deno.Command(bwrap, { args: ["--version"], stdin: "null", stderr: "null" });
}

/** A trial sandbox with a real one's flags, with or without a fresh `/proc`. */
function trialCommand(bwrap: string, proc: boolean): Deno.Command {
  const filter = filterFile("restricted");
  const flags = [
    ...COMMON_FLAGS,
    ...["--unshare-net", "--unshare-pid", "--unshare-ipc", "--ro-bind", "/", "/"],
    "--dev",
    "/dev",
    ...(proc ? ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"] : NO_PROC_FLAGS),
    ...["--seccomp", "3", "--", SHIM_SHELL, "-c", "exit 0"],
  ];
  return new Deno.Command(SHIM_SHELL, {
    args: ["-c", SECCOMP_SHIM, filter, bwrap, ...flags],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin" },
  });
}

/** A trial Landlock sandbox: a read-only file system, no network, `/bin/sh -c 'exit 0'`. */
function landlockTrialCommand(version: number): Deno.Command {
  const [program, ...leading] = launcherCommand();
  const spec = landlockSpec(READ_ONLY_RULES, version, "restricted");
  return new Deno.Command(program!, {
    args: [...leading, ...launcherArgs(spec, {}, SHIM_SHELL, [SHIM_SHELL, "-c", "exit 0"])],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    clearEnv: true,
    env: launcherEnv(),
    cwd: "/",
  });
}

function judgeTrial(
  bwrap: string,
  versionOutput: Deno.CommandOutput,
  run: Deno.CommandOutput,
  layer: BubblewrapAvailability["layer"],
): BubblewrapAvailability | { ok: false; reason: string } {
  if (!run.success) {
    const detail = firstLine(new TextDecoder().decode(run.stderr)) || `exit code ${run.code}`;
    return {
      ok: false,
      reason:
        `${layer}: bubblewrap cannot create a sandbox here (are user namespaces enabled?): ${detail}`,
    };
  }
  const version = firstLine(new TextDecoder().decode(versionOutput.stdout))
    .replace(/^bubblewrap\s+/, "");
  const [major = 0, minor = 0] = version.split(".").map(Number);
  // bubblewrap 0.9.0 added --argv0.
  const argv0 = major > 0 || minor >= 9;
  return { ok: true, layer, bwrap, version, argv0 };
}

/**
 * Checks once (then caches) that sandboxed processes can run, and on which
 * layer: Linux, a supported architecture, then for bubblewrap `bwrap` on
 * `PATH` (or in `/usr/bin`), permission to run it and `/bin/sh` and a trial
 * sandbox with the flags a real one uses (user namespaces must be
 * available), for Landlock the kernel's ABI and a trial sandbox through the
 * launcher. The first call costs about 30 ms;
 * {@linkcode warmSandboxProbe} runs it in the background instead.
 *
 * @returns `{ok: true, layer, ...}` or `{ok: false, reason}` naming what each layer misses.
 */
export function sandboxAvailable(): SandboxAvailability {
  const choice = sandboxLayerChoice();
  let result = probed.get(choice);
  if (result === undefined) probed.set(choice, result = probeSandbox({ layer: choice }));
  return result;
}

const warming = new Map<SandboxLayerChoice, Promise<SandboxAvailability>>();

/**
 * Starts the probe of {@linkcode sandboxAvailable} in the background (for
 * example at server start), so neither `initialize` nor the first sandboxed
 * `process/start` waits for it.
 *
 * @returns The result, also cached for {@linkcode sandboxAvailable}.
 */
export function warmSandboxProbe(): Promise<SandboxAvailability> {
  const choice = sandboxLayerChoice();
  const done = probed.get(choice);
  if (done !== undefined) return Promise.resolve(done);
  let pending = warming.get(choice);
  if (pending === undefined) {
    pending = probeSandboxAsync({ layer: choice }).then((result) => {
      if (!probed.has(choice)) probed.set(choice, result);
      return probed.get(choice)!;
    });
    warming.set(choice, pending);
  }
  return pending;
}

/**
 * The capability flag for `environmentInfo`: the probe's result once it has
 * run, else the cheap checks only (Linux, architecture, `bwrap` installed and
 * runnable, or a Landlock ABI the layer can use), so `initialize` never
 * waits for a trial sandbox.
 */
export function sandboxCapability(): boolean {
  const choice = sandboxLayerChoice();
  const done = probed.get(choice);
  if (done !== undefined) return done.ok;
  // Made once: looking for `bwrap` along PATH is a failed stat per directory, per `initialize`.
  let cheap = staticallyAvailable.get(choice);
  if (cheap === undefined) staticallyAvailable.set(choice, cheap = cheaplyAvailable());
  return cheap;
}

function cheaplyAvailable(): boolean {
  const choice = sandboxLayerChoice();
  if (choice !== "landlock" && bubblewrapCheck(someBwrap()) === undefined) return true;
  return (choice === "auto" || choice === "landlock") && typeof landlockCheck() === "number";
}

const staticallyAvailable = new Map<SandboxLayerChoice, boolean>();
