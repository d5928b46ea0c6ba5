/**
 * Locks that keep a sandbox's read-only covers in place while another
 * server's sandbox ends.
 *
 * A cover inside a writable root (`.git`, `.codex`, `.agents`, `.aws`, a
 * denied path) that does not exist is a *synthetic* mount point: bubblewrap
 * creates an empty directory on the host to mount over, and the server
 * removes it when its last sandbox using it ended. Another server's sandbox
 * started meanwhile sees that directory as existing and binds it read-only;
 * removing it detaches that mount inside the other sandbox (the kernel lets
 * `rmdir` remove a mount point of another mount namespace), whose process
 * could then create `.codex` and write in it.
 *
 * So every sandbox holds a shared `flock` on the directory holding each of
 * its covers for its whole life (whichever server runs it), and a
 * synthetic mount point is removed only under an exclusive lock taken
 * without waiting: while any sandbox of any server covers something in the
 * same directory, it stays (empty, read-only inside the sandboxes) and is
 * not removed later. Without FFI nothing is locked and nothing is removed.
 *
 * @module
 */

import { close, F, flock, fsSyscallsAvailable, openat, unlinkat } from "../host/fs_syscalls.ts";
import { basename, dirname } from "../host/posix_path.ts";

function openDirectory(path: string): number | undefined {
  try {
    return openat(F.AT_FDCWD, path, F.O_RDONLY | F.O_DIRECTORY);
  } catch {
    return undefined;
  }
}

/**
 * Takes a shared lock on the directory holding each cover, waiting while
 * a server removes a mount point there.
 *
 * @param covers Canonical paths of the sandbox's read-only and denied mounts.
 * @returns Releases the locks (call it once the sandbox ended).
 */
export function holdCoverDirectories(covers: readonly string[]): () => void {
  if (!fsSyscallsAvailable()) return () => {};
  const held: number[] = [];
  for (const dir of new Set(covers.map((path) => dirname(path)))) {
    const fd = openDirectory(dir);
    if (fd === undefined) continue;
    flock(fd, F.LOCK_SH);
    held.push(fd);
  }
  return () => {
    for (const fd of held.splice(0)) close(fd);
  };
}

/**
 * Removes a synthetic mount point (an empty directory) unless a sandbox of
 * any server still holds its directory (see {@linkcode holdCoverDirectories}).
 *
 * @param path The mount point's canonical path.
 */
export function removeMountPointIfUnused(path: string): void {
  if (!fsSyscallsAvailable()) return;
  const fd = openDirectory(dirname(path));
  if (fd === undefined) return;
  try {
    if (flock(fd, F.LOCK_EX | F.LOCK_NB)) unlinkat(fd, basename(path), true);
  } catch {
    // Already gone, or no longer empty.
  } finally {
    close(fd);
  }
}
