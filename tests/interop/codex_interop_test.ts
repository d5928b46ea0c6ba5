/**
 * Interop: the real Codex CLI runs its commands through our exec-server.
 *
 * Each case starts `codex exec` with `CODEX_EXEC_SERVER_URL` pointing (through a logging proxy)
 * at the exec-server under test, which is then Codex's only environment. A mock Responses API
 * makes the model call `exec_command` (and, for the stdin case, `write_stdin`). The command computes a product of two random numbers
 * (a value that appears nowhere in its text) and prints `INTEROP_SECRET`, a variable that only
 * the exec-server's environment has; the test finds both in the tool output Codex reported back
 * to the model, so the command ran on the server and its output travelled over the protocol.
 *
 * Environment:
 * - `CODEX_BIN`: the Codex CLI (default: this machine's 0.171.0 install; skipped when absent).
 * - `EXEC_SERVER_CMD`: a simple shell command that, given `--listen ws://127.0.0.1:0`, prints
 *   its URL as the first stdout line (default: `deno run --allow-all <repo>/main.ts`). Point it
 *   at `<codex> exec-server` to check the harness against the reference.
 * - `INTEROP_WORK_DIR`: where temporary `CODEX_HOME`s and workspaces go (default:
 *   `$HOME/.cache/exec-server-interop`; Codex must not run from /tmp).
 * - `INTEROP_KEEP=1`: keep that directory for inspection.
 * - `INTEROP_SANDBOX=1` / `0`: force / skip the `workspace-write` case (default: run it when the
 *   server accepts a sandboxed `process/start`).
 * - `INTEROP_STRACE=0`: do not run Codex under `strace` (default: when strace works, every
 *   `connect()` Codex makes is checked to stay on loopback).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  CODEX_CONFIG_TOML,
  type CodexExecResult,
  defaultExecServerCommand,
  type ExecServer,
  findCodexBin,
  foreignConnects,
  runCodexExec,
  startExecServer,
  straceWorks,
  summarizeMethods,
} from "./harness.ts";
import { startMockModel, type ToolCall } from "./mock_model.ts";
import { type OutboundGuard, startOutboundGuard } from "./outbound_guard.ts";
import { probeSandboxedStart } from "./sandbox_probe.ts";
import { type LoggedMessage, startWsProxy } from "./ws_proxy.ts";
import { MOCK_MCP_TOOL, type MockMcp, startMockMcp } from "./mock_mcp.ts";

const TEST_NAME = "codex runs its commands through exec-server";
const FIVE_MIB = 5 * 1024 * 1024;
/** docs/protocol.md §3: the filesystem "not found" error, which Codex expects for absent AGENTS.md, .git… */
const NOT_FOUND = -32004;

/** Everything the cases share: one exec-server, one outbound guard, one work directory. */
interface Context {
  codexBin: string;
  server: ExecServer;
  guard: OutboundGuard;
  /** The HTTP MCP server named in the exec-server's own Codex config. */
  mcp: MockMcp;
  workRoot: string;
  secret: string;
  summaries: string[];
  /** The capability flags the server advertised in its first `initialize` result. */
  capabilities?: string;
  /** Whether Codex runs under strace so that every `connect()` it makes is checked. */
  traceConnects: boolean;
}

/** What a case asks the model to run. */
interface CaseSpec {
  /** Short label for the summary. */
  label: string;
  sandbox: "read-only" | "workspace-write" | "danger-full-access";
  /** Extra `exec_command` arguments besides `cmd`. */
  extraArguments?: Record<string, unknown>;
  /**
   * Where the command gets its two numbers: spelled out in its text, or read from stdin, which
   * the model then sends with a second tool call (`write_stdin`).
   * @default {"inline"}
   */
  operands?: "inline" | "stdin";
  /** Builds the command from the shell snippet that defines `$x` and prints the markers. */
  command(prelude: string, paths: { workspace: string; outside: string }): string;
}

