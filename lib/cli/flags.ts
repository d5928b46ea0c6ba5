/**
 * A table-driven command-line flag parser and help renderer. A command
 * declares its flags once, in a {@linkcode FlagTable}; the parser, the typed
 * values, the defaults, the validation errors and the `--help` option list
 * all come from that table.
 *
 * Written here rather than taken from `node:util`'s `parseArgs` because
 * loading Node compatibility adds about 10 ms to every server start
 * (measured with `--cpu-prof`), and cold start is a benchmark. This module
 * imports nothing.
 *
 * @module
 */

interface FlagCommon {
  /** A one-letter alias: `"h"` makes `-h` mean this flag. */
  readonly short?: string;
  /** The help line; `"\n"` starts a continuation line. */
  readonly help: string;
}

/** `--name` alone sets it; it takes no value. */
export interface BooleanFlag extends FlagCommon {
  readonly kind: "boolean";
}

/** `--name VALUE`, optionally checked and converted by `parse`. */
export interface StringFlag extends FlagCommon {
  readonly kind: "string";
  /** The value's name in the help, e.g. `FILE`. */
  readonly value: string;
  /** The value when the flag is absent (passed through `parse` too). */
  readonly default?: string;
  /** Checks and converts a value; throws {@linkcode FlagError} to refuse it. */
  readonly parse?: (value: string, flag: string) => unknown;
  /**
   * The value names a file of secrets (a token, a key): the server denies
   * it inside every sandbox.
   */
  readonly secretFile?: true;
}

/** `--name N`: a positive integer, at most `max`. */
export interface IntegerFlag extends FlagCommon {
  readonly kind: "integer";
  /** The value's name in the help, e.g. `N`. */
  readonly value: string;
  /** The value when the flag is absent. */
  readonly default?: number;
  /** The largest accepted value (default `Number.MAX_SAFE_INTEGER`). */
  readonly max?: number;
}

/** `--name CHOICE`: one of `choices`. */
export interface EnumFlag extends FlagCommon {
  readonly kind: "enum";
  /** The value's name in the help, e.g. `LEVEL`. */
  readonly value: string;
  /** The accepted values, listed in the help. */
  readonly choices: readonly string[];
  /** The value when the flag is absent. */
  readonly default?: string;
}

/** `--name VALUE`, repeatable: every value, in order. */
export interface ListFlag extends FlagCommon {
  readonly kind: "list";
  /** The value's name in the help, e.g. `K=V`. */
  readonly value: string;
}

/** One flag's declaration. */
export type FlagSpec = BooleanFlag | StringFlag | IntegerFlag | EnumFlag | ListFlag;

/** A command's flags, by long name (without `--`). */
export type FlagTable = Readonly<Record<string, FlagSpec>>;

type Optional<F, T> = F extends { readonly default: string | number } ? T : T | undefined;

/** The parsed value type of one flag. */
export type FlagValue<F extends FlagSpec> = F extends BooleanFlag ? boolean
  : F extends ListFlag ? string[]
  : F extends IntegerFlag ? Optional<F, number>
  : F extends EnumFlag ? Optional<F, F["choices"][number]>
  : F extends { readonly parse: (value: string, flag: string) => infer R } ? Optional<F, R>
  : Optional<F, string>;

/** The parsed values of a whole table. */
export type FlagValues<T extends FlagTable> = { -readonly [K in keyof T]: FlagValue<T[K]> };

/** A bad command line; the message names the flag and fits on one line. */
export class FlagError extends Error {
  /** @param message What is wrong, naming the flag. */
  constructor(message: string) {
    super(message);
    this.name = "FlagError";
  }
}

/**
 * Declares a flag table, keeping its literal types so that
 * {@linkcode parseFlags} can type each value.
 *
 * @example
 * ```ts
 * import { defineFlags } from "./flags.ts";
 * const flags = defineFlags({ verbose: { kind: "boolean", short: "v", help: "say more" } });
 * console.log(flags.verbose.kind); // "boolean"
 * ```
 *
 * @param table The flags, by long name.
 * @returns The same table.
 */
