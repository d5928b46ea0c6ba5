/**
 * What a `process/start` runs (docs/protocol.md section 8.2): its params checked, the working
 * directory, the child environment (`envPolicy`), the program looked up like
 * execvp under the server's run permission, and the command wrapped in its
 * sandbox. Nothing here spawns or awaits.
 *
 * @module
 */

import { inPidNamespace, processNamespaces } from "../sandbox/pid_namespace.ts";
import { invalidParams, kindError, RpcError } from "../../protocol/errors.ts";
import type { ExtensionName, ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { cwdPathFromUri } from "../host/path_uri.ts";
import { permissionDenied } from "../host/permission_errors.ts";
import { requireRun, requireSafeLoaderEnv } from "../host/permissions.ts";
import { launchSandboxed, type SandboxLaunch } from "../sandbox/launch.ts";
import { effectivePlan } from "../sandbox/server_policy.ts";
import { childEnvironment } from "./env_policy.ts";
import { spawnErrorFromErrno } from "./spawn_errors.ts";

/** A checked `process/start`, ready to spawn. */
export interface StartPlan {
  /** Spawn on a pseudo-terminal. */
  readonly tty: boolean;
  /** The executable to spawn (pipe processes; a tty process looks `argv[0]` up itself). */
  readonly program: string;
  /** The command line to spawn: the request's, or its sandbox's wrapper. */
  readonly argv: string[];
  /** What the child sees as `argv[0]` (applied by the sandbox when wrapped). */
  readonly arg0?: string;
  /** Working directory (native absolute path). */
  readonly cwd: string;
  /** The child's complete environment (the sandbox launcher's, when it has its own). */
  readonly env: Record<string, string>;
  /** Initial terminal size (extension `processResize`). */
  readonly size?: { rows: number; cols: number };
  /** Give a pipe process a stdin pipe. */
  readonly pipeStdin: boolean;
  /** Lossless output (extension `processLosslessOutput`). */
  readonly block: boolean;
  /** The `sandboxType` of the result. */
  readonly sandboxType: ResultOf<"process/start">["sandboxType"];
  /** The sandbox's launch (release it once the process has exited), if sandboxed. */
  readonly sandbox?: SandboxLaunch;
}

/**
 * Checks a `process/start` and works out what to spawn. The errors, in the
 * reference's order: `-32602` for bad params, `processExists` (from
 * `claimId`), the reference's `spawn*` errors, `permissionDenied` for a
 * program or loader variables outside the server's permissions.
 *
 * @param params The request.
 * @param extensions The extensions the client opted in to (others' params are ignored).
 * @param claimId Throws when the process id is taken (called once the params are checked).
 */
export function planStart(
  params: ParamsOf<"process/start">,
  extensions: ReadonlySet<ExtensionName>,
  claimId: () => void,
): StartPlan {
  if (params.argv.length === 0) throw invalidParams("argv must not be empty");
  if (params.networkProxy !== undefined || params.shellSnapshot !== undefined) {
    throw invalidParams("networkProxy and shellSnapshot are not supported by this server");
  }
  const cwd = cwdPathFromUri(params.cwd);
  claimId();
  const env = childEnvironment(params.env, params.envPolicy);
  for (const [key, value] of Object.entries(env)) {
    if (key.includes("\0") || value.includes("\0")) {
      throw kindError("spawnFailed", "data provided contains a nul byte");
    }
  }
  if (params.argv.some((arg) => arg.includes("\0")) || params.arg0?.includes("\0")) {
    throw kindError("spawnFailed", "nul byte found in provided data");
  }
  // The client's sandbox narrowed by the server's own (`--sandbox`).
  const sandbox = effectivePlan(params.sandbox, { cwd, env });
  const program = params.argv[0]!;
  if (program === "") throw kindError("spawnFailed", "missing program for pipe spawn");
  // Extension params are ignored, as the reference ignores unknown members, unless opted in to.
  const size = extensions.has("processResize") ? params.size : undefined;
  if (size !== undefined && !params.tty) {
    throw invalidParams("process/start size is only valid for tty processes (tty: true)");
  }
  const block = extensions.has("processLosslessOutput") && params.output === "block";
  if (!params.tty) checkCwd(cwd);
  requireSafeLoaderEnv(env);
  if (params.tty && !env.SHELL) env.SHELL = Deno.env.get("SHELL") ?? "/bin/sh";
  // The program bubblewrap runs is looked up on the same PATH (the sandbox sees the host's
  // files), so a sandboxed start checks --allow-run on it here, tty or not: the spawner
  // itself only sees the shim shell. An unsandboxed tty start is checked by the pty spawner.
  const wrapsSandbox = sandbox !== undefined && sandbox.isolation !== "none";
  const namespaced = !wrapsSandbox && processNamespaces();
  const resolved = params.tty && !wrapsSandbox && !namespaced
    ? program
    : resolveProgram(program, cwd, env.PATH ?? Deno.env.get("PATH"));
  // Sandboxed: the command runs under bubblewrap (launch.argv), which applies arg0.
  const launch = sandbox && launchSandboxed(sandbox, params.argv, {
    cwd,
    env,
    arg0: params.arg0,
    program: wrapsSandbox ? resolved : undefined,
  });
  const wrapped = launch?.wrapped === true;
  // --process-namespace: bubblewrap runs the checked program in its own PID namespace.
  const argv = wrapped
    ? launch.argv
    : namespaced
    ? inPidNamespace(resolved, params.argv, params.arg0)
    : params.argv;
  return {
    tty: params.tty,
    program: wrapped || namespaced ? argv[0]! : resolved,
    argv,
    arg0: wrapped || namespaced ? undefined : params.arg0,
    cwd,
    env: launch?.env ?? env,
    size,
    pipeStdin: params.pipeStdin ?? false,
    block,
    sandboxType: sandbox?.type ?? "none",
    sandbox: launch,
  };
}

/** Why `path` cannot be executed (an errno name), `undefined` if it can, "unknown" if we may not look. */
function isExecutableFile(path: string): string | undefined {
  try {
    const info = Deno.statSync(path);
    if (info.isDirectory) return "EACCES";
    if (info.mode !== null && (info.mode & 0o111) === 0) return "EACCES";
    return undefined;
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) return "unknown";
    return (err as { code?: string }).code ?? "ENOENT";
  }
}

