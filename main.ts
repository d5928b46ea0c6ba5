#!/usr/bin/env -S deno run --allow-run --allow-read --allow-write --allow-net --allow-env --allow-sys --allow-ffi
/**
 * The `exec-server` command line.
 *
 * @module
 */

import { setProcessNamespaces } from "./lib/server/sandbox/pid_namespace.ts";
import type { AuthResult } from "./lib/server/listen/auth.ts";
import { VERSION } from "./lib/server/session/environment.ts";
import { FlagError } from "./lib/cli/flags.ts";
import {
  parseServerFlags,
  secretFiles,
  type ServerFlags,
  serverHelp,
} from "./lib/cli/server_flags.ts";
import { log, setLogFormat, setLogLevel } from "./lib/server/host/log.ts";
import { scopeRaceWarning } from "./lib/server/host/permissions.ts";
import { type RunningServer, serveStdio } from "./lib/server/listen/stdio_listen.ts";
import { serveWebSocket } from "./lib/server/listen/listen.ts";
import { setServerSandbox } from "./lib/server/sandbox/server_policy.ts";
import { sandboxFromFlags } from "./lib/cli/sandbox_flags.ts";
import { LAUNCHER_SUBCOMMAND } from "./lib/server/sandbox/landlock_exec.ts";

/** Exit code for bad command lines. */
const USAGE_EXIT = 2;

function fail(message: string, code = USAGE_EXIT): never {
  console.error(`error: ${message}`);
  Deno.exit(code);
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** The flags that belong to one `--ws-auth` mode. */
const MODE_FLAGS = {
  "capability-token": ["ws-token-file", "ws-token-sha256"],
  "signed-bearer-token": [
    "ws-shared-secret-file",
    "ws-issuer",
    "ws-audience",
    "ws-max-clock-skew-seconds",
  ],
} as const;

/** An issuer or audience flag, trimmed; empty means not configured (as the reference). */
function claimFlag(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === "" ? undefined : trimmed;
}

async function authFromFlags(
  flags: ServerFlags,
): Promise<((request: Request) => Promise<AuthResult>) | undefined> {
  const mode = flags["ws-auth"];
  for (const [owner, names] of Object.entries(MODE_FLAGS)) {
    const given = names.filter((name) => flags[name] !== undefined);
    if (given.length > 0 && mode !== owner) {
      fail(
        `${given.map((name) => `--${name}`).join(", ")} ${
          given.length === 1 ? "needs" : "need"
        } --ws-auth ${owner}`,
      );
    }
  }
  try {
    // The authentication modules load only for the mode in use.
    if (mode === "signed-bearer-token") {
      const path = flags["ws-shared-secret-file"];
      if (path === undefined) fail("--ws-auth signed-bearer-token needs --ws-shared-secret-file");
      const { readSharedSecret, signedBearerAuth } = await import(
        "./lib/server/listen/signed_bearer.ts"
      );
      return signedBearerAuth({
        secret: await readSharedSecret(path),
        issuer: claimFlag(flags["ws-issuer"]),
        audience: claimFlag(flags["ws-audience"]),
        maxClockSkewSeconds: flags["ws-max-clock-skew-seconds"],
      });
    }
    if (mode === "capability-token") {
      if (Boolean(flags["ws-token-file"]) === Boolean(flags["ws-token-sha256"])) {
        fail(
          "--ws-auth capability-token needs exactly one of --ws-token-file and --ws-token-sha256",
        );
      }
      const { capabilityTokenAuth, tokenFileDigest } = await import("./lib/server/listen/auth.ts");
      return capabilityTokenAuth(
        flags["ws-token-sha256"] ?? await tokenFileDigest(flags["ws-token-file"]!),
      );
    }
    return undefined;
  } catch (err) {
    fail((err as Error).message);
  }
}

/**
 * The web console's own credential from `--console-token-file` (read once, like
 * `--ws-token-file`), or `undefined`; `--console-can-terminate` needs it.
 */
async function consoleAuthFromFlags(
  flags: ServerFlags,
): Promise<((request: Request) => Promise<AuthResult>) | undefined> {
  const path = flags["console-token-file"];
  if (path === undefined) {
    if (flags["console-can-terminate"]) fail("--console-can-terminate needs --console-token-file");
    return undefined;
  }
  try {
    const { capabilityTokenAuth, tokenFileDigest } = await import("./lib/server/listen/auth.ts");
    return capabilityTokenAuth(await tokenFileDigest(path));
  } catch (err) {
    fail((err as Error).message);
  }
}

/**
 * `exec-server mcp`, with the MCP SDK, through a specifier `deno run` does not see: it fetches
 * and resolves every literal `import()` of the graph before the first line runs, and the SDK's
 * npm packages cost every server start about 15 ms of that. Loaded this way the module needs
 * read access to this directory under `deno run` (a binary carries it: compile.sh's
 * `--include`).
 */
async function loadMcpCommand(): Promise<typeof import("./lib/cli/mcp_command.ts")> {
  const module = new URL("./lib/cli/mcp_command.ts", import.meta.url);
  const local = module.protocol === "file:";
  if (local && Deno.permissions.querySync({ name: "read", path: module }).state !== "granted") {
    fail(
      `exec-server mcp loads its modules when it starts: start it with --allow-read=${
        new URL("./", import.meta.url).pathname
      }`,
    );
  }
  return await import(module.href);
}

async function main(args: string[]): Promise<void> {
  if (args[0] === LAUNCHER_SUBCOMMAND) {
    // A compiled binary as the Landlock layer's launcher (lib/server/sandbox/landlock_exec.ts).
    const { landlockExecMain } = await import("./lib/server/sandbox/landlock_exec.ts");
    landlockExecMain(args.slice(1));
  }
  if (args[0] === "run") {
    // Loaded on demand: the client is not part of the server's start-up path.
    const { runCommand } = await import("./lib/cli/run_command.ts");
    Deno.exit(await runCommand(args.slice(1)));
  }
  if (args[0] === "mcp") {
    const { mcpCommand } = await loadMcpCommand();
    Deno.exit(await mcpCommand(args.slice(1)));
  }
  let flags: ServerFlags;
  try {
    flags = parseServerFlags(args);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    fail(err.message);
  }
  if (flags.help) {
    console.log(serverHelp());
    return;
  }
  if (flags.version) {
    console.log(`exec-server ${VERSION}`);
    return;
  }
  const listen = flags.listen;
  setLogLevel(flags["log-level"]);
  setLogFormat(flags["log-format"]);
  const raceWarning = scopeRaceWarning();
  if (raceWarning) log("warn", raceWarning);
  setServerSandbox(sandboxFromFlags(flags, secretFiles(flags), fail));
  setProcessNamespaces(flags["process-namespace"]);
  const authorize = await authFromFlags(flags);
  const consoleAuthorize = await consoleAuthFromFlags(flags);
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
    concurrentRequests: flags["concurrent-requests"],
    ttlMs: flags["session-ttl"] * 1000,
    processRetentionMs: flags["process-retention"] * 1000,
    maxProcesses: flags["max-processes"],
    maxMessageBytes: flags["max-message-bytes"],
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
        consoleAuthorize,
        consoleCanTerminate: flags["console-can-terminate"],
        tls,
        allowedOrigins: flags["allow-origin"],
        maxConnections: flags["max-connections"],
      });
    } catch (err) {
      const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
      fail(`cannot listen on ws://${host}:${listen.port}: ${(err as Error).message}`, 1);
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
