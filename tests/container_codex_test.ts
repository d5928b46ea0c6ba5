/**
 * A real Codex CLI turn (mock model, as in tests/interop/) whose commands
 * run in an unprivileged podman container (issue 33): Codex runs on the
 * host, the server in the container (tests/helpers/podman_scene.ts: non-root
 * user, read-only root, podman's default seccomp profile or one denying user
 * namespaces as Docker's does), spoken to over stdio: the container is the
 * `program = "podman"`, `args = ["run", "-i", …]` environment of Codex's
 * `environments.toml`, the only one (`include_local = false`).
 *
 * The server gets no `--sandbox` flag: what confines the command is the
 * sandbox Codex sends with `process/start` in its `workspace-write` and
 * `read-only` modes. The command computes a product (a value in no text),
 * writes it in the workspace, tries to write in a writable volume outside
 * the workspace and to open a TCP connection (to 127.0.0.1:9: refused by
 * the sandbox's seccomp filter with `EPERM`, where the container's own
 * loopback answers "Connection refused"). A `danger-full-access` turn is
 * the control: there the same writes and the connection attempt get through
 * to the kernel. The server's log (stderr, JSON) goes to a file, which names
 * the layer of each sandboxed start.
 *
 * Containers are named `es-csb-*` and removed at the end (and by
 * `--rm` when Codex closes their stdin). Without podman, root or the Codex
 * CLI the tests are ignored, saying why.
 *
 * @module
 */

import assert from "node:assert/strict";
// The npm packages the server loads on first use, fetched into the runner's cache (the container
// reads that cache).
import "../lib/server/session/lazy_packages.ts";
import { CODEX_CONFIG_TOML, findCodexBin, runCodexExec } from "./interop/harness.ts";
import { startMockModel } from "./interop/mock_model.ts";
import { LAYER_TRAITS, type SandboxLayer } from "../lib/server/sandbox/layer.ts";
import {
  denyUserNamespaces,
  exists,
  makeScene,
  PODMAN_SKIP,
  type Scene,
} from "./helpers/podman_scene.ts";

const CODEX = findCodexBin();
const SKIP = PODMAN_SKIP !== ""
  ? PODMAN_SKIP
  : CODEX === undefined
  ? " (ignored: the Codex CLI is not installed; set CODEX_BIN)"
  : "";
/** Where scenes go: Codex must not run from /tmp (tests/interop/harness.ts). */
const WORK_BASE = Deno.env.get("INTEROP_WORK_DIR") ??
  `${Deno.env.get("HOME") ?? "/root"}/.cache/exec-server-interop`;

type Mode = "workspace-write" | "read-only" | "danger-full-access";

/** What one Codex turn saw. */
interface Turn {
  product: number;
  toolOutput: string;
  code: number;
  stderr: string;
  /** The `sandboxLayer` of each `process.start` the server logged. */
  layers: unknown[];
  /** The events the server logged at level `error` (a request that failed unexpectedly). */
  errors: unknown[];
}

/** Codex's `environments.toml`: the container, its server's log appended to `log`. */
function environmentsToml(command: string[], log: string): string {
  const args = [
    "-c",
    `exec "$0" "$@" 2>>'${log}'`,
    ...command,
    ...["--listen", "stdio", "--log-level", "info", "--log-format", "json"],
  ];
  return [
    `default = "container"`,
    `include_local = false`,
    ``,
    `[[environments]]`,
    `id = "container"`,
    `program = "/bin/sh"`,
    `args = [${args.map((arg) => JSON.stringify(arg)).join(", ")}]`,
    "",
  ].join("\n");
}

/** One `codex exec` turn in `mode` whose one command runs in the container `name`. */
async function codexTurn(
  scene: Scene,
  name: string,
  seccomp: string | undefined,
  mode: Mode,
): Promise<Turn> {
  const a = 10_000 + Math.floor(Math.random() * 90_000);
  const b = 10_000 + Math.floor(Math.random() * 90_000);
  const codexHome = `${scene.base}/codex-home-${name}`;
  const log = `${scene.base}/server-${name}.log`;
  await Deno.mkdir(codexHome);
  await Deno.writeTextFile(`${codexHome}/config.toml`, CODEX_CONFIG_TOML);
  await Deno.writeTextFile(
    `${codexHome}/environments.toml`,
    environmentsToml(scene.podman(name, seccomp), log),
  );
  const command = [
    `x=$(( ${a} * ${b} ))`,
    `echo "INTEROP_RESULT_$x"`,
    `if echo "$x" > '${scene.workspace}/sub/marker-${name}.txt' 2>/dev/null; ` +
    `then echo INTEROP_INSIDE=written; else echo INTEROP_INSIDE=denied; fi`,
    `if echo "$x" > '${scene.workspace}/top-${name}.txt' 2>/dev/null; ` +
    `then echo INTEROP_TOP=written; else echo INTEROP_TOP=denied; fi`,
    `if echo escaped > '${scene.outside}/escape-${name}.txt' 2>/dev/null; ` +
    `then echo INTEROP_OUTSIDE=written; else echo INTEROP_OUTSIDE=denied; fi`,
    `echo "INTEROP_NET:$(/bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>&1 | tr '\\n' ' ')"`,
    `exit 7`,
  ].join("\n");
  await using model = startMockModel({
    toolCalls: [{ arguments: { cmd: command, "yield_time_ms": 30_000 } }],
  });
  const result = await runCodexExec("Run the container command.", {
    codexBin: CODEX!,
    codexHome,
    workspace: scene.workspace,
    modelBaseUrl: model.baseUrl,
    sandbox: mode,
  });
  let logText = "";
  try {
    logText = await Deno.readTextFile(log);
  } catch {
    // The server never started.
  }
  const events = logText.split("\n").filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
  const layers = events.filter((event) => event.event === "process.start")
    .map((event) => event.sandboxLayer);
  return {
    product: a * b,
    toolOutput: model.toolOutputs().join("\n"),
    code: result.code,
    stderr: `codex exit ${result.code}\ncodex stderr:\n${result.stderr}\nserver log:\n${logText}`,
    layers,
    errors: events.filter((event) => event.level === "error"),
  };
}

