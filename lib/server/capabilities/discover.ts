/**
 * `capabilityRoots/discoverV1` (docs/protocol.md §13): for each root a client selects, the
 * plugin manifest it declares (with its MCP and app configs), every `SKILL.md` below it (with
 * its `agents/openai.yaml`) and the plugin manifests that namespace those skills, read as text
 * in one bounded pass, as the reference does it.
 *
 * Every file-system access goes through the fs operations table (`fs/getMetadata`, `fs/walk`,
 * `fs/readFile` with the root's `sandbox`), so discovery sees exactly what those requests
 * would: the root's sandbox, the server's own sandbox and its `--allow-read` scope apply, and a
 * path outside the read scope is a missing one. Problems below a root are warnings, a root that
 * cannot be inspected is that root's `error`; neither fails the other roots.
 *
 * @module
 */

import { invalidRequest, RpcError } from "../../protocol/errors.ts";
import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { isNotFound, readFileUpTo } from "../fs/bounded_read.ts";
import type { FsRunner } from "../fs/operations.ts";
import { joinPath, pathFromUri, uriFromPath } from "../host/path_uri.ts";
import { basename, dirname } from "../host/posix_path.ts";
import { fsSandboxChecks } from "../sandbox/fs_guard.ts";
import { utf8Error } from "./utf8_error.ts";

/** Most roots one request may name (the reference's bound, with its `-32600`). */
export const MAX_ROOTS_PER_REQUEST = 128;
/** Deepest level below a root the scan lists (the reference's). */
export const MAX_SCAN_DEPTH = 6;
/** Most directories the scan of one root lists (the reference's). */
export const MAX_DIRECTORIES_PER_ROOT = 2_000;
/** Most entries the scan of one root lists (the reference's). */
export const MAX_ENTRIES_PER_ROOT = 20_000;
/** Largest file read: 1 MiB (the reference's); a larger one is a warning. */
export const MAX_FILE_BYTES = 1024 * 1024;
/** Most text read below one root: 16 MiB (the reference's); past it files are warnings. */
export const MAX_BUNDLE_BYTES_PER_ROOT = 16 * 1024 * 1024;
/**
 * Most text one request reads over all its roots: 64 MiB (the reference has no such bound, and
 * 128 roots of 16 MiB would make a 2 GiB reply); past it files are warnings.
 */
export const MAX_BUNDLE_BYTES_PER_REQUEST = 64 * 1024 * 1024;

/** The plugin manifests a root may hold, the first present one being its own. */
const PLUGIN_MANIFESTS = [
  ".codex-plugin/plugin.json",
  ".claude-plugin/plugin.json",
  ".cursor-plugin/plugin.json",
] as const;
const SKILL_FILE = "SKILL.md";
/** How many skills' files are read ahead of the one being admitted (at most 2 MiB each). */
const SKILL_READ_AHEAD = 8;
const SKILL_METADATA = "agents/openai.yaml";
const DEFAULT_MCP_CONFIG = ".mcp.json";

type Params = ParamsOf<"capabilityRoots/discoverV1">;
type Result = ResultOf<"capabilityRoots/discoverV1">;
type RootDiscovery = Result["roots"][number];
type TextFile = RootDiscovery["namespaceManifests"][number];

/** Bytes of text read, below one root and in the whole request. */
class Budget {
  #request = 0;
  #root = 0;

  /** Starts the count of a new root. */
  nextRoot(): void {
    this.#root = 0;
  }

  /** Why `bytes` more do not fit, or `undefined` when they do. */
  refusal(bytes: number): string | undefined {
    if (this.#root + bytes > MAX_BUNDLE_BYTES_PER_ROOT) {
      return `capability root bundle exceeds the ${MAX_BUNDLE_BYTES_PER_ROOT}-byte limit`;
    }
    if (this.#request + bytes > MAX_BUNDLE_BYTES_PER_REQUEST) {
      return `capability discovery reply exceeds the ${MAX_BUNDLE_BYTES_PER_REQUEST}-byte limit`;
    }
    return undefined;
  }

  add(bytes: number): void {
    this.#root += bytes;
    this.#request += bytes;
  }
}

/** One root's scan: its fs requests carry its sandbox, its warnings collect here. */
interface Scan {
  readonly run: FsRunner;
  readonly sandbox: unknown;
  readonly budget: Budget;
  readonly warnings: string[];
}

