/**
 * What a sandboxed `process/start` costs a client, per layer: the time from
 * sending `process/start` of `/bin/true` (with the `sandbox` Codex 0.171
 * sends in `workspace-write` mode) to receiving its `process/exited`, over
 * stdio, one server per layer (`--sandbox-layer`), against the same start
 * without a sandbox and, when the Codex CLI is installed, against the
 * reference `codex exec-server` with the same sandbox. Rounds are
 * interleaved (one start of each kind per round, in turn); the median and
 * 90th percentile are printed in milliseconds as a Markdown table
 * (docs/guide/sandbox.md). A layer that does not work here is left out,
 * saying why. tools/sandbox_spawn_cost.ts measures the spawn alone, without
 * the server.
 *
 * With `--container`, the servers run in the unprivileged podman containers
 * of the container tests (tests/helpers/podman_scene.ts: non-root, read-only
 * root; podman's default seccomp profile, and one denying user namespaces
 * for the `landlock` row) instead, and the reference is left out.
 *
 * Usage: `deno run -A bench/sandbox_spawn.ts [--container] [ROUNDS]` (default 30).
 *
 * @module
 */

import { decodeBase64, RpcClient } from "./rpc_client.ts";
import { type ServerHandle, startServer, stopAllServers } from "./server_process.ts";
import { markdownTable, percentile, summarize } from "./stats.ts";
import { probeSandbox } from "../lib/server/sandbox/availability.ts";
import { SANDBOX_LAYERS } from "../lib/server/sandbox/layer.ts";
import { findCodexBin, shellQuote } from "../tests/interop/harness.ts";
import { workspaceWriteSandbox } from "../tests/interop/sandbox_probe.ts";
import {
  denyUserNamespaces,
  makeScene,
  PODMAN_SKIP,
  type Scene,
} from "../tests/helpers/podman_scene.ts";

const inContainer = Deno.args.includes("--container");
const rounds = Number(Deno.args.find((arg) => !arg.startsWith("--")) ?? 30);
const MAIN_TS = new URL("../main.ts", import.meta.url).pathname;
const OURS = `${shellQuote(Deno.execPath())} run --allow-all ${shellQuote(MAIN_TS)}`;

/** One kind of start: a server and whether its starts carry the sandbox. */
interface Kind {
  name: string;
  command: string;
  sandboxed: boolean;
  server?: ServerHandle;
  client?: RpcClient;
  millis: number[];
}

const kinds: Kind[] = [];
let workspace: string;
let scene: Scene | undefined;
if (inContainer) {
  if (PODMAN_SKIP !== "") throw new Error(`cannot run --container${PODMAN_SKIP}`);
  scene = await makeScene({ prefix: "es-bench-spawn-" });
  workspace = scene.workspace;
  const profile = denyUserNamespaces(`${scene.base}/seccomp.json`);
  const podman = (name: string, seccomp?: string) =>
    scene!.podman(`es-bench-spawn-${name}-${crypto.randomUUID().slice(0, 8)}`, seccomp)
      .map(shellQuote).join(" ");
  kinds.push(
    { name: "none (no sandbox)", command: podman("none"), sandboxed: false, millis: [] },
    {
      name: "bubblewrap-no-proc",
      command: `${podman("bwrap")} --sandbox-layer bubblewrap-no-proc`,
      sandboxed: true,
      millis: [],
    },
    {
      name: "landlock (user namespaces denied)",
      command: `${podman("landlock", profile)} --sandbox-layer landlock`,
      sandboxed: true,
      millis: [],
    },
  );
} else {
  workspace = await Deno.realPath(
    await Deno.makeTempDir({ dir: "/var/tmp", prefix: "sandbox-spawn-" }),
  );
  await Deno.mkdir(`${workspace}/.git`);
  hostKinds();
}

/** The host's kinds: no sandbox, each layer that works, the reference. */
function hostKinds(): void {
  kinds.push({ name: "none (no sandbox)", command: OURS, sandboxed: false, millis: [] });
  for (const layer of SANDBOX_LAYERS) {
    const availability = probeSandbox({ layer });
    if (!availability.ok) {
      console.error(`${layer}: not measured (${availability.reason})`);
      continue;
    }
    kinds.push({
      name: layer,
      command: `${OURS} --sandbox-layer ${layer}`,
      sandboxed: true,
      millis: [],
    });
  }
  const codex = findCodexBin();
  if (codex === undefined) {
    console.error("reference: not measured (no Codex CLI; set CODEX_BIN)");
    return;
  }
  if (Deno.env.get("CODEX_HOME") === undefined) {
    // The reference finds its sandbox helper (codex-linux-sandbox) through CODEX_HOME, which
    // must not be under /tmp.
    const home = `${Deno.env.get("HOME") ?? "/root"}/.cache/exec-server-bench-home`;
    Deno.mkdirSync(home, { recursive: true });
    Deno.env.set("CODEX_HOME", home);
  }
  kinds.push({
    name: "reference (codex exec-server)",
    command: `${shellQuote(codex)} exec-server`,
    sandboxed: true,
    millis: [],
  });
}

const workspaceUri = new URL(`file://${workspace}`).href;
let serial = 0;

/** One `process/start` of `/bin/true` to its `process/exited`, in milliseconds. */
async function once(kind: Kind): Promise<number> {
  const client = kind.client!;
  const processId = `spawn-${++serial}`;
  const exited = Promise.withResolvers<number>();
  const closed = Promise.withResolvers<void>();
  let output = "";
  client.watch(processId, {
    onOutput: (chunk) => output += new TextDecoder().decode(decodeBase64(chunk)),
    onExited: exited.resolve,
    onClosed: closed.resolve,
  });
  const started = performance.now();
  await client.call("process/start", {
    processId,
    argv: ["/bin/true"],
    cwd: workspaceUri,
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    ...(kind.sandboxed ? { sandbox: workspaceWriteSandbox(workspaceUri) } : {}),
  });
  const code = await exited.promise;
  const elapsed = performance.now() - started;
  await closed.promise;
  client.unwatch(processId);
  if (code !== 0) throw new Error(`${kind.name}: /bin/true exited with ${code}: ${output}`);
  return elapsed;
}

try {
  for (const kind of kinds) {
    kind.server = await startServer(kind.command, { listen: "stdio" });
    kind.client = new RpcClient(kind.server.stdio!);
    await kind.client.initialize();
    await once(kind); // Warm-up: the first start binds libc and probes the layer.
  }
  for (let round = 0; round < rounds; round++) {
    for (const kind of kinds) kind.millis.push(await once(kind));
  }
  const fixed = (value: number) => value.toFixed(1);
  console.log(markdownTable(
    ["kind", "median ms", "p90 ms"],
    kinds.map((kind) => {
      const summary = summarize(kind.millis);
      return [kind.name, fixed(summary.median), fixed(percentile(kind.millis, 90))];
    }),
  ));
  const where = inContainer ? " in podman containers" : "";
  console.log(
    `\n${rounds} interleaved rounds${where}, process/start to process/exited of /bin/true`,
  );
} finally {
  for (const kind of kinds) kind.client?.close();
  await stopAllServers();
  if (scene !== undefined) await scene[Symbol.asyncDispose]();
  else await Deno.remove(workspace, { recursive: true });
}
