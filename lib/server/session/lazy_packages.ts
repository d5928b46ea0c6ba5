/**
 * The npm packages the server loads on first use, outside its start-up graph: the TOML parser
 * of `environmentConfig/read` and the YAML parser of `capabilities/discoverV2`. `deno run
 * main.ts` does not fetch them at start; whatever runs the server without a network must have
 * them already, so this module names them for the places that prepare one:
 *
 * - `compile.sh` passes it to `deno compile --include`, so a binary carries them;
 * - the `Containerfile` and the systemd guide's install block `deno cache` it, so a server
 *   started with `--cached-only` finds them.
 *
 * Nothing imports it at run time.
 *
 * @module
 */

import "../codex_config/toml_package.ts";
import "../capabilities/yaml_package.ts";