function messageOf(err: unknown): string {
  return err instanceof RpcError ? err.message : "internal error";
}

/**
 * What reading a capability file found, before the budget decides: nothing (missing or not a
 * regular file), a warning that comes before the budget (it cannot be inspected, it is too
 * large), or its size with its bytes or the warning of the read that failed.
 */
type Fetched =
  | { kind: "absent" }
  | { kind: "refused"; warning: string }
  | { kind: "failed"; size: number; warning: string }
  | { kind: "read"; size: number; bytes: Uint8Array };

/** Reads a capability file (at most {@linkcode MAX_FILE_BYTES} of it); never throws. */
async function fetchText(scan: Scan, uri: string): Promise<Fetched> {
  let size: number;
  try {
    const metadata = await scan.run("fs/getMetadata", { path: uri, sandbox: scan.sandbox });
    if (!metadata.isFile) return { kind: "absent" };
    size = metadata.size;
  } catch (err) {
    return isNotFound(err)
      ? { kind: "absent" }
      : { kind: "refused", warning: `failed to inspect capability file ${uri}: ${messageOf(err)}` };
  }
  if (size > MAX_FILE_BYTES) {
    return {
      kind: "refused",
      warning: `capability file ${uri} exceeds the ${MAX_FILE_BYTES}-byte limit`,
    };
  }
  try {
    const params = { path: uri, sandbox: scan.sandbox };
    return { kind: "read", size, bytes: await readFileUpTo(scan.run, params, MAX_FILE_BYTES) };
  } catch (err) {
    return {
      kind: "failed",
      size,
      warning: `failed to read capability file ${uri}: ${messageOf(err)}`,
    };
  }
}

/**
 * A fetched capability file's text, within the budget: `undefined` when it is missing or not a
 * regular file (silently) or when it cannot be used (with a warning: unreadable, too large,
 * over the budget, not UTF-8).
 */
function admitText(scan: Scan, uri: string, fetched: Fetched): TextFile | undefined {
  const warn = (warning: string) => void scan.warnings.push(warning);
  if (fetched.kind === "absent") return undefined;
  if (fetched.kind === "refused") return void warn(fetched.warning);
  const refusal = scan.budget.refusal(fetched.size);
  if (refusal !== undefined) return void warn(refusal);
  if (fetched.kind === "failed") return void warn(fetched.warning);
  const { bytes } = fetched;
  // The file grew after its size was read.
  if (bytes.length > MAX_FILE_BYTES) {
    return void warn(`capability file ${uri} exceeded its read limit`);
  }
  const grown = scan.budget.refusal(bytes.length);
  if (grown !== undefined) return void warn(grown);
  const invalid = utf8Error(bytes);
  if (invalid !== undefined) return void warn(`capability file ${uri} is not UTF-8: ${invalid}`);
  scan.budget.add(bytes.length);
  return { path: uri, contents: new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes) };
}

/** A capability file's text, read and admitted ({@linkcode admitText}). */
async function readText(scan: Scan, uri: string): Promise<TextFile | undefined> {
  return admitText(scan, uri, await fetchText(scan, uri));
}

/** The first plugin manifest `directory` holds, in {@linkcode PLUGIN_MANIFESTS} order. */
async function firstManifest(scan: Scan, directory: string): Promise<TextFile | undefined> {
  for (const relative of PLUGIN_MANIFESTS) {
    const manifest = await readText(scan, uriFromPath(joinPath(directory, relative)));
    if (manifest !== undefined) return manifest;
  }
  return undefined;
}

/** The rank of a plugin manifest path in {@linkcode PLUGIN_MANIFESTS}, or -1 for another file. */
function manifestRank(path: string): number {
  if (basename(path) !== "plugin.json") return -1;
  return PLUGIN_MANIFESTS.indexOf(`${basename(dirname(path))}/plugin.json` as never);
}

/** The plugin a manifest describes: the directory holding its `.codex-plugin` (or similar). */
function pluginRootOf(manifestPath: string): string {
  return dirname(dirname(manifestPath));
}

