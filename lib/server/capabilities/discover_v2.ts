/**
 * `capabilities/discoverV2` (docs/protocol.md §13): the Codex plugins installed on this machine
 * and the skills installed outside them, as the reference (codex-cli 0.171.0) reports them.
 *
 * Two steps, as in the reference:
 *
 * 1. **Locations** (without the request's sandbox: these are fixed places of this machine):
 *    each plugin of `$CODEX_HOME/plugins/cache/<marketplace>/<name>/` at its active version
 *    (`plugin_version.ts`), with the remote id of its `.codex-remote-plugin-install.json`;
 *    then the skill roots `$CODEX_HOME/skills`, `~/.agents/skills` and `/etc/codex/skills`.
 * 2. **Discovery** (with the request's sandbox): each location is scanned as
 *    `capabilityRoots/discoverV1` scans a root; its skills' frontmatter and `agents/openai.yaml`
 *    are read (`skill_metadata.ts`), a skill inside a plugin is named `namespace:name` by the
 *    nearest plugin manifest above it.
 *
 * Nothing fails the request: a location that cannot be resolved, a plugin without a readable
 * manifest, an invalid skill is left out, and the reply says so with one general warning (the
 * reference does not name what it left out). The reply holds at most
 * {@linkcode MAX_CAPABILITIES} plugins and skills and {@linkcode MAX_RESPONSE_BYTES} bytes;
 * past either it ends with `capability discovery size limit reached` first among its
 * warnings. The reference caches the locations and watches them; this server reads them on
 * every request (the reference's behaviour without a watcher), so a newly installed skill is
 * seen at once.
 *
 * @module
 */

import type { ParamsOf, ResultOf } from "../../protocol/methods.ts";
import { errnoOf, isNotFound, readFileUpTo } from "../fs/bounded_read.ts";
import type { FsRunner } from "../fs/operations.ts";
import { type CodexPlaces, codexPlaces } from "../host/codex_places.ts";
import { joinPath, pathFromUri, uriFromPath } from "../host/path_uri.ts";
import { basename, dirname, relative } from "../host/posix_path.ts";
import { fsSandboxChecks } from "../sandbox/fs_guard.ts";
import { scanCapabilityRoots } from "./discover.ts";
import { type JsonNode, readJson, writeJson } from "./json_text.ts";
import { activePluginVersion, isPluginSegment } from "./plugin_version.ts";
import {
  charCount,
  foldLine,
  loadYaml,
  parseSkillFrontmatter,
  parseSkillPolicy,
  trimWhitespace,
} from "./skill_metadata.ts";

type Params = ParamsOf<"capabilities/discoverV2">;
type Result = ResultOf<"capabilities/discoverV2">;
type Plugin = Result["plugins"][number];
type PluginSkill = Plugin["skills"][number];
type Skill = Result["skills"][number];
type RootDiscovery = Awaited<ReturnType<typeof scanCapabilityRoots>>[number];

