/**
 * A file whose name is not UTF-8, for listings that must not lose it.
 *
 * @module
 */

/** The name {@linkcode makeNonUtf8File} creates (`bad`, the byte 0xFF, `name`) as the reference lists it: the byte becomes U+FFFD. */
export const NON_UTF8_NAME_TEXT = "bad\uFFFDname";

/**
 * Creates the empty file `bad<0xFF>name` in `dir`, through the shell (Deno's paths are text).
 *
 * @param dir An existing directory.
 */
export async function makeNonUtf8File(dir: string): Promise<void> {
  const made = await new Deno.Command("/bin/sh", {
    args: ["-c", `: > "$(printf 'bad\\377name')"`],
    cwd: dir,
  }).output();
  if (!made.success) throw new Error("could not create a file with a name that is not UTF-8");
}
