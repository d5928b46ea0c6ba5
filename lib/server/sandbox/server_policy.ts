/**
 * The server's own sandbox (`--sandbox`, `--writable-root`, `--deny-read`,
 * `--network-access`): a ceiling set by whoever runs the server, in Codex's
 * vocabulary, that every process and every `fs/*` call of every client runs
 * under. A client's `sandbox` can only narrow it: the effective plan of a
 * request is the intersection of the ceiling and the client's plan
 * ({@linkcode intersectPlans}).
 *
 * - `danger-full-access` (the default): no ceiling; processes run as the
 *   client asks.
 * - `read-only`: the whole file system is read-only.
 * - `workspace-write`: read-only except the writable roots (each keeping
 *   `.git`, `.agents`, `.codex` and `.aws` read-only, as Codex does).
 *
 * In both confining modes every process runs under bubblewrap with a
 * private, empty `/tmp` (a tmpfs of {@linkcode PRIVATE_TMP_BYTES}, gone when
 * the process exits; the host's `/tmp` is not visible unless it is a
 * writable root), no reads of the denied paths, only a loopback network of
 * its own unless `--network-access`, no capabilities, its own PID namespace,
 * and it dies with the server.
 *
 * A confining mode also gets a temporary directory of its own, writable for
 * every process and fs call and shared between them, which
 * `environmentInfo.tempDir` names ({@linkcode withSandboxTempDir}).
 *
 * The server's secret files (`--ws-token-file`, `--tls-key`, ...) are denied
 * in every sandbox, also in a client's own sandbox when there is no ceiling.
 *
 * @module
 */

import { ErrorCode, RpcError } from "../../protocol/errors.ts";
import type { PermissionDeniedData } from "../host/permission_errors.ts";
import {
  canonicalPath,
  intersectPlans,
  pathIsUnder,
  planFromPaths,
  type PlanPath,
  planSandbox,
  type PlanSandboxOptions,
  type SandboxPlan,
} from "./policy.ts";

/** The server sandbox modes, as Codex names its sandbox policies. */
export const SANDBOX_MODES = ["read-only", "workspace-write", "danger-full-access"] as const;

/** One of {@linkcode SANDBOX_MODES}. */
export type SandboxMode = typeof SANDBOX_MODES[number];

/** Size of the private `/tmp` of a confined process: 512 MiB (memory-backed). */
export const PRIVATE_TMP_BYTES = 512 * 1024 * 1024;

/** The server's sandbox, resolved at start. */
export interface ServerSandbox {
  /** The mode. */
  readonly mode: SandboxMode;
  /** Canonical writable roots (`workspace-write` only). */
  readonly writableRoots: readonly string[];
  /** Canonical paths no process and no `fs/*` call may read (`--deny-read`). */
  readonly denyRead: readonly string[];
  /** The server's secret files (token, shared secret, TLS key): denied in every sandbox. */
  readonly secretFiles: readonly string[];
  /** Processes get the host's network (`--network-access`). */
  readonly networkAccess: boolean;
  /**
   * The sandbox's own temporary directory (a confining mode only, once
   * {@linkcode withSandboxTempDir} made it): writable for every process and
   * fs call, shared between them, `environmentInfo.tempDir`.
   */
  readonly tempDir?: string;
}

/** Options for {@linkcode serverSandbox}. */
export interface ServerSandboxOptions {
  /**
   * The mode.
   *
   * @default {"danger-full-access"}
   */
  mode?: SandboxMode;
  /** Writable roots, absolute paths (need `workspace-write`). */
  writableRoots?: readonly string[];
  /** Paths to deny, absolute. */
  denyRead?: readonly string[];
  /** The server's secret files, denied automatically. */
  secretFiles?: readonly string[];
  /** Let processes use the network. */
  networkAccess?: boolean;
}

function canonical(flag: string, path: string): string {
  if (!path.startsWith("/")) throw new Error(`${flag} needs an absolute path, got "${path}"`);
  let state: Deno.PermissionState;
  try {
    state = Deno.permissions.querySync({ name: "read", path }).state;
  } catch {
    state = "denied";
  }
  // A path the server cannot see cannot be resolved, so neither bound nor hidden.
  if (state !== "granted") {
    throw new Error(`${flag} ${path} must be inside the server's --allow-read`);
  }
  return canonicalPath(path).path;
}