/** Most plugins and skills one reply holds (the reference's). */
export const MAX_CAPABILITIES = 2_048;
/** Most bytes of JSON one reply holds: 4 MiB (the reference's). */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Most warnings one reply holds (the reference's). */
export const MAX_WARNINGS = 64;
/** Most locations (installed plugins and skill roots) discovered (the reference's). */
export const MAX_LOCATIONS = 512;
/** Largest `.codex-remote-plugin-install.json` read: 16 KiB (the reference's). */
export const MAX_REMOTE_METADATA_BYTES = 16 * 1024;
/** Longest remote plugin id, in bytes (the reference's). */
const MAX_REMOTE_PLUGIN_ID_BYTES = 1024;
/** Longest `namespace:name` of a skill (the reference's: two names and the colon). */
const MAX_QUALIFIED_NAME_CHARS = 64 * 2 + 1;
/** The bounds of the plugin cache's listing (the reference's). */
const CACHE_WALK = {
  maxDepth: 1,
  maxDirectories: 2_000,
  maxEntries: 20_000,
  followDirectorySymlinks: true,
  pruneHiddenDirectories: false,
};
const REMOTE_METADATA_FILE = ".codex-remote-plugin-install.json";

const LOCATIONS_INCOMPLETE =
  "some capability locations could not be resolved; discovery may be incomplete";
const METADATA_INCOMPLETE =
  "some capability metadata could not be loaded; discovery may be incomplete";
const SIZE_LIMIT_REACHED = "capability discovery size limit reached";

/** One place to discover: an installed plugin or a skill root. */
interface Location {
  root: string;
  plugin?: { id: string; version: string; remotePluginId: string | null };
  /** The skill root's id in `discoveryRoot`, for a skill root. */
  rootId?: string;
}

/** The locations, and whether some could not be resolved. */
interface Locations {
  locations: Location[];
  incomplete: boolean;
}

/** Why the locations could not be listed at all (the reference's `io::ErrorKind` name). */
class PrewarmFailure extends Error {}

function errorKindName(err: unknown): string {
  const errno = errnoOf(err);
  return errno === "EACCES" || errno === "EPERM" ? "PermissionDenied" : "Other";
}

/** Whether `path` is a directory, without the request's sandbox; other errors fail the step. */
async function isDirectory(run: FsRunner, path: string): Promise<boolean> {
  try {
    return (await run("fs/getMetadata", { path: uriFromPath(path) })).isDirectory;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw new PrewarmFailure(errorKindName(err));
  }
}

/** The remote id a plugin was installed under, from its package's install metadata. */
async function remotePluginId(run: FsRunner, packageRoot: string): Promise<string | null> {
  const uri = uriFromPath(joinPath(packageRoot, REMOTE_METADATA_FILE));
  let bytes: Uint8Array;
  try {
    bytes = await readFileUpTo(run, { path: uri }, MAX_REMOTE_METADATA_BYTES);
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
  if (bytes.length > MAX_REMOTE_METADATA_BYTES) throw new Error("too large");
  const metadata = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  const id = typeof metadata?.remote_plugin_id === "string"
    ? trimWhitespace(metadata.remote_plugin_id)
    : undefined;
  if (metadata?.schema_version !== 1 || id === undefined || id === "") throw new Error("invalid");
  if (new TextEncoder().encode(id).length > MAX_REMOTE_PLUGIN_ID_BYTES) {
    throw new Error("too long");
  }
  return id;
}

/**
 * The active version of the plugin package at `packageRoot`, `undefined` when it has none or
 * cannot be listed. Its version directories are the directories in it (the package directory
 * itself may be a link; a link in it to a directory is not a version).
 */
async function installedVersion(run: FsRunner, packageRoot: string): Promise<string | undefined> {
  try {
    const { path: real } = await run("fs/canonicalize", { path: uriFromPath(packageRoot) });
    const { entries } = await run("fs/walk", {
      path: real,
      options: { ...CACHE_WALK, maxDepth: 0, followDirectorySymlinks: false },
    });
    return activePluginVersion(
      entries.filter((entry) => entry.kind === "directory")
        .map((entry) => basename(pathFromUri(entry.path))),
    );
  } catch {
    return undefined;
  }
}

/** The installed plugins of the cache, in `name@marketplace` order. */
async function cachedPlugins(run: FsRunner, cache: string): Promise<Locations> {
  let walked: ResultOf<"fs/walk">;
  try {
    walked = await run("fs/walk", { path: uriFromPath(cache), options: CACHE_WALK });
  } catch (err) {
    if (isNotFound(err)) return { locations: [], incomplete: false };
    throw new PrewarmFailure(errorKindName(err));
  }
  if (walked.errors.length > 0) throw new PrewarmFailure("Other");
  let incomplete = walked.truncated;
  const packages = new Map<string, string>();
  for (const entry of walked.entries) {
    if (entry.kind !== "directory") continue;
    const path = pathFromUri(entry.path);
    const parts = relative(cache, path).split("/");
    if (parts.length !== 2) continue;
    const [marketplace, name] = parts as [string, string];
    if (isPluginSegment(name) && isPluginSegment(marketplace)) {
      packages.set(`${name}@${marketplace}`, path);
    }
  }
  const locations: Location[] = [];
  for (const id of [...packages.keys()].sort()) {
    const packageRoot = packages.get(id)!;
    const version = await installedVersion(run, packageRoot);
    if (version === undefined) continue;
    if (locations.length === MAX_LOCATIONS) {
      incomplete = true;
      break;
    }
    let remote: string | null = null;
    try {
      remote = await remotePluginId(run, packageRoot);
    } catch {
      incomplete = true;
    }
    locations.push({
      root: joinPath(packageRoot, version),
      plugin: { id, version, remotePluginId: remote },
    });
  }
  return { locations, incomplete };
}

/** Every location of this machine, installed plugins first, bounded. */
async function resolveLocations(run: FsRunner, places: CodexPlaces): Promise<Locations> {
  const skillRoots = [
    { root: joinPath(places.codexHome, "skills"), rootId: "codex-home-skills" },
    ...places.userHome === undefined
      ? []
      : [{ root: joinPath(places.userHome, ".agents/skills"), rootId: "user-agent-skills" }],
    { root: joinPath(places.systemDir, "skills"), rootId: "system-skills" },
  ].filter((root, index, all) => all.findIndex((other) => other.root === root.root) === index);
  const cache = joinPath(places.codexHome, "plugins/cache");
  const cacheExists = await isDirectory(run, cache);
  const existing: Location[] = [];
  for (const root of skillRoots) {
    if (await isDirectory(run, root.root)) existing.push(root);
  }
  const plugins = cacheExists
    ? await cachedPlugins(run, cache)
    : { locations: [], incomplete: false };
  const locations = [...plugins.locations, ...existing];
  return {
    locations: locations.slice(0, MAX_LOCATIONS),
    incomplete: plugins.incomplete || locations.length > MAX_LOCATIONS,
  };
}

// ---------------------------------------------------------------------------
// Discovery of one location

/** A location's plugin or skills, and whether something in it was left out. */
interface Discovered {
  plugin?: Plugin;
  skills: Skill[];
  incomplete: boolean;
}

/** The name a manifest gives its skills' namespace, or `undefined` when it gives none. */
function manifestName(contents: string): string | undefined {
  let node: JsonNode;
  try {
    node = readJson(contents);
  } catch {
    return undefined;
  }
  if (node.kind !== "object" || node.repeated.has("name")) return undefined;
  const name = node.entries.get("name");
  if (name === undefined) return "";
  return name.kind === "string" ? name.value : undefined;
}

/**
 * What the plugin's own manifest says of it, as the reference's typed read does: `undefined`
 * when it is not a JSON object or `name`, `apps`, `interface` or `interface.displayName` has
 * the wrong type (the plugin is left out).
 */
function pluginManifest(contents: string, root: string) {
  let node: JsonNode;
  try {
    node = readJson(contents);
  } catch {
    return undefined;
  }
  if (node.kind !== "object") return undefined;
  if (["name", "apps", "interface", "mcpServers"].some((key) => node.repeated.has(key))) {
    return undefined;
  }
  const fields = node.entries;
  const name = fields.get("name");
  const face = fields.get("interface");
  const isNull = (value: JsonNode | undefined) => value?.kind === "literal" && value.value === null;
  const isText = (value: JsonNode | undefined) => value === undefined || value.kind === "string";
  if (!isText(name) || !(isText(fields.get("apps")) || isNull(fields.get("apps")))) {
    return undefined;
  }
  let displayName: JsonNode | undefined;
  if (face !== undefined && !isNull(face)) {
    if (face.kind !== "object" || face.repeated.has("displayName")) return undefined;
    displayName = face.entries.get("displayName");
    if (!isText(displayName) && !isNull(displayName)) return undefined;
  }
  const text = (value: JsonNode | undefined) => value?.kind === "string" ? value.value : "";
  const shown = trimWhitespace(text(displayName));
  const named = text(name);
  const servers = fields.get("mcpServers");
  return {
    displayName: shown !== "" ? shown : trimWhitespace(named) !== "" ? named : basename(root),
    inlineServers: servers?.kind === "object" ? writeJson(servers) : undefined,
    declaresServersFile: servers?.kind === "string",
    declaresAppsFile: fields.get("apps")?.kind === "string",
  };
}

/** The nearest namespace at or above a skill's directory, by plugin root. */
function namespaceOf(skillPath: string, namespaces: Map<string, string>): string | undefined {
  for (let dir = dirname(skillPath);; dir = dirname(dir)) {
    const name = namespaces.get(dir);
    if (name !== undefined) return name;
    if (dir === "/") return undefined;
  }
}

/** The skills a location's scan found, named and described; `incomplete` if some were left out. */
async function skillsOf(discovery: RootDiscovery) {
  const yaml = await loadYaml();
  const namespaces = new Map<string, string>();
  for (const manifest of discovery.namespaceManifests) {
    const pluginRoot = dirname(dirname(pathFromUri(manifest.path)));
    const name = manifestName(manifest.contents);
    if (name === undefined || namespaces.has(pluginRoot)) continue;
    namespaces.set(pluginRoot, trimWhitespace(name) === "" ? basename(pluginRoot) : name);
  }
  const skills: PluginSkill[] = [];
  let incomplete = false;
  for (const { instructions, metadata } of discovery.skills) {
    const path = pathFromUri(instructions.path);
    const fallback = foldLine(basename(dirname(path)));
    const parsed = parseSkillFrontmatter(yaml, instructions.contents, fallback || "skill");
    const namespace = parsed === undefined ? undefined : namespaceOf(path, namespaces);
    if (
      parsed === undefined ||
      (namespace !== undefined &&
        charCount(namespace) + 1 + charCount(parsed.name) > MAX_QUALIFIED_NAME_CHARS)
    ) {
      incomplete = true;
      continue;
    }
    skills.push({
      name: namespace === undefined ? parsed.name : `${namespace}:${parsed.name}`,
      description: parsed.description,
      shortDescription: parsed.shortDescription,
      path: instructions.path,
      ...metadata === null
        ? { dependencies: null, policy: null }
        : parseSkillPolicy(yaml, metadata.contents),
    });
  }
  return { skills, incomplete };
}

/** A scanned location as the reply shows it: its plugin, or its skills for a skill root. */
async function discovered(location: Location, discovery: RootDiscovery): Promise<Discovered> {
  const scanIncomplete = discovery.warnings.length > 0 || discovery.error !== null;
  const rootUri = uriFromPath(location.root);
  if (location.plugin === undefined) {
    const { skills, incomplete } = await skillsOf(discovery);
    const discoveryRoot = { id: location.rootId ?? "", path: rootUri };
    return {
      skills: skills.map(({ dependencies, policy, ...skill }) => ({
        ...skill,
        discoveryRoot,
        dependencies,
        policy,
      })),
      incomplete: scanIncomplete || incomplete,
    };
  }
  // An installed plugin without a manifest the reference reads is left out, skills and all.
  const files = discovery.plugin;
  const manifest = files === null
    ? undefined
    : pluginManifest(files.manifest.contents, location.root);
  if (files === null || manifest === undefined) return { skills: [], incomplete: true };
  const { skills, incomplete } = await skillsOf(discovery);
  // A file the manifest names that could not be read is left out, and said so.
  const unread = (manifest.declaresServersFile && files.mcpConfig === null) ||
    (manifest.declaresAppsFile && files.appsConfig === null);
  const { id, remotePluginId, version } = location.plugin;
  return {
    plugin: {
      id,
      displayName: manifest.displayName,
      remotePluginId,
      version,
      root: rootUri,
      files: {
        manifest: files.manifest,
        mcpConfig: manifest.inlineServers === undefined
          ? files.mcpConfig
          : { path: files.manifest.path, contents: manifest.inlineServers },
        appsConfig: files.appsConfig,
      },
      skills,
    },
    skills: [],
    incomplete: scanIncomplete || incomplete || unread,
  };
}

/**
 * Whether a location is worth scanning: `scan` for a directory the request's sandbox lets us
 * see; `skip` for one that is missing, not a directory or forbidden (normal); `warn` else.
 */
async function scannability(
  run: FsRunner,
  location: Location,
  sandbox: unknown,
): Promise<"scan" | "skip" | "warn"> {
  try {
    const metadata = await run("fs/getMetadata", { path: uriFromPath(location.root), sandbox });
    return metadata.isDirectory ? "scan" : "skip";
  } catch (err) {
    if (isNotFound(err)) return "skip";
    return errorKindName(err) === "PermissionDenied" ? "skip" : "warn";
  }
}

/** Each location's plugin or skills, its text read within one request's budget. */
async function discoverLocations(
  run: FsRunner,
  locations: Location[],
  sandbox: unknown,
): Promise<Discovered[]> {
  const states: ("scan" | "skip" | "warn")[] = [];
  for (const location of locations) states.push(await scannability(run, location, sandbox));
  const scanned = locations.filter((_, index) => states[index] === "scan");
  const discoveries = await scanCapabilityRoots(
    scanned.map((location) => ({
      id: location.plugin?.id ?? "",
      path: uriFromPath(location.root),
      sandbox,
    })),
    run,
  );
  const found: Discovered[] = [];
  let next = 0;
  for (const [index, location] of locations.entries()) {
    found.push(
      states[index] === "scan"
        ? await discovered(location, discoveries[next++]!)
        : { skills: [], incomplete: states[index] === "warn" },
    );
  }
  return found;
}

// ---------------------------------------------------------------------------
// The reply's bounds

function jsonBytes(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value)).length;
}