/** What a case observed. */
interface CaseResult {
  command: string;
  product: number;
  workspace: string;
  outside: string;
  run: CodexExecResult;
  /** Every `function_call_output` Codex sent to the model for the scripted calls, joined. */
  toolOutput: string;
  log: readonly LoggedMessage[];
  /** The `process/start` request Codex sent for the command. */
  start: Record<string, unknown>;
  /** The last Codex `command_execution` item that completed. */
  commandItem: Record<string, unknown> | undefined;
  /** Non-loopback addresses Codex tried to connect to (empty when not traced). */
  foreignConnects: string[];
  /** The tools Codex offered the model in its first request. */
  modelTools: { name?: string }[];
}

const codexBin = findCodexBin();

if (codexBin === undefined) {
  Deno.test({
    name: `${TEST_NAME} (skipped: Codex CLI not installed; set CODEX_BIN)`,
    ignore: true,
    fn() {},
  });
} else {
  Deno.test(TEST_NAME, async (t) => {
    const ctx = await setUp(codexBin);
    try {
      let plain: CaseResult | undefined;
      await t.step("codex runs a plain command through exec-server", async () => {
        plain = await runCase(ctx, {
          label: "plain",
          sandbox: "danger-full-access",
          command: (prelude) => prelude,
        });
        assertRanOnServer(ctx, plain, { exitCode: 0, checkAncestry: true });
        assert.equal(plain.start.tty, false);
      });

      await t.step(
        "codex adds the HTTP MCP server of the exec-server's own config, reached through http/request",
        () => {
          assert.ok(plain !== undefined, "the plain case ran");
          // Codex read `mcp_servers` from the executor (environmentConfig/read) ...
          const read = plain.log.find((entry) =>
            entry.direction === "server" && entry.kind === "response" &&
            entry.method === "environmentConfig/read"
          );
          const layers = (read?.payload as { config?: { layers?: { toml: string }[] } })?.config
            ?.layers ?? [];
          assert.deepEqual(layers.map((layer) => layer.toml), [
            `[mcp_servers.executor_docs]\nurl = "${ctx.mcp.url}"\n`,
          ]);
          // ... spoke MCP to the server it names through the executor's http/request ...
          assert.ok(
            plain.log.some((entry) => entry.kind === "response" && entry.method === "http/request"),
            "Codex sent the MCP traffic as http/request",
          );
          assert.ok(ctx.mcp.methods.includes("initialize"), `MCP methods: ${ctx.mcp.methods}`);
          assert.ok(ctx.mcp.methods.includes("tools/list"), `MCP methods: ${ctx.mcp.methods}`);
          // ... and offered the model that server's tool (in the server's tool namespace).
          const offered = plain.modelTools.find((tool) => tool.name === "mcp__executor_docs");
          assert.ok(
            JSON.stringify(offered ?? null).includes(MOCK_MCP_TOOL),
            `tools offered to the model: ${plain.modelTools.map((tool) => tool.name).join(", ")}`,
          );
        },
      );

      await t.step("codex runs a tty command through exec-server", async () => {
        const result = await runCase(ctx, {
          label: "tty",
          sandbox: "danger-full-access",
          extraArguments: { tty: true },
          command: (prelude) =>
            `${prelude}\nif [ -t 1 ]; then echo "INTEROP_TTY=yes"; else echo "INTEROP_TTY=no"; fi`,
        });
        assertRanOnServer(ctx, result, { exitCode: 0, checkAncestry: true });
        assert.equal(result.start.tty, true, "Codex asked for a pty");
        assert.match(result.toolOutput, /INTEROP_TTY=yes/);
        const streams = outputChunks(result.log, processId(result)).map((chunk) => chunk.stream);
        assert.ok(streams.length > 0 && streams.every((s) => s === "pty"), `streams: ${streams}`);
      });

      await t.step("codex writes to a tty command's stdin through exec-server", async () => {
        const result = await runCase(ctx, {
          label: "tty stdin",
          sandbox: "danger-full-access",
          operands: "stdin",
          extraArguments: { tty: true },
          command: (prelude) => prelude,
        });
        assertRanOnServer(ctx, result, { exitCode: 0, checkAncestry: true });
        const writes = result.log.filter((entry) =>
          entry.direction === "client" && entry.method === "process/write"
        );
        assert.ok(writes.length > 0, "Codex used process/write");
      });

      await t.step("codex receives 5 MiB of command output through exec-server", async () => {
        const result = await runCase(ctx, {
          label: "5 MiB",
          sandbox: "danger-full-access",
          command: (prelude) =>
            `${prelude}\nhead -c ${FIVE_MIB} /dev/zero | tr '\\0' 'x'\necho\n` +
            `echo "INTEROP_TAIL_$x"`,
        });
        assertRanOnServer(ctx, result, { exitCode: 0, checkAncestry: true });
        const bytes = outputChunks(result.log, processId(result))
          .reduce((total, chunk) => total + chunk.bytes, 0);
        assert.ok(bytes > FIVE_MIB, `Codex received ${bytes} bytes of output, expected > 5 MiB`);
        assert.ok(
          result.toolOutput.includes(`INTEROP_TAIL_${result.product}`),
          "the end of the output reached the model",
        );
      });

      await t.step("codex sees the exit code of a failing command", async () => {
        const result = await runCase(ctx, {
          label: "failing",
          sandbox: "danger-full-access",
          command: (prelude) => `${prelude}\nexit 37`,
        });
        assertRanOnServer(ctx, result, { exitCode: 37, checkAncestry: true });
        assert.match(result.toolOutput, /\b37\b/);
      });

      const refusal = await sandboxRefusal(ctx);
      await t.step({
        name: "codex runs a workspace-write sandboxed command through exec-server" +
          (refusal === undefined ? "" : ` (skipped: ${refusal})`),
        ignore: refusal !== undefined,
        fn: async () => {
          const result = await runCase(ctx, {
            label: "workspace-write",
            sandbox: "workspace-write",
            command: (prelude, paths) =>
              `${prelude}\necho "$x" > interop_marker.txt\n` +
              `if echo escaped > '${paths.outside}/escape.txt' 2>/dev/null; ` +
              `then echo INTEROP_OUTSIDE=written; else echo INTEROP_OUTSIDE=denied; fi`,
          });
          assertRanOnServer(ctx, result, { exitCode: 0, checkAncestry: false });
          assert.ok(result.start.sandbox, "Codex sent a sandbox with process/start");
          const marker = await Deno.readTextFile(`${result.workspace}/interop_marker.txt`);
          assert.equal(marker.trim(), String(result.product), "the workspace is writable");
          assert.match(result.toolOutput, /INTEROP_OUTSIDE=denied/);
          assert.equal(await exists(`${result.outside}/escape.txt`), false);
        },
      });
    } finally {
      console.log(
        `\nOutbound checks: proxy trap${ctx.traceConnects ? " + strace connect() log" : " only"}`,
      );
      console.log(`Capabilities advertised as true: ${ctx.capabilities ?? "(none seen)"}`);
      console.log(`Methods Codex used, per case (← = sent by the server):`);
      for (const line of ctx.summaries) console.log(`  ${line}`);
      await tearDown(ctx);
    }
  });
}

