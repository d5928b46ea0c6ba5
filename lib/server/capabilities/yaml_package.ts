/**
 * The YAML parser package, named statically (through lib/server/session/lazy_packages.ts)
 * so that a binary and a prepared cache carry it; the server loads it by a specifier `deno run`
 * does not resolve at start (`loadYaml` in skill_metadata.ts).
 *
 * @module
 */

export { parseDocument } from "npm:yaml@2.9.1";
