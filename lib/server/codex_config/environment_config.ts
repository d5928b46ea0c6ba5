/**
 * `environmentConfig/read` (docs/protocol.md §13): the Codex configuration of this machine,
 * layer by layer, as the reference's executor-local loader reads it, cut down to the key paths a
 * client asks for. Codex 0.171 reads `mcp_servers` from it to add the executor's HTTP MCP
 * servers.
 *
 * The config layers, lowest precedence first: the system file (`/etc/codex/config.toml`), the
 * user file (`$CODEX_HOME/config.toml`), one project layer per `.codex/config.toml` from the
 * project root down to `cwd` (trusted directories only, without the keys a project may not
 * set), and `/etc/codex/managed_config.toml`. The requirements: `/etc/codex/requirements.toml`
 * and the policies of `managed_config.toml`.
 *
 * Every file access goes through the fs operations table (`fs/getMetadata`, `fs/readFile`,
 * `fs/canonicalize`), so `--allow-read` and the server's own sandbox apply: a file outside
 * them is a missing one.
 *
 * @module
 */

import { invalidParams, kindError, RpcError } from "../../protocol/errors.ts";
import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { isNotFound, readFileUpTo } from "../fs/bounded_read.ts";
import type { FsRunner } from "../fs/operations.ts";
import { joinPath, pathFromUri, uriFromPath } from "../host/path_uri.ts";
import { type CodexPlaces, codexPlaces } from "../host/codex_places.ts";
import { dirname } from "../host/posix_path.ts";
import { type Layer, type LayerStack, projectStack } from "./projection.ts";
import { isTable, setEntry, type TomlTable, tomlText } from "./toml_text.ts";

type Params = ParamsOf<"environmentConfig/read">;
type Result = ResultOf<"environmentConfig/read">;

/** Largest config or requirements file read: 4 MiB (a larger one is `configInvalid`). */
export const MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024;

/**
 * The top-level keys a project layer may not set (they choose where credentials go or which
 * commands run); as codex-cli 0.171.0 drops them. `features.respect_system_proxy` is dropped too.
 */
export const PROJECT_LOCAL_CONFIG_DENYLIST = [
  "openai_base_url",
  "chatgpt_base_url",
  "apps_mcp_product_sku",
  "responses_api_metadata",
  "model_provider",
  "model_providers",
  "notify",
  "profile",
  "profiles",
  "experimental_realtime_webrtc_call_base_url",
  "experimental_realtime_ws_base_url",
  "otel",
] as const;

/** The `approval_policy` values a managed config may name (else `configInvalid`). */
const APPROVAL_POLICIES = ["untrusted", "on-failure", "on-request", "granular", "never"];
/** The `sandbox_mode` values a managed config may name (else `configInvalid`). */
const SANDBOX_MODES = ["read-only", "workspace-write", "danger-full-access"];

/** Where the configuration lives on this machine, and its name. */
export interface ConfigPlaces extends CodexPlaces {
  /** This machine's name, when known. */
  hostname: string | undefined;
}

/** The places of this machine (`/etc/codex`, `$CODEX_HOME` or `$HOME/.codex`, `$HOME`), its name. */
export function hostConfigPlaces(): ConfigPlaces {
  let hostname: string | undefined;
  try {
    hostname = Deno.hostname();
  } catch {
    hostname = undefined;
  }
  return { ...codexPlaces(), hostname };
}

/** The TOML parser: smol-toml, loaded with the first read (outside the start-up graph). */
export type TomlParse = (text: string) => TomlTable;

// A specifier `deno run` does not resolve at start (a literal one it would);
// lib/server/session/lazy_packages.ts names the same package for compile.sh and for the caches
// a server without a network starts from.
const TOML_PACKAGE = "npm:smol-toml@1.9.1";
let parser: Promise<TomlParse> | undefined;

/** Loads the TOML parser once (again on the next call after a load that failed). */
export function loadTomlParser(): Promise<TomlParse> {
  return parser ??= import(TOML_PACKAGE).then(
    (module: { parse(text: string, options: { integersAsBigInt: boolean }): TomlTable }) =>
    (text: string) => module.parse(text, { integersAsBigInt: true }),
    (err) => {
      parser = undefined;
      throw err;
    },
  );
}

/** A `configInvalid` error, its message worded as the reference's. */
function invalid(message: string): RpcError {
  return kindError("configInvalid", `failed to load executor-local config: ${message}`);
}

/** Most characters of a parser's message kept (it quotes the line, which may be long). */
const MAX_PARSE_MESSAGE_CHARS = 2_000;

