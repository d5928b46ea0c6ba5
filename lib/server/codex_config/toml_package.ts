/**
 * The TOML parser package, named statically so that `deno compile` (compile.sh's `--include`)
 * carries it in a binary; the server loads it by a specifier `deno run` does not resolve at
 * start (`loadTomlParser` in environment_config.ts).
 *
 * @module
 */

export { parse } from "npm:smol-toml@1.9.1";
