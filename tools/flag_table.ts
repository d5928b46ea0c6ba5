/**
 * The table of every server flag in docs/guide/configuration.md, rendered from
 * the flag table (`SERVER_FLAGS` in lib/cli/server_flags.ts), so that the
 * document cannot drift from the command line. `tests/docs_test.ts` fails when
 * the document's table is not what this renders; rewrite it with
 *
 *     deno task docs:flags
 *
 * @module
 */

import type { FlagSpec, FlagTable } from "../lib/cli/flags.ts";
import { SERVER_FLAGS } from "../lib/cli/server_flags.ts";

/** The document holding the table, relative to the repository root. */
export const CONFIGURATION_DOC = "docs/guide/configuration.md";
const BEGIN = "<!-- server-flags:begin -->";
const END = "<!-- server-flags:end -->";

function defaultOf(spec: FlagSpec): string {
  if (spec.kind === "boolean") return "off";
  if (spec.kind === "list") return "none (repeatable)";
  return spec.default === undefined ? "none" : `\`${spec.default}\``;
}

function valueOf(spec: FlagSpec): string {
  if (spec.kind === "enum") return spec.choices.join("\\|");
  return spec.kind === "boolean" ? "" : spec.value;
}

/**
 * The Markdown table of `table`'s flags: flag and value, default, help text.
 *
 * @example
 * ```ts
 * import { flagTable } from "./flag_table.ts";
 * console.log(flagTable({ port: { kind: "integer", value: "N", default: 80, help: "the port" } }));
 * ```
 */
export function flagTable(table: FlagTable): string {
  const rows = Object.entries(table).map(([name, spec]) => {
    const value = valueOf(spec);
    const flag = `\`${spec.short === undefined ? "" : `-${spec.short}, `}--${name}${
      value === "" ? "" : ` ${value}`
    }\``;
    const help = spec.help.replaceAll("\n", " ").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
    return `| ${flag} | ${defaultOf(spec)} | ${help} |`;
  });
  return ["| flag | default | what it does |", "| --- | --- | --- |", ...rows].join("\n");
}

/** `markdown` with the text between the server-flags markers replaced by `table`. */
export function withFlagTable(markdown: string, table: string): string {
  const begin = markdown.indexOf(BEGIN);
  const end = markdown.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`${CONFIGURATION_DOC} lacks ${BEGIN} … ${END}`);
  return `${markdown.slice(0, begin + BEGIN.length)}\n\n${table}\n\n${markdown.slice(end)}`;
}

/** The server flags table as it stands in the document, whitespace of the cells normalised. */
export function normaliseTable(markdown: string): string {
  const begin = markdown.indexOf(BEGIN);
  const end = markdown.indexOf(END);
  return markdown.slice(begin + BEGIN.length, end).trim().split("\n").map((line) =>
    line.split("|").map((cell) => cell.trim().replace(/^-+$/, "---")).join("|")
  ).join("\n");
}

/** The table for {@linkcode SERVER_FLAGS}. */
export function serverFlagTable(): string {
  return flagTable(SERVER_FLAGS);
}

if (import.meta.main) {
  const url = new URL(`../${CONFIGURATION_DOC}`, import.meta.url);
  Deno.writeTextFileSync(url, withFlagTable(Deno.readTextFileSync(url), serverFlagTable()));
  const fmt = new Deno.Command(Deno.execPath(), { args: ["fmt", url.pathname] }).outputSync();
  if (!fmt.success) throw new Error(new TextDecoder().decode(fmt.stderr));
}