function parseMessage(err: unknown): string {
  const message = err instanceof Error ? err.message.trim() : String(err);
  return message.length > MAX_PARSE_MESSAGE_CHARS
    ? `${message.slice(0, MAX_PARSE_MESSAGE_CHARS)}…`
    : message;
}

interface Reader {
  run: FsRunner;
  parse: TomlParse;
}

/**
 * Whether `path` exists (any file type), and whether it is a directory; a path the fs table
 * refuses (outside `--allow-read`, denied by the server's sandbox) counts as missing.
 */
async function stat(
  reader: Reader,
  path: string,
): Promise<{ isDirectory: boolean; size: number } | undefined> {
  try {
    return await reader.run("fs/getMetadata", { path: uriFromPath(path) });
  } catch (err) {
    if (err instanceof RpcError) return undefined;
    throw err;
  }
}

/** A file's text, or `undefined` when it is missing (or outside the read scope). */
async function readText(reader: Reader, path: string): Promise<string | undefined> {
  const metadata = await stat(reader, path);
  if (metadata === undefined) return undefined;
  const tooLarge = () => invalid(`${path} exceeds the ${MAX_CONFIG_FILE_BYTES}-byte limit`);
  if (metadata.size > MAX_CONFIG_FILE_BYTES) throw tooLarge();
  let bytes: Uint8Array;
  try {
    bytes = await readFileUpTo(reader.run, { path: uriFromPath(path) }, MAX_CONFIG_FILE_BYTES);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw invalid(`failed to read ${path}: ${err instanceof RpcError ? err.message : "error"}`);
  }
  // The file grew after its size was read.
  if (bytes.length > MAX_CONFIG_FILE_BYTES) throw tooLarge();
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw invalid(`${path} is not valid UTF-8`);
  }
}

/** A TOML file's table: `{}` when missing, `configInvalid` naming the file when not TOML. */
async function readToml(
  reader: Reader,
  path: string,
  describe: (message: string) => string = (message) => `${path}: ${message}`,
): Promise<TomlTable | undefined> {
  const text = await readText(reader, path);
  if (text === undefined) return undefined;
  try {
    return reader.parse(text);
  } catch (err) {
    throw invalid(describe(parseMessage(err)));
  }
}

/** `overlay` merged into `base`: tables key by key, any other value replaces. */
function merge(base: TomlTable, overlay: TomlTable): TomlTable {
  const merged: TomlTable = { ...base };
  for (const [key, value] of Object.entries(overlay)) {
    const below = merged[key];
    setEntry(merged, key, isTable(below) && isTable(value) ? merge(below, value) : value);
  }
  return merged;
}

/** `path` and each directory above it, `path` first. */
function ancestors(path: string): string[] {
  const all = [path];
  while (all.at(-1) !== "/") all.push(dirname(all.at(-1)!));
  return all;
}

/**
 * The metadata of `marker` in `dir` when `dir` holds it. A `.git` directory counts only with a
 * `HEAD` in it (codex-cli 0.171.0 passes over an empty one); a `.git` file always does.
 */
async function marker(
  reader: Reader,
  dir: string,
  name: string,
): Promise<{ isDirectory: boolean } | undefined> {
  const path = joinPath(dir, name);
  const metadata = await stat(reader, path);
  if (metadata === undefined || name !== ".git" || !metadata.isDirectory) return metadata;
  return await stat(reader, joinPath(path, "HEAD")) === undefined ? undefined : metadata;
}

async function projectRoot(reader: Reader, cwd: string, markers: string[]): Promise<string> {
  if (markers.length === 0) return cwd;
  for (const dir of ancestors(cwd)) {
    for (const name of markers) {
      if (await marker(reader, dir, name) !== undefined) return dir;
    }
  }
  return cwd;
}

/**
 * The repository whose trust covers `cwd`: the checkout holding it, or for a linked worktree
 * (a `.git` file naming `<repo>/.git/worktrees/<name>`) the main repository.
 */
async function repositoryRoot(reader: Reader, cwd: string): Promise<string | undefined> {
  const base = (await stat(reader, cwd))?.isDirectory ? cwd : dirname(cwd);
  for (const dir of ancestors(base)) {
    const dotGit = await marker(reader, dir, ".git");
    if (dotGit === undefined) continue;
    if (dotGit.isDirectory) return dir;
    const text = await readText(reader, joinPath(dir, ".git")).catch(() => undefined);
    const gitDir = /^gitdir:\s*(.+?)\s*$/m.exec(text ?? "")?.[1];
    if (gitDir === undefined) return dir;
    const worktree = gitDir.startsWith("/") ? gitDir : joinPath(dir, gitDir);
    const worktrees = dirname(worktree);
    return worktrees.endsWith("/worktrees") ? dirname(dirname(worktrees)) : dir;
  }
  return undefined;
}