/**
 * Why the sandbox case does not apply, or `undefined` when it does. `INTEROP_SANDBOX=1` forces
 * the case, `INTEROP_SANDBOX=0` skips it; otherwise the server is asked directly.
 */
async function sandboxRefusal(ctx: Context): Promise<string | undefined> {
  const setting = Deno.env.get("INTEROP_SANDBOX");
  if (setting === "1") return undefined;
  if (setting === "0") return "INTEROP_SANDBOX=0";
  const probeDir = await Deno.makeTempDir({ dir: ctx.workRoot, prefix: "probe-" });
  const refusal = await probeSandboxedStart(ctx.server.url, probeDir);
  return refusal === undefined ? undefined : `the server refuses sandboxes: ${refusal}`;
}

/** Starts the exec-server under test and the outbound guard; makes the work directory. */
async function setUp(codexBinPath: string): Promise<Context> {
  try {
    await Deno.stat(codexBinPath);
  } catch (error) {
    throw new Error(`Cannot run Codex: "${codexBinPath}" does not exist (check CODEX_BIN)`, {
      cause: error,
    });
  }
  const home = Deno.env.get("HOME") ?? "/root";
  const workBase = Deno.env.get("INTEROP_WORK_DIR") ?? `${home}/.cache/exec-server-interop`;
  await Deno.mkdir(workBase, { recursive: true });
  const workRoot = await Deno.makeTempDir({ dir: workBase, prefix: "run-" });
  const secret = `secret-${crypto.randomUUID()}`;
  const serverHome = `${workRoot}/server-home`;
  await Deno.mkdir(serverHome);
  const mcp = startMockMcp();
  await Deno.writeTextFile(
    `${serverHome}/config.toml`,
    `[mcp_servers.executor_docs]\nurl = "${mcp.url}"\n`,
  );
  const command = Deno.env.get("EXEC_SERVER_CMD") ?? defaultExecServerCommand();
  const server = await startExecServer(command, {
    env: { INTEROP_SECRET: secret, CODEX_HOME: serverHome, DENO_NO_UPDATE_CHECK: "1" },
  });
  const guard = startOutboundGuard();
  const traceConnects = Deno.env.get("INTEROP_STRACE") !== "0" && await straceWorks();
  return {
    codexBin: codexBinPath,
    server,
    guard,
    mcp,
    workRoot,
    secret,
    summaries: [],
    traceConnects,
  };
}

