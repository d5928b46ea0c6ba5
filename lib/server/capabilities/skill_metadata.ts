/**
 * What `capabilities/discoverV2` reads from a skill: the YAML frontmatter of its `SKILL.md`
 * (`name`, `description`, `metadata.short-description`) and its `agents/openai.yaml`
 * (`dependencies`, `policy`), with the reference's rules (probed on codex-cli 0.171.0):
 *
 * - the frontmatter sits between a first line and a later line that are `---` once trimmed;
 * - a scalar is read as the text it was written as (`name: 1.50` is `"1.50"`); a plain `~`,
 *   `null` or nothing is absent; a sequence or mapping where text is expected is an error;
 * - a frontmatter that is not valid YAML is parsed again with every `key: value` line whose
 *   value holds `: ` (or starts like a broken flow collection) quoted, since skills often hold
 *   prose such as `description: Build for AWS: ECS`;
 * - text is folded to one line (runs of whitespace become one space); a name has at most
 *   {@linkcode MAX_SKILL_NAME_CHARS} characters, a description must not be empty;
 * - `agents/openai.yaml` fails open: any error in it leaves the skill without dependencies
 *   and policy.
 *
 * The YAML parser is `npm:yaml`, loaded with the first discovery (outside the start-up graph).
 *
 * @module
 */

import type { ResultOf } from "../../protocol/methods.ts";

type Skill = ResultOf<"capabilities/discoverV2">["skills"][number];
/** A skill's dependencies and policy, as `agents/openai.yaml` declares them. */
export type SkillPolicyFields = Pick<Skill, "dependencies" | "policy">;
/** The fields of a `SKILL.md` frontmatter. */
export interface SkillFrontmatter {
  /** The skill's name, folded to one line. */
  name: string;
  /** Its description, folded to one line. */
  description: string;
  /** `metadata.short-description`, folded, or `null`. */
  shortDescription: string | null;
}

/** Most characters a skill's name may have (the reference's). */
export const MAX_SKILL_NAME_CHARS = 64;
/** Most characters of a dependency's `type` and `transport` (the reference's). */
const MAX_DEPENDENCY_WORD_CHARS = 64;
/** Most characters of a dependency's other text fields (the reference's). */
const MAX_DEPENDENCY_TEXT_CHARS = 1024;
/** The products a skill's policy may name, by every spelling the reference accepts. */
const PRODUCTS = new Map(
  [
    ["codex", "codex"],
    ["CODEX", "codex"],
    ["chatgpt", "chatgpt"],
    ["CHATGPT", "chatgpt"],
    ["atlas", "atlas"],
    ["ATLAS", "atlas"],
  ] as const,
);

// Rust's `char::is_whitespace` (Unicode White_Space), which differs from JavaScript's `\s`:
// it has U+0085 and lacks U+FEFF.
const WS =
  "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const WS_RUN = new RegExp(`[${WS}]+`, "u");
const IS_WS = new RegExp(`^[${WS}]$`, "u");
const LEADING_WS = new RegExp(`^[${WS}]*`, "u");
const TRAILING_WS = new RegExp(`[${WS}]*$`, "u");

/** Text without whitespace at its ends, as Rust's `str::trim` cuts it (U+FEFF stays). */
export function trimWhitespace(text: string): string {
  return text.replace(LEADING_WS, "").replace(TRAILING_WS, "");
}

/** Text folded to one line: whitespace runs become one space, the ends are cut. */
export function foldLine(text: string): string {
  return text.split(WS_RUN).filter((word) => word !== "").join(" ");
}