function mayRun(path: string): boolean {
  return Deno.permissions.querySync({ name: "run", command: path }).state === "granted";
}

/**
 * Resolves `argv[0]` like execvp, against the given PATH, and checks the run
 * permission on the result before anything is executed. Where the server may
 * not read a directory, a candidate it may run is taken and the spawn itself
 * reports a missing file. Throws the reference's spawn errors, or a typed
 * permission error naming the program.
 */
function resolveProgram(program: string, cwd: string, path: string | undefined): string {
  if (program.includes("/")) {
    const full = program.startsWith("/") ? program : `${cwd}/${program}`;
    requireRun(full);
    const problem = isExecutableFile(full);
    if (problem && problem !== "unknown") throw spawnErrorFromErrno(problem);
    return full;
  }
  let sawDenied = false;
  let sawHidden = false;
  for (const dir of (path ?? "").split(":")) {
    const candidate = `${dir || "."}/${program}`;
    const full = candidate.startsWith("/") ? candidate : `${cwd}/${candidate}`;
    const problem = isExecutableFile(full);
    if (problem === "unknown") {
      if (mayRun(full)) return full;
      sawHidden = true;
      continue;
    }
    if (!problem) {
      requireRun(full);
      return full;
    }
    if (problem === "EACCES") sawDenied = true;
  }
  if (sawHidden) requireRun(program);
  throw spawnErrorFromErrno(sawDenied ? "EACCES" : "ENOENT");
}

function checkCwd(cwd: string): void {
  try {
    if (!Deno.statSync(cwd).isDirectory) throw spawnErrorFromErrno("ENOTDIR");
  } catch (err) {
    if (err instanceof RpcError) throw err;
    if (err instanceof Deno.errors.NotCapable) throw permissionDenied("read", cwd);
    throw spawnErrorFromErrno((err as { code?: string }).code ?? "ENOENT");
  }
}
