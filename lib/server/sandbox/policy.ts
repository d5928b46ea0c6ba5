/**
 * The `sandbox` member of `process/start` and the `fs/*` methods
 * (`FileSystemSandboxContext`, docs/protocol.md section 13): validation of the wire value, with
 * the reference's error messages, and its resolution into a
 * {@linkcode SandboxPlan}, the list of mounts that expresses it.
 *
 * Resolution follows the reference's Linux sandbox:
 *
 * - `root` read (or write) is the base; policies without full read access
 *   (no `root` entry, `minimal`) are refused.
 * - `project_roots` (alias `current_working_directory`) are the
 *   `workspaceRoots`, or the sandbox `cwd` when there are none, plus the
 *   entry's relative `subpath`; `tmpdir` is `TMPDIR` of the process's
 *   environment (`temporaryDirectories` when the client sends them);
 *   `slash_tmp` is `/tmp`.
 * - Every writable root keeps `.git`, `.agents`, `.codex` and `.aws`
 *   read-only, as if the client had sent those entries.
 * - Paths are canonicalized. Of two entries for one path, `deny` beats
 *   `write` and `write` beats `read`. A missing writable root is skipped; a
 *   missing read-only or denied path inside a writable root is covered by an
 *   empty read-only (or inaccessible) directory at its first missing
 *   component, so the process cannot create it.
 * - Read-only or denied paths that cross a symlink in a writable directory
 *   cannot be enforced (the process could swap the link) and are refused.
 *
 * @module
 */

import { ErrorCode, invalidParams, RpcError } from "../../protocol/errors.ts";
import { JsonFloat } from "../../protocol/json_decode.ts";
import { pathFromUri } from "../host/path_uri.ts";
import { SANDBOX_SPECIAL_PATH_KINDS } from "../../protocol/methods.ts";
import { removeMountPointIfUnused } from "./mount_locks.ts";
import { accessError, C, libcAvailable, realUid } from "../host/libc.ts";

/** Access of a path inside the sandbox. */
export type SandboxAccess = "read" | "write" | "deny";

/** Whether the process may use the network. */
export type NetworkPolicy = "restricted" | "enabled";

/**
 * What the sandbox has to do:
 * - `"none"`: the profile restricts nothing (`disabled`, or full access with
 *   network `enabled`); the process runs as is.
 * - `"network"`: only the network is restricted (full file system access).
 * - `"filesystem"`: a read-only (or partly writable) file system in its own
 *   mount, PID and IPC namespaces, plus the network policy.
 */
export type SandboxIsolation = "none" | "network" | "filesystem";

/** One mount of a {@linkcode SandboxPlan}, layered over the root. */
export interface SandboxMount {
  /** Canonical absolute path. */
  readonly path: string;
  /** Access inside the sandbox to the path and everything below it. */
  readonly access: SandboxAccess;
  /**
   * What is at the path on the host: `"missing"` marks a read-only or
   * denied path that does not exist, covered by an empty directory created
   * for the process's lifetime (a *synthetic* mount point).
   */
  readonly node: "directory" | "file" | "missing";
  /**
   * A denied directory that holds re-exposed writable roots (the server's
   * `--writable-root` inside its `--deny-read`): it can be traversed to
   * reach them, never listed or read.
   */
  readonly traversable?: boolean;
}

/** A resolved sandbox: what a `FileSystemSandboxContext` allows. */
export interface SandboxPlan {
  /** The `sandboxType` a sandboxed `process/start` reports. */
  readonly type: "linuxSeccomp";
  /** What has to be enforced. */
  readonly isolation: SandboxIsolation;
  /** The network policy. */
  readonly network: NetworkPolicy;
  /** Access to the whole file system, below the mounts. */
  readonly rootAccess: "read" | "write";
  /** Mounts over the root, parents before children. */
  readonly mounts: readonly SandboxMount[];
  /**
   * The process gets a private, empty `/tmp` (a tmpfs of
   * `PRIVATE_TMP_BYTES`, gone with the sandbox) instead of the host's: set
   * by the server's own `--sandbox`. Mounts below `/tmp` are layered on it.
   * File operations of the server itself see the host's `/tmp`.
   */
  readonly privateTmp?: boolean;
}