/** Characters (Unicode scalar values) in `text`, as Rust counts `chars()`. */
export function charCount(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

// ---------------------------------------------------------------------------
// YAML, read the way serde_yaml reads it into the reference's structs

/** The parts of `npm:yaml` this module uses. */
interface YamlModule {
  parseDocument(text: string, options: { uniqueKeys: boolean }): YamlDocument;
  isAlias(node: unknown): node is YamlAlias;
  isMap(node: unknown): node is YamlMap;
  isSeq(node: unknown): node is YamlSeq;
  isScalar(node: unknown): node is YamlScalar;
}
interface YamlDocument {
  errors: unknown[];
  contents: unknown;
}
interface YamlAlias {
  resolve(doc: YamlDocument): unknown;
}
interface YamlMap {
  items: { key: unknown; value: unknown }[];
}
interface YamlSeq {
  items: unknown[];
}
interface YamlScalar {
  value: unknown;
  source?: string;
  type?: string;
}

// A specifier `deno run` does not resolve at start (a literal one it would);
// lib/server/session/lazy_packages.ts names the same package for compile.sh and for the caches
// a server without a network starts from.
const YAML_PACKAGE = "npm:yaml@2.9.1";
let yamlModule: Promise<YamlModule> | undefined;

/** Loads the YAML parser once (again on the next call after a load that failed). */
export function loadYaml(): Promise<YamlModule> {
  return yamlModule ??= (import(YAML_PACKAGE) as Promise<YamlModule>).catch((err) => {
    yamlModule = undefined;
    throw err;
  });
}

/** Thrown where serde_yaml would fail to read a value into its struct. */
class Mismatch extends Error {}

/** One parsed YAML document and the way to read its nodes. */
class Yaml {
  constructor(readonly lib: YamlModule, readonly doc: YamlDocument) {}

  /** Parses `text`, or throws when it is not one valid YAML document. */
  static parse(lib: YamlModule, text: string): Yaml {
    const doc = lib.parseDocument(text, { uniqueKeys: true });
    if (doc.errors.length > 0) throw new Mismatch("invalid YAML");
    return new Yaml(lib, doc);
  }

  /** The node an alias stands for, or the node itself. */
  node(node: unknown): unknown {
    if (!this.lib.isAlias(node)) return node;
    const target = node.resolve(this.doc);
    if (target === undefined) throw new Mismatch("unknown anchor");
    return target;
  }

  /** Whether a node is absent or a plain null (`~`, `null`, nothing). */
  isNull(node: unknown): boolean {
    const resolved = this.node(node);
    if (resolved === undefined || resolved === null) return true;
    return this.lib.isScalar(resolved) && resolved.value === null && resolved.type === "PLAIN";
  }

  /** Whether a node is written as nothing at all (`key:`), which a struct reads as empty. */
  isEmpty(node: unknown): boolean {
    const resolved = this.node(node);
    return this.lib.isScalar(resolved) && resolved.value === null && resolved.source === "";
  }

  /** A mapping's entries by key text; an absent, empty or null node is `undefined`. */
  mapping(node: unknown, emptyIsMapping = false): Map<string, unknown> | undefined {
    const resolved = this.node(node);
    if (emptyIsMapping && this.isEmpty(resolved)) return new Map();
    if (this.isNull(resolved)) return undefined;
    if (!this.lib.isMap(resolved)) throw new Mismatch("expected a mapping");
    const entries = new Map<string, unknown>();
    for (const { key, value } of resolved.items) {
      const text = this.textOf(this.node(key));
      if (text !== undefined) entries.set(text, value);
    }
    return entries;
  }

  /** A struct field that must be a mapping when present: `key:` is an empty one, `~` fails. */
  struct(node: unknown): Map<string, unknown> {
    if (node === undefined) return new Map();
    const entries = this.mapping(node, true);
    if (entries === undefined) throw new Mismatch("expected a mapping, found null");
    return entries;
  }

  /** A text field: the scalar's text, `undefined` when absent or null. */
  text(node: unknown): string | undefined {
    if (this.isNull(node)) return undefined;
    const text = this.textOf(this.node(node));
    if (text === undefined) throw new Mismatch("expected text");
    return text;
  }

  /** A sequence field: its items; absent or empty is none, `~` fails. */
  sequence(node: unknown): unknown[] {
    if (node === undefined || this.isEmpty(node)) return [];
    const resolved = this.node(node);
    if (!this.lib.isSeq(resolved)) throw new Mismatch("expected a sequence");
    return resolved.items;
  }

  /** An optional boolean: a plain `true`/`false` (any case the core schema allows). */
  boolean(node: unknown): boolean | null {
    if (this.isNull(node)) return null;
    const resolved = this.node(node);
    if (
      this.lib.isScalar(resolved) && typeof resolved.value === "boolean" &&
      resolved.type === "PLAIN"
    ) return resolved.value;
    throw new Mismatch("expected a boolean");
  }

  /** An optional port: a plain integer from 0 to 65535. */
  port(node: unknown): number | null {
    if (this.isNull(node)) return null;
    const resolved = this.node(node);
    if (
      this.lib.isScalar(resolved) && resolved.type === "PLAIN" &&
      /^(0|[1-9][0-9]*)$/.test(resolved.source ?? "") && Number(resolved.source) <= 65535
    ) return Number(resolved.source);
    throw new Mismatch("expected a port");
  }

  textOf(node: unknown): string | undefined {
    if (!this.lib.isScalar(node)) return undefined;
    return node.source ?? String(node.value);
  }
}

// ---------------------------------------------------------------------------
// SKILL.md

/**
 * Rust's `str::lines`: split at `\n`, the `\r` of a `\r\n` cut (a last line without `\n` keeps
 * its `\r`), no empty last line.
 */
function lines(text: string): string[] {
  const parts = text.split("\n");
  const last = parts.pop()!;
  const ended = parts.map((line) => line.endsWith("\r") ? line.slice(0, -1) : line);
  return last === "" ? ended : [...ended, last];
}

/** The frontmatter of a `SKILL.md`: the lines between two `---` lines, or `undefined`. */
export function frontmatterOf(contents: string): string | undefined {
  const all = lines(contents);
  if (all.length === 0 || trimWhitespace(all[0]!) !== "---") return undefined;
  const closing = all.findIndex((line, index) => index > 0 && trimWhitespace(line) === "---");
  if (closing <= 1) return undefined;
  return all.slice(1, closing).join("\n");
}

/** The index of a `#` that starts a comment in `text` (at its start or after whitespace). */
function commentStart(text: string): number {
  let previous = "";
  let index = 0;
  for (const char of text) {
    if (char === "#" && (index === 0 || IS_WS.test(previous))) return index;
    previous = char;
    index += char.length;
  }
  return -1;
}

/**
 * The frontmatter with each `key: value` line quoted whose value would break YAML (it holds a
 * `: `, or starts with `[`, `{`, `@` or `` ` `` and does not parse); `undefined` when no line
 * changed. Block scalars (`|`, `>`) and quoted values are left as they are.
 */
export function repairFrontmatter(
  frontmatter: string,
  parses: (text: string) => boolean,
): string | undefined {
  let changed = false;
  let blockIndent: number | undefined;
  const repaired: string[] = [];
  for (const line of lines(frontmatter)) {
    const indent = line.length - line.replace(/^ +/, "").length;
    if (blockIndent !== undefined) {
      if (trimWhitespace(line) === "" || indent > blockIndent) {
        repaired.push(line);
        continue;
      }
      blockIndent = undefined;
    }
    const colon = line.indexOf(":");
    const key = colon < 0 ? "" : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1);
    const first = [...value][0];
    if (colon < 0 || trimWhitespace(key) === "" || (first !== undefined && !IS_WS.test(first))) {
      repaired.push(line);
      continue;
    }
    const start = value.replace(LEADING_WS, "");
    const leading = value.slice(0, value.length - start.length);
    const hash = commentStart(start);
    const cut = hash < 0 ? start.length : start.slice(0, hash).replace(TRAILING_WS, "").length;
    const scalar = start.slice(0, cut).replace(TRAILING_WS, "");
    const comment = start.slice(cut);
    const head = [...scalar][0];
    if (head === undefined || head === "'" || head === '"') {
      repaired.push(line);
      continue;
    }
    if (head === "|" || head === ">") {
      blockIndent = indent;
      repaired.push(line);
      continue;
    }
    const separated = [...scalar].some((char, index, chars) =>
      char === ":" && chars[index + 1] !== undefined && IS_WS.test(chars[index + 1]!)
    );
    const brokenFlow = "[{@`".includes(head) && !parses(scalar);
    if (!separated && !brokenFlow) {
      repaired.push(line);
      continue;
    }
    repaired.push(`${key}:${leading}'${scalar.replaceAll("'", "''")}'${comment}`);
    changed = true;
  }
  return changed ? repaired.join("\n") : undefined;
}

