/**
 * Recognising a file the kernel cannot execute, for the pipe backend without
 * FFI: Node's spawn (Deno's `node:child_process`), like `execvp`, runs a file
 * that `execve` refuses with ENOEXEC through `/bin/sh` (which then fails with
 * exit 127); the reference reports `Exec format error (os error 8)` instead,
 * so there a file that is neither an ELF binary nor a `#!` script is refused
 * before the spawn. The FFI spawns need no such check: glibc's `posix_spawn`
 * (since 2.15) returns ENOEXEC itself, without the shell.
 *
 * @module
 */

/**
 * Returns whether the file at `path` starts like something `execve` runs:
 * an ELF binary (`\x7fELF`) or a script (`#!`). A file that cannot be read
 * (no permission for the server, gone) counts as executable, so the spawn
 * itself decides.
 *
 * @example
 * ```ts
 * import { hasExecutableFormat } from "./exec_format.ts";
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "echo hi\n");
 * console.log(hasExecutableFormat(path)); // false
 * await Deno.writeTextFile(path, "#!/bin/sh\necho hi\n");
 * console.log(hasExecutableFormat(path)); // true
 * await Deno.remove(path);
 * ```
 *
 * @param path The program's path, as it will be spawned.
 */
export function hasExecutableFormat(path: string): boolean {
  const head = new Uint8Array(4);
  let read = 0;
  try {
    // Only a regular file is opened (a FIFO would block the open).
    if (!Deno.statSync(path).isFile) return true;
    using file = Deno.openSync(path, { read: true });
    read = file.readSync(head) ?? 0;
  } catch {
    return true;
  }
  const elf = read === 4 && head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c &&
    head[3] === 0x46;
  const script = read >= 2 && head[0] === 0x23 && head[1] === 0x21;
  return elf || script;
}