/** Options for {@linkcode planSandbox}. */
export interface PlanSandboxOptions {
  /** Native absolute path used when the context has no `cwd`. */
  cwd: string;
  /** Environment whose `TMPDIR` resolves `tmpdir` entries (the child's for a process). */
  env?: Record<string, string | undefined>;
  /**
   * Paths that exist only as synthetic mount points of running sandboxes;
   * they are treated as missing.
   *
   * @default {the mount points acquired with {@linkcode acquireSyntheticMountPoints}}
   */
  synthetic?: ReadonlySet<string>;
}

/** Synthetic mount points of running sandboxes, with how many sandboxes use each. */
const syntheticMountPoints = new Map<string, number>();

/**
 * Records that a sandbox is about to create (or share) these synthetic
 * mount points; while recorded, plans treat them as missing paths.
 *
 * @param paths Canonical paths of `"missing"` mounts.
 */
export function acquireSyntheticMountPoints(paths: readonly string[]): void {
  for (const path of paths) {
    syntheticMountPoints.set(path, (syntheticMountPoints.get(path) ?? 0) + 1);
  }
}

/**
 * Releases synthetic mount points; the last user removes each empty
 * directory that bubblewrap created for it, unless a sandbox of another
 * server still holds its directory (`mount_locks.ts`).
 *
 * @param paths The paths given to {@linkcode acquireSyntheticMountPoints}.
 */
export function releaseSyntheticMountPoints(paths: readonly string[]): void {
  for (const path of paths) {
    const count = (syntheticMountPoints.get(path) ?? 1) - 1;
    if (count > 0) {
      syntheticMountPoints.set(path, count);
      continue;
    }
    syntheticMountPoints.delete(path);
    removeMountPointIfUnused(path);
  }
}

/** The top-level names a writable root keeps read-only, as the reference. */
export const PROTECTED_NAMES: readonly string[] = [".git", ".agents", ".codex", ".aws"];

type PathSpec =
  | { type: "path"; path: string }
  | { type: "glob_pattern"; pattern: string }
  | { type: "special"; kind: SpecialKind; subpath?: string };

type SpecialKind =
  | "root"
  | "minimal"
  | "project_roots"
  | "tmpdir"
  | "slash_tmp"
  | "unknown";

interface Entry {
  path: PathSpec;
  access: SandboxAccess;
}

interface Context {
  permissions:
    | { type: "disabled" }
    | { type: "external"; network: NetworkPolicy }
    | { type: "managed"; network: NetworkPolicy; entries: Entry[] | null };
  cwd?: string;
  workspaceRoots: string[];
  temporaryDirectories?: string[];
  useLegacyLandlock: boolean;
}

// ---------------------------------------------------------------------------
// Wire validation (serde-style messages, as the reference's decoder).
//
// The reference reads the context's own members from the message text, where a number is just
// `number`, and everything inside `permissions` (an internally tagged enum) from a buffered copy,
// where it is `integer `5`` or `floating point `1.5`` and a tag may also be its variant's index.
// `Level` says which of the two a value is read at.

type Level = "text" | "buffered";

function describe(value: unknown, level: Level): string {
  const number = typeof value === "number" || typeof value === "bigint" ||
    value instanceof JsonFloat;
  if (number && level === "text") return "number";
  if (value instanceof JsonFloat) return `floating point \`${value.value}\``;
  if (typeof value === "bigint") return `integer \`${value}\``;
  if (typeof value === "number") {
    return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
  }
  if (value === null) return "null";
  if (typeof value === "boolean") return `boolean \`${value}\``;
  if (typeof value === "string") return `string ${JSON.stringify(value)}`;
  if (Array.isArray(value)) return "sequence";
  return "map";
}

function invalidType(value: unknown, expected: string, level: Level): RpcError {
  return invalidParams(`invalid type: ${describe(value, level)}, expected ${expected}`);
}

function missingField(name: string): RpcError {
  return invalidParams(`missing field \`${name}\``);
}

