/**
 * Where bubblewrap reads a seccomp filter from. It takes the filter on a
 * file descriptor, which the shim shell opens from a path: with
 * `--allow-ffi` each mode's program lives in a sealed in-memory file
 * (`memfd`) opened as `/proc/<server pid>/fd/<fd>`, so nothing is ever
 * written to disk and a killed server leaves nothing behind (denied files
 * are then covered with `--ro-bind-data` from `/dev/null`). Without FFI the
 * programs are written once to a private temporary directory (removed at
 * a normal exit, left behind by a SIGKILL), with the empty mode-`0000` file
 * that is bound over denied files.
 *
 * @module
 */

import { fsSyscallsAvailable, sealedMemoryFile } from "../host/fs_syscalls.ts";
import { seccompArch, type SeccompMode, seccompProgram } from "./seccomp.ts";

let directory: string | undefined;
const memoryFiles = new Map<SeccompMode, string>();

/** The directory holding the filter files, once {@linkcode filterFile} made it (never with FFI). */
export function filterDirectory(): string | undefined {
  return directory;
}

/**
 * The path of a mode's filter: its sealed memory file, or (without FFI) the
 * file written (or checked) in this server's filter directory, with the
 * empty `0000` file bound over denied files.
 *
 * @param mode Which filter.
 * @throws {Error} When the architecture has no filter or the files cannot be written.
 */
export function filterFile(mode: SeccompMode): string {
  const arch = seccompArch();
  if (arch === undefined) throw new Error(`No seccomp filter for ${Deno.build.arch}`);
  const program = seccompProgram(mode, arch);
  if (fsSyscallsAvailable()) {
    let path = memoryFiles.get(mode);
    if (path === undefined) {
      path = `/proc/${Deno.pid}/fd/${sealedMemoryFile(`exec-server-seccomp-${mode}`, program)}`;
      memoryFiles.set(mode, path);
    }
    return path;
  }
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
