/**
 * Copies the web console's terminal emulator, `@xterm/xterm` (its browser
 * script, stylesheet and licence), from the pinned npm package into
 * `lib/server/observe/xterm/`, where `xterm_assets.ts` imports the files as
 * text. Run `deno task console:assets` after changing
 * {@linkcode XTERM_VERSION}; `tests/console_assets_test.ts` fails while a
 * committed file differs from the package.
 *
 * @module
 */

/** The `@xterm/xterm` version the console serves. */
export const XTERM_VERSION = "5.5.0";

/** Where the copies go. */
export const ASSETS_DIR = new URL("../lib/server/observe/xterm/", import.meta.url);

/** The package's files, by the name of their copy in {@linkcode ASSETS_DIR}. */
export async function packageFiles(): Promise<Record<string, string>> {
  const [js, css, license] = await Promise.all([
    import("@xterm/xterm/lib/xterm.js", { with: { type: "text" } }),
    import("@xterm/xterm/css/xterm.css", { with: { type: "text" } }),
    import("@xterm/xterm/LICENSE", { with: { type: "text" } }),
  ]);
  return { "xterm.js": js.default, "xterm.css": css.default, "LICENSE": license.default };
}

if (import.meta.main) {
  for (const [name, text] of Object.entries(await packageFiles())) {
    await Deno.writeTextFile(new URL(name, ASSETS_DIR), text);
    console.log(`wrote ${new URL(name, ASSETS_DIR).pathname}`);
  }
}