/**
 * Validates and canonicalizes a server sandbox (symlinks in the given paths
 * are resolved now, so a later swap of a link cannot move a root).
 *
 * @param options The flags' values.
 * @throws {Error} With a message for the command line, e.g. for a relative path.
 *
 * @example A workspace-write ceiling
 * ```ts
 * import { serverSandbox } from "./server_policy.ts";
 * const sandbox = serverSandbox({ mode: "workspace-write", writableRoots: ["/var/tmp"] });
 * console.log(sandbox.writableRoots.length); // 1
 * ```
 */
export function serverSandbox(options: ServerSandboxOptions = {}): ServerSandbox {
  const mode = options.mode ?? "danger-full-access";
  const writableRoots = options.writableRoots ?? [];
  const denyRead = options.denyRead ?? [];
  if (mode !== "workspace-write" && writableRoots.length > 0) {
    throw new Error("--writable-root needs --sandbox workspace-write");
  }
  if (mode === "danger-full-access" && (denyRead.length > 0 || options.networkAccess)) {
    throw new Error(
      "--deny-read and --network-access need a confining --sandbox (read-only or workspace-write)",
    );
  }
  const roots = writableRoots.map((path) => canonical("--writable-root", path));
  const denied = denyRead.map((path) => canonical("--deny-read", path));
  return {
    mode,
    writableRoots: roots,
    denyRead: denied,
    secretFiles: (options.secretFiles ?? []).map((path) =>
      canonical("a secret file", path.startsWith("/") ? path : `${Deno.cwd()}/${path}`)
    ),
    networkAccess: options.networkAccess ?? false,
  };
}

/**
 * Gives a confining sandbox its own temporary directory: a new directory
 * `tmp` inside a private one (mode `0700`) under `/var/tmp` (else the
 * server's `TMPDIR`: not `/tmp`, which every process sees private; where
 * neither can be written, none), writable for processes and fs calls (the private directory is
 * the writable root, so the read-only covers of `.git` and the like a root
 * gets stay out of `tmp`), removed when the server exits normally (a
 * SIGKILL leaves it). Without a confining mode the sandbox is returned as is.
 *
 * @param sandbox A resolved sandbox.
 * @returns The sandbox with {@linkcode ServerSandbox.tempDir} set.
 */
export function withSandboxTempDir(sandbox: ServerSandbox): ServerSandbox {
  if (!confines(sandbox) || sandbox.tempDir !== undefined) return sandbox;
  // Not under /tmp if it can be helped: it would show in every process's private /tmp. A
  // read-only root (a container's) may have neither: then the sandbox has no directory of its own.
  let base: string | undefined;
  for (const parent of ["/var/tmp", undefined]) {
    try {
      base = Deno.realPathSync(
        Deno.makeTempDirSync({ dir: parent, prefix: "exec-server-sandbox-" }),
      );
      break;
    } catch {
      // Not writable here: the next.
    }
  }
  if (base === undefined) return sandbox;
  const made = base;
  const tempDir = `${made}/tmp`;
  Deno.mkdirSync(tempDir);
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(made, { recursive: true });
    } catch {
      // Best effort.
    }
  });
  return { ...sandbox, tempDir };
}

let active: ServerSandbox = serverSandbox();

/**
 * Sets the sandbox of this server process (once, at start, before any
 * request).
 *
 * @param sandbox The resolved sandbox.
 */
export function setServerSandbox(sandbox: ServerSandbox): void {
  active = sandbox;
}

/** The sandbox of this server process (`danger-full-access` unless set). */
export function activeServerSandbox(): ServerSandbox {
  return active;
}

/**
 * Whether the sandbox confines every process (`read-only` or
 * `workspace-write`).
 *
 * @param sandbox The server's sandbox.
 */
export function confines(sandbox: ServerSandbox = active): boolean {
  return sandbox.mode !== "danger-full-access";
}

/**
 * Whether confined processes get a private `/tmp`: always, unless the
 * host's `/tmp` is inside a writable root (then it is shared, writable).
 *
 * @param sandbox The server's sandbox.
 */
export function hasPrivateTmp(sandbox: ServerSandbox = active): boolean {
  return confines(sandbox) && !sandbox.writableRoots.some((root) => pathIsUnder("/tmp", root));
}

/**
 * The ceiling as a plan, resolved against the file system now (missing
 * paths may have appeared since the start). `undefined` when there is
 * nothing to enforce.
 *
 * @param sandbox The server's sandbox.
 * @param options Synthetic mount points.
 */