async function tearDown(ctx: Context): Promise<void> {
  await ctx.guard.close();
  await ctx.server.close();
  await ctx.mcp[Symbol.asyncDispose]();
  if (Deno.env.get("INTEROP_KEEP") === "1") {
    console.log(`Kept ${ctx.workRoot}`);
  } else {
    await Deno.remove(ctx.workRoot, { recursive: true });
  }
}

/** Runs one `codex exec` turn whose tool call runs `spec.command(...)` on the server. */
async function runCase(ctx: Context, spec: CaseSpec): Promise<CaseResult> {
  const a = 10_000 + Math.floor(Math.random() * 90_000);
  const b = 10_000 + Math.floor(Math.random() * 90_000);
  const product = a * b;
  const caseDir = await Deno.makeTempDir({ dir: ctx.workRoot, prefix: "case-" });
  const codexHome = `${caseDir}/codex-home`;
  const workspace = `${caseDir}/workspace`;
  const outside = `${caseDir}/outside`;
  for (const dir of [codexHome, workspace, outside]) await Deno.mkdir(dir);
  await Deno.writeTextFile(`${codexHome}/config.toml`, CODEX_CONFIG_TOML);

  const fromStdin = spec.operands === "stdin";
  const prelude = [
    fromStdin ? `read -r a b\nx=$(( a * b ))` : `x=$(( ${a} * ${b} ))`,
    `echo "INTEROP_RESULT_$x"`,
    `echo "INTEROP_SECRET=\${INTEROP_SECRET:-unset}"`,
    `chain=""; p=$$`,
    `while [ "$p" -gt 1 ] && [ -r /proc/$p/stat ]; do chain="$chain $p"; ` +
    `p=$(sed 's/^.*) //' /proc/$p/stat | cut -d' ' -f2); done`,
    `echo "INTEROP_PIDS:$chain "`,
  ].join("\n");
  const command = spec.command(prelude, { workspace, outside });
  assert.ok(!command.includes(String(product)), "the product must not appear in the command");

  const toolCalls: ToolCall[] = [{
    arguments: {
      cmd: command,
      "yield_time_ms": fromStdin ? 1000 : 10_000,
      ...spec.extraArguments,
    },
  }];
  if (fromStdin) {
    toolCalls.push({
      name: "write_stdin",
      arguments: (previous) => ({
        "session_id": Number(previous[0]?.match(/session ID (\d+)/)?.[1]),
        chars: `${a} ${b}\n`,
        "yield_time_ms": 10_000,
      }),
    });
  }
  await using model = startMockModel({ toolCalls });
  await using proxy = startWsProxy(ctx.server.url);
  const run = await runCodexExec("Run the interop command.", {
    codexBin: ctx.codexBin,
    codexHome,
    workspace,
    execServerUrl: proxy.url,
    modelBaseUrl: model.baseUrl,
    sandbox: spec.sandbox,
    env: ctx.guard.proxyEnv(),
    connectTrace: ctx.traceConnects ? `${caseDir}/connect.trace` : undefined,
  });
  const foreign = ctx.traceConnects
    ? foreignConnects(await Deno.readTextFile(`${caseDir}/connect.trace`))
    : [];

  const errors = proxy.log.filter((entry) => entry.kind === "error")
    .map((entry) => `${entry.method} ${entry.error?.code}`);
  await Deno.writeTextFile(`${caseDir}/protocol_log.json`, JSON.stringify(compactLog(proxy.log)));
  if (ctx.capabilities === undefined) ctx.capabilities = advertisedCapabilities(proxy.log);
  ctx.summaries.push(
    `${spec.label}: ${summarizeMethods(proxy.log)}` +
      (errors.length > 0 ? ` [errors: ${summarizeErrors(errors)}]` : ""),
  );

  const diagnostics = () =>
    `codex exit ${run.code}${run.timedOut ? " (killed by the hang guard)" : ""}\n` +
    `codex stderr:\n${run.stderr}\nexec-server stderr:\n${ctx.server.stderr()}\n` +
    `methods: ${summarizeMethods(proxy.log)}\nerrors: ${errors.join(", ")}`;
  assert.equal(run.code, 0, diagnostics());
  const start = proxy.log.find((entry) =>
    entry.direction === "client" && entry.kind === "request" && entry.method === "process/start"
  )?.payload as Record<string, unknown> | undefined;
  assert.ok(start, `Codex never sent process/start\n${diagnostics()}`);

  const commandItem = run.events
    .filter((event) => event.type === "item.completed")
    .map((event) => event.item as Record<string, unknown>)
    .findLast((item) => item?.type === "command_execution");
  return {
    command,
    product,
    workspace,
    outside,
    run,
    toolOutput: model.toolOutputs().join("\n"),
    log: [...proxy.log],
    start,
    commandItem,
    foreignConnects: foreign,
    modelTools: (model.requests[0]?.body as { tools?: { name?: string }[] })?.tools ?? [],
  };
}

