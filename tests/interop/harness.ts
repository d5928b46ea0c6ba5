/**
 * Plumbing for the Codex interop test: locating the Codex CLI, starting the exec-server under
 * test, and running `codex exec` against it with an isolated `CODEX_HOME`.
 *
 * @module
 */

import type { LoggedMessage } from "./ws_proxy.ts";

/**
 * Where `.ci/run` installs the Codex CLI 0.171.0 (`npm install --prefix ~/codex-ref`), used when
 * `CODEX_BIN` is not set.
 */
export const DEFAULT_CODEX_BIN = `${Deno.env.get("HOME") ?? ""}/codex-ref/node_modules/` +
  "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

/** The repository root (two levels above this file). */
export const REPO_ROOT: string = decodeURIComponent(new URL("../../", import.meta.url).pathname)
  .replace(/\/$/, "");

/**
 * The `config.toml` every Codex run gets. It turns off everything that would talk to the
 * internet (update checks, analytics, feedback, plugins, apps, remote model discovery, web
 * search, telemetry export), so the only traffic left goes to 127.0.0.1. Checked with
 * `--strict-config`, which rejects unknown keys.
 */
export const CODEX_CONFIG_TOML = `check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
tool_suggest = false
plugin_sharing = false
api_key_model_discovery = false

[otel]
exporter = "none"
`;

/** Options for {@linkcode findCodexBin}. */
export interface FindCodexBinOptions {
  /**
   * The value of `CODEX_BIN`.
   * @default {Deno.env.get("CODEX_BIN")}
   */
  codexBin?: string;
  /**
   * Where to look when `CODEX_BIN` is unset.
   * @default {DEFAULT_CODEX_BIN}
   */
  defaultPath?: string;
}

/**
 * Returns the Codex CLI to use: `$CODEX_BIN` when set (whether or not it exists, so that a
 * wrong setting fails loudly), else {@linkcode DEFAULT_CODEX_BIN} if that file exists.
 *
 * @param options Overrides for tests.
 * @returns The path, or `undefined` when no Codex CLI is installed.
 */
