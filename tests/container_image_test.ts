/**
 * The container image (`Containerfile`, docs/guide/container.md): built with
 * podman from the repository alone (base images stood in for locally by
 * tests/helpers/base_images.sh), then each property the guide states is
 * checked on a real container: non-root uid 10001, read-only root with a
 * tmpfs `/tmp`, a start with `--network none`, the capability token
 * (refused without it or with a wrong one, accepted with it, through a port
 * published on 127.0.0.1), the one-line refusal to start without the token
 * file, the health check, `exec-server run` inside the container.
 * Containers are named `es-image-*` and removed however a test ends.
 * Without podman (or as a non-root user) the tests are ignored, saying why.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  buildImage,
  type Container,
  containerName,
  containerSkipReason,
  freePort,
  IMAGE_TAG,
  PODMAN,
  podman,
  podmanOk,
  removeContainer,
  REPO_DIR,
  runContainer,
  TOKEN_DIR_IN_CONTAINER,
  waitForHealthz,
  writeTokenDir,
} from "./helpers/container.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { CODEX_CONFIG_TOML, findCodexBin, runCodexExec } from "./interop/harness.ts";
import { startMockModel } from "./interop/mock_model.ts";
import { docBlock } from "./helpers/doc_blocks.ts";
import { firstLine } from "./helpers/server_harness.ts";

const PREFIX = "es-image-";
const SKIP = containerSkipReason();
const TOKEN = "container-test-token-0123456789";

/** The hardened way the guide runs the image: read-only root, tmpfs /tmp, no privileges. */
const HARDENED = [
  "--read-only",
  "--tmpfs",
  "/tmp",
  "--cap-drop",
  "all",
  "--security-opt",
  "no-new-privileges",
];

function containerTest(name: string, fn: () => Promise<void>, skip = SKIP): void {
  Deno.test({
    name: `${name}${skip ?? ""}`,
    ignore: skip !== undefined,
    sanitizeResources: false,
    sanitizeOps: false,
    fn,
  });
}

/** A served container: the image's default command with a token mounted, its port on 127.0.0.1. */
interface Served extends AsyncDisposable {
  box: Container;
  port: number;
}

async function serve(options: string[] = []): Promise<Served> {
  const image = await buildImage();
  const tokenDir = await writeTokenDir(TOKEN);
  const port = freePort();
  const box = await runContainer({
    prefix: PREFIX,
    image,
    options: [
      ...HARDENED,
      "-v",
      `${tokenDir}:${TOKEN_DIR_IN_CONTAINER}:ro`,
      "-p",
      `127.0.0.1:${port}:8080`,
      ...options,
    ],
  });
  const dispose = async () => {
    await box.remove();
    await Deno.remove(tokenDir, { recursive: true });
  };
  try {
    assert.ok(
      await waitForHealthz(port),
      `the container never served /healthz: ${(await box.logs()).stderr}`,
    );
  } catch (err) {
    await dispose();
    throw err;
  }
  return { box, port, [Symbol.asyncDispose]: dispose };
}

/** Runs `sh -c SCRIPT` through the container's server with `exec-server run` inside it. */
function runThroughServer(box: Container, script: string) {
  const token = `${TOKEN_DIR_IN_CONTAINER}/token`;
  return box.exec([
    "exec-server",
    "run",
    "--url",
    "ws://127.0.0.1:8080",
    "--token-file",
    token,
    "--",
    "sh",
    "-c",
    script,
  ]);
}

/** Sends `initialize` over an accepted raw WebSocket and returns the response. */
async function initialize(socket: RawWebSocket): Promise<Record<string, unknown>> {
  const request = { id: 1, method: "initialize", params: { clientName: "container-test" } };
  await socket.sendFrame(1, new TextEncoder().encode(JSON.stringify(request)));
  const text = await socket.readMessage();
  assert.ok(text !== null, "the connection closed before the initialize response");
  return JSON.parse(text) as Record<string, unknown>;
}