/** A file a manifest declares under `field`: a `./` path that stays below the root. */
function declaredPath(
  scan: Scan,
  root: string,
  field: string,
  value: unknown,
  manifest: TextFile,
): string | undefined {
  if (typeof value !== "string") return undefined;
  const ignoring = `ignoring ${field} in ${manifest.path}: path must`;
  if (!value.startsWith("./")) {
    return void scan.warnings.push(`${ignoring} start with \`./\``);
  }
  const relative = value.slice(2);
  if (relative === "" || relative.startsWith("/") || relative.split(/[/\\]/).includes("..")) {
    return void scan.warnings.push(`${ignoring} remain below the capability root`);
  }
  return uriFromPath(joinPath(root, relative));
}

/** The root plugin's files: its manifest, its MCP config (declared or `.mcp.json`), its apps. */
async function pluginFiles(
  scan: Scan,
  root: string,
  manifest: TextFile,
): Promise<NonNullable<RootDiscovery["plugin"]>> {
  let declared: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(manifest.contents);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) declared = parsed;
  } catch {
    // A manifest that is not JSON declares nothing; the client parses it and says why.
  }
  const servers = declared.mcpServers;
  const inline = typeof servers === "object" && servers !== null && !Array.isArray(servers);
  const mcpPath = inline ? undefined : declaredPath(scan, root, "mcpServers", servers, manifest) ??
    uriFromPath(joinPath(root, DEFAULT_MCP_CONFIG));
  const appsPath = declaredPath(scan, root, "apps", declared.apps, manifest);
  const mcpConfig = mcpPath === undefined ? undefined : await readText(scan, mcpPath);
  const appsConfig = appsPath === undefined ? undefined : await readText(scan, appsPath);
  return { manifest, mcpConfig: mcpConfig ?? null, appsConfig: appsConfig ?? null };
}

/** Discovers one root (its URI and sandbox already checked). */
async function discoverRoot(
  request: Params["roots"][number],
  run: FsRunner,
  budget: Budget,
): Promise<RootDiscovery> {
  const { id, sandbox } = request;
  const root = pathFromUri(request.path);
  // The root as the reference's URI parser gives it back: dot segments resolved, and the
  // client's own percent-encoding kept.
  const uri = new URL(request.path).href;
  const scan: Scan = { run, sandbox, budget, warnings: [] };
  const discovery: RootDiscovery = {
    id,
    path: uri,
    plugin: null,
    skills: [],
    namespaceManifests: [],
    warnings: scan.warnings,
    error: null,
  };
  try {
    const metadata = await run("fs/getMetadata", { path: uri, sandbox });
    if (!metadata.isDirectory) {
      return { ...discovery, error: `capability root ${uri} is not a directory` };
    }
  } catch (err) {
    return { ...discovery, error: `failed to inspect capability root ${uri}: ${messageOf(err)}` };
  }
  let walked: ResultOf<"fs/walk">;
  try {
    walked = await run("fs/walk", {
      path: uri,
      options: {
        maxDepth: MAX_SCAN_DEPTH,
        maxDirectories: MAX_DIRECTORIES_PER_ROOT,
        maxEntries: MAX_ENTRIES_PER_ROOT,
        followDirectorySymlinks: true,
        pruneHiddenDirectories: false,
      },
      sandbox,
    });
  } catch (err) {
    return { ...discovery, error: `failed to scan capability root ${uri}: ${messageOf(err)}` };
  }
  for (const error of walked.errors) {
    scan.warnings.push(`failed to scan capability path ${error.path}: ${error.message}`);
  }
  if (walked.truncated) {
    scan.warnings.push(`capability scan reached its traversal limit (root: ${uri})`);
  }
  const files = walked.entries.filter((entry) => entry.kind === "file").map((entry) => ({
    uri: entry.path,
    path: pathFromUri(entry.path),
  }));
  const skills = files.filter((file) => basename(file.path) === SKILL_FILE)
    .sort((a, b) => a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0);
  const manifests = files.map((file) => ({ ...file, rank: manifestRank(file.path) }))
    .filter((file) => file.rank >= 0)
    .map((file) => ({ ...file, pluginRoot: uriFromPath(pluginRootOf(file.path)) }))
    .sort((a, b) =>
      a.pluginRoot < b.pluginRoot ? -1 : a.pluginRoot > b.pluginRoot ? 1 : a.rank - b.rank
    );

  const own = await firstManifest(scan, root);
  // Skills of a root inside a plugin take that plugin's namespace: the nearest manifest above.
  let inherited = own;
  for (let above = root; inherited === undefined && above !== "/";) {
    above = dirname(above);
    inherited = await firstManifest(scan, above);
  }
  const namespaced = new Set<string>();
  if (inherited !== undefined) {
    namespaced.add(uriFromPath(pluginRootOf(pathFromUri(inherited.path))));
    discovery.namespaceManifests.push(inherited);
  }
  for (const manifest of manifests) {
    if (namespaced.has(manifest.pluginRoot)) continue;
    namespaced.add(manifest.pluginRoot);
    const text = await readText(scan, manifest.uri);
    if (text !== undefined) discovery.namespaceManifests.push(text);
  }
  if (own !== undefined) discovery.plugin = await pluginFiles(scan, root, own);
  // Each skill's two files are read up to SKILL_READ_AHEAD skills ahead and admitted in order,
  // so the budget and the warnings come out as if they were read one by one.
  const metadataUri = (skill: { path: string }) =>
    uriFromPath(joinPath(dirname(skill.path), SKILL_METADATA));
  const fetchBoth = (skill: { uri: string; path: string }) =>
    Promise.all([fetchText(scan, skill.uri), fetchText(scan, metadataUri(skill))]);
  const ahead = skills.slice(0, SKILL_READ_AHEAD).map(fetchBoth);
  for (const [index, skill] of skills.entries()) {
    const [instructionsRead, metadataRead] = await ahead.shift()!;
    const next = skills[index + SKILL_READ_AHEAD];
    if (next !== undefined) ahead.push(fetchBoth(next));
    const instructions = admitText(scan, skill.uri, instructionsRead);
    if (instructions === undefined) continue;
    const metadata = admitText(scan, metadataUri(skill), metadataRead);
    discovery.skills.push({ instructions, metadata: metadata ?? null });
  }
  return discovery;
}

