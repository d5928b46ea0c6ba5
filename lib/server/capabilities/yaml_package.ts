/**
 * The YAML parser package, named statically so that `deno compile` (compile.sh's `--include`)
 * carries it in a binary; the server loads it by a specifier `deno run` does not resolve at
 * start (`loadYaml` in skill_metadata.ts).
 *
 * @module
 */

export { parseDocument } from "npm:yaml@2.9.1";