/** Plugins and skills admitted so far, by count and bytes. */
class Budget {
  capabilities = 0;
  bytes = 0;
  truncated = false;

  admit(capabilities: number, bytes: number): boolean {
    if (
      this.capabilities + capabilities > MAX_CAPABILITIES ||
      this.bytes + bytes > MAX_RESPONSE_BYTES
    ) {
      this.truncated = true;
      return false;
    }
    this.capabilities += capabilities;
    this.bytes += bytes;
    return true;
  }

  get full(): boolean {
    return this.capabilities === MAX_CAPABILITIES || this.bytes === MAX_RESPONSE_BYTES;
  }
}

function append(result: Result, found: Discovered, budget: Budget): void {
  if (found.incomplete && result.warnings.length < MAX_WARNINGS) {
    result.warnings.push(METADATA_INCOMPLETE);
  }
  if (found.plugin !== undefined) {
    const remaining = MAX_CAPABILITIES - budget.capabilities;
    if (remaining === 0) {
      budget.truncated = true;
      return;
    }
    // The plugin counts too.
    if (found.plugin.skills.length > remaining - 1) budget.truncated = true;
    const plugin = { ...found.plugin, skills: found.plugin.skills.slice(0, remaining - 1) };
    if (budget.admit(1 + plugin.skills.length, jsonBytes(plugin))) result.plugins.push(plugin);
    return;
  }
  for (const skill of found.skills) {
    if (budget.capabilities === MAX_CAPABILITIES) {
      budget.truncated = true;
      break;
    }
    if (budget.admit(1, jsonBytes(skill))) result.skills.push(skill);
  }
}