Deno.test("the Containerfile pins the Deno image to .deno-version and labels deno.json's version", async () => {
  const containerfile = await Deno.readTextFile(`${REPO_DIR}/Containerfile`);
  const deno = (await Deno.readTextFile(`${REPO_DIR}/.deno-version`)).trim();
  const version =
    (JSON.parse(await Deno.readTextFile(`${REPO_DIR}/deno.json`)) as { version: string })
      .version;
  assert.match(
    containerfile,
    new RegExp(
      `^ARG DENO_IMAGE=docker\\.io/denoland/deno:bin-${deno.replaceAll(".", "\\.")}$`,
      "m",
    ),
  );
  assert.match(containerfile, /^ARG DEBIAN_IMAGE=docker\.io\/library\/debian:bookworm-slim$/m);
  assert.match(containerfile, new RegExp(`^ARG VERSION=${version.replaceAll(".", "\\.")}$`, "m"));
  assert.doesNotMatch(containerfile, /--allow-all|\s-A\s/);
});

containerTest(
  "the image runs as uid 10001 in /workspace with a read-only root and serves with the token",
  async () => {
    await using served = await serve();
    const id = await served.box.exec(["id", "-u"]);
    assert.equal(id.stdout.trim(), "10001");
    const pwd = await served.box.exec([
      "sh",
      "-c",
      "pwd; touch /workspace/ok && echo wrote; touch /etc/x 2>&1 || echo refused",
    ]);
    assert.equal(pwd.stdout.split("\n")[0], "/workspace");
    assert.match(pwd.stdout, /^wrote$/m);
    assert.match(pwd.stdout, /Read-only file system/);
    const inspect = JSON.parse(await podmanOk(["container", "inspect", served.box.name])) as {
      HostConfig: { ReadonlyRootfs: boolean };
    }[];
    assert.equal(inspect[0]!.HostConfig.ReadonlyRootfs, true);
    await using socket = await RawWebSocket.connect(served.port, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(socket.answer.status, 101);
    const response = await initialize(socket);
    assert.equal(response.id, 1);
    assert.equal(typeof (response.result as { sessionId?: unknown }).sessionId, "string");
  },
);

containerTest(
  "the image refuses an upgrade without the token or with a wrong one (401)",
  async () => {
    await using served = await serve();
    const attempts: Record<string, string>[] = [
      {},
      { Authorization: "Bearer wrong-token" },
      { Authorization: `Bearer ${TOKEN}x` },
    ];
    for (const headers of attempts) {
      await using socket = await RawWebSocket.connect(served.port, { headers });
      assert.equal(socket.answer.status, 401, JSON.stringify(headers));
    }
  },
);

containerTest("the image without a token file exits non-zero at once with one line", async () => {
  const image = await buildImage();
  await using box = await runContainer({ prefix: PREFIX, image, options: HARDENED });
  const code = await box.wait();
  assert.notEqual(code, 0);
  const logs = await box.logs();
  const lines = `${logs.stdout}${logs.stderr}`.split("\n").filter((line) => line.trim() !== "");
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.equal(
    lines[0],
    'error: Cannot read secret file "/run/secrets/exec-server/token": No such file or directory (os error 2)',
  );
  assert.doesNotMatch(lines[0]!, /\bat \S+:\d+|TypeError|Error:/);
});

containerTest(
  "the image starts with --network none and answers initialize over stdio",
  async () => {
    const image = await buildImage();
    const request = JSON.stringify({ id: 1, method: "initialize", params: { clientName: "t" } });
    const name = `${PREFIX}stdio-${crypto.randomUUID().slice(0, 8)}`;
    try {
      const child = new Deno.Command(PODMAN!, {
        args: [
          "run",
          "-i",
          "--rm",
          "--name",
          name,
          "--network",
          "none",
          ...HARDENED,
          image,
          "--listen",
          "stdio",
        ],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(`${request}\n`));
      const { line, rest } = await firstLine(child.stdout);
      await writer.close();
      await rest;
      await child.stderr.cancel();
      await child.status;
      const response = JSON.parse(line ?? "null") as {
        id: number;
        result: { sessionId: string };
      };
      assert.equal(response.id, 1);
      assert.equal(typeof response.result.sessionId, "string");
    } finally {
      await removeContainer(name);
    }
  },
);

containerTest("podman healthcheck run passes through the server's /healthz", async () => {
  await using served = await serve();
  const result = await podman(["healthcheck", "run", served.box.name]);
  assert.equal(result.code, 0, result.stderr);
  const inspect = JSON.parse(await podmanOk(["image", "inspect", IMAGE_TAG])) as {
    Healthcheck?: { Test: string[] };
    Config: {
      StopSignal?: string;
      Labels: Record<string, string>;
    };
  }[];
  assert.match(inspect[0]!.Healthcheck!.Test.join(" "), /healthcheck\.ts/);
  assert.equal(inspect[0]!.Config.StopSignal, "SIGTERM");
  const labels = inspect[0]!.Config.Labels;
  assert.ok(labels["org.opencontainers.image.source"]);
  assert.ok(labels["org.opencontainers.image.licenses"]);
  assert.equal(labels["org.opencontainers.image.version"], "0.1.0");
});

containerTest(
  "exec-server run inside the container reaches the server with the token",
  async () => {
    await using served = await serve();
    const result = await runThroughServer(served.box, "echo ran as $(id -u); exit 3");
    assert.equal(result.code, 3, result.stderr);
    assert.equal(result.stdout, "ran as 10001\n");
  },
);

containerTest(
  "podman stop ends a container running sleep 600 children: exit 0 in under 5 s",
  async () => {
    await using served = await serve();
    for (let i = 0; i < 2; i++) {
      const started = await runThroughServer(
        served.box,
        "sleep 600 >/dev/null 2>&1 & echo started",
      );
      assert.equal(started.stdout, "started\n", started.stderr);
    }
    const sleeping = await served.box.exec([
      "sh",
      "-c",
      "grep -l '^sleep' /proc/[0-9]*/comm | wc -l",
    ]);
    assert.ok(Number(sleeping.stdout.trim()) >= 2, `sleep children: ${sleeping.stdout}`);
    const t0 = performance.now();
    const stopped = await served.box.stop(10);
    const seconds = (performance.now() - t0) / 1000;
    assert.equal(stopped.code, 0, stopped.stderr);
    const state = JSON.parse(await podmanOk(["container", "inspect", served.box.name])) as {
      State: { ExitCode: number; Running: boolean };
    }[];
    assert.equal(state[0]!.State.Running, false);
    assert.equal(state[0]!.State.ExitCode, 0);
    assert.ok(seconds < 5, `podman stop took ${seconds.toFixed(1)} s`);
  },
);

const CODEX_SKIP = SKIP ??
  (findCodexBin() === undefined ? " (ignored: Codex CLI not installed; set CODEX_BIN)" : undefined);

/** A Codex turn (mock model) through the container's published port: what the command printed. */
async function codexTurnInContainer(
  sandbox: "danger-full-access" | "workspace-write",
  cmd: (workspace: string) => string,
): Promise<{ output: string; exitCode: unknown }> {
  const home = Deno.env.get("HOME") ?? "/root";
  const workBase = `${home}/.cache/exec-server-interop`;
  await Deno.mkdir(workBase, { recursive: true });
  const codexHome = await Deno.makeTempDir({ dir: workBase, prefix: "container-" });
  // Codex sends its working directory as each command's cwd: the same path in the container,
  // under /tmp (inside the image's read and write scope).
  const workspace = await Deno.makeTempDir({ prefix: "es-image-ws-" });
  await Deno.chmod(workspace, 0o777);
  try {
    await using served = await serve(["-v", `${workspace}:${workspace}`]);
    await Deno.writeTextFile(`${codexHome}/config.toml`, CODEX_CONFIG_TOML);
    // The README's environments.toml, with the test's port and token.
    const readme = docBlock("readme-container-environments");
    assert.match(readme, /^url = "ws:\/\/127\.0\.0\.1:8080"$/m);
    assert.match(readme, /^auth_bearer_token = "<the token>"$/m);
    await Deno.writeTextFile(
      `${codexHome}/environments.toml`,
      readme.replace("127.0.0.1:8080", `127.0.0.1:${served.port}`).replace("<the token>", TOKEN),
    );
    const a = 1000 + Math.floor(Math.random() * 9000);
    await using model = startMockModel({
      toolCalls: [{
        arguments: {
          cmd: cmd(workspace).replaceAll("A7", String(a * 7)),
          "yield_time_ms": 10_000,
        },
      }],
    });
    const result = await runCodexExec("Run the container command.", {
      codexBin: findCodexBin()!,
      codexHome,
      workspace,
      modelBaseUrl: model.baseUrl,
      sandbox,
    });
    const output = model.toolOutputs().join("\n").replaceAll(String(a * 7), "A7");
    assert.equal(result.code, 0, result.stderr);
    // Every request Codex sent was answered: environmentConfig/read needs the TOML parser the
    // image's cache must hold (the server runs --cached-only).
    const logs = await podman(["logs", served.box.name]);
    assert.doesNotMatch(`${logs.stdout}${logs.stderr}`, /request\.failed/, logs.stderr);
    const item = result.events
      .filter((event) => event.type === "item.completed")
      .map((event) => event.item as Record<string, unknown>)
      .findLast((it) => it?.type === "command_execution");
    return { output, exitCode: item?.exit_code };
  } finally {
    await Deno.remove(codexHome, { recursive: true });
    await Deno.remove(workspace, { recursive: true });
  }
}

containerTest(
  "codex runs a command through the container's published port in danger-full-access",
  async () => {
    const turn = await codexTurnInContainer(
      "danger-full-access",
      () => `echo "CONTAINER_RESULT_A7_uid$(id -u)"; exit 5`,
    );
    assert.match(turn.output, /CONTAINER_RESULT_A7_uid10001/, turn.output);
    assert.equal(turn.exitCode, 5);
  },
  CODEX_SKIP,
);

containerTest(
  "codex's default workspace-write turn through the container's published port writes in its workspace and not in /workspace",
  async () => {
    const turn = await codexTurnInContainer(
      "workspace-write",
      (workspace) =>
        `echo in > ${workspace}/inside && echo "INSIDE_OK_A7"; ` +
        `if echo out > /workspace/outside 2>/dev/null; then echo OUTSIDE_WRITTEN; else echo OUTSIDE_REFUSED; fi`,
    );
    assert.match(turn.output, /INSIDE_OK_A7/, turn.output);
    assert.match(turn.output, /OUTSIDE_REFUSED/, turn.output);
    assert.doesNotMatch(turn.output, /OUTSIDE_WRITTEN/, turn.output);
  },
  CODEX_SKIP,
);

containerTest("the README's container recipe runs a server that accepts its token", async () => {
  const image = await buildImage();
  const lines = docBlock("readme-container-run").trim().split("\n");
  // The build line is the image buildImage() made (with the test machine's CA for deno cache).
  assert.equal(lines[0], "podman build --format docker -t exec-server .");
  const tokenDir = await Deno.makeTempDir({ prefix: "es-image-readme-" });
  await Deno.chmod(tokenDir, 0o755);
  const name = containerName(PREFIX);
  const port = freePort();
  const script = lines.slice(1).join("\n")
    .replaceAll("~/.config/exec-server", tokenDir)
    .replace("--name exec-server", `--name ${name}`)
    .replace("127.0.0.1:8080:8080", `127.0.0.1:${port}:8080`)
    .replace(/ exec-server$/, ` ${image}`);
  try {
    const run = await new Deno.Command("/bin/bash", {
      args: ["-euo", "pipefail", "-c", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(run.success, new TextDecoder().decode(run.stderr));
    assert.ok(await waitForHealthz(port), "the recipe's container never served /healthz");
    const token = (await Deno.readTextFile(`${tokenDir}/token`)).trim();
    assert.ok(token.length >= 40, token);
    await using socket = await RawWebSocket.connect(port, {
      headers: { Authorization: `Bearer ${token}` },
    });
    assert.equal(socket.answer.status, 101);
    assert.equal((await initialize(socket)).id, 1);
  } finally {
    await removeContainer(name);
    await Deno.remove(tokenDir, { recursive: true });
  }
});