/** Whether `text` is one valid YAML document. */
function parsesAsYaml(lib: YamlModule, text: string): boolean {
  return lib.parseDocument(text, { uniqueKeys: true }).errors.length === 0;
}

/**
 * A `SKILL.md`'s frontmatter fields, or `undefined` when the reference would reject the skill
 * (no frontmatter, invalid YAML even after repair, a field of the wrong type, an empty
 * description, a name over {@linkcode MAX_SKILL_NAME_CHARS} characters).
 *
 * @param lib The YAML parser ({@linkcode loadYaml}).
 * @param contents The `SKILL.md` text.
 * @param defaultName The name when the frontmatter has none (the skill directory's).
 * @returns The skill's name, description and short description.
 *
 * @example Read a skill's frontmatter
 * ```ts
 * import { loadYaml, parseSkillFrontmatter } from "./skill_metadata.ts";
 * const skill = parseSkillFrontmatter(
 *   await loadYaml(),
 *   "---\nname: tidy\ndescription: Build for AWS: ECS\n---\nbody\n",
 *   "dir",
 * );
 * console.log(skill?.description); // "Build for AWS: ECS"
 * ```
 */
export function parseSkillFrontmatter(
  lib: YamlModule,
  contents: string,
  defaultName: string,
): SkillFrontmatter | undefined {
  const frontmatter = frontmatterOf(contents);
  if (frontmatter === undefined) return undefined;
  try {
    let yaml: Yaml;
    try {
      yaml = Yaml.parse(lib, frontmatter);
    } catch (err) {
      const repaired = repairFrontmatter(frontmatter, (text) => parsesAsYaml(lib, text));
      if (repaired === undefined) throw err;
      yaml = Yaml.parse(lib, repaired);
    }
    const root = yaml.mapping(yaml.doc.contents) ?? new Map<string, unknown>();
    const rawName = yaml.text(root.get("name"));
    const rawDescription = yaml.text(root.get("description"));
    const metadata = yaml.struct(root.get("metadata"));
    const rawShort = yaml.text(metadata.get("short-description"));
    const folded = rawName === undefined ? "" : foldLine(rawName);
    const name = folded === "" ? defaultName : folded;
    const description = rawDescription === undefined ? "" : foldLine(rawDescription);
    const short = rawShort === undefined ? "" : foldLine(rawShort);
    if (name === "" || charCount(name) > MAX_SKILL_NAME_CHARS || description === "") {
      return undefined;
    }
    return { name, description, shortDescription: short === "" ? null : short };
  } catch {
    // Mismatch, or a parser failure: the reference rejects the skill either way.
    return undefined;
  }
}

