#!/usr/bin/env -S deno run --allow-run --allow-read --allow-write --allow-net --allow-env --allow-sys --allow-ffi
/**
 * The `exec-server` command line.
 *
 * @module
 */

import { type AuthResult, capabilityTokenAuth, tokenFileDigest } from "./lib/server/listen/auth.ts";
import { VERSION } from "./lib/server/session/environment.ts";
import { log, type LogLevel, setLogLevel } from "./lib/server/host/log.ts";
import { raiseFileLimit } from "./lib/server/host/file_limit.ts";
import { type RunningServer, serveStdio, serveWebSocket } from "./lib/server/listen/listen.ts";

const HELP =
  `exec-server ${VERSION}: run processes, files and HTTP for a remote client (Codex exec-server protocol)

Usage:
  exec-server [--listen ws://IP:PORT | stdio] [options]
  exec-server run --url ws://HOST:PORT [run options] -- CMD ARGS...   (see exec-server run --help)

Options:
  --listen URL                 stdio, stdio:// or ws://IP:PORT (default ws://127.0.0.1:0)
  --concurrent-requests N      requests run at once per connection after initialized (default 1)
  --session-ttl SECONDS        how long a detached session waits for a resume (default 80)
  --process-retention SECONDS  how long a closed process stays readable (default 80)
  --max-message-bytes N        largest inbound message (default 67108864)
  --exit-on-stdin-close        in WebSocket mode, exit when stdin closes
  --ws-auth MODE               capability-token: require "Authorization: Bearer <token>" on upgrade
  --ws-token-file FILE         the token (file content, trimmed)
  --ws-token-sha256 HEX        the token's SHA-256 instead of the token itself
  --insecure-no-auth           allow a non-loopback --listen address without --ws-auth
  --tls-cert FILE, --tls-key FILE   serve wss:// with this PEM certificate and key
  --log-level LEVEL            error, warn, info or debug, written to stderr (default warn)
  -h, --help                   print this help
  -V, --version                print the version

In WebSocket mode the bound URL (ws://host:port) is printed as the only line on stdout.
`;

/** Exit code for bad command lines. */
const USAGE_EXIT = 2;

function fail(message: string, code = USAGE_EXIT): never {
  console.error(`error: ${message}`);
  Deno.exit(code);
}

function positiveInteger(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    fail(`--${flag} must be a positive integer, got "${value}"`);
  }
  return Number(value);
}

function parseListen(
  value: string,
): { kind: "stdio" } | { kind: "ws"; host: string; port: number } {
  if (value === "stdio" || value === "stdio://") return { kind: "stdio" };
  const match = /^ws:\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(value);
  if (!match || Number(match[2]) > 65535) {
    fail(`unsupported --listen URL \`${value}\`; expected \`ws://IP:PORT\` or \`stdio\``);
  }
  return { kind: "ws", host: match[1]!.replace(/^\[|\]$/g, ""), port: Number(match[2]) };
}

type FlagSpec = Record<string, string | boolean | undefined>;
type Flags<S extends FlagSpec> = {
  [K in keyof S]: S[K] extends boolean ? boolean : string | undefined;
};

const SHORT_FLAGS: Record<string, string> = { "-h": "help", "-V": "version" };

/**
 * Parses `--name value`, `--name=value` and boolean `--name` flags; a default
 * of `false` marks a boolean flag. Written here rather than taken from
 * `node:util` because loading Node compatibility adds about 10 ms to every
 * server start (measured with `--cpu-prof`), and cold start is a benchmark.
 */
function parseFlags<S extends FlagSpec>(args: string[], spec: S): Flags<S> {
  const values: Record<string, string | boolean | undefined> = { ...spec };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const short = SHORT_FLAGS[arg];
    const match = short ? [arg, short, undefined] : /^--([a-z0-9-]+)(?:=(.*))?$/s.exec(arg);
    const name = match?.[1];
    if (!name || !Object.hasOwn(spec, name)) fail(`unknown option '${arg}'`);
    if (typeof spec[name] === "boolean") {
      if (match[2] !== undefined) fail(`option '--${name}' does not take a value`);
      values[name] = true;
    } else {
      const value = match[2] ?? args[++i];
      if (value === undefined) fail(`option '--${name} <value>' argument missing`);
      values[name] = value;
    }
  }
  return values as Flags<S>;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

