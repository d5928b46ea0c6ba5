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
  containerSkipReason,
  freePort,
  podmanOk,
  REPO_DIR,
  runContainer,
  TOKEN_DIR_IN_CONTAINER,
  waitForHealthz,
  writeTokenDir,
} from "./helpers/container.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";

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

function containerTest(name: string, fn: () => Promise<void>): void {
  Deno.test({
    name: `${name}${SKIP ?? ""}`,
    ignore: SKIP !== undefined,
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
  assert.match(lines[0]!, /\/run\/secrets\/exec-server\/token/);
  assert.doesNotMatch(lines[0]!, /\bat \S+:\d+|TypeError|Error:/);
});
