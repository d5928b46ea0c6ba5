/**
 * The import graph of the repository's own modules, as Deno's parser sees it
 * (`deno info --json`: static, type-only and dynamic imports, re-exports;
 * never the imports inside JSDoc examples), and the two checks
 * `tests/import_direction_test.ts` makes on it: imports that climb a floor,
 * and cycles between files.
 *
 * @module
 */

/** File -> the files it imports, as paths relative to the repository root. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/**
 * Which floor a folder sits on: each entry lists the folders directly below
 * it. A file may import files of its own folder and of every folder below its
 * own, directly or not; nothing else.
 */
export type Floors = Readonly<Record<string, readonly string[]>>;

interface InfoDependency {
  code?: { specifier?: string; error?: string };
  type?: { specifier?: string; error?: string };
}

interface InfoModule {
  specifier: string;
  error?: string;
  dependencies?: InfoDependency[];
}

/**
 * The `.ts` files under `dir` (recursively), relative to `root`.
 *
 * @param root The repository root.
 * @param dir A folder inside it, e.g. `lib`.
 */
export async function typeScriptFiles(root: URL, dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(new URL(dir, root))) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) found.push(...await typeScriptFiles(root, path));
    else if (entry.isFile && entry.name.endsWith(".ts")) found.push(path);
  }
  return found.sort();
}

/**
 * Reads the imports of `files` and of every repository file they reach,
 * with one `deno info --json` over a root module that imports them all.
 *
 * @param root The repository root (with its `deno.json`).
 * @param files Paths relative to `root`.
 * @returns Each repository file reached and the repository files it imports.
 * @throws {Error} When `deno info` fails or cannot resolve an import of a repository file.
 */
export async function importGraph(root: URL, files: readonly string[]): Promise<ImportGraph> {
  const dir = await Deno.makeTempDir({ prefix: "import_graph_" });
  try {
    const entry = `${dir}/all.ts`;
    await Deno.writeTextFile(
      entry,
      files.map((file) => `import ${JSON.stringify(new URL(file, root).href)};\n`).join(""),
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", new URL("deno.json", root).pathname, entry],
      stdin: "null",
      stderr: "piped",
    }).output();
    if (out.code !== 0) {
      throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: InfoModule[] };
    const local = (specifier: string | undefined) =>
      specifier?.startsWith(root.href) ? specifier.slice(root.href.length) : undefined;
    const graph = new Map<string, string[]>();
    for (const module of info.modules) {
      const from = local(module.specifier);
      if (from === undefined) continue;
      if (module.error !== undefined) throw new Error(`${from}: ${module.error}`);
      const targets = new Set<string>();
      for (const dependency of module.dependencies ?? []) {
        for (const end of [dependency.code, dependency.type]) {
          if (end?.error !== undefined) throw new Error(`${from}: ${end.error}`);
          const to = local(end?.specifier);
          if (to !== undefined) targets.add(to);
        }
      }
      graph.set(from, [...targets].sort());
    }
    return graph;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * The folder a file belongs to, as the floors name it: `lib/server/<name>/...`
 * is `server/<name>`, `lib/<name>/...` is `<name>`, any other file is itself
 * (`main.ts`, `mod.ts`).
 *
 * @example
 * ```ts
 * import { folderOf } from "./import_graph.ts";
 * console.log(folderOf("lib/server/fs/walk.ts"), folderOf("lib/rpc/bytes.ts")); // server/fs rpc
 * ```
 *
 * @param file A path relative to the repository root.
 */
export function folderOf(file: string): string {
  const parts = file.split("/");
  if (parts[0] !== "lib" || parts.length < 3) return file;
  return parts[1] === "server" && parts.length >= 4 ? `server/${parts[2]}` : parts[1]!;
}

/** The folders below each folder of `floors`, directly or not. */
function below(floors: Floors): Map<string, Set<string>> {
  const closure = new Map<string, Set<string>>();
  const visit = (folder: string, path: readonly string[]): Set<string> => {
    const known = closure.get(folder);
    if (known !== undefined) return known;
    if (path.includes(folder)) throw new Error(`the floors loop: ${[...path, folder].join(" > ")}`);
    const all = new Set<string>();
    for (const lower of floors[folder] ?? []) {
      if (!(lower in floors)) throw new Error(`${folder} sits on ${lower}, which has no floor`);
      all.add(lower);
      for (const deeper of visit(lower, [...path, folder])) all.add(deeper);
    }
    closure.set(folder, all);
    return all;
  };
  for (const folder of Object.keys(floors)) visit(folder, []);
  return closure;
}

/**
 * Every import that does not point down: into a folder that is not below
 * the importer's own, or from or into a file whose folder has no floor.
 *
 * @example
 * ```ts
 * import { climbs } from "./import_graph.ts";
 * const graph = new Map([["lib/rpc/a.ts", ["lib/protocol/b.ts"]], ["lib/protocol/b.ts", ["lib/rpc/a.ts"]]]);
 * console.log(climbs(graph, { rpc: ["protocol"], protocol: [] }));
 * // [ "lib/protocol/b.ts -> lib/rpc/a.ts (protocol imports rpc, which is not below it)" ]
 * ```
 *
 * @param graph The import graph.
 * @param floors The floors.
 * @returns One line per offending import.
 */
export function climbs(graph: ImportGraph, floors: Floors): string[] {
  const closure = below(floors);
  const found: string[] = [];
  for (const [from, targets] of graph) {
    const folder = folderOf(from);
    const lower = closure.get(folder);
    if (lower === undefined) {
      found.push(`${from} is in ${folder}, which has no floor`);
      continue;
    }
    for (const to of targets) {
      const target = folderOf(to);
      if (target === folder || lower.has(target)) continue;
      const why = target in floors ? "which is not below it" : "which has no floor";
      found.push(`${from} -> ${to} (${folder} imports ${target}, ${why})`);
    }
  }
  return found.sort();
}

/**
 * The import cycles between files: each strongly connected set of two or
 * more files (or a file importing itself), with one path around it.
 *
 * @example
 * ```ts
 * import { cycles } from "./import_graph.ts";
 * const graph = new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", ["a.ts"]], ["d.ts", ["a.ts"]]]);
 * console.log(cycles(graph)); // [ "a.ts -> b.ts -> c.ts -> a.ts" ]
 * ```
 *
 * @param graph The import graph.
 * @returns One line per cycle.
 */
export function cycles(graph: ImportGraph): string[] {
  // Tarjan's strongly connected components, iteratively (no recursion limit on deep graphs).
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let next = 0;
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const [node, at] = frame;
      const targets = graph.get(node) ?? [];
      if (at < targets.length) {
        frame[1]++;
        const to = targets[at]!;
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push([to, 0]);
        } else if (onStack.has(to)) {
          low.set(node, Math.min(low.get(node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) low.set(parent[0], Math.min(low.get(parent[0])!, low.get(node)!));
      if (low.get(node) !== index.get(node)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || targets.includes(node)) components.push(component);
    }
  }
  return components.map((component) => pathAround(graph, new Set(component))).sort();
}

/** One cycle through the files of a strongly connected set, from its first file in sort order. */
function pathAround(graph: ImportGraph, members: ReadonlySet<string>): string {
  const first = [...members].sort()[0]!;
  // Breadth-first from `first` back to it, inside the set: the shortest way around.
  const cameFrom = new Map<string, string>();
  const queue = [first];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const to of graph.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === first) {
        const path = [first];
        for (let at = node; at !== first; at = cameFrom.get(at)!) path.unshift(at);
        path.unshift(first);
        return path.join(" -> ");
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  return [...members].sort().join(" <-> ");
}