function unknownVariant(value: string, variants: readonly string[]): RpcError {
  const quoted = variants.map((v) => `\`${v}\``);
  const expected = quoted.length === 1
    ? quoted[0]
    : quoted.length === 2
    ? `${quoted[0]} or ${quoted[1]}`
    : `one of ${quoted.join(", ")}`;
  return invalidParams(`unknown variant \`${value}\`, expected ${expected}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof JsonFloat);
}

/** A JSON object; `expected` names the type in the error (`struct X`, `internally tagged enum X`). */
function record(value: unknown, expected: string, level: Level): Record<string, unknown> {
  if (!isRecord(value)) throw invalidType(value, expected, level);
  return value;
}

/** A unit enum value: its name, or a map of its name to `null`. */
function variant<T extends string>(value: unknown, variants: readonly T[], level: Level): T {
  let name = value;
  if (isRecord(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && value[keys[0]!] === null) name = keys[0];
  }
  if (typeof name !== "string") throw invalidType(value, "string or map", level);
  if (!(variants as readonly string[]).includes(name)) throw unknownVariant(name, variants);
  return name as T;
}

/**
 * The tag of an internally tagged enum. Read from a buffered copy, an integer picks the variant
 * of that index (`indexed`: the variants in declaration order, without aliases).
 */
function tag<T extends string>(
  object: Record<string, unknown>,
  field: string,
  variants: readonly T[],
  level: Level,
  indexed: readonly T[] = variants,
): T {
  if (!(field in object)) throw missingField(field);
  const value = object[field];
  if (typeof value === "string") {
    if (!(variants as readonly string[]).includes(value)) throw unknownVariant(value, variants);
    return value as T;
  }
  const index = typeof value === "bigint"
    ? value
    : Number.isInteger(value)
    ? BigInt(value as number)
    : -1n;
  if (level === "buffered" && index >= 0n) {
    if (index < BigInt(indexed.length)) return indexed[Number(index)]!;
    throw invalidParams(
      `invalid value: integer \`${index}\`, expected variant index 0 <= i < ${indexed.length}`,
    );
  }
  throw invalidType(value, "variant identifier", level);
}

function required(object: Record<string, unknown>, field: string): unknown {
  if (object[field] === undefined) throw missingField(field);
  return object[field];
}

function optionalBool(object: Record<string, unknown>, field: string, level: Level): boolean {
  const value = object[field];
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw invalidType(value, "a boolean", level);
  return value;
}

function string(value: unknown, level: Level): string {
  if (typeof value !== "string") throw invalidType(value, "a string", level);
  return value;
}

function uriList(value: unknown, level: Level): string[] {
  if (!Array.isArray(value)) throw invalidType(value, "a sequence", level);
  return value.map((item) => pathFromUri(string(item, level)));
}

const ACCESS = ["read", "write", "deny", "none"] as const;
const KINDS = SANDBOX_SPECIAL_PATH_KINDS;
/** The kinds by index: `current_working_directory` is an alias of `project_roots`. */
const INDEXED_KINDS = KINDS.filter((kind) => kind !== "current_working_directory");

function parsePathSpec(value: unknown): PathSpec {
  const object = record(value, "internally tagged enum ExecFileSystemPath", "buffered");
  const type = tag(object, "type", ["path", "glob_pattern", "special"], "buffered");
  if (type === "path") {
    return { type, path: pathFromUri(string(required(object, "path"), "buffered")) };
  }
  if (type === "glob_pattern") {
    return { type, pattern: string(required(object, "pattern"), "buffered") };
  }
  const special = record(
    required(object, "value"),
    "internally tagged enum FileSystemSpecialPath",
    "buffered",
  );
  const kind = tag(special, "kind", KINDS, "buffered", INDEXED_KINDS);
  const subpath = special.subpath;
  const spec: PathSpec = {
    type,
    kind: kind === "current_working_directory" ? "project_roots" : kind,
  };
  if (subpath !== undefined && subpath !== null) spec.subpath = string(subpath, "buffered");
  if (kind === "unknown") string(required(special, "path"), "buffered");
  return spec;
}

function parseEntry(value: unknown): Entry {
  const object = record(value, "struct ExecFileSystemSandboxEntry", "buffered");
  const path = parsePathSpec(required(object, "path"));
  const access = variant(required(object, "access"), ACCESS, "buffered");
  const missing = object.missing_path_behavior;
  if (missing !== undefined && missing !== null) variant(missing, ["skip"], "buffered");
  return { path, access: access === "none" ? "deny" : access };
}