export function defineFlags<const T extends FlagTable>(table: T): T {
  return table;
}

/**
 * Takes some flags of another command's table, declarations and all, so that
 * a command sharing them has no second list: `exec-server mcp` takes the
 * server's sandbox flags this way.
 *
 * @example
 * ```ts
 * import { defineFlags, pickFlags } from "./flags.ts";
 * const server = defineFlags({
 *   port: { kind: "integer", value: "N", default: 80, help: "the port" },
 *   verbose: { kind: "boolean", help: "say more" },
 * });
 * console.log(Object.keys(pickFlags(server, ["verbose"]))); // ["verbose"]
 * ```
 *
 * @param table The table to take from.
 * @param names The flags to take, in the order they are listed.
 * @returns A table of those flags.
 */
export function pickFlags<T extends FlagTable, const K extends keyof T & string>(
  table: T,
  names: readonly K[],
): Pick<T, K> {
  return Object.fromEntries(names.map((name) => [name, table[name]])) as Pick<T, K>;
}

/** Whether arguments that are not flags are accepted. */
export interface ParseOptions {
  /**
   * `true`: the first argument that is not a flag, or everything after `--`,
   * ends the flags and is returned in `rest` with what follows it.
   * `false` (the default): such an argument is an error.
   */
  readonly rest?: boolean;
}

/** The result of {@linkcode parseFlags}. */
export interface ParsedFlags<T extends FlagTable> {
  /** Every flag's value: given, or its default. */
  readonly flags: FlagValues<T>;
  /** The arguments after the flags (with `rest: true`). */
  readonly rest: string[];
}

/**
 * Parses `--name value`, `--name=value`, boolean `--name` and one-letter
 * aliases (`-h`, and several boolean ones at once: `-it`) against a table. The last value of a flag wins, except for
 * a `list` flag, which collects them all.
 *
 * @example
 * ```ts
 * import { defineFlags, parseFlags } from "./flags.ts";
 * const table = defineFlags({
 *   port: { kind: "integer", value: "N", default: 80, help: "the port" },
 *   tag: { kind: "list", value: "T", help: "a tag" },
 * });
 * const { flags } = parseFlags(table, ["--port=8080", "--tag", "a", "--tag", "b"]);
 * console.log(flags.port, flags.tag); // 8080 [ "a", "b" ]
 * ```
 *
 * @param table The flags.
 * @param args The command-line arguments.
 * @param options Whether trailing arguments are accepted.
 * @returns The values and the trailing arguments.
 * @throws {FlagError} For an unknown flag, a missing or refused value.
 */
export function parseFlags<T extends FlagTable>(
  table: T,
  args: readonly string[],
  options: ParseOptions = {},
): ParsedFlags<T> {
  const values: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    values[name] = initialValue(name, spec);
  }
  const shorts = new Map<string, string>();
  for (const [name, spec] of Object.entries(table)) {
    if (spec.short !== undefined) shorts.set(`-${spec.short}`, name);
  }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (options.rest && arg === "--") {
      return { flags: values as FlagValues<T>, rest: args.slice(i + 1) };
    }
    const bundle = /^-([a-zA-Z]{2,})$/.exec(arg)?.[1];
    if (bundle !== undefined && [...bundle].every((c) => isBooleanShort(table, shorts, c))) {
      // `-it`: several one-letter boolean flags at once.
      for (const c of bundle) values[shorts.get(`-${c}`)!] = true;
      continue;
    }
    const short = shorts.get(arg);
    const match = short !== undefined ? [arg, short] : /^--([a-z0-9-]+)(?:=(.*))?$/s.exec(arg);
    const name = match?.[1];
    if (options.rest && match === null && !arg.startsWith("-")) {
      return { flags: values as FlagValues<T>, rest: args.slice(i) };
    }
    if (name === undefined || !Object.hasOwn(table, name)) {
      throw new FlagError(`unknown option '${arg}'`);
    }
    const spec = table[name]!;
    if (spec.kind === "boolean") {
      if (match![2] !== undefined) throw new FlagError(`option '--${name}' does not take a value`);
      values[name] = true;
      continue;
    }
    const value = match![2] ?? args[++i];
    if (value === undefined) throw new FlagError(`option '--${name} <value>' argument missing`);
    if (spec.kind === "list") (values[name] as string[]).push(value);
    else values[name] = convert(name, spec, value);
  }
  return { flags: values as FlagValues<T>, rest: [] };
}

