/**
 * The TOML parser package, named statically (through lib/server/session/lazy_packages.ts)
 * so that a binary and a prepared cache carry it; the server loads it by a specifier `deno run`
 * does not resolve at start (`loadTomlParser` in environment_config.ts).
 *
 * @module
 */

export { parse } from "npm:smol-toml@1.9.1";
