/**
 * Refusing protocol connections from the server's own sandboxed processes.
 *
 * A sandboxed process whose network is `enabled` shares the host's network
 * namespace, so it can reach the server's WebSocket port on 127.0.0.1 and,
 * as a client, start unsandboxed processes. The WebSocket listener asks
 * {@linkcode isSandboxedPeer} before anything else: the peer's socket is
 * looked up in `/proc/net/tcp` (or `tcp6`) and every descendant of the
 * server that is sandboxed is checked for holding it: one that lives in
 * another user namespace (every bubblewrap sandbox has its own), or one
 * with more seccomp filters than the server (a Landlock sandbox shares the
 * server's namespaces; its launcher adds a filter, which its descendants
 * inherit and cannot remove).
 *
 * The check costs nothing while no network-enabled sandbox is alive
 * ({@linkcode trackNetworkSandbox} counts them); while one is, it reads
 * `/proc` (about a millisecond for a few hundred processes) and fails
 * closed: if `/proc` cannot be read, the connection is refused. (Deno reads
 * `/proc` only with `--allow-all`; with `--allow-ffi` it is read through
 * libc instead.)
 * A network-`restricted` sandbox has its own network namespace and cannot
 * reach the port at all.
 *
 * @module
 */

import { F, fsSyscallsAvailable, readlinkat } from "../host/fs_syscalls.ts";
import { descendantsOf, listProc, readProcText } from "../host/proc.ts";

let liveNetworkSandboxes = 0;

// Deno reads `/proc` only with --allow-all: go through FFI when it is granted.
function readLink(path: string): string {
  return fsSyscallsAvailable() ? readlinkat(F.AT_FDCWD, path) : Deno.readLinkSync(path);
}

/**
 * Counts one live sandbox with network access; call the returned function
 * once it has exited (idempotent).
 */
export function trackNetworkSandbox(): () => void {
  liveNetworkSandboxes++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    liveNetworkSandboxes--;
  };
}

/** A TCP endpoint. */
export interface Endpoint {
  /** IP address (IPv6 without brackets). */
  hostname: string;
  /** Port. */
  port: number;
}

/** `/proc/net/tcp*` encoding of an address: the 32-bit words of the address in host order, hex. */
function procAddress(endpoint: Endpoint): string | undefined {
  const port = endpoint.port.toString(16).toUpperCase().padStart(4, "0");
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(endpoint.hostname);
  if (v4 !== null) {
    const bytes = v4.slice(1).map(Number);
    return `${hexWord(bytes)}:${port}`;
  }
  const bytes = ipv6Bytes(endpoint.hostname);
  if (bytes === undefined) return undefined;
  let words = "";
  for (let i = 0; i < 16; i += 4) words += hexWord(bytes.slice(i, i + 4));
  return `${words}:${port}`;
}

/** Four bytes in network order as the kernel prints a little-endian 32-bit word. */
function hexWord(bytes: number[]): string {
  return [...bytes].reverse().map((b) => b.toString(16).toUpperCase().padStart(2, "0")).join("");
}

function ipv6Bytes(host: string): number[] | undefined {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(host);
  if (mapped) {
    return [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...mapped[1]!.split(".").map(Number)];
  }
  const [head, tail] = host.split("::");
  const parse = (part: string | undefined) =>
    part === undefined || part === "" ? [] : part.split(":").map((g) => parseInt(g, 16));
  const left = parse(head);
  const right = parse(tail);
  if (tail === undefined && left.length !== 8) return undefined;
  const groups = [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  if (groups.length !== 8 || groups.some((g) => !(g >= 0 && g <= 0xffff))) return undefined;
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

/** The inode of the socket whose local end is `peer` and remote end `server`. */
function socketInode(peer: Endpoint, server: Endpoint): string | undefined {
  const local = procAddress(peer);
  const remote = procAddress(server);
  if (local === undefined || remote === undefined) return undefined;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readProcText(table);
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") continue;
      throw err;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[1] === local && fields[2] === remote) return fields[9];
    }
  }
  return undefined;
}

/** The `Seccomp_filters` count of a process (`/proc/<pid>/status`), if it can be read. */
function seccompFilters(pid: string): number | undefined {
  try {
    const match = /^Seccomp_filters:\s*(\d+)$/m.exec(readProcText(`/proc/${pid}/status`));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

function readLinkOrUndefined(path: string): string | undefined {
  try {
    return readLink(path);
  } catch {
    return undefined;
  }
}

/**
 * Whether the TCP connection from `peer` to the server's `server` endpoint
 * belongs to one of the server's sandboxed descendants. `false` at once
 * while no network-enabled sandbox is alive; `true` (refuse) when `/proc`
 * cannot be read while one is.
 *
 * @param peer The connection's remote address.
 * @param server The listening address.
 */
export function isSandboxedPeer(peer: Endpoint, server: Endpoint): boolean {
  if (liveNetworkSandboxes === 0) return false;
  try {
    const inode = socketInode(peer, server);
    if (inode === undefined || inode === "0") return false;
    const wanted = `socket:[${inode}]`;
    const ownNamespace = readLink("/proc/self/ns/user");
    const ownFilters = seccompFilters("self") ?? 0;
    for (const pid of descendantsOf(Deno.pid)) {
      const namespace = readLinkOrUndefined(`/proc/${pid}/ns/user`);
      if (namespace === undefined) continue;
      if (namespace === ownNamespace && (seccompFilters(String(pid)) ?? 0) <= ownFilters) continue;
      let fds: string[];
      try {
        fds = listProc(`/proc/${pid}/fd`);
      } catch {
        continue;
      }
      if (fds.some((fd) => readLinkOrUndefined(`/proc/${pid}/fd/${fd}`) === wanted)) {
        return true;
      }
    }
    return false;
  } catch {
    return true;
  }
}