/** The lookup keys of a directory: its canonical path, then the path as given. */
async function trustKeys(reader: Reader, path: string): Promise<string[]> {
  let canonical = path;
  try {
    canonical = pathFromUri(
      (await reader.run("fs/canonicalize", { path: uriFromPath(path) })).path,
    );
  } catch {
    // A path that does not resolve is looked up as given.
  }
  return canonical === path ? [path] : [canonical, path];
}

type TrustLevel = "trusted" | "untrusted";

/** `[projects."<path>"] trust_level` of the merged system, user and managed config. */
function trustTable(config: TomlTable): Map<string, TrustLevel> {
  const projects = config.projects;
  const trust = new Map<string, TrustLevel>();
  if (projects === undefined) return trust;
  if (!isTable(projects)) throw invalid("projects: expected a table");
  for (const [key, project] of Object.entries(projects)) {
    if (!isTable(project)) throw invalid(`projects.${key}: expected a table`);
    const level = project.trust_level;
    if (level === undefined) continue;
    if (level !== "trusted" && level !== "untrusted") {
      throw invalid(`projects.${key}.trust_level: expected "trusted" or "untrusted"`);
    }
    trust.set(key, level);
  }
  return trust;
}

function rootMarkers(config: TomlTable): string[] {
  const markers = config.project_root_markers;
  if (markers === undefined) return [".git"];
  if (!Array.isArray(markers) || !markers.every((marker) => typeof marker === "string")) {
    throw invalid("project_root_markers: expected an array of strings");
  }
  return markers as string[];
}

/** A project layer's table without the keys a project may not set. */
function sanitized(config: TomlTable): TomlTable {
  const kept: TomlTable = { ...config };
  for (const key of PROJECT_LOCAL_CONFIG_DENYLIST) delete kept[key];
  const features = kept.features;
  if (isTable(features) && Object.hasOwn(features, "respect_system_proxy")) {
    const { respect_system_proxy: _, ...rest } = features;
    kept.features = rest;
  }
  return kept;
}

async function projectLayers(
  reader: Reader,
  cwd: string,
  discovery: TomlTable,
  codexHome: string,
): Promise<Layer[]> {
  const root = await projectRoot(reader, cwd, rootMarkers(discovery));
  const trust = trustTable(discovery);
  const repository = await repositoryRoot(reader, cwd);
  const fallbackKeys = [
    ...await trustKeys(reader, root),
    ...(repository === undefined ? [] : await trustKeys(reader, repository)),
  ];
  const homeKeys = await trustKeys(reader, codexHome);
  const all = ancestors(cwd);
  const dirs = all.slice(0, all.indexOf(root) + 1).reverse();
  const layers: Layer[] = [];
  for (const dir of dirs) {
    const dotCodex = joinPath(dir, ".codex");
    if (!(await stat(reader, dotCodex))?.isDirectory) continue;
    const keys = [...await trustKeys(reader, dir), ...fallbackKeys];
    const level = keys.map((key) => trust.get(key)).find((found) => found !== undefined);
    if (level !== "trusted") continue;
    const dotCodexKeys = await trustKeys(reader, dotCodex);
    if (dotCodexKeys.some((key) => homeKeys.includes(key))) continue;
    const file = joinPath(dotCodex, "config.toml");
    const config = await readToml(
      reader,
      file,
      (message) => `Error parsing project config file ${file}: ${message}`,
    );
    layers.push({
      source: `project (${file})`,
      baseDir: dotCodex,
      toml: sanitized(config ?? {}),
    });
  }
  return layers;
}

/** The requirements `managed_config.toml`'s policies stand for (as the reference maps them). */
function legacyRequirements(managed: TomlTable): TomlTable {
  const requirements: TomlTable = {};
  const { approval_policy: policy, approvals_reviewer: reviewer, sandbox_mode: mode } = managed;
  if (policy !== undefined) {
    const name = isTable(policy) ? Object.keys(policy)[0] : policy;
    if (typeof name !== "string" || !APPROVAL_POLICIES.includes(name)) {
      throw invalid("managed_config.toml approval_policy: not an approval policy");
    }
    requirements.allowed_approval_policies = [policy];
  }
  if (reviewer !== undefined) {
    if (typeof reviewer !== "string") {
      throw invalid("managed_config.toml approvals_reviewer: expected a string");
    }
    requirements.allowed_approvals_reviewers = reviewer === "auto_review"
      ? [reviewer, "user"]
      : [reviewer];
  }
  if (mode !== undefined) {
    if (typeof mode !== "string" || !SANDBOX_MODES.includes(mode)) {
      throw invalid("managed_config.toml sandbox_mode: not a sandbox mode");
    }
    requirements.allowed_sandbox_modes = mode === "read-only" ? [mode] : ["read-only", mode];
  }
  return requirements;
}

