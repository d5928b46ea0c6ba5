/**
 * Unix sockets in sandboxes whose network is `enabled`
 * (`--sandbox-unix-sockets`).
 *
 * Network access should mean the network, not every local daemon: with the
 * host's network a sandbox can also reach the host's unix sockets (the
 * Docker or Podman socket, D-Bus, systemd's), and through most of them
 * start processes outside any sandbox. Read-only mounts and Landlock (up to
 * ABI 7) do not stop a `connect` to a socket file, and a seccomp filter
 * cannot read the path it names, so by default such a sandbox cannot
 * create a unix socket at all (`socket(AF_UNIX)` fails with `EPERM`; its
 * own, already connected `socketpair`s work). That also refuses a server
 * listening on a unix socket inside the writable roots. The operator flag
 * gives them back. A network-`restricted` sandbox is unchanged: its filter
 * already refuses `connect`, `bind`, `sendto` and `sendmsg` on any socket.
 *
 * @module
 */

import type { SeccompMode } from "./seccomp.ts";
import type { NetworkPolicy } from "./policy.ts";

let allowed = false;

/**
 * Lets network-enabled sandboxes use unix sockets (`--sandbox-unix-sockets`), once at start.
 *
 * @param on Whether they may.
 */
export function setSandboxUnixSockets(on: boolean): void {
  allowed = on;
}

/**
 * The seccomp filter of a sandbox with this network policy.
 *
 * @param network The plan's network policy.
 *
 * @example
 * ```ts
 * import { filterModeFor } from "./unix_sockets.ts";
 * console.log(filterModeFor("enabled")); // "nounix"
 * ```
 */
export function filterModeFor(network: NetworkPolicy): SeccompMode {
  if (network === "restricted") return "restricted";
  return allowed ? "vsock" : "nounix";
}
