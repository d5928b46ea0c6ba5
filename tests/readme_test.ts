/**
 * The README's commands, run as a new user would run them.
 *
 * - `quickstart-server` and `quickstart-codex`: the server block runs with an
 *   `exec-server` on `PATH` that is this checkout's `main.ts`; the Codex block
 *   runs the real Codex CLI (`CODEX_BIN`, as the interop test finds it) in a
 *   git workspace, whose `CODEX_HOME` points the model at the interop test's
 *   mock Responses API instead of OpenAI's. The mock asks for one command; the
 *   test finds its output, and a value only the server's environment holds, in
 *   what Codex reported back. The only change to the blocks' text: the port
 *   8765 becomes one the test picked free.
 * - `install-by-url`: this tree is served on 127.0.0.1 in place of
 *   `https://raw.githubusercontent.com/<repo>/<tag>/`; a host other than that
 *   one needs `--allow-import=HOST:PORT` (raw.githubusercontent.com is in
 *   Deno's default list), which the test adds. It installs into a scratch
 *   `DENO_INSTALL_ROOT`.
 * - The three numbers of the opening paragraph are the medians of the table in
 *   docs/benchmarks.md.
 *
 * @module
 */

import assert from "node:assert/strict";
import { docBlock } from "./helpers/doc_blocks.ts";
import {
  execServerOnPath,
  freePort,
  fromServedTree,
  RECIPE_PORT,
  serveTree,
  startRecipeServer,
} from "./helpers/doc_recipes.ts";
import { CODEX_CONFIG_TOML, findCodexBin } from "./interop/harness.ts";
import { startMockModel } from "./interop/mock_model.ts";
import { startOutboundGuard } from "./interop/outbound_guard.ts";

const README = await Deno.readTextFile(new URL("../README.md", import.meta.url));
const BENCHMARKS = await Deno.readTextFile(new URL("../docs/benchmarks.md", import.meta.url));
const codexBin = findCodexBin();

Deno.test({
  name: codexBin === undefined
    ? "README quick start: Codex runs a command through a fresh server (ignored: no Codex CLI; set CODEX_BIN)"
    : "README quick start: Codex runs a command through a fresh server",
  ignore: codexBin === undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const home = Deno.env.get("HOME") ?? "/root";
    const base = `${home}/.cache/exec-server-interop`; // Codex must not run from /tmp.
    await Deno.mkdir(base, { recursive: true });
    const work = await Deno.makeTempDir({ dir: base, prefix: "readme-" });
    const port = freePort();
    const secret = `only-on-the-server-${crypto.randomUUID()}`;
    const bin = await execServerOnPath(work);
    const guard = startOutboundGuard();
    try {
      await using server = await startRecipeServer(docBlock("quickstart-server"), port, {
        cwd: work,
        env: { PATH: `${bin}:${Deno.env.get("PATH")}`, QUICKSTART_SECRET: secret },
      });
      assert.equal(server.url, `ws://127.0.0.1:${port}`);

      const workspace = `${work}/project`;
      const codexHome = `${work}/codex-home`;
      await Deno.mkdir(workspace);
      await Deno.mkdir(codexHome);
      await new Deno.Command("git", { args: ["init", "-q", workspace] }).output();
      await using model = startMockModel({
        toolCalls: [{
          arguments: {
            cmd: 'uname -s; echo "SERVER_SAYS=$QUICKSTART_SECRET"',
            yield_time_ms: 10_000,
          },
        }],
      });
      await Deno.writeTextFile(
        `${codexHome}/config.toml`,
        `model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n` +
          CODEX_CONFIG_TOML +
          `\n[model_providers.mock]\nname = "mock"\nbase_url = "${model.baseUrl}"\n` +
          `env_key = "MOCK_KEY"\nwire_api = "responses"\n`,
      );
      const codexDir = `${work}/codex-bin`;
      await Deno.mkdir(codexDir);
      await Deno.symlink(codexBin!, `${codexDir}/codex`);
      const codex = await new Deno.Command("/bin/bash", {
        args: ["-e", "-c", docBlock("quickstart-codex").replaceAll(RECIPE_PORT, String(port))],
        cwd: workspace,
        clearEnv: true,
        env: {
          PATH: `${codexDir}:/usr/local/bin:/usr/bin:/bin`,
          HOME: home,
          LANG: "C.UTF-8",
          CODEX_HOME: codexHome,
          MOCK_KEY: "dummy",
          ...guard.proxyEnv(),
        },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(180_000),
      }).output();
      const stderr = new TextDecoder().decode(codex.stderr);
      assert.equal(codex.code, 0, stderr);
      const output = model.toolOutputs().join("\n");
      assert.match(output, /Linux/, `the command's output: ${output}`);
      assert.match(output, new RegExp(`SERVER_SAYS=${secret}`), "the command ran on the server");
      assert.deepEqual(guard.attempts, [], "no traffic left 127.0.0.1");
      assert.match(server.stderr(), /INFO process\.start .*argv=\["\/bin\/bash","-lc","uname -s;/);
    } finally {
      await guard.close();
      await Deno.remove(work, { recursive: true });
    }
  },
});

Deno.test("README install: deno install by URL gives an exec-server command", async () => {
  const root = await Deno.makeTempDir({ prefix: "readme-install-" });
  try {
    await using tree = serveTree();
    const installed = await new Deno.Command("/bin/sh", {
      args: ["-e", "-c", fromServedTree(docBlock("install-by-url"), tree)],
      cwd: root,
      env: {
        DENO_INSTALL_ROOT: root,
        PATH: `${root}/bin:${Deno.env.get("PATH")}`,
        DENO_NO_UPDATE_CHECK: "1",
      },
      stdin: "null",
    }).output();
    const stdout = new TextDecoder().decode(installed.stdout);
    assert.equal(installed.code, 0, new TextDecoder().decode(installed.stderr));
    assert.match(stdout, /^exec-server \d+\.\d+\.\d+$/m);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/** The median cell of one row of docs/benchmarks.md's results table: `[ours, reference]`. */
function medians(metric: string, measure: string): [string, string] {
  for (const line of BENCHMARKS.split("\n")) {
    const cells = line.split("|").map((cell) => cell.trim());
    if (cells[1] === metric && cells[2] === measure) {
      const first = (cell: string) => cell.split(" ")[0]!;
      return [first(cells[4]!), first(cells[5]!)];
    }
  }
  throw new Error(`docs/benchmarks.md has no row ${metric} / ${measure}`);
}

Deno.test("README's three numbers are the medians of docs/benchmarks.md's latest run", () => {
  const intro = README.split("\n## ")[0]!.replaceAll("\n", " ");
  for (
    const [metric, measure, unit] of [
      ["spawn", "sequential p50", "ms"],
      ["stdin", "4 KiB echo p50", "ms"],
      ["stream", "eight at once", "MiB/s"],
    ]
  ) {
    const [ours, reference] = medians(metric!, measure!);
    assert.ok(
      intro.includes(`${ours} ${unit} instead of ${reference} ${unit}`),
      `README's opening paragraph should say "${ours} ${unit} instead of ${reference} ${unit}" (${metric}, ${measure})`,
    );
  }
});