function validatePaths(params: Params): void {
  if (params.configPaths.length === 0 && params.requirementsPaths.length === 0) {
    throw invalidParams("at least one config or requirements path is required");
  }
  if ([...params.configPaths, ...params.requirementsPaths].some((path) => path.length === 0)) {
    throw invalidParams("TOML paths must contain at least one key segment");
  }
}

function wireStack(stack: LayerStack): Result["config"] {
  return {
    layers: stack.layers.map((layer) => ({
      source: layer.source,
      baseDir: uriFromPath(layer.baseDir),
      toml: tomlText(layer.toml),
    })),
    cloudInsertionIndex: stack.cloudInsertionIndex,
  };
}

/**
 * Answers `environmentConfig/read`: the config and requirements layers of this machine for
 * `cwd`, each cut down to the requested key paths.
 *
 * @param params The request's params.
 * @param run Runs fs requests through the fs operations table.
 * @param places Where the configuration lives (the host's, unless a test says otherwise).
 * @throws {RpcError} `-32602` for empty path lists or key paths, `-32603` `configInvalid` for a
 * file that is not TOML (naming it).
 *
 * @example
 * ```ts
 * import { readEnvironmentConfig } from "./environment_config.ts";
 * import { runFsOperation } from "../fs/operations.ts";
 * import { FileHandleTable } from "../fs/handles.ts";
 * import { MissingWatchTable } from "../fs/watch.ts";
 * const home = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${home}/config.toml`, 'model = "m"\n[features]\nx = true\n');
 * const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
 * const result = await readEnvironmentConfig(
 *   { cwd: `file://${home}`, configPaths: [["features"]], requirementsPaths: [] },
 *   (method, params) => runFsOperation(method, params, context),
 *   { systemDir: `${home}/none`, codexHome: home, userHome: undefined, hostname: "box" },
 * );
 * console.log(result.config.layers[0]!.toml); // "[features]\nx = true\n"
 * await Deno.remove(home, { recursive: true });
 * ```
 */
export async function readEnvironmentConfig(
  params: Params,
  run: FsRunner,
  places: ConfigPlaces = hostConfigPlaces(),
): Promise<Result> {
  validatePaths(params);
  const cwd = pathFromUri(params.cwd);
  const reader: Reader = { run, parse: await loadTomlParser() };
  const { systemDir, codexHome } = places;
  const systemFile = joinPath(systemDir, "config.toml");
  const userFile = joinPath(codexHome, "config.toml");
  const managedFile = joinPath(systemDir, "managed_config.toml");
  const requirementsFile = joinPath(systemDir, "requirements.toml");
  const system = await readToml(reader, systemFile) ?? {};
  const user = await readToml(reader, userFile) ?? {};
  const managed = await readToml(reader, managedFile);
  const systemRequirements = await readToml(
    reader,
    requirementsFile,
    (message) => `failed to parse requirements layer ${requirementsFile}: ${message}`,
  );
  const discovery = merge(merge(system, user), managed ?? {});
  const config: LayerStack = {
    layers: [
      { source: `system (${systemFile})`, baseDir: systemDir, toml: system },
      { source: `user (${userFile})`, baseDir: codexHome, toml: user },
      ...await projectLayers(reader, cwd, discovery, codexHome),
      ...(managed === undefined ? [] : [{
        source: `legacy managed_config.toml (${managedFile})`,
        baseDir: systemDir,
        toml: managed,
      }]),
    ],
    // The cloud's layers go above the system layer.
    cloudInsertionIndex: 1,
  };
  const requirements: LayerStack = {
    layers: [
      ...(systemRequirements === undefined
        ? []
        : [{ source: requirementsFile, baseDir: systemDir, toml: systemRequirements }]),
      ...(managed === undefined
        ? []
        : [{ source: managedFile, baseDir: systemDir, toml: legacyRequirements(managed) }]),
    ],
    cloudInsertionIndex: systemRequirements === undefined ? 0 : 1,
  };
  return {
    userHomeDir: places.userHome === undefined ? null : uriFromPath(places.userHome),
    codexHomeDir: uriFromPath(codexHome),
    hostname: places.hostname ?? null,
    config: wireStack(projectStack(config, params.configPaths)),
    requirements: wireStack(projectStack(requirements, params.requirementsPaths)),
  };
}