/**
 * The proof: the command Codex asked for ran on the server under test and its output, exit
 * code and lifecycle events came back through the protocol.
 */
function assertRanOnServer(
  ctx: Context,
  result: CaseResult,
  expected: { exitCode: number; checkAncestry: boolean },
): void {
  const { log, start, toolOutput } = result;
  const argv = start.argv as string[];
  assert.equal(argv.at(-1), result.command, "process/start carries the command");
  assert.ok(!JSON.stringify(start).includes(ctx.secret), "Codex never saw the secret");

  assert.ok(
    toolOutput.includes(`INTEROP_RESULT_${result.product}`),
    `the tool output carries the computed product:\n${toolOutput.slice(0, 2000)}`,
  );
  assert.ok(
    toolOutput.includes(`INTEROP_SECRET=${ctx.secret}`),
    `the command saw the server's environment:\n${toolOutput.slice(0, 2000)}`,
  );
  if (expected.checkAncestry) {
    const pids = toolOutput.match(/INTEROP_PIDS:([\d ]*)/)?.[1]?.trim().split(/\s+/) ?? [];
    assert.ok(
      pids.includes(String(ctx.server.pid)),
      `the command descends from the exec-server (pid ${ctx.server.pid}): ${pids.join(" ")}`,
    );
  }

  const id = processId(result);
  const startReply = log.find((entry) =>
    entry.direction === "server" && entry.method === "process/start" &&
    (entry.kind === "response" || entry.kind === "error")
  );
  assert.equal(startReply?.kind, "response", `process/start failed: ${startReply?.error?.message}`);
  const events = log.filter((entry) =>
    entry.direction === "server" && (entry.payload as { processId?: unknown })?.processId === id
  );
  const readUsed = log.some((entry) =>
    entry.direction === "client" && entry.method === "process/read"
  );
  assert.ok(
    readUsed || events.some((entry) => entry.method === "process/output"),
    "output came back as process/output or through process/read",
  );
  const exited = events.find((entry) => entry.method === "process/exited");
  assert.ok(exited || readUsed, "the server pushed process/exited");
  if (exited) {
    const params = exited.payload as { exitCode: number; sandboxDenied?: unknown };
    assert.equal(params.exitCode, expected.exitCode);
    assert.equal(typeof params.sandboxDenied, "boolean", "process/exited carries sandboxDenied");
  }
  assert.ok(
    events.some((entry) => entry.method === "process/closed") || readUsed,
    "the server pushed process/closed",
  );
  assert.equal(result.commandItem?.exit_code, expected.exitCode, "Codex saw the exit code");

  // Codex only calls a gated method when the matching capability flag is true, so a failing
  // call means a flag promised something the server does not do. Lookups of missing files
  // (AGENTS.md, .git, skills) are the only errors Codex expects.
  const unexpected = log.filter((entry) =>
    entry.kind === "error" &&
    !(entry.method === "fs/getMetadata" && entry.error?.code === NOT_FOUND)
  ).map((entry) => `${entry.method}: ${entry.error?.code} ${entry.error?.message}`);
  assert.deepEqual(unexpected, [], "every request Codex made succeeded");
  assert.deepEqual(ctx.guard.attempts, [], "Codex tried to reach the internet");
  assert.deepEqual(result.foreignConnects, [], "Codex connected outside 127.0.0.1");
}

