/**
 * The server's command-line flags: the one table that `exec-server`'s parser,
 * its `--help` text and its defaults come from. To add a flag, add an entry
 * here; `main.ts` reads its value from {@linkcode parseServerFlags}.
 *
 * @module
 */

import { VERSION } from "../server/session/environment.ts";
import { LOG_FORMATS } from "../server/host/log.ts";
import { DEFAULT_MAX_CONNECTIONS } from "../server/listen/connection_limit.ts";
import { DEFAULT_MAX_PROCESSES } from "../server/process/live_processes.ts";
import { SANDBOX_MODES } from "../server/sandbox/server_policy.ts";
import { SANDBOX_LAYER_CHOICES } from "../server/sandbox/layer.ts";
import {
  defineFlags,
  FlagError,
  type FlagTable,
  type FlagValues,
  parseFlags,
  renderFlagHelp,
} from "./flags.ts";

/** Where the server listens: its stdin/stdout, or a WebSocket address. */
export type ListenAddress = { kind: "stdio" } | { kind: "ws"; host: string; port: number };

/**
 * Parses a `--listen` value: `stdio`, `stdio://` or `ws://IP:PORT`
 * (an IPv6 address in brackets).
 *
 * @example
 * ```ts
 * import { parseListen } from "./server_flags.ts";
 * console.log(parseListen("ws://[::1]:8080")); // { kind: "ws", host: "::1", port: 8080 }
 * ```
 *
 * @param value The flag's value.
 * @returns The address.
 * @throws {FlagError} For anything else.
 */
export function parseListen(value: string): ListenAddress {
  if (value === "stdio" || value === "stdio://") return { kind: "stdio" };
  const match = /^ws:\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(value);
  if (!match || Number(match[2]) > 65535) {
    throw new FlagError(
      `unsupported --listen URL \`${value}\`; expected \`ws://IP:PORT\` or \`stdio\``,
    );
  }
  return { kind: "ws", host: match[1]!.replace(/^\[|\]$/g, ""), port: Number(match[2]) };
}

/**
 * Parses a `--ws-max-clock-skew-seconds` value: a non-negative integer of at
 * most 2^63 - 1, as the reference accepts.
 *
 * @example
 * ```ts
 * import { parseClockSkew } from "./server_flags.ts";
 * console.log(parseClockSkew("45", "ws-max-clock-skew-seconds")); // 45n
 * ```
 *
 * @param value The flag's value.
 * @param flag The flag's name.
 * @returns The skew in seconds.
 * @throws {FlagError} For anything else.
 */
export function parseClockSkew(value: string, flag: string): bigint {
  if (!/^\d+$/.test(value) || BigInt(value) >= 1n << 63n) {
    throw new FlagError(`--${flag} must be an integer from 0 to 2^63 - 1, got "${value}"`);
  }
  return BigInt(value);
}

