/**
 * Shared pieces of the attack tests: a sandbox value with chosen writable
 * roots and network, a scratch layout outside every default writable root,
 * and whether the tools the attacks need (bubblewrap, python3) are there.
 *
 * @module
 */

import { sandboxAvailable } from "../../lib/server/sandbox/availability.ts";

/** A `file:` URI of a native absolute path. */
export const uri = (path: string): string => `file://${path}`;

/** Standard base64 of a UTF-8 text. */
export const b64 = (text: string): string => new TextEncoder().encode(text).toBase64();

/** bubblewrap works here, or why not (for test names). */
export const SANDBOX = sandboxAvailable();

/** The python3 the attacks run inside sandboxes (a plain binary, no shim). */
export const PYTHON3 = ["/usr/bin/python3", "/usr/local/bin/python3"].find((path) => {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
});

/** Why an attack that needs python3 is skipped, or `""`. */
export const PYTHON_SKIP = PYTHON3 === undefined
  ? " (skipped: no python3 in /usr/bin or /usr/local/bin)"
  : "";

/** Why a sandbox attack test is skipped, or `""`. */
export const SANDBOX_SKIP = !SANDBOX.ok ? ` (skipped: ${SANDBOX.reason})` : PYTHON_SKIP;

/**
 * A Codex `sandbox` value: the whole file system readable, `writable`
 * writable, with the given network policy.
 */
export function sandboxValue(
  writable: string[],
  network: "restricted" | "enabled",
): Record<string, unknown> {
  return {
    permissions: {
      type: "managed",
      file_system: {
        type: "restricted",
        entries: [
          { path: { type: "special", value: { kind: "root" } }, access: "read" },
          ...writable.map((path) => ({ path: { type: "path", path: uri(path) }, access: "write" })),
        ],
      },
      network,
    },
    windowsSandboxLevel: "disabled",
  };
}

/** A scratch directory under /var/tmp (no default writable root), with `ws` and `outside`. */
export interface AttackLayout extends AsyncDisposable {
  /** The base directory (removed on dispose). */
  base: string;
  /** The sandbox's writable root. */
  ws: string;
  /** Outside every writable root. */
  outside: string;
}

/** Creates an {@linkcode AttackLayout}. */
export async function attackLayout(prefix: string): Promise<AttackLayout> {
  const base = await Deno.realPath(await Deno.makeTempDir({ dir: "/var/tmp", prefix }));
  const ws = `${base}/ws`;
  const outside = `${base}/outside`;
  await Deno.mkdir(ws);
  await Deno.mkdir(outside);
  return {
    base,
    ws,
    outside,
    async [Symbol.asyncDispose]() {
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** Names in a directory, sorted. */
export function listNames(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
}

/** A listing of a directory tree with file contents, to prove that it did not change. */
export async function snapshot(dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (path: string) => {
    for await (const entry of Deno.readDir(path)) {
      const full = `${path}/${entry.name}`;
      const info = await Deno.lstat(full);
      if (info.isDirectory) {
        out.push(`${full}/`);
        await walk(full);
      } else out.push(`${full} ${info.isFile ? await Deno.readTextFile(full) : "?"}`);
    }
  };
  await walk(dir);
  return out.sort().join("\n");
}

/** Whether something (even a dangling link) is at `path`. */
export function pathExists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
