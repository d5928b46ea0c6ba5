/**
 * `fs/watchMissing` and the `fs/missingChanged` notification (docs/protocol.md §10.13).
 *
 * @module
 */

import { kindError } from "../../protocol/errors.ts";
import { dirname } from "../host/posix_path.ts";
import { fsError, osErrorCode } from "../host/os_errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { requireRead } from "../host/permissions.ts";
import { close, F } from "../host/fs_syscalls.ts";
import { openForRead, readsScoped } from "./resolve.ts";

/**
 * How often a watch under a read scope looks for its paths. Such a watch
 * polls on checked descriptors instead of using `Deno.watchFs`: a process
 * renaming a watched directory in a loop keeps Deno's watcher thread busy,
 * and the server's next `Deno.watchFs` or `close` waits for that thread, so
 * the whole server stopped answering (`attack_scope_race_test.ts`).
 */
const SCOPED_POLL_MS = 50;

/**
 * Most distinct paths one watch takes; a longer list is answered `watching: false` and
 * registers nothing, as the reference answers it.
 */
export const MAX_WATCH_PATHS = 64;

/** Most watches registered at once on one connection; one more is refused with -32600. */
export const MAX_WATCHES = 1024;

interface Watch {
  watchers: Deno.FsWatcher[];
  loops: Promise<void>[];
  done: boolean;
}

/**
 * The missing-path watches of one connection. Create one per connection and
 * call {@linkcode MissingWatchTable.closeAll} when it ends.
 *
 * Each watch observes, for every listed path, the nearest existing ancestor
 * directory (non-recursively) and fires once, independently of other
 * watches, when the next missing path component appears.
 *
 * @example Wait for a file
 * ```ts
 * import { MissingWatchTable } from "./watch.ts";
 * const table = new MissingWatchTable();
 * const dir = await Deno.makeTempDir();
 * const fired = Promise.withResolvers<number>();
 * await table.watchMissing(1, [`${dir}/later`], fired.resolve);
 * await Deno.writeTextFile(`${dir}/later`, "");
 * console.log(await fired.promise); // 1
 * await table.closeAll();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class MissingWatchTable {
  #watches = new Map<number, Watch>();

  /** Number of registered watches that have not fired. */
  get size(): number {
    return this.#watches.size;
  }

  /**
   * `fs/watchMissing`: registers a one-shot watch; `notify(watchId)` is called
   * once when one of the paths (or a missing ancestor of it) appears. At most
   * {@linkcode MAX_WATCH_PATHS} distinct paths (more: `watching: false`) and
   * {@linkcode MAX_WATCHES} watches that have not fired.
   *
   * @param id Client-chosen id, echoed in `fs/missingChanged`.
   * @param paths Native absolute paths that do not exist yet, their read access already checked.
   * @param notify Sends `fs/missingChanged {watchId}` to the client.
   * @throws {RpcError} -32600 past {@linkcode MAX_WATCHES}; the path's OS error.
   */
  async watchMissing(
    id: number,
    paths: readonly string[],
    notify: (watchId: number) => void,
  ): Promise<ResultOf<"fs/watchMissing">> {
    const distinct = new Set(paths);
    if (distinct.size === 0 || distinct.size > MAX_WATCH_PATHS || this.#watches.has(id)) {
      return { watching: false };
    }
    this.#checkRoom();
    // ancestor directory → the paths of its children whose creation fires the watch
    const targets = new Map<string, Set<string>>();
    try {
      for (const path of distinct) {
        if (await exists(path)) return { watching: false };
        const next = await nextMissing(path);
        if (next === undefined) return { watching: false };
        const ancestor = dirname(next);
        requireRead(ancestor);
        targets.set(ancestor, (targets.get(ancestor) ?? new Set()).add(next));
      }
    } catch (err) {
      throw fsError(err);
    }
    if (this.#watches.has(id)) return { watching: false };
    this.#checkRoom();
    const watch: Watch = { watchers: [], loops: [], done: false };
    this.#watches.set(id, watch);
    const fire = () => {
      if (watch.done) return;
      this.#stop(id, watch);
      notify(id);
    };
    try {
      for (const [ancestor, children] of targets) {
        if ([...children].some((child) => readsScoped(child, []))) {
          watch.loops.push(pollLoop(watch, children, fire));
          continue;
        }
        const watcher = Deno.watchFs(ancestor, { recursive: false });
        watch.watchers.push(watcher);
        watch.loops.push(watchLoop(watcher, children, fire));
      }
      // Something may have appeared before the watchers started: report it as existing.
      for (const children of targets.values()) {
        for (const child of children) {
          if (await exists(child)) {
            this.#stop(id, watch);
            return { watching: false };
          }
        }
      }
    } catch (err) {
      this.#stop(id, watch);
      throw fsError(err);
    }
    return { watching: true };
  }

  /** Refuses a watch past {@linkcode MAX_WATCHES} (checked again after the awaits of a registration). */
  #checkRoom(): void {
    if (this.#watches.size < MAX_WATCHES) return;
    throw kindError(
      "limitReached",
      `at most ${MAX_WATCHES} missing-path watches may be registered per connection`,
    );
  }

  /** Stops every watch (connection end); resolves when the watchers are released. */
  async closeAll(): Promise<void> {
    const loops: Promise<void>[] = [];
    for (const [id, watch] of this.#watches) {
      loops.push(...watch.loops);
      this.#stop(id, watch);
    }
    await Promise.all(loops);
  }

  #stop(id: number, watch: Watch): void {
    watch.done = true;
    if (this.#watches.get(id) === watch) this.#watches.delete(id);
    for (const watcher of watch.watchers) {
      try {
        watcher.close();
      } catch {
        // Already closed.
      }
    }
  }
}

