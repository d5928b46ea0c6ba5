/**
 * Which installed version of a Codex plugin is active, and which cache directory names are
 * plugin names at all: the reference's rules, probed on codex-cli 0.171.0.
 *
 * A plugin `<marketplace>/<name>` in `$CODEX_HOME/plugins/cache` keeps one directory per
 * installed version. The active one is `local` when present, else the greatest by
 * {@linkcode comparePluginVersions}: two semantic versions compare as semantic versions (build
 * metadata included, as the Rust `semver` crate orders them), anything else as text.
 *
 * @module
 */

/** The version a locally installed plugin has, which wins over any other. */
export const LOCAL_PLUGIN_VERSION = "local";

/** A name segment of a plugin or marketplace: dot-separated runs of letters, digits, `_`, `-`. */
const PLUGIN_SEGMENT = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
/** A version directory name: letters, digits, `.`, `+`, `_`, `-`, and not `.` or `..`. */
const VERSION_SEGMENT = /^[A-Za-z0-9.+_-]+$/;

/** Whether `name` may be a plugin's or a marketplace's name. */
export function isPluginSegment(name: string): boolean {
  return PLUGIN_SEGMENT.test(name);
}

/** Whether `name` may be a plugin version directory. */
export function isVersionSegment(name: string): boolean {
  return VERSION_SEGMENT.test(name) && name !== "." && name !== "..";
}

const NUMERIC = /^(0|[1-9][0-9]*)$/;
const IDENTIFIER = /^[0-9A-Za-z-]+$/;
const SEMVER = /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([^+]+))?(?:\+(.+))?$/;

interface SemVer {
  core: bigint[];
  pre: string[];
  build: string[];
}

function parseSemVer(text: string): SemVer | undefined {
  const match = SEMVER.exec(text);
  if (match === null) return undefined;
  const pre = match[4] === undefined ? [] : match[4].split(".");
  const build = match[5] === undefined ? [] : match[5].split(".");
  if (!pre.every((id) => IDENTIFIER.test(id) && (!/^[0-9]+$/.test(id) || NUMERIC.test(id)))) {
    return undefined;
  }
  if (!build.every((id) => IDENTIFIER.test(id))) return undefined;
  return { core: [match[1]!, match[2]!, match[3]!].map(BigInt), pre, build };
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Dot-separated identifiers: numeric ones by value and before alphanumeric ones. */
function compareIdentifiers(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const [x, y] = [a[i]!, b[i]!];
    const [xNumeric, yNumeric] = [/^[0-9]+$/.test(x), /^[0-9]+$/.test(y)];
    let order: number;
    if (xNumeric && yNumeric) {
      const [bx, by] = [BigInt(x), BigInt(y)];
      order = bx < by ? -1 : bx > by ? 1 : x.length - y.length;
    } else if (xNumeric !== yNumeric) {
      order = xNumeric ? -1 : 1;
    } else {
      order = compareText(x, y);
    }
    if (order !== 0) return Math.sign(order);
  }
  return Math.sign(a.length - b.length);
}

/**
 * Orders two version directory names: as semantic versions when both are (a pre-release
 * before its release, build metadata compared last), else as text.
 *
 * @param a A version.
 * @param b Another version.
 * @returns Negative, zero or positive as `a` is before, equal to or after `b`.
 *
 * @example Semantic versions compare by number
 * ```ts
 * import { comparePluginVersions } from "./plugin_version.ts";
 * console.log(comparePluginVersions("1.10.0", "1.9.0") > 0); // true
 * console.log(comparePluginVersions("1.0.0-beta", "1.0.0") < 0); // true
 * ```
 */
export function comparePluginVersions(a: string, b: string): number {
  const [x, y] = [parseSemVer(a), parseSemVer(b)];
  if (x === undefined || y === undefined) return compareText(a, b);
  for (let i = 0; i < 3; i++) {
    if (x.core[i]! !== y.core[i]!) return x.core[i]! < y.core[i]! ? -1 : 1;
  }
  if (x.pre.length === 0 || y.pre.length === 0) {
    if (x.pre.length !== y.pre.length) return x.pre.length === 0 ? 1 : -1;
  } else {
    const order = compareIdentifiers(x.pre, y.pre);
    if (order !== 0) return order;
  }
  return compareIdentifiers(x.build, y.build);
}

/**
 * The active version among a plugin's version directory names: `local` when present, else
 * the greatest valid one; `undefined` when none is valid.
 *
 * @param names The names of the plugin's version directories.
 * @returns The active version.
 *
 * @example
 * ```ts
 * import { activePluginVersion } from "./plugin_version.ts";
 * console.log(activePluginVersion(["1.9.0", "1.10.0", ".."])); // "1.10.0"
 * console.log(activePluginVersion(["2.0.0", "local"])); // "local"
 * ```
 */
export function activePluginVersion(names: readonly string[]): string | undefined {
  const versions = names.filter(isVersionSegment).sort(comparePluginVersions);
  return versions.includes(LOCAL_PLUGIN_VERSION) ? LOCAL_PLUGIN_VERSION : versions.at(-1);
}
