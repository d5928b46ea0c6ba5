#!/usr/bin/env -S deno run --allow-run --allow-read --allow-write --allow-net --allow-env --allow-sys --allow-ffi
/**
 * The `exec-server` command line.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { VERSION } from "./lib/server/environment.ts";
import { type RunningServer, serveStdio, serveWebSocket } from "./lib/server/listen.ts";

const HELP = `exec-server ${VERSION}: run processes, files and HTTP for a remote client (Codex exec-server protocol)

Usage:
  exec-server [--listen ws://IP:PORT | stdio] [options]

Options:
  --listen URL                 stdio, stdio:// or ws://IP:PORT (default ws://127.0.0.1:0)
  --concurrent-requests N      requests run at once per connection after initialized (default 1)
  --session-ttl SECONDS        how long a detached session waits for a resume (default 80)
  --process-retention SECONDS  how long a closed process stays readable (default 80)
  --max-message-bytes N        largest inbound message (default 67108864)
  --exit-on-stdin-close        in WebSocket mode, exit when stdin closes
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

function parseListen(value: string): { kind: "stdio" } | { kind: "ws"; host: string; port: number } {
  if (value === "stdio" || value === "stdio://") return { kind: "stdio" };
  const match = /^ws:\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(value);
  if (!match || Number(match[2]) > 65535) {
    fail(`unsupported --listen URL \`${value}\`; expected \`ws://IP:PORT\` or \`stdio\``);
  }
  return { kind: "ws", host: match[1]!.replace(/^\[|\]$/g, ""), port: Number(match[2]) };
}

async function main(args: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        listen: { type: "string", default: "ws://127.0.0.1:0" },
        "concurrent-requests": { type: "string" },
        "session-ttl": { type: "string" },
        "process-retention": { type: "string" },
        "max-message-bytes": { type: "string" },
        "exit-on-stdin-close": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
        version: { type: "boolean", short: "V", default: false },
      },
    });
  } catch (err) {
    fail((err as Error).message);
  }
  const flags = parsed.values;
  if (flags.help) {
    console.log(HELP);
    return;
  }
  if (flags.version) {
    console.log(`exec-server ${VERSION}`);
    return;
  }
  const listen = parseListen(flags.listen!);
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
      server = await serveWebSocket({ ...options, hostname: listen.host, port: listen.port });
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