/** Sorts the plugins and, past a bound, says so and cuts the reply to fit. */
function finish(result: Result, truncated: boolean): Result {
  result.plugins.sort((a, b) =>
    a.id < b.id ? -1 : a.id > b.id ? 1 : a.root < b.root ? -1 : a.root > b.root ? 1 : 0
  );
  result.warnings.splice(MAX_WARNINGS);
  if (truncated || jsonBytes(result) > MAX_RESPONSE_BYTES) {
    result.warnings.splice(MAX_WARNINGS - 1);
    result.warnings.unshift(SIZE_LIMIT_REACHED);
    while (jsonBytes(result) > MAX_RESPONSE_BYTES) {
      if (result.warnings.length > 1) result.warnings.splice(1);
      else if (result.skills.pop() === undefined && result.plugins.pop() === undefined) break;
    }
  }
  return result;
}

/**
 * `capabilities/discoverV2`: the installed plugins and standalone skills of this machine.
 *
 * @param params The request's params (`cwd` is not used, as in the reference; `sandbox` applies
 * to every read of a plugin or skill).
 * @param run Runs an fs request for this connection.
 * @param places Where Codex's home, the user's home and `/etc/codex` are (this machine's).
 * @returns The plugins (sorted by id), the standalone skills (in root order) and the warnings.
 * @throws {RpcError} `-32602` for a `sandbox` this server cannot enforce.
 *
 * @example Discover a skill in Codex's home
 * ```ts
 * import { discoverCapabilities } from "./discover_v2.ts";
 * import { runFsOperation } from "../fs/operations.ts";
 * import { FileHandleTable } from "../fs/handles.ts";
 * import { MissingWatchTable } from "../fs/watch.ts";
 * const home = await Deno.makeTempDir();
 * await Deno.mkdir(`${home}/skills/tidy`, { recursive: true });
 * await Deno.writeTextFile(`${home}/skills/tidy/SKILL.md`, "---\ndescription: Tidy up\n---\n");
 * const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
 * const { skills } = await discoverCapabilities(
 *   { cwd: `file://${home}` },
 *   (method, params) => runFsOperation(method, params, context),
 *   { codexHome: home, userHome: undefined, systemDir: `${home}/none` },
 * );
 * console.log(skills.map((skill) => skill.name)); // ["tidy"]
 * await Deno.remove(home, { recursive: true });
 * ```
 */
export async function discoverCapabilities(
  params: Params,
  run: FsRunner,
  places: CodexPlaces = codexPlaces(),
): Promise<Result> {
  pathFromUri(params.cwd);
  fsSandboxChecks(params.sandbox);
  const { sandbox } = params;
  let resolved: Locations;
  try {
    resolved = await resolveLocations(run, places);
  } catch (err) {
    if (!(err instanceof PrewarmFailure)) throw err;
    return {
      plugins: [],
      skills: [],
      warnings: [`could not prewarm capability discovery: ${err.message}`],
    };
  }
  const result: Result = {
    plugins: [],
    skills: [],
    warnings: resolved.incomplete ? [LOCATIONS_INCOMPLETE] : [],
  };
  const budget = new Budget();
  const found = await discoverLocations(run, resolved.locations, sandbox);
  for (const [index, location] of found.entries()) {
    append(result, location, budget);
    // A rejected large entry does not rule out smaller ones later; a full budget does.
    if (budget.full && index + 1 < found.length) {
      budget.truncated = true;
      break;
    }
  }
  return finish(result, budget.truncated);
}
