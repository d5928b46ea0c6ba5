/**
 * POSIX path arithmetic with `node:path`'s results (`dirname`, `basename`,
 * `resolve`, `relative`), written here so that the server's start-up does not
 * load Deno's Node compatibility layer (about 15 ms of CPU) for four string
 * functions. `tests/posix_path_test.ts` compares them with `node:path`.
 *
 * @module
 */

/**
 * The path without its last segment (trailing slashes ignored), `.` or `/` when none is left.
 *
 * @param path A path.
 *
 * @example
 * ```ts
 * import { dirname } from "./posix_path.ts";
 * console.log(dirname("/a/b/"), dirname("a"), dirname("/a")); // "/a" "." "/"
 * ```
 */
export function dirname(path: string): string {
  if (path === "") return ".";
  const rooted = path.startsWith("/");
  let end = -1;
  let inSlashes = true;
  for (let i = path.length - 1; i >= 1; i--) {
    if (path[i] !== "/") inSlashes = false;
    else if (!inSlashes) {
      end = i;
      break;
    }
  }
  if (end === -1) return rooted ? "/" : ".";
  if (rooted && end === 1) return "//";
  return path.slice(0, end);
}

/**
 * The last segment of a path (trailing slashes ignored).
 *
 * @param path A path.
 *
 * @example
 * ```ts
 * import { basename } from "./posix_path.ts";
 * console.log(basename("/a/b/"), basename("/")); // "b" ""
 * ```
 */
export function basename(path: string): string {
  let end = path.length;
  while (end > 0 && path[end - 1] === "/") end--;
  return path.slice(path.lastIndexOf("/", end - 1) + 1, end);
}

/**
 * The absolute, normalized path the segments lead to from the working directory.
 *
 * @param segments Paths joined from the right until one is absolute.
 *
 * @example
 * ```ts
 * import { resolve } from "./posix_path.ts";
 * console.log(resolve("/a/b", "../c/./d/")); // "/a/c/d"
 * ```
 */
export function resolve(...segments: string[]): string {
  let joined = "";
  for (let i = segments.length - 1; i >= 0 && !joined.startsWith("/"); i--) {
    const segment = segments[i]!;
    if (segment !== "") joined = joined === "" ? segment : `${segment}/${joined}`;
  }
  if (!joined.startsWith("/")) joined = `${Deno.cwd()}/${joined}`;
  const parts: string[] = [];
  for (const part of joined.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/**
 * The relative path from `from` to `to` (both resolved first); `""` when they are the same.
 *
 * @param from The starting path.
 * @param to The target path.
 *
 * @example
 * ```ts
 * import { relative } from "./posix_path.ts";
 * console.log(relative("/a/b/c", "/a/d")); // "../../d"
 * ```
 */
export function relative(from: string, to: string): string {
  const a = resolve(from).split("/").filter((part) => part !== "");
  const b = resolve(to).split("/").filter((part) => part !== "");
  let common = 0;
  while (common < a.length && common < b.length && a[common] === b[common]) common++;
  return [...new Array(a.length - common).fill(".."), ...b.slice(common)].join("/");
}