function isBooleanShort(table: FlagTable, shorts: Map<string, string>, letter: string): boolean {
  const name = shorts.get(`-${letter}`);
  return name !== undefined && table[name]!.kind === "boolean";
}

function initialValue(name: string, spec: FlagSpec): unknown {
  switch (spec.kind) {
    case "boolean":
      return false;
    case "list":
      return [];
    case "integer":
      return spec.default;
    case "enum":
    case "string":
      return spec.default === undefined ? undefined : convert(name, spec, spec.default);
  }
}

function convert(name: string, spec: StringFlag | IntegerFlag | EnumFlag, value: string): unknown {
  switch (spec.kind) {
    case "string":
      return spec.parse ? spec.parse(value, name) : value;
    case "integer": {
      const max = spec.max ?? Number.MAX_SAFE_INTEGER;
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max) {
        const bound = spec.max === undefined ? "" : ` up to ${spec.max}`;
        throw new FlagError(`--${name} must be a positive integer${bound}, got "${value}"`);
      }
      return Number(value);
    }
    case "enum":
      if (!spec.choices.includes(value)) {
        throw new FlagError(`--${name} must be ${alternatives(spec.choices)}, got "${value}"`);
      }
      return value;
  }
}

function alternatives(choices: readonly string[]): string {
  return choices.length < 2
    ? choices.join("")
    : `${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}`;
}

/**
 * Renders a table as the option list of a `--help` text: one flag a line
 * (plus continuation lines), the help aligned in a column, with the
 * choices, the default and "repeatable" added from the declaration (at the
 * end of a one-line help, on a line of their own after a longer one).
 *
 * @example
 * ```ts
 * import { defineFlags, renderFlagHelp } from "./flags.ts";
 * const table = defineFlags({
 *   port: { kind: "integer", value: "N", default: 80, help: "the port" },
 *   help: { kind: "boolean", short: "h", help: "print this help" },
 * });
 * console.log(renderFlagHelp(table));
 * // "  --port N    the port (default 80)\n  -h, --help  print this help"
 * ```
 *
 * @param table The flags.
 * @returns The lines, indented by two spaces, without a final newline.
 */
export function renderFlagHelp(table: FlagTable): string {
  const rows = Object.entries(table).map(([name, spec]) => {
    const short = spec.short === undefined ? "" : `-${spec.short}, `;
    const value = spec.kind === "boolean" ? "" : ` ${spec.value}`;
    return [`${short}--${name}${value}`, describe(spec)] as const;
  });
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, help]) =>
    help.split("\n").map((line, i) => `  ${(i === 0 ? left : "").padEnd(width)}${line}`.trimEnd())
      .join("\n")
  ).join("\n");
}

function describe(spec: FlagSpec): string {
  const notes: string[] = [];
  if (spec.kind === "enum") notes.push(alternatives(spec.choices));
  if (spec.kind === "list") notes.push("repeatable");
  if (spec.kind !== "boolean" && spec.kind !== "list" && spec.default !== undefined) {
    notes.push(`default ${spec.default}`);
  }
  if (notes.length === 0) return spec.help;
  // A one-line help takes the notes at its end; a longer one on a line of their own.
  return `${spec.help}${spec.help.includes("\n") ? "\n" : " "}(${notes.join("; ")})`;
}