/**
 * `capabilityRoots/discoverV1`: discovers each root in request order.
 *
 * Every root's URI and `sandbox` are checked before any is scanned, so a request with one
 * invalid root (or a sandbox this server cannot enforce) is refused whole, with `-32602`, as the
 * reference refuses one it cannot decode.
 *
 * @param params The request's params.
 * @param run Runs an fs request for this connection.
 * @returns One discovery per root, in request order.
 * @throws {RpcError} `-32600` past {@linkcode MAX_ROOTS_PER_REQUEST} roots; the path or sandbox
 * error of an invalid root.
 *
 * @example Discover a skill
 * ```ts
 * import { discoverCapabilityRoots } from "./discover.ts";
 * import { runFsOperation } from "../fs/operations.ts";
 * import { FileHandleTable } from "../fs/handles.ts";
 * import { MissingWatchTable } from "../fs/watch.ts";
 * const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
 * const dir = await Deno.makeTempDir();
 * await Deno.mkdir(`${dir}/skills/tidy`, { recursive: true });
 * await Deno.writeTextFile(`${dir}/skills/tidy/SKILL.md`, "---\nname: tidy\n---\n");
 * const { roots } = await discoverCapabilityRoots(
 *   { roots: [{ id: "repo", path: `file://${dir}` }] },
 *   (method, params) => runFsOperation(method, params, context),
 * );
 * console.log(roots[0]!.skills.length); // 1
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function discoverCapabilityRoots(params: Params, run: FsRunner): Promise<Result> {
  if (params.roots.length > MAX_ROOTS_PER_REQUEST) {
    throw invalidRequest(
      `capability root discovery accepts at most ${MAX_ROOTS_PER_REQUEST} roots`,
    );
  }
  for (const root of params.roots) {
    pathFromUri(root.path);
    fsSandboxChecks(root.sandbox);
  }
  return { roots: await scanCapabilityRoots(params.roots, run) };
}

/**
 * Discovers each root, in order, within one request's text budget (a root that cannot be
 * scanned is its own `error`); for callers that have already checked the roots' URIs and
 * sandboxes, such as `capabilities/discoverV2`.
 *
 * @param roots The roots, each with its id and sandbox.
 * @param run Runs an fs request for this connection.
 * @returns One discovery per root, in order.
 */
export async function scanCapabilityRoots(
  roots: Params["roots"],
  run: FsRunner,
): Promise<RootDiscovery[]> {
  const budget = new Budget();
  const discoveries: RootDiscovery[] = [];
  for (const root of roots) {
    budget.nextRoot();
    discoveries.push(await discoverRoot(root, run, budget));
  }
  return discoveries;
}