function parseContext(value: unknown): Context {
  const object = record(value, "struct WireFileSystemSandboxContext", "text");
  const permissionsValue = record(
    required(object, "permissions"),
    "internally tagged enum ExecPermissionProfile",
    "buffered",
  );
  // The tag is read from the text, the rest of `permissions` from the buffered copy.
  const type = tag(permissionsValue, "type", ["managed", "disabled", "external"], "text");
  const network = (): NetworkPolicy =>
    variant(required(permissionsValue, "network"), ["restricted", "enabled"], "buffered");
  let permissions: Context["permissions"];
  if (type === "disabled") {
    permissions = { type };
  } else if (type === "external") {
    permissions = { type, network: network() };
  } else {
    const fileSystem = record(
      required(permissionsValue, "file_system"),
      "internally tagged enum ExecManagedFileSystemPermissions",
      "buffered",
    );
    const fsType = tag(fileSystem, "type", ["restricted", "unrestricted"], "buffered");
    let entries: Entry[] | null = null;
    if (fsType === "restricted") {
      const raw = required(fileSystem, "entries");
      if (!Array.isArray(raw)) throw invalidType(raw, "a sequence", "buffered");
      entries = raw.map(parseEntry);
    }
    permissions = { type, network: network(), entries };
  }
  variant(required(object, "windowsSandboxLevel"), [
    "disabled",
    "restricted-token",
    "elevated",
    "mxc",
  ], "text");
  const proxyMode = object.windowsSandboxProxySettingsMode;
  if (proxyMode !== undefined && proxyMode !== null) {
    variant(proxyMode, ["reconcile", "preserve"], "text");
  }
  const context: Context = {
    permissions,
    workspaceRoots: object.workspaceRoots === undefined
      ? []
      : uriList(object.workspaceRoots, "text"),
    useLegacyLandlock: optionalBool(object, "useLegacyLandlock", "text"),
  };
  if (object.cwd !== undefined && object.cwd !== null) {
    context.cwd = pathFromUri(string(object.cwd, "text"));
  }
  const temporary = object.temporaryDirectories;
  if (temporary !== undefined && temporary !== null) {
    context.temporaryDirectories = uriList(temporary, "text");
  }
  return context;
}

// ---------------------------------------------------------------------------
// Resolution.

function unsupported(what: string): RpcError {
  return invalidParams(`${what} is not supported by this server's sandbox`);
}

function isUnder(path: string, root: string): boolean {
  return path === root || root === "/" || path.startsWith(`${root}/`);
}

function depth(path: string): number {
  return path === "/" ? 0 : path.split("/").length - 1;
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch {
    return null;
  }
}

/** The canonical form of a path that may not exist: realpath of its longest existing prefix plus the rest. */
export function canonicalPath(path: string): { path: string; exists: boolean } {
  const parts = path.split("/").filter((part) => part !== "");
  for (let cut = parts.length; cut >= 0; cut--) {
    const prefix = "/" + parts.slice(0, cut).join("/");
    let real: string;
    try {
      real = Deno.realPathSync(prefix);
    } catch {
      continue;
    }
    const rest = parts.slice(cut);
    if (rest.length === 0) return { path: real, exists: true };
    return {
      path: real === "/" ? `/${rest.join("/")}` : `${real}/${rest.join("/")}`,
      exists: false,
    };
  }
  return { path: "/" + parts.join("/"), exists: false };
}

function joinSubpath(root: string, subpath: string | undefined): string {
  if (subpath === undefined || subpath === "" || subpath === ".") return root;
  if (subpath.startsWith("/")) {
    throw invalidParams(`project_roots subpath must be relative: "${subpath}"`);
  }
  const parts: string[] = [];
  for (const part of subpath.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) {
        throw invalidParams(`project_roots subpath must stay inside the root: "${subpath}"`);
      }
      parts.pop();
    } else {
      parts.push(part);
    }
  }
  if (parts.length === 0) return root;
  return root === "/" ? `/${parts.join("/")}` : `${root}/${parts.join("/")}`;
}

const PRECEDENCE: Record<SandboxAccess, number> = { read: 0, write: 1, deny: 2 };

interface Candidate {
  /** The path as the policy spells it (for the symlink check). */
  spelled: string;
  access: SandboxAccess;
}