// ---------------------------------------------------------------------------
// agents/openai.yaml

/** Optional text folded to one line: `undefined` when absent, empty or too long. */
function boundedText(value: string | undefined, max: number): string | undefined {
  if (value === undefined) return undefined;
  const folded = foldLine(value);
  return folded === "" || charCount(folded) > max ? undefined : folded;
}

/** Checks the `interface` table's types (the reply does not carry it, but a bad one fails). */
function checkInterface(yaml: Yaml, node: unknown): void {
  const table = yaml.mapping(node);
  if (table === undefined) return;
  for (
    const field of [
      "display_name",
      "short_description",
      "icon_small",
      "icon_large",
      "brand_color",
      "default_prompt",
    ]
  ) yaml.text(table.get(field));
}

function dependencyTool(yaml: Yaml, node: unknown) {
  const tool = yaml.struct(node);
  const oauth = yaml.mapping(tool.get("oauth"));
  const oauthCallbackPort = oauth === undefined ? null : yaml.port(oauth.get("callback_port"));
  const field = (name: string, max: number) => boundedText(yaml.text(tool.get(name)), max);
  const parsed = {
    type: field("type", MAX_DEPENDENCY_WORD_CHARS),
    value: field("value", MAX_DEPENDENCY_TEXT_CHARS),
    description: field("description", MAX_DEPENDENCY_TEXT_CHARS) ?? null,
    transport: field("transport", MAX_DEPENDENCY_WORD_CHARS) ?? null,
    command: field("command", MAX_DEPENDENCY_TEXT_CHARS) ?? null,
    url: field("url", MAX_DEPENDENCY_TEXT_CHARS) ?? null,
    oauthCallbackPort,
  };
  const { type, value } = parsed;
  // A tool without a type or a value is dropped; the others stay.
  return type === undefined || value === undefined ? undefined : { ...parsed, type, value };
}

/**
 * A skill's `dependencies` and `policy` from its `agents/openai.yaml`; both `null` when the
 * file is not valid YAML or a field has the wrong type (the reference fails open).
 *
 * @param lib The YAML parser ({@linkcode loadYaml}).
 * @param contents The file's text.
 * @returns The skill's dependencies (tools without a `type` or `value` dropped; none left is
 * `null`) and policy.
 *
 * @example Read a skill's policy
 * ```ts
 * import { loadYaml, parseSkillPolicy } from "./skill_metadata.ts";
 * const { policy } = parseSkillPolicy(
 *   await loadYaml(),
 *   "policy:\n  allow_implicit_invocation: false\n  products: [codex]\n",
 * );
 * console.log(policy); // { allowImplicitInvocation: false, products: ["codex"] }
 * ```
 */
export function parseSkillPolicy(lib: YamlModule, contents: string): SkillPolicyFields {
  try {
    const yaml = Yaml.parse(lib, contents);
    const root = yaml.mapping(yaml.doc.contents) ?? new Map<string, unknown>();
    checkInterface(yaml, root.get("interface"));
    const dependencies = yaml.mapping(root.get("dependencies"));
    const tools = dependencies === undefined ? [] : yaml.sequence(dependencies.get("tools"))
      .map((tool) => dependencyTool(yaml, tool))
      .filter((tool) => tool !== undefined);
    const policy = yaml.mapping(root.get("policy"));
    return {
      dependencies: tools.length === 0 ? null : { tools },
      policy: policy === undefined ? null : {
        allowImplicitInvocation: yaml.boolean(policy.get("allow_implicit_invocation")),
        products: yaml.sequence(policy.get("products")).map((product) => {
          const name = yaml.text(product);
          const known = PRODUCTS.get(name as never);
          if (known === undefined) throw new Mismatch("unknown product");
          return known;
        }),
      },
    };
  } catch {
    return { dependencies: null, policy: null };
  }
}
