/**
 * The shell blocks of README.md and docs/ that tests run.
 *
 * A fenced shell block (`sh`, `bash`, `shell`, `console`) is preceded, on the
 * line just before its fence (blank lines between them, which `deno fmt`
 * inserts, do not count), by one marker comment:
 *
 * - `<!-- doc-test: ID -->`: a test runs it; {@linkcode docBlock} returns its
 *   text by ID, wherever the block stands, so a block can move between
 *   documents without its test changing;
 * - `<!-- doc-test: not run — REASON -->`: it is deliberately not run.
 *
 * IDs are unique across README.md and docs/ (lower-case letters, digits, `-`).
 *
 * @module
 */

/** The fence languages that count as shell blocks. */
export const SHELL_LANGUAGES: ReadonlySet<string> = new Set(["sh", "bash", "shell", "console"]);

/** One fenced block of a Markdown document. */
export interface FencedBlock {
  /** The document's path relative to the repository root. */
  file: string;
  /** The 1-based line of the opening fence. */
  line: number;
  /** The fence's language (the info string's first word), `""` when none. */
  language: string;
  /** The block's text, without the fences, with the fence's indentation removed. */
  text: string;
  /** The marker on the line before the fence: an ID, a not-run reason, or nothing. */
  marker: { id: string } | { notRun: string } | undefined;
}

const ROOT = new URL("../../", import.meta.url);
const MARKER = /^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$/;
const NOT_RUN = /^not run\s*[—-]+\s*(\S.*)$/;
const ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/;

/** Parses a marker comment's content; `undefined` when the line is no marker. */
function parseMarker(line: string | undefined): FencedBlock["marker"] {
  const content = line === undefined ? undefined : MARKER.exec(line)?.[1];
  if (content === undefined) return undefined;
  const notRun = NOT_RUN.exec(content);
  if (notRun) return { notRun: notRun[1]! };
  if (ID.test(content)) return { id: content };
  throw new Error(`malformed doc-test marker: ${line}`);
}

/**
 * The index of the last line before line `i` that is not blank (`deno fmt`
 * puts a blank line between a marker comment and its fence).
 */
function lineBefore(lines: readonly string[], i: number): number {
  let j = i - 1;
  while (j >= 0 && lines[j]!.trim() === "") j--;
  return j;
}

/**
 * Every fenced block of one Markdown text.
 *
 * @example A marked block
 * ```ts
 * import { fencedBlocks } from "./doc_blocks.ts";
 * const fence = "`".repeat(3);
 * const doc = `<!-- doc-test: hello -->\n${fence}sh\necho hi\n${fence}\n`;
 * const [block] = fencedBlocks("x.md", doc);
 * if (block?.text !== "echo hi\n" || !block.marker || !("id" in block.marker)) throw new Error();
 * ```
 */
export function fencedBlocks(file: string, markdown: string): FencedBlock[] {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, language] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j]!;
      const trimmed = line.trimStart();
      if (trimmed.startsWith(fence) && trimmed.slice(fence.length).trim() === "") break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    blocks.push({
      file,
      line: i + 1,
      language,
      text: body.length === 0 ? "" : body.join("\n") + "\n",
      marker: parseMarker(lines[lineBefore(lines, i)]),
    });
    i = j;
  }
  return blocks;
}

/** README.md and every Markdown file under docs/, as paths relative to the repository root. */
export function documentPaths(): string[] {
  const paths = ["README.md"];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(new URL(dir, ROOT))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (entry.isFile && entry.name.endsWith(".md")) paths.push(path);
    }
  };
  walk("docs");
  return paths.sort();
}

/** Every fenced block of README.md and docs/. */
export function allDocumentBlocks(): FencedBlock[] {
  return documentPaths().flatMap((path) =>
    fencedBlocks(path, Deno.readTextFileSync(new URL(path, ROOT)))
  );
}

/**
 * The text of the shell block marked `<!-- doc-test: ID -->` in README.md or
 * docs/. Throws when no block, or more than one, carries the ID.
 *
 * @example
 * ```ts ignore
 * const script = docBlock("recipe-ssh");
 * ```
 */
export function docBlock(id: string): string {
  const found = allDocumentBlocks().filter((b) =>
    b.marker && "id" in b.marker && b.marker.id === id
  );
  if (found.length !== 1) {
    throw new Error(`doc-test ID ${id}: ${found.length} blocks carry it (want exactly 1)`);
  }
  return found[0]!.text;
}