/** Every flag of `exec-server` (the server; `exec-server run` has its own). */
export const SERVER_FLAGS = defineFlags({
  listen: {
    kind: "string",
    value: "URL",
    default: "ws://127.0.0.1:0",
    parse: parseListen,
    help: "stdio, stdio:// or ws://IP:PORT",
  },
  "concurrent-requests": {
    kind: "integer",
    value: "N",
    default: 1,
    help: "requests run at once per connection after initialized",
  },
  "session-ttl": {
    kind: "integer",
    value: "SECONDS",
    default: 80,
    help: "how long a detached session waits for a resume",
  },
  "process-retention": {
    kind: "integer",
    value: "SECONDS",
    default: 80,
    help: "how long a closed process stays readable",
  },
  "max-processes": {
    kind: "integer",
    value: "N",
    default: DEFAULT_MAX_PROCESSES,
    help: "most processes alive at once across all sessions; a further\n" +
      "process/start fails with limitReached",
  },
  "max-message-bytes": {
    kind: "integer",
    value: "N",
    default: 64 << 20,
    help: "largest inbound message",
  },
  "exit-on-stdin-close": {
    kind: "boolean",
    help: "in WebSocket mode, exit when stdin closes",
  },
  "ws-auth": {
    kind: "enum",
    value: "MODE",
    choices: ["capability-token", "signed-bearer-token"],
    help: 'require "Authorization: Bearer <token>" on the upgrade: a fixed token\n' +
      "or a JWT signed with HMAC-SHA-256 (HS256)",
  },
  "ws-token-file": {
    kind: "string",
    value: "FILE",
    help: "the token (file content, trimmed)",
    secretFile: true,
  },
  "ws-token-sha256": {
    kind: "string",
    value: "HEX",
    help: "the token's SHA-256 instead of the token itself",
  },
  "ws-shared-secret-file": {
    kind: "string",
    value: "FILE",
    help: "signed-bearer-token: the HMAC secret (file content, trimmed, at least 32 bytes)",
    secretFile: true,
  },
  "ws-issuer": {
    kind: "string",
    value: "ISSUER",
    help: "signed-bearer-token: the iss a token must carry",
  },
  "ws-audience": {
    kind: "string",
    value: "AUDIENCE",
    help: "signed-bearer-token: the aud a token must carry (or list)",
  },
  "ws-max-clock-skew-seconds": {
    kind: "string",
    value: "SECONDS",
    parse: parseClockSkew,
    help: "signed-bearer-token: leeway for exp and nbf (default 30)",
  },
  "console-token-file": {
    kind: "string",
    value: "FILE",
    help: "a token for the web console only (file content, trimmed): its logins\n" +
      "watch processes; it opens no protocol connection",
    secretFile: true,
  },
  "console-can-terminate": {
    kind: "boolean",
    help: "let --console-token-file logins terminate processes too",
  },
  "insecure-no-auth": {
    kind: "boolean",
    help: "allow a non-loopback --listen address without --ws-auth",
  },
  "allow-origin": {
    kind: "list",
    value: "ORIGIN",
    help: "serve requests whose Origin header is exactly ORIGIN; any\n" +
      "other request carrying an Origin (a web page) gets 403",
  },
  "max-connections": {
    kind: "integer",
    value: "N",
    default: DEFAULT_MAX_CONNECTIONS,
    help: "most WebSocket connections served at once; a further upgrade gets 503",
  },
  "tls-cert": {
    kind: "string",
    value: "FILE",
    help: "serve wss:// with this PEM certificate (with --tls-key)",
  },
  "tls-key": {
    kind: "string",
    value: "FILE",
    help: "the PEM private key of --tls-cert",
    secretFile: true,
  },
  sandbox: {
    kind: "enum",
    value: "MODE",
    choices: SANDBOX_MODES,
    default: "danger-full-access",
    help: "the ceiling for every process and fs call of every client (Codex's policies):\n" +
      "read-only, or workspace-write (only the --writable-root dirs); processes\n" +
      "run under bubblewrap with a private /tmp and a loopback-only network",
  },
  "writable-root": {
    kind: "list",
    value: "DIR",
    help: "workspace-write: a directory processes and fs calls may write",
  },
  "deny-read": {
    kind: "list",
    value: "PATH",
    help: "a path processes and fs calls may not read (the server's token,\n" +
      "secret and key files are denied without it)",
  },
  "network-access": {
    kind: "boolean",
    help: "with a confining --sandbox, let processes use the host's network",
  },
  "sandbox-unix-sockets": {
    kind: "boolean",
    help: "let sandboxes with network access use unix sockets (they can then reach\n" +
      "the host's daemons: docker.sock, D-Bus, systemd); off, socket(AF_UNIX) fails",
  },
  "sandbox-layer": {
    kind: "enum",
    value: "LAYER",
    choices: SANDBOX_LAYER_CHOICES,
    default: "auto",
    help: "what enforces sandboxes: auto (the first that works: bubblewrap, then\n" +
      "bubblewrap-no-proc where /proc cannot be mounted, then landlock where user\n" +
      "namespaces are denied), or one of them (docs/guide/sandbox.md)",
  },
  "process-namespace": {
    kind: "boolean",
    help: "run every unsandboxed process in its own PID namespace (bubblewrap):\n" +
      "none of its descendants outlives it or the server, even a SIGKILLed one;\n" +
      "background jobs then end with their leader",
  },
  "log-level": {
    kind: "enum",
    value: "LEVEL",
    choices: ["error", "warn", "info", "debug"],
    default: "warn",
    help: "what to log, to stderr (info and debug add the audit events)",
  },
  "log-format": {
    kind: "enum",
    value: "FORMAT",
    choices: LOG_FORMATS,
    default: "text",
    help: "text, or json: one JSON object per line (ts, level, event and its fields)",
  },
  help: { kind: "boolean", short: "h", help: "print this help" },
  version: { kind: "boolean", short: "V", help: "print the version" },
});

/**
 * The files named by the flags marked `secretFile` (token, shared secret,
 * TLS key) that this command line gives: the server's sandboxes deny them.
 *
 * @example
 * ```ts
 * import { parseServerFlags, secretFiles } from "./server_flags.ts";
 * const flags = parseServerFlags(["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
 * console.log(secretFiles(flags)); // ["k.pem"]
 * ```
 *
 * @param flags The parsed flags.
 * @returns The paths, as given.
 */
export function secretFiles(flags: ServerFlags): string[] {
  return Object.entries(SERVER_FLAGS as FlagTable).flatMap(([name, spec]) => {
    if (spec.kind !== "string" || spec.secretFile !== true) return [];
    const value = (flags as Record<string, unknown>)[name];
    return typeof value === "string" ? [value] : [];
  });
}

/** The parsed values of {@linkcode SERVER_FLAGS}. */
export type ServerFlags = FlagValues<typeof SERVER_FLAGS>;

/**
 * Parses the server's command line (everything but `exec-server run`).
 *
 * @example
 * ```ts
 * import { parseServerFlags } from "./server_flags.ts";
 * const flags = parseServerFlags(["--listen", "stdio", "--session-ttl=5"]);
 * console.log(flags.listen, flags["session-ttl"], flags["log-level"]);
 * // { kind: "stdio" } 5 "warn"
 * ```
 *
 * @param args The command-line arguments.
 * @returns Every flag's value or default.
 * @throws {FlagError} For a bad flag, naming it.
 */
export function parseServerFlags(args: readonly string[]): ServerFlags {
  return parseFlags(SERVER_FLAGS, args).flags;
}

/**
 * The text `exec-server --help` prints; its option list comes from
 * {@linkcode SERVER_FLAGS}.
 *
 * @example
 * ```ts
 * import { serverHelp } from "./server_flags.ts";
 * console.log(serverHelp().includes("--listen URL")); // true
 * ```
 *
 * @returns The help text.
 */
export function serverHelp(): string {
  return `exec-server ${VERSION}: run processes, files and HTTP for a remote client (Codex exec-server protocol)

Usage:
  exec-server [--listen ws://IP:PORT | stdio] [options]
  exec-server run --url ws://HOST:PORT [run options] -- CMD ARGS...   (see exec-server run --help)
  exec-server mcp [--url ws://HOST:PORT | server options]   (see exec-server mcp --help)

Options:
${renderFlagHelp(SERVER_FLAGS)}

In WebSocket mode the bound URL (ws://host:port) is printed as the only line on stdout.
`;
}
