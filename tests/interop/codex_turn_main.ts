/**
 * One `codex exec` turn (mock model) as a program, for tests whose Codex must run somewhere the
 * test process is not, e.g. in the network namespace of a throwaway machine:
 *
 *     deno run -A tests/interop/codex_turn_main.ts ENVIRONMENTS_TOML CODEX_HOME WORKSPACE CMD
 *
 * Codex gets `CODEX_HOME` (created, with the harness's `config.toml` and a copy of
 * `ENVIRONMENTS_TOML`), works in `WORKSPACE` with `danger-full-access`, and the mock model makes
 * it run `CMD` once through `exec_command`. Prints one JSON line: Codex's exit code and stderr, the
 * tool output the model received, the exit code Codex reported for the command.
 *
 * @module
 */

import { CODEX_CONFIG_TOML, findCodexBin, runCodexExec } from "./harness.ts";
import { startMockModel } from "./mock_model.ts";

/** What {@linkcode codexTurn} prints. */
export interface CodexTurnReport {
  code: number;
  stderr: string;
  toolOutput: string;
  exitCode: unknown;
}

/** Runs the turn; see the module documentation. */
export async function codexTurn(
  environmentsToml: string,
  codexHome: string,
  workspace: string,
  command: string,
): Promise<CodexTurnReport> {
  const codexBin = findCodexBin();
  if (codexBin === undefined) throw new Error("Codex CLI not installed; set CODEX_BIN");
  await Deno.mkdir(codexHome, { recursive: true });
  await Deno.writeTextFile(`${codexHome}/config.toml`, CODEX_CONFIG_TOML);
  await Deno.copyFile(environmentsToml, `${codexHome}/environments.toml`);
  await using model = startMockModel({
    toolCalls: [{ arguments: { cmd: command, "yield_time_ms": 10_000 } }],
  });
  const run = await runCodexExec("Run the command.", {
    codexBin,
    codexHome,
    workspace,
    modelBaseUrl: model.baseUrl,
    sandbox: "danger-full-access",
  });
  const item = run.events
    .filter((event) => event.type === "item.completed")
    .map((event) => event.item as Record<string, unknown>)
    .findLast((it) => it?.type === "command_execution");
  return {
    code: run.code,
    stderr: run.stderr,
    toolOutput: model.toolOutputs().join("\n"),
    exitCode: item?.exit_code,
  };
}

if (import.meta.main) {
  const [environmentsToml, codexHome, workspace, command] = Deno.args;
  if (command === undefined) {
    console.error("usage: codex_turn_main.ts ENVIRONMENTS_TOML CODEX_HOME WORKSPACE CMD");
    Deno.exit(2);
  }
  console.log(JSON.stringify(await codexTurn(environmentsToml!, codexHome!, workspace!, command)));
}