function expand(context: Context, entries: Entry[], options: PlanSandboxOptions): {
  root: SandboxAccess | undefined;
  candidates: Candidate[];
} {
  const cwd = context.cwd ?? options.cwd;
  const projectRoots = context.workspaceRoots.length > 0 ? context.workspaceRoots : [cwd];
  const tmpdirs = context.temporaryDirectories ??
    (options.env?.TMPDIR?.startsWith("/") ? [options.env.TMPDIR.replace(/(.)\/+$/, "$1")] : []);
  let root: SandboxAccess | undefined;
  let minimal = false;
  const candidates: Candidate[] = [];
  const add = (spelled: string, access: SandboxAccess) => {
    if (spelled === "/") {
      root = root === undefined || PRECEDENCE[access] > PRECEDENCE[root] ? access : root;
    } else {
      candidates.push({ spelled, access });
    }
  };
  for (const entry of entries) {
    const spec = entry.path;
    if (spec.type === "path") {
      add(spec.path, entry.access);
    } else if (spec.type === "glob_pattern") {
      // The reference only honours glob entries that deny; those we cannot express.
      if (entry.access === "deny") throw unsupported("A `glob_pattern` deny entry");
    } else if (spec.kind === "root") {
      add("/", entry.access);
    } else if (spec.kind === "minimal") {
      minimal = true;
    } else if (spec.kind === "project_roots") {
      for (const projectRoot of projectRoots) {
        add(joinSubpath(projectRoot, spec.subpath), entry.access);
      }
    } else if (spec.kind === "tmpdir") {
      for (const tmpdir of tmpdirs) add(tmpdir, entry.access);
    } else if (spec.kind === "slash_tmp") {
      add("/tmp", entry.access);
    } else if (entry.access !== "write") {
      // A future special path this server does not know: ignoring a grant
      // is safe, ignoring a restriction is not.
      throw unsupported("A `unknown` special path that restricts access");
    }
  }
  if (root === undefined || root === "deny") {
    throw unsupported(
      minimal
        ? "Restricted read access (`minimal` without `root`)"
        : "Restricted read access (no `root` read entry)",
    );
  }
  return { root, candidates };
}

/**
 * Validates a wire `sandbox` value and resolves it into a plan.
 *
 * @param sandbox The `sandbox` member as received (`undefined`/`null` for none).
 * @param options Fallback `cwd`, the environment for `tmpdir`, synthetic mount points.
 * @returns The plan, or `undefined` when the request carries no sandbox.
 * @throws {RpcError} `-32602` for an invalid or unsupported value, `-32603`
 * for a policy that cannot be enforced on this file system.
 */
export function planSandbox(
  sandbox: unknown,
  options: PlanSandboxOptions,
): SandboxPlan | undefined {
  if (sandbox === undefined || sandbox === null) return undefined;
  return planContext(parseContext(sandbox), options);
}

/** The plan of a validated `sandbox` value ({@linkcode planSandbox}). */
function planContext(
  context: Context,
  options: PlanSandboxOptions,
): SandboxPlan {
  const permissions = context.permissions;
  const base = { type: "linuxSeccomp" as const, mounts: [] as SandboxMount[] };
  if (permissions.type === "disabled") {
    return { ...base, isolation: "none", network: "enabled", rootAccess: "write" };
  }
  if (permissions.type === "external" || permissions.entries === null) {
    const network = permissions.network;
    return {
      ...base,
      isolation: network === "restricted" ? "network" : "none",
      network,
      rootAccess: "write",
    };
  }
  const { root, candidates } = expand(context, permissions.entries, options);
  if (context.useLegacyLandlock) throw unsupported("`useLegacyLandlock`");
  const paths = candidates.map((candidate) => ({
    path: candidate.spelled,
    access: candidate.access,
  }));
  return planFromPaths(root === "write" ? "write" : "read", paths, permissions.network, options);
}

/** One path of {@linkcode planFromPaths}. */
export interface PlanPath {
  /** Absolute path as given (canonicalized here). */
  readonly path: string;
  /** Access to it and everything below it. */
  readonly access: SandboxAccess;
}

/**
 * Resolves a plan from absolute paths, as {@linkcode planSandbox} does for
 * the entries of a `sandbox` value: canonical paths, `deny` beats `write`
 * beats `read`, protected names kept read-only in writable roots, missing
 * restrictions covered.
 *
 * @param rootAccess Access to the whole file system below the paths.
 * @param paths The paths with their access.
 * @param network The network policy.
 * @param options Synthetic mount points (see {@linkcode PlanSandboxOptions});
 * `reexpose`: a writable path inside a denied directory stays writable (the
 * directory becomes traversable), instead of denied with it.
 * @throws {RpcError} `-32603` for a restriction that crosses a writable symlink.
 */