async function authFromFlags(
  flags: { "ws-auth"?: string; "ws-token-file"?: string; "ws-token-sha256"?: string },
): Promise<((request: Request) => Promise<AuthResult>) | undefined> {
  const mode = flags["ws-auth"];
  if (mode === undefined) {
    if (flags["ws-token-file"] || flags["ws-token-sha256"]) {
      fail("--ws-token-file and --ws-token-sha256 need --ws-auth capability-token");
    }
    return undefined;
  }
  if (mode !== "capability-token") {
    fail(`--ws-auth supports only "capability-token", got "${mode}"`);
  }
  if (Boolean(flags["ws-token-file"]) === Boolean(flags["ws-token-sha256"])) {
    fail("--ws-auth capability-token needs exactly one of --ws-token-file and --ws-token-sha256");
  }
  try {
    const digest = flags["ws-token-sha256"] ?? await tokenFileDigest(flags["ws-token-file"]!);
    return capabilityTokenAuth(digest);
  } catch (err) {
    fail((err as Error).message);
  }
}

async function main(args: string[]): Promise<void> {
  if (args[0] === "run") {
    // Loaded on demand: the client is not part of the server's start-up path.
    const { runCommand } = await import("./lib/client/run_command.ts");
    Deno.exit(await runCommand(args.slice(1)));
  }
  const flags = parseFlags(args, {
    listen: "ws://127.0.0.1:0",
    "concurrent-requests": undefined,
    "session-ttl": undefined,
    "process-retention": undefined,
    "max-message-bytes": undefined,
    "exit-on-stdin-close": false,
    "ws-auth": undefined,
    "ws-token-file": undefined,
    "ws-token-sha256": undefined,
    "insecure-no-auth": false,
    "tls-cert": undefined,
    "tls-key": undefined,
    "log-level": "warn",
    help: false,
    version: false,
  });
  if (flags.help) {
    console.log(HELP);
    return;
  }
  if (flags.version) {
    console.log(`exec-server ${VERSION}`);
    return;
  }
  const listen = parseListen(flags.listen!);
  if (!["error", "warn", "info", "debug"].includes(flags["log-level"]!)) {
    fail(`--log-level must be error, warn, info or debug, got "${flags["log-level"]}"`);
  }
  setLogLevel(flags["log-level"] as LogLevel);
  const fileLimit = raiseFileLimit();
  log("debug", `open file limit: ${fileLimit ? fileLimit.soft : "unchanged (libc unavailable)"}`);
  const authorize = await authFromFlags(flags);
  if (
    listen.kind === "ws" && !isLoopback(listen.host) && !authorize && !flags["insecure-no-auth"]
  ) {
    fail(
      `refusing to listen on non-loopback address ${listen.host} without --ws-auth; pass --insecure-no-auth to do it anyway`,
    );
  }
  if (Boolean(flags["tls-cert"]) !== Boolean(flags["tls-key"])) {
    fail("--tls-cert and --tls-key must be given together");
  }
  let tls: { cert: string; key: string } | undefined;
  if (flags["tls-cert"] && flags["tls-key"]) {
    try {
      tls = {
        cert: await Deno.readTextFile(flags["tls-cert"]),
        key: await Deno.readTextFile(flags["tls-key"]),
      };
    } catch (err) {
      fail(`cannot read --tls-cert/--tls-key: ${(err as Error).message}`);
    }
  }
  const options = {
    concurrentRequests: positiveInteger("concurrent-requests", flags["concurrent-requests"], 1),
    ttlMs: positiveInteger("session-ttl", flags["session-ttl"], 80) * 1000,
    processRetentionMs: positiveInteger("process-retention", flags["process-retention"], 80) *
      1000,
    maxMessageBytes: positiveInteger("max-message-bytes", flags["max-message-bytes"], 64 << 20),
  };
  let server: RunningServer;
  if (listen.kind === "stdio") {
    server = serveStdio(options);
  } else {
    try {
      server = await serveWebSocket({
        ...options,
        hostname: listen.host,
        port: listen.port,
        authorize,
        tls,
      });
    } catch (err) {
      fail(`cannot listen on ${flags.listen}: ${(err as Error).message}`, 1);
    }
    console.log(server.url);
    const exitOnStdinClose = flags["exit-on-stdin-close"] ||
      Deno.env.get("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE") !== undefined;
    if (exitOnStdinClose) {
      (async () => {
        for await (const _ of Deno.stdin.readable) { /* drain until EOF */ }
        await server.shutdown();
        Deno.exit(0);
      })();
    }
  }
  const stop = async () => {
    await Promise.race([server.shutdown(), new Promise((r) => setTimeout(r, 2000))]);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  await server.finished;
  Deno.exit(0);
}

if (import.meta.main) {
  await main(Deno.args);
}