export function findCodexBin(options: FindCodexBinOptions = {}): string | undefined {
  const fromEnv = "codexBin" in options ? options.codexBin : Deno.env.get("CODEX_BIN");
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const fallback = options.defaultPath ?? DEFAULT_CODEX_BIN;
  try {
    return Deno.statSync(fallback).isFile ? fallback : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The shell command that starts our exec-server: `deno run --allow-all <repo>/main.ts`.
 *
 * @returns A command line for {@linkcode startExecServer}.
 */
export function defaultExecServerCommand(): string {
  return `${shellQuote(Deno.execPath())} run --allow-all ${shellQuote(`${REPO_ROOT}/main.ts`)}`;
}

/** Quotes `value` for a POSIX shell. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/** A running exec-server process. */
export interface ExecServer extends AsyncDisposable {
  /** The `ws://` URL it printed. */
  readonly url: string;
  /** The OS pid of the server (the shell `exec`s into it). */
  readonly pid: number;
  /** What the server wrote to stderr so far (at most 64 KiB, the oldest part dropped). */
  stderr(): string;
  /** Stops the server (SIGTERM, then SIGKILL) and waits for it to exit. */
  close(): Promise<void>;
}

/** Options for {@linkcode startExecServer}. */
export interface StartExecServerOptions {
  /** Extra environment variables for the server (added to this process's environment). */
  env?: Record<string, string>;
  /**
   * The server's working directory.
   * @default {REPO_ROOT}
   */
  cwd?: string;
  /**
   * How long to wait for the URL line before giving up.
   * @default {60000}
   */
  startTimeoutMs?: number;
}

/**
 * Starts `command --listen ws://127.0.0.1:0` through `sh -c 'exec …'` and waits for the URL
 * it prints as its first stdout line.
 *
 * @param command A simple shell command (words only, so that `exec` replaces the shell).
 * @param options Environment, working directory and start timeout.
 * @returns The running server.
 */
export async function startExecServer(
  command: string,
  options: StartExecServerOptions = {},
): Promise<ExecServer> {
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", `exec ${command} --listen ws://127.0.0.1:0`],
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? {},
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();

  let stderrText = "";
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      write(chunk) {
        stderrText = (stderrText + chunk).slice(-65536);
      },
    }),
  ).catch(() => {});

  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error("Timed out waiting for the exec-server URL")),
      options.startTimeoutMs ?? 60_000,
    );
  });
  async function firstLine(): Promise<string> {
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error("Exec-server exited before printing its URL");
      buffered += value;
    }
    return buffered.slice(0, buffered.indexOf("\n")).trim();
  }

  let url: string;
  try {
    url = await Promise.race([firstLine(), timeout]);
    if (!url.startsWith("ws://")) throw new Error(`Exec-server printed "${url}" instead of a URL`);
  } catch (error) {
    clearTimeout(timer);
    await stop();
    await stderrDone;
    throw new Error(`Cannot start exec-server "${command}": ${stderrText.trim()}`, {
      cause: error,
    });
  }
  clearTimeout(timer);
  // Keep draining stdout so the server never blocks on a full pipe.
  const stdoutDone = (async () => {
    while (!(await lines.read()).done) { /* discard */ }
  })().catch(() => {});

  async function stop(): Promise<void> {
    try {
      child.kill("SIGTERM");
    } catch {
      // Already gone.
    }
    const killer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }, 5000);
    await child.status;
    clearTimeout(killer);
  }

  async function close(): Promise<void> {
    await stop();
    await stdoutDone;
    await stderrDone;
  }

  return {
    url,
    pid: child.pid,
    stderr: () => stderrText,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Options for {@linkcode runCodexExec}. */
export interface RunCodexExecOptions {
  /** The Codex CLI. */
  codexBin: string;
  /** A `CODEX_HOME` outside /tmp holding {@linkcode CODEX_CONFIG_TOML}. */
  codexHome: string;
  /** The workspace Codex runs in (passed as `-C`). */
  workspace: string;
  /**
   * The exec-server URL handed to Codex as `CODEX_EXEC_SERVER_URL`. Omitted, the variable is not
   * set: Codex then takes its environments from `environments.toml` in `codexHome`, if any.
   */
  execServerUrl?: string;
  /** The mock model's `base_url`. */
  modelBaseUrl: string;
  /** Codex's `--sandbox` mode. */
  sandbox: "read-only" | "workspace-write" | "danger-full-access";
  /** Extra environment for Codex (e.g. the outbound guard's proxy variables). */
  env?: Record<string, string>;
  /**
   * When set, Codex runs under `strace -f -e trace=connect` writing to this file, so
   * {@linkcode foreignConnects} can list every socket address Codex tried to reach.
   */
  connectTrace?: string;
  /**
   * Kill Codex after this long (a hang guard, not an assertion).
   * @default {180000}
   */
  timeoutMs?: number;
}

/** The outcome of one `codex exec --json` run. */
export interface CodexExecResult {
  /** Codex's exit code. */
  code: number;
  /** The JSONL events Codex printed on stdout. */
  events: Record<string, unknown>[];
  /** Codex's stderr. */
  stderr: string;
  /** True when the hang guard killed Codex. */
  timedOut: boolean;
}

/**
 * Runs `codex exec --json` once with a clean environment: Codex sees only `PATH`, `HOME`,
 * `LANG`, `CODEX_HOME`, `MOCK_KEY`, `CODEX_EXEC_SERVER_URL` (when given) and `options.env`.
 *
 * @param prompt The user prompt (the mock model ignores it).
 * @param options Where Codex runs and what it talks to.
 * @returns Exit code, events and stderr.
 */
export async function runCodexExec(
  prompt: string,
  options: RunCodexExecOptions,
): Promise<CodexExecResult> {
  const provider = `{name="mock",base_url="${options.modelBaseUrl}",env_key="MOCK_KEY",` +
    `wire_api="responses"}`;
  const args = [
    "exec",
    "--json",
    "--strict-config",
    "--skip-git-repo-check",
    "-C",
    options.workspace,
    "-s",
    options.sandbox,
    "-c",
    'approval_policy="never"',
    "-m",
    "mock-model",
    "-c",
    "model_provider=mock",
    "-c",
    `model_providers.mock=${provider}`,
    prompt,
  ];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 180_000);
  try {
    const traced = options.connectTrace !== undefined;
    const strace = ["-f", "-qq", "-e", "trace=connect", "-o", options.connectTrace ?? ""];
    const output = await new Deno.Command(traced ? "strace" : options.codexBin, {
      args: traced ? [...strace, options.codexBin, ...args] : args,
      cwd: options.workspace,
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
        HOME: Deno.env.get("HOME") ?? "/root",
        LANG: "C.UTF-8",
        CODEX_HOME: options.codexHome,
        MOCK_KEY: "dummy",
        ...(options.execServerUrl === undefined
          ? {}
          : { CODEX_EXEC_SERVER_URL: options.execServerUrl }),
        ...options.env,
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: controller.signal,
    }).output();
    const stdout = new TextDecoder().decode(output.stdout);
    const events = stdout.split("\n").filter((line) => line.trim() !== "").map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return { type: "unparsable", line };
      }
    });
    return {
      code: output.code,
      events,
      stderr: new TextDecoder().decode(output.stderr),
      timedOut: controller.signal.aborted,
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Tells whether `strace` can trace a child here (it is optional, and ptrace may be forbidden).
 *
 * @returns True when `strace -f -e trace=connect true` works.
 */
export async function straceWorks(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command("strace", {
      args: ["-f", "-qq", "-e", "trace=connect", "-o", "/dev/null", "true"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
    return success;
  } catch {
    return false;
  }
}

/**
 * Lists the `connect()` calls in an strace log that target anything but loopback: IPv4/IPv6
 * sockets whose address is outside 127.0.0.0/8 and `::1` (DNS lookups included).
 *
 * @param traceText The strace output written through `connectTrace`.
 * @returns The offending addresses as `address:port`, in order.
 */
export function foreignConnects(traceText: string): string[] {
  const found: string[] = [];
  for (const line of traceText.split("\n")) {
    if (!line.includes("connect(")) continue;
    const v4 = line.match(/sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)/);
    if (v4) {
      if (!v4[2]!.startsWith("127.")) found.push(`${v4[2]}:${v4[1]}`);
      continue;
    }
    const v6 = line.match(/sin6_port=htons\((\d+)\).*inet_pton\(AF_INET6, "([^"]+)"/);
    if (v6) {
      const address = v6[2]!;
      const loopback = address === "::1" || /^::ffff:127\./.test(address);
      if (!loopback) found.push(`[${address}]:${v6[1]}`);
    }
  }
  return found;
}

/**
 * Summarises which methods a client used, in first-use order, with counts:
 * `initialize, initialized, fs/getMetadata×13, process/start, …`.
 *
 * @param log The proxy log of one run.
 * @returns One line.
 */
export function summarizeMethods(log: readonly LoggedMessage[]): string {
  const counts = new Map<string, number>();
  for (const entry of log) {
    if (entry.method === undefined) continue;
    if (entry.kind === "response" || entry.kind === "error") continue;
    const arrow = entry.direction === "client" ? "" : "← ";
    const key = `${arrow}${entry.method}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([method, count]) => count === 1 ? method : `${method}×${count}`)
    .join(", ");
}