export function planFromPaths(
  rootAccess: "read" | "write",
  paths: readonly PlanPath[],
  network: NetworkPolicy,
  options: { synthetic?: ReadonlySet<string>; reexpose?: boolean } = {},
): SandboxPlan {
  const synthetic = options.synthetic ?? new Set(syntheticMountPoints.keys());
  const candidates = paths.map((entry) => ({ spelled: entry.path, access: entry.access }));
  const mounts = resolveMounts(rootAccess, candidates, synthetic, options.reexpose);
  const isolation: SandboxIsolation = rootAccess === "read" || mounts.length > 0
    ? "filesystem"
    : network === "restricted"
    ? "network"
    : "none";
  return { type: "linuxSeccomp", isolation, network, rootAccess, mounts };
}

interface Resolved {
  path: string;
  spelled: string;
  access: SandboxAccess;
  node: SandboxMount["node"];
  implicit: boolean;
}

function nodeOf(
  path: string,
  exists: boolean,
  synthetic: ReadonlySet<string>,
): SandboxMount["node"] {
  if (!exists || synthetic.has(path)) return "missing";
  return lstatOrNull(path)?.isDirectory ? "directory" : "file";
}

function resolveMounts(
  rootAccess: "read" | "write",
  candidates: Candidate[],
  synthetic: ReadonlySet<string>,
  reexpose = false,
): SandboxMount[] {
  const byPath = new Map<string, Resolved>();
  const put = (resolved: Resolved) => {
    const existing = byPath.get(resolved.path);
    if (
      existing === undefined ||
      PRECEDENCE[resolved.access] > PRECEDENCE[existing.access] ||
      (existing.implicit && !resolved.implicit && resolved.access === existing.access)
    ) {
      byPath.set(resolved.path, resolved);
    }
  };
  for (const candidate of candidates) {
    if (candidate.access !== "write") requireVisible(candidate);
    const canonical = canonicalPath(candidate.spelled);
    const node = nodeOf(canonical.path, canonical.exists, synthetic);
    put({
      path: canonical.path,
      spelled: candidate.spelled,
      access: candidate.access,
      node,
      implicit: false,
    });
  }
  for (const resolved of [...byPath.values()]) {
    if (resolved.access !== "write" || resolved.node !== "directory") continue;
    for (const name of PROTECTED_NAMES) {
      const path = `${resolved.path}/${name}`;
      const node = nodeOf(path, lstatOrNull(path) !== null, synthetic);
      put({ path, spelled: path, access: "read", node, implicit: true });
    }
  }

  const sorted = [...byPath.values()].sort((a, b) =>
    depth(a.path) - depth(b.path) || (a.path < b.path ? -1 : 1)
  );
  const mounts: SandboxMount[] = [];
  const effective = (path: string): SandboxAccess => {
    let best: SandboxMount | undefined;
    for (const mount of mounts) {
      if (
        isUnder(path, mount.path) && (best === undefined || mount.path.length > best.path.length)
      ) {
        best = mount;
      }
    }
    return best?.access ?? rootAccess;
  };
  const restrictions: Resolved[] = [];
  for (const entry of sorted) {
    if (entry.access !== "write") restrictions.push(entry);
    const parentAccess = effective(parentOf(entry.path));
    if (entry.node !== "missing") {
      // Same access as around it: nothing to mount. Inside a denied
      // directory nothing is reachable (unless writable roots are re-exposed).
      if (parentAccess === entry.access) continue;
      if (parentAccess === "deny") {
        if (!reexpose || entry.access !== "write") continue;
        markTraversable(mounts, entry.path);
      }
      mounts.push({ path: entry.path, access: entry.access, node: entry.node });
      continue;
    }
    // Missing paths: grants cannot be mounted (less access, fine); protect
    // restrictions inside writable directories at the first missing component.
    if (entry.access === "write" || parentAccess !== "write") continue;
    const cover = firstMissing(entry.path, synthetic);
    const existing = mounts.find((mount) => mount.path === cover);
    if (existing !== undefined) {
      if (existing.node === "missing" && entry.access === "deny" && existing.access !== "deny") {
        mounts[mounts.indexOf(existing)] = { ...existing, access: "deny" };
      }
    } else if (effective(cover) === "write" && !entriesFixed(parentOf(cover))) {
      mounts.push({ path: cover, access: entry.access, node: "missing" });
    }
  }
  for (const entry of restrictions) checkSymlinks(entry, mounts, rootAccess);
  return mounts.sort((a, b) => depth(a.path) - depth(b.path) || (a.path < b.path ? -1 : 1));
}