/** The proxy log with output chunks replaced by their size, for `INTEROP_KEEP=1` inspection. */
function compactLog(log: readonly LoggedMessage[]): unknown[] {
  return log.map((entry) => {
    const payload = entry.payload as { chunk?: unknown; chunks?: unknown[] } | undefined;
    if (typeof payload?.chunk === "string") {
      return { ...entry, payload: { ...payload, chunk: `<${base64Length(payload.chunk)} bytes>` } };
    }
    if (Array.isArray(payload?.chunks)) {
      return { ...entry, payload: { ...payload, chunks: `<${payload.chunks.length} chunks>` } };
    }
    return entry;
  });
}

/** The names of the capability flags that are true in the `initialize` result. */
function advertisedCapabilities(log: readonly LoggedMessage[]): string {
  const result = log.find((entry) => entry.kind === "response" && entry.method === "initialize")
    ?.payload as { environmentInfo?: { capabilities?: Record<string, unknown> } } | undefined;
  const flags = result?.environmentInfo?.capabilities ?? {};
  return Object.keys(flags).filter((name) => flags[name] === true).join(", ") || "(none)";
}

/** The exec-server process id Codex chose for the command. */
function processId(result: CaseResult): string {
  return result.start.processId as string;
}

/** One output chunk of a process, from a `process/output` push or a `process/read` reply. */
interface Chunk {
  seq: number;
  stream: string;
  bytes: number;
}

/** Every distinct output chunk (by seq) of process `id` that the server sent to Codex. */
function outputChunks(log: readonly LoggedMessage[], id: string): Chunk[] {
  const bySeq = new Map<number, Chunk>();
  function add(chunk: { seq: number; stream: string; chunk: string }): void {
    bySeq.set(chunk.seq, {
      seq: chunk.seq,
      stream: chunk.stream,
      bytes: base64Length(chunk.chunk),
    });
  }
  const readIds = new Set(
    log.filter((entry) =>
      entry.direction === "client" && entry.method === "process/read" &&
      (entry.payload as { processId?: unknown })?.processId === id
    ).map((entry) => JSON.stringify(entry.id)),
  );
  for (const entry of log) {
    if (entry.direction !== "server") continue;
    const payload = entry.payload as Record<string, unknown> | undefined;
    if (entry.kind === "notification" && entry.method === "process/output") {
      if (payload?.processId === id) add(payload as unknown as Parameters<typeof add>[0]);
    } else if (entry.kind === "response" && entry.method === "process/read") {
      if (!readIds.has(JSON.stringify(entry.id))) continue;
      for (const chunk of (payload?.chunks ?? []) as Parameters<typeof add>[0][]) add(chunk);
    }
  }
  return [...bySeq.values()].sort((left, right) => left.seq - right.seq);
}

/** The number of bytes a padded base64 string decodes to. */
function base64Length(text: string): number {
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

function summarizeErrors(errors: string[]): string {
  const counts = new Map<string, number>();
  for (const error of errors) counts.set(error, (counts.get(error) ?? 0) + 1);
  return [...counts].map(([error, count]) => count === 1 ? error : `${error}×${count}`).join(", ");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