export function ceilingPlan(
  sandbox: ServerSandbox = active,
  options: { synthetic?: ReadonlySet<string> } = {},
): SandboxPlan | undefined {
  const denied: PlanPath[] = [...sandbox.denyRead, ...sandbox.secretFiles].map((path) => ({
    path,
    access: "deny",
  }));
  if (!confines(sandbox)) {
    return denied.length === 0 ? undefined : planFromPaths("write", denied, "enabled", options);
  }
  const writable: PlanPath[] = sandbox.writableRoots.map((path) => ({ path, access: "write" }));
  // The private directory holding it is the writable root (its covers stay out of `tmp`).
  const tempRoot = sandbox.tempDir?.slice(0, sandbox.tempDir.lastIndexOf("/"));
  if (tempRoot !== undefined) writable.push({ path: tempRoot, access: "write" });
  const plan = planFromPaths(
    "read",
    [...writable, ...denied],
    sandbox.networkAccess ? "enabled" : "restricted",
    { ...options, reexpose: true },
  );
  return hasPrivateTmp(sandbox) ? { ...plan, privateTmp: true } : plan;
}

/**
 * The plan a request runs under: the client's `sandbox` narrowed by the
 * server's ceiling. Without a ceiling a client's sandbox only loses the
 * server's secret files; without a client sandbox the ceiling applies as
 * is (and a request with neither runs unsandboxed).
 *
 * @param sandbox The wire `sandbox` member (`undefined`/`null` for none).
 * @param options As for {@linkcode planSandbox}.
 * @param server The server's sandbox.
 * @throws {RpcError} As {@linkcode planSandbox}.
 */
export function effectivePlan(
  sandbox: unknown,
  options: PlanSandboxOptions,
  server: ServerSandbox = active,
): SandboxPlan | undefined {
  const client = planSandbox(sandbox, options);
  const ceiling = ceilingPlan(server, options);
  if (ceiling === undefined) return client;
  if (confines(server)) return client === undefined ? ceiling : intersectPlans(ceiling, client);
  // No ceiling: a client sandbox that isolates anything also hides the server's secrets.
  return client === undefined || client.isolation === "none"
    ? client
    : intersectPlans(ceiling, client);
}

/** What {@linkcode describeServerSandbox} reports. */
export interface ServerSandboxDescription {
  /** The mode. */
  mode: SandboxMode;
  /** Writable roots, canonical native paths. */
  writableRoots: string[];
  /** Paths denied to processes and `fs/*` calls (`--deny-read` and the server's secret files). */
  denyRead: string[];
  /** Whether confined processes have the host's network. */
  networkAccess: boolean;
  /** Whether confined processes get a private `/tmp`. */
  privateTmp: boolean;
}

/**
 * What the server's sandbox enforces, for `protocol/describe`.
 *
 * @param sandbox The server's sandbox.
 */
export function describeServerSandbox(sandbox: ServerSandbox = active): ServerSandboxDescription {
  const confined = confines(sandbox);
  return {
    mode: sandbox.mode,
    writableRoots: [...sandbox.writableRoots],
    denyRead: [...sandbox.denyRead, ...sandbox.secretFiles],
    networkAccess: !confined || sandbox.networkAccess,
    privateTmp: hasPrivateTmp(sandbox),
  };
}

/**
 * The typed `-32600` permission error for a request the server's sandbox
 * refuses, with the same `data` as a refusal by the server's Deno
 * permissions (`kind: "permissionDenied"`); `flag` names the server flag
 * behind it (`--writable-root` for writes, `--deny-read` for reads).
 *
 * @param permission `read` or `write`.
 * @param resource The refused path.
 * @param sandbox The server's sandbox (for the message).
 */
export function sandboxPermissionDenied(
  permission: "read" | "write",
  resource: string,
  sandbox: ServerSandbox = active,
): RpcError {
  const flag = permission === "write" ? "--writable-root" : "--deny-read";
  const data: PermissionDeniedData = { kind: "permissionDenied", permission, resource, flag };
  const why = permission === "write"
    ? `is outside the writable roots of the server's --sandbox ${sandbox.mode}`
    : "is denied by the server's sandbox (--deny-read or a server secret)";
  return new RpcError(ErrorCode.InvalidRequest, `${permission} access to "${resource}" ${why}`, {
    data,
  });
}