/**
 * Refuses a read-only or denied path the server may not read: it could not
 * tell whether the path exists, and a restriction it cannot see is one it
 * cannot enforce (fail closed rather than skip it as missing).
 */
function requireVisible(candidate: Candidate): void {
  let state: Deno.PermissionState;
  try {
    state = Deno.permissions.querySync({ name: "read", path: candidate.spelled }).state;
  } catch {
    state = "denied";
  }
  if (state === "granted") return;
  const kind = candidate.access === "deny" ? "denied" : "read-only";
  throw new RpcError(
    ErrorCode.InternalError,
    `cannot enforce sandbox ${kind} path ${candidate.spelled}: the server's --allow-read does not cover it`,
  );
}

/** Marks the deepest denied mount above `path` as traversable (it holds a re-exposed mount). */
function markTraversable(mounts: SandboxMount[], path: string): void {
  let deepest = -1;
  mounts.forEach((mount, index) => {
    if (
      mount.access === "deny" && mount.path !== path && isUnder(path, mount.path) &&
      (deepest < 0 || depth(mount.path) > depth(mounts[deepest]!.path))
    ) {
      deepest = index;
    }
  });
  if (deepest >= 0) mounts[deepest] = { ...mounts[deepest]!, traversable: true };
}

function parentOf(path: string): string {
  const cut = path.lastIndexOf("/");
  return cut <= 0 ? "/" : path.slice(0, cut);
}

/**
 * True when no process of the server's user can add an entry to `directory`, so that a
 * missing restriction there needs no cover (whose mount point bubblewrap could not make
 * either: a container's root-owned `/tmp`, a read-only root file system). That holds on a
 * read-only mount, and where this user lacks write and search permission and does not own the
 * directory (an owner could `chmod` it). Without libc (no `--allow-ffi`): false, the cover is
 * kept.
 */
function entriesFixed(directory: string): boolean {
  if (!libcAvailable()) return false;
  const code = accessError(directory, C.W_OK | C.X_OK);
  if (code === C.EROFS) return true;
  if (code !== C.EACCES) return false;
  const owner = lstatOrNull(directory)?.uid;
  return owner !== undefined && owner !== null && owner !== realUid();
}

/** The first component of `path` that does not exist (synthetic mount points count as missing). */
function firstMissing(path: string, synthetic: ReadonlySet<string>): string {
  const parts = path.split("/").filter((part) => part !== "");
  let current = "";
  for (const part of parts) {
    current = `${current}/${part}`;
    if (synthetic.has(current) || lstatOrNull(current) === null) return current;
  }
  return path;
}

/**
 * Refuses a read-only or denied path whose spelling goes through a symlink
 * that lives in a writable directory: the process could replace the link
 * and get a writable path under the protected name.
 */
function checkSymlinks(entry: Resolved, mounts: SandboxMount[], rootAccess: SandboxAccess): void {
  const parts = entry.spelled.split("/").filter((part) => part !== "");
  let current = "";
  for (const part of parts) {
    const parent = current === "" ? "/" : current;
    current = `${current}/${part}`;
    const info = lstatOrNull(current);
    if (info === null) return;
    if (!info.isSymlink) continue;
    const where = canonicalPath(parent).path;
    let best: SandboxMount | undefined;
    for (const mount of mounts) {
      if (
        isUnder(where, mount.path) && (best === undefined || mount.path.length > best.path.length)
      ) {
        best = mount;
      }
    }
    if ((best?.access ?? rootAccess) === "write") {
      const kind = entry.access === "deny" ? "denied" : "read-only";
      throw new RpcError(
        ErrorCode.InternalError,
        `cannot enforce sandbox ${kind} path ${entry.spelled} because it crosses writable symlink ${current}`,
      );
    }
  }
}

/**
 * The access the plan gives to a canonical path: that of the deepest mount
 * at or above it, else the root's.
 *
 * @param plan The plan.
 * @param path A canonical absolute path.
 */