/** Asserts that the command ran in the container and Codex got its output and exit code. */
function assertRan(turn: Turn): string {
  const diagnostics = `${turn.stderr}\ntool output:\n${turn.toolOutput}`;
  assert.equal(turn.code, 0, diagnostics);
  assert.ok(turn.toolOutput.includes(`INTEROP_RESULT_${turn.product}`), diagnostics);
  // What Codex told the model (its JSONL events carry no command item for a sandboxed command).
  assert.match(turn.toolOutput, /Process exited with code 7/, diagnostics);
  // Every request Codex sent was answered (environmentConfig/read needs its TOML parser).
  assert.deepEqual(turn.errors, [], diagnostics);
  return diagnostics;
}

/** The confined turns: workspace-write and read-only, on the layer the server picks. */
async function confinedTurns(
  scene: Scene,
  seccomp: string | undefined,
  prefix: string,
  layer: SandboxLayer,
): Promise<void> {
  const ww = `${prefix}-ww-${crypto.randomUUID().slice(0, 8)}`;
  const written = await codexTurn(scene, ww, seccomp, "workspace-write");
  const wwDiagnostics = assertRan(written);
  assert.match(written.toolOutput, /INTEROP_INSIDE=written/, wwDiagnostics);
  assert.equal(
    (await Deno.readTextFile(`${scene.workspace}/sub/marker-${ww}.txt`)).trim(),
    String(written.product),
    "the sandboxed command wrote in its workspace",
  );
  // A new name directly in the workspace: on Landlock the workspace's own entries are fixed
  // (its missing .git and .codex stay read-only: LAYER_TRAITS.rootEntriesWritable).
  const top = LAYER_TRAITS[layer].rootEntriesWritable ? "written" : "denied";
  assert.match(written.toolOutput, new RegExp(`INTEROP_TOP=${top}`), wwDiagnostics);
  assert.match(written.toolOutput, /INTEROP_OUTSIDE=denied/, wwDiagnostics);
  assert.equal(exists(`${scene.outside}/escape-${ww}.txt`), false);
  assert.match(written.toolOutput, /INTEROP_NET:.*Operation not permitted/, wwDiagnostics);
  assert.deepEqual(written.layers, [layer], wwDiagnostics);

  const ro = `${prefix}-ro-${crypto.randomUUID().slice(0, 8)}`;
  const readOnly = await codexTurn(scene, ro, seccomp, "read-only");
  const roDiagnostics = assertRan(readOnly);
  assert.match(readOnly.toolOutput, /INTEROP_INSIDE=denied/, roDiagnostics);
  assert.equal(exists(`${scene.workspace}/sub/marker-${ro}.txt`), false);
  assert.match(readOnly.toolOutput, /INTEROP_TOP=denied/, roDiagnostics);
  assert.match(readOnly.toolOutput, /INTEROP_OUTSIDE=denied/, roDiagnostics);
  assert.equal(exists(`${scene.outside}/escape-${ro}.txt`), false);
  assert.deepEqual(readOnly.layers, [layer], roDiagnostics);
}

async function workScene(): Promise<Scene> {
  await Deno.mkdir(WORK_BASE, { recursive: true });
  return await makeScene({ dir: WORK_BASE, prefix: "es-csb-" });
}

Deno.test({
  name:
    `a Codex turn whose commands run in a podman container with its default seccomp profile completes in workspace-write (a write outside the workspace and a connection refused, on bubblewrap-no-proc) and in read-only (the command runs, its writes refused)${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await workScene();

    // The control: unconfined, the same writes and the connection attempt reach the kernel.
    const open = `es-csb-full-${crypto.randomUUID().slice(0, 8)}`;
    const control = await codexTurn(scene, open, undefined, "danger-full-access");
    const diagnostics = assertRan(control);
    assert.match(control.toolOutput, /INTEROP_INSIDE=written/, diagnostics);
    assert.match(control.toolOutput, /INTEROP_TOP=written/, diagnostics);
    assert.match(control.toolOutput, /INTEROP_OUTSIDE=written/, diagnostics);
    assert.match(control.toolOutput, /INTEROP_NET:.*Connection refused/, diagnostics);
    assert.deepEqual(control.layers, [null], diagnostics);

    await confinedTurns(scene, undefined, "es-csb-default", "bubblewrap-no-proc");
  },
});

Deno.test({
  name:
    `a Codex turn whose commands run in a podman container whose seccomp profile denies user namespaces completes in workspace-write (a write outside the workspace and a connection refused, on landlock) and in read-only (the command runs, its writes refused)${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await workScene();
    const profile = denyUserNamespaces(`${scene.base}/seccomp.json`);
    await confinedTurns(scene, profile, "es-csb-nouserns", "landlock");
  },
});
