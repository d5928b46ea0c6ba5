/**
 * Checks the relative links of README.md and every Markdown file under docs/:
 * the file a link names exists, and its `#anchor`, when it has one, is a
 * heading of that file under GitHub's slug rules. Links to other sites are not
 * followed. Prints one line per broken link and exits 1 when there is one.
 *
 *     deno run --allow-read tools/check_links.ts
 *
 * `deno task check` runs it; `tests/docs_test.ts` runs {@linkcode brokenLinks}.
 *
 * @module
 */

const ROOT = new URL("../", import.meta.url);

/** A link that leads nowhere. */
export interface BrokenLink {
  /** The document holding the link, relative to the repository root. */
  file: string;
  /** The 1-based line of the link. */
  line: number;
  /** The link's target as written. */
  target: string;
  /** Why it is broken. */
  reason: string;
}

/**
 * GitHub's anchor for a heading: lower case, markup and punctuation dropped
 * (letters, digits, `-`, `_` and spaces kept), each space a `-`.
 *
 * @example
 * ```ts
 * import { headingSlug } from "./check_links.ts";
 * console.log(headingSlug("The server's sandbox: `--sandbox`")); // "the-servers-sandbox---sandbox"
 * ```
 */
export function headingSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // A link's text stays, its target goes.
    .replace(/<[^>]+>/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The lines of a Markdown text with fenced blocks blanked out (their links are code). */
function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split("\n").map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && open) {
      fence = open[1];
      return "";
    }
    if (fence !== undefined) {
      if (line.trim().startsWith(fence) && line.trim().slice(fence.length).trim() === "") {
        fence = undefined;
      }
      return "";
    }
    return line;
  });
}

/**
 * Every anchor of a Markdown text: its headings' slugs, a repeated one with
 * `-1`, `-2`, … as GitHub numbers them.
 *
 * @example
 * ```ts
 * import { anchors } from "./check_links.ts";
 * console.log([...anchors("# A\n## Notes\n## Notes\n")]); // ["a", "notes", "notes-1"]
 * ```
 */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = headingSlug(heading[1]!);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return found;
}

/** README.md and every Markdown file under docs/, relative to the repository root. */
function documents(): string[] {
  const paths = ["README.md"];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(new URL(dir, ROOT))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (entry.name.endsWith(".md")) paths.push(path);
    }
  };
  walk("docs");
  return paths.sort();
}

function readText(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(new URL(path, ROOT));
  } catch {
    return undefined;
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(new URL(path, ROOT));
    return true;
  } catch {
    return false;
  }
}

/** Resolves `target` (without its anchor) against the document `from`, relative to the root. */
function resolve(from: string, target: string): string {
  const url = new URL(target, new URL(from, "file:///repo/"));
  return decodeURIComponent(url.pathname.slice("/repo/".length)).replace(/\/$/, "");
}

/**
 * The broken links of the given documents (default: README.md and docs/).
 *
 * @param files Paths relative to the repository root, with their text when it
 *   is not to be read from disk.
 */
export function brokenLinks(
  files: ReadonlyMap<string, string> = new Map(documents().map((p) => [p, readText(p)!])),
): BrokenLink[] {
  const broken: BrokenLink[] = [];
  const text = (path: string) => files.get(path) ?? readText(path);
  for (const [file, markdown] of files) {
    proseLines(markdown).forEach((line, i) => {
      const code = line.replace(/`[^`]*`/g, (span) => " ".repeat(span.length));
      for (const match of code.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = match[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
        const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
        const path = pathPart === "" ? file : resolve(file, pathPart);
        const report = (reason: string) => broken.push({ file, line: i + 1, target, reason });
        if (pathPart !== "" && !exists(path) && !files.has(path)) {
          report(`${path} does not exist`);
          continue;
        }
        if (anchor === undefined || anchor === "") continue;
        if (!path.endsWith(".md")) {
          report(`${path} is not Markdown, so it has no #${anchor}`);
          continue;
        }
        if (!anchors(text(path) ?? "").has(anchor)) report(`${path} has no heading #${anchor}`);
      }
    });
  }
  return broken;
}

if (import.meta.main) {
  const broken = brokenLinks();
  for (const link of broken) {
    console.error(`${link.file}:${link.line}: ${link.target}: ${link.reason}`);
  }
  if (broken.length > 0) Deno.exit(1);
  console.log(`check_links: ${documents().length} documents, every relative link resolves`);
}