export function accessAt(plan: SandboxPlan, path: string): SandboxAccess {
  return mountAt(plan, path)?.access ?? plan.rootAccess;
}

/**
 * The deepest mount of the plan at or above a canonical path.
 *
 * @param plan The plan.
 * @param path A canonical absolute path.
 */
export function mountAt(plan: SandboxPlan, path: string): SandboxMount | undefined {
  let best: SandboxMount | undefined;
  for (const mount of plan.mounts) {
    if (isUnder(path, mount.path) && (best === undefined || mount.path.length > best.path.length)) {
      best = mount;
    }
  }
  return best;
}

/**
 * Whether `path` is `root` or lies below it (component-wise).
 *
 * @param path An absolute path.
 * @param root An absolute path.
 */
export function pathIsUnder(path: string, root: string): boolean {
  return isUnder(path, root);
}

const RANK: Record<SandboxAccess, number> = { deny: 0, read: 1, write: 2 };

function lesser(a: SandboxAccess, b: SandboxAccess): SandboxAccess {
  return RANK[a] <= RANK[b] ? a : b;
}

/**
 * The intersection of two plans: every path gets the lesser of its two
 * accesses (`deny` < `read` < `write`), the network is `restricted` when
 * either restricts it, and `/tmp` is private when one plan makes it private
 * and the other lets it be written. This is how the server's own
 * `--sandbox` (the ceiling) narrows a client's `sandbox`: the client can
 * only take away.
 *
 * @param a A plan.
 * @param b Another plan.
 * @returns A plan that allows what both allow.
 *
 * @example A read-only root narrows a writable one
 * ```ts
 * import { intersectPlans, type SandboxPlan } from "./policy.ts";
 * const writable: SandboxPlan = {
 *   type: "linuxSeccomp",
 *   isolation: "none",
 *   network: "enabled",
 *   rootAccess: "write",
 *   mounts: [],
 * };
 * const readOnly: SandboxPlan = { ...writable, isolation: "filesystem", rootAccess: "read" };
 * console.log(intersectPlans(writable, readOnly).rootAccess); // "read"
 * ```
 */
export function intersectPlans(a: SandboxPlan, b: SandboxPlan): SandboxPlan {
  const rootAccess = a.rootAccess === "write" && b.rootAccess === "write" ? "write" : "read";
  const network = a.network === "restricted" || b.network === "restricted"
    ? "restricted"
    : "enabled";
  const privateTmp = (a.privateTmp === true && accessAt(b, "/tmp") === "write") ||
    (b.privateTmp === true && accessAt(a, "/tmp") === "write");
  const nodes = new Map<string, SandboxMount["node"]>();
  for (const mount of [...a.mounts, ...b.mounts]) {
    if (!nodes.has(mount.path) || mount.node === "missing") nodes.set(mount.path, mount.node);
  }
  const paths = [...nodes.keys()].sort((x, y) => depth(x) - depth(y) || (x < y ? -1 : 1));
  const mounts: SandboxMount[] = [];
  for (const path of paths) {
    const access = lesser(accessAt(a, path), accessAt(b, path));
    const node = nodes.get(path)!;
    let around: SandboxMount | undefined;
    for (const mount of mounts) {
      if (
        isUnder(path, mount.path) &&
        (around === undefined || depth(mount.path) > depth(around.path))
      ) {
        around = mount;
      }
    }
    const aroundAccess = around?.access ?? rootAccess;
    // Inside a denied directory only what both plans re-expose is reachable.
    if (aroundAccess === "deny") {
      if (access === "deny" || node === "missing") continue;
      markTraversable(mounts, path);
      mounts.push({ path, access, node });
      continue;
    }
    if (node === "missing") {
      // A cover for a missing restriction is needed only where the process could create it.
      if (access !== "write" && aroundAccess === "write") mounts.push({ path, access, node });
      continue;
    }
    if (access !== aroundAccess) mounts.push({ path, access, node });
  }
  const isolation: SandboxIsolation = rootAccess === "read" || mounts.length > 0 || privateTmp
    ? "filesystem"
    : network === "restricted"
    ? "network"
    : "none";
  return {
    type: "linuxSeccomp",
    isolation,
    network,
    rootAccess,
    mounts,
    ...(privateTmp ? { privateTmp } : {}),
  };
}
