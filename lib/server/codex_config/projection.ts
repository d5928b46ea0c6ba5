/**
 * The key-path projection of `environmentConfig/read`: each layer keeps only the requested
 * key paths, and a layer left with none of them is dropped (docs/protocol.md §13).
 *
 * @module
 */

import { isTable, setEntry, type TomlTable, type TomlValue } from "./toml_text.ts";

/** A tree of requested key paths; `whole` marks a path that ends here. */
interface Selector {
  whole: boolean;
  children: Map<string, Selector>;
}

function selector(paths: readonly (readonly string[])[]): Selector {
  const root: Selector = { whole: false, children: new Map() };
  for (const path of paths) {
    let node = root;
    for (const key of path) {
      if (node.whole) break;
      let child = node.children.get(key);
      if (child === undefined) {
        node.children.set(key, child = { whole: false, children: new Map() });
      }
      node = child;
    }
    node.whole = true;
    node.children.clear();
  }
  return root;
}

function project(value: TomlValue, node: Selector): TomlValue {
  // A value that is not a table is kept whole below a requested key: it still overrides the
  // layers under it.
  if (node.whole || !isTable(value)) return value;
  const kept: TomlTable = {};
  for (const [key, item] of Object.entries(value)) {
    const child = node.children.get(key);
    if (child !== undefined) setEntry(kept, key, project(item, child));
  }
  return kept;
}

/** One layer of a stack before projection. */
export interface Layer<T = TomlTable> {
  /** The layer's `source` label. */
  source: string;
  /** The directory its relative paths are read against. */
  baseDir: string;
  /** Its parsed document. */
  toml: T;
}

/** An ordered stack of layers, lowest precedence first. */
export interface LayerStack<T = TomlTable> {
  /** The layers. */
  layers: Layer<T>[];
  /** How many layers come before the place of the cloud's layers. */
  cloudInsertionIndex: number;
}

/**
 * The stack with each layer cut down to `paths`; a layer without any of them is left out and
 * `cloudInsertionIndex` counts only the kept layers below it.
 *
 * @example
 * ```ts
 * import { projectStack } from "./projection.ts";
 * const stack = projectStack({
 *   layers: [
 *     { source: "system", baseDir: "/etc/codex", toml: { model: "a" } },
 *     { source: "user", baseDir: "/root/.codex", toml: { features: { x: true }, model: "b" } },
 *   ],
 *   cloudInsertionIndex: 1,
 * }, [["features"]]);
 * console.log(stack.layers.map((layer) => layer.source), stack.cloudInsertionIndex); // ["user"] 0
 * ```
 */
export function projectStack(stack: LayerStack, paths: readonly (readonly string[])[]): LayerStack {
  const tree = selector(paths);
  const layers: Layer[] = [];
  let cloudInsertionIndex = 0;
  stack.layers.forEach((layer, index) => {
    const toml = project(layer.toml, tree) as TomlTable;
    if (!tree.whole && Object.keys(toml).length === 0) return;
    if (index < stack.cloudInsertionIndex) cloudInsertionIndex++;
    layers.push({ ...layer, toml });
  });
  return { layers, cloudInsertionIndex };
}
