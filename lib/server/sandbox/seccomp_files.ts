/**
 * The seccomp filters on disk: bubblewrap reads a filter from a file
 * descriptor, so each mode's program is written once to a private temporary
 * directory (removed at exit), with the empty mode-`0000` file that is bound
 * over denied files.
 *
 * @module
 */

import { seccompArch, type SeccompMode, seccompProgram } from "./seccomp.ts";

let directory: string | undefined;

/** The directory holding the filter files, once {@linkcode filterFile} made it. */
export function filterDirectory(): string | undefined {
  return directory;
}

/**
 * Writes (or checks) the filter file of a mode, and the empty `0000` file
 * bound over denied files, in this server's filter directory; returns the
 * filter's path.
 *
 * @param mode Which filter.
 * @throws {Error} When the architecture has no filter or the files cannot be written.
 */
export function filterFile(mode: SeccompMode): string {
  const arch = seccompArch();
  if (arch === undefined) throw new Error(`No seccomp filter for ${Deno.build.arch}`);
  const program = seccompProgram(mode, arch);
  if (directory === undefined) {
    const made = Deno.makeTempDirSync({ prefix: "exec-server-seccomp-" });
    directory = made;
    globalThis.addEventListener("unload", () => {
      try {
        Deno.removeSync(made, { recursive: true });
      } catch {
        // Best effort.
      }
    });
  }
  const denied = `${directory}/denied`;
  try {
    const info = Deno.lstatSync(denied);
    if (!info.isFile || info.size !== 0 || (info.mode ?? 0) & 0o777) throw new Error("changed");
  } catch {
    const temp = `${denied}.${crypto.randomUUID()}`;
    Deno.writeFileSync(temp, new Uint8Array(), { mode: 0o000 });
    Deno.chmodSync(temp, 0o000);
    Deno.renameSync(temp, denied);
  }
  const path = `${directory}/${mode}.bpf`;
  let current: Uint8Array | undefined;
  try {
    current = Deno.readFileSync(path);
  } catch {
    current = undefined;
  }
  if (current === undefined || !sameBytes(current, program)) {
    const temp = `${path}.${crypto.randomUUID()}`;
    Deno.writeFileSync(temp, program, { mode: 0o444 });
    Deno.renameSync(temp, path);
  }
  return path;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