/** Under a read scope: looks for the children on checked descriptors every {@linkcode SCOPED_POLL_MS}. */
async function pollLoop(watch: Watch, children: Set<string>, fire: () => void): Promise<void> {
  while (!watch.done) {
    await new Promise((resolve) => setTimeout(resolve, SCOPED_POLL_MS));
    if (watch.done) return;
    for (const child of children) if (await exists(child).catch(() => false)) return fire();
  }
}

async function watchLoop(
  watcher: Deno.FsWatcher,
  children: Set<string>,
  fire: () => void,
): Promise<void> {
  try {
    for await (const event of watcher) {
      if (event.paths.some((path) => children.has(path))) return fire();
      // Paths in events may be spelled differently from ours; check the children directly.
      for (const child of children) if (await exists(child).catch(() => false)) return fire();
    }
  } catch {
    // The watcher was closed or the directory went away; nothing more to report.
  }
}

/**
 * Whether `path` exists, without following a final symlink (a broken link
 * exists). Under a read scope (with `--allow-ffi`) the entry is opened below
 * the read scope's root and checked (`openForRead`): a path a swapped link
 * leads out of the scope throws the permission error instead of answering
 * for what is there.
 */
async function exists(path: string): Promise<boolean> {
  try {
    if (readsScoped(path, [])) close(openForRead(path, [], F.O_PATH | F.O_NOFOLLOW, true));
    else await Deno.lstat(path);
    return true;
  } catch (err) {
    const code = osErrorCode(err);
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw err;
  }
}

/** Whether `path` is a directory (symlinks followed, checked as {@linkcode exists} does). */
async function isDirectory(path: string): Promise<boolean> {
  if (!readsScoped(path, [])) return (await Deno.stat(path)).isDirectory;
  try {
    close(openForRead(path, [], F.O_PATH | F.O_DIRECTORY, true));
    return true;
  } catch (err) {
    if (osErrorCode(err) === "ENOTDIR") return false;
    throw err;
  }
}

/**
 * Returns the first missing component of `path` (a child of its nearest
 * existing ancestor), or `undefined` when that ancestor is not a directory.
 */
async function nextMissing(path: string): Promise<string | undefined> {
  let current = path;
  while (true) {
    const parent = dirname(current);
    if (parent === current) return undefined;
    try {
      return (await isDirectory(parent)) ? current : undefined;
    } catch (err) {
      const code = osErrorCode(err);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
    }
    current = parent;
  }
}
