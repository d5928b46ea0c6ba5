/**
 * The web console's terminal emulator, `@xterm/xterm` (MIT licence,
 * `xterm/LICENSE`): the package's files, vendored unchanged in `xterm/`
 * (`deno task console:assets` copies them from the pinned version;
 * `tests/console_assets_test.ts` fails while they differ from it).
 *
 * They are plain files, imported as text (`with { type: "text" }`, stable
 * since Deno 2.8) rather than read or fetched, because a text import is part
 * of the module graph: Deno loads it with the module that imports it, so it
 * works under `deno run` by URL (fetched from beside this module, where a
 * `Deno.readTextFile` of a relative path has no file to read), needs no
 * `--allow-read` of the server's own directory (an operator scopes reads to
 * the workspace: a read here would be refused), and `deno compile` embeds it
 * with the rest of the graph (a file read at run time would need
 * `--include`; `tests/console_test.ts` fetches the emulator from a compiled
 * binary when one is built). This module is loaded with the console's first
 * request for the emulator, never at start-up.
 *
 * @module
 */

import script from "./xterm/xterm.js" with { type: "text" };
import stylesheet from "./xterm/xterm.css" with { type: "text" };

/** `lib/xterm.js`: defines the global `Terminal`. */
export const XTERM_JS: string = script;
/** `css/xterm.css`. */
export const XTERM_CSS: string = stylesheet;
