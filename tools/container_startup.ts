/**
 * Measures the container image (docs/guide/container.md): its size
 * (`podman image inspect`) and the time from `podman run` to a served
 * `initialize` over a port published on 127.0.0.1, as the median of a few
 * runs. Builds the image first (tests/helpers/container.ts). Prints; asserts
 * nothing.
 *
 * ```sh
 * deno run --allow-all tools/container_startup.ts [RUNS]
 * ```
 *
 * @module
 */

import {
  buildImage,
  containerName,
  freePort,
  podmanOk,
  removeContainer,
  TOKEN_DIR_IN_CONTAINER,
  writeTokenDir,
} from "../tests/helpers/container.ts";
import { RawWebSocket } from "../tests/helpers/reliability_server.ts";

const TOKEN = "startup-measurement-token";

/** Milliseconds from `podman run` to the answer of `initialize` through the published port. */
async function oneRun(image: string, tokenDir: string): Promise<number> {
  const name = containerName("es-image-measure-");
  const port = freePort();
  const started = performance.now();
  try {
    await podmanOk([
      "run",
      "-d",
      "--name",
      name,
      "--read-only",
      "--tmpfs",
      "/tmp",
      "-v",
      `${tokenDir}:${TOKEN_DIR_IN_CONTAINER}:ro`,
      "-p",
      `127.0.0.1:${port}:8080`,
      image,
    ]);
    while (true) {
      try {
        await using socket = await RawWebSocket.connect(port, {
          headers: { Authorization: `Bearer ${TOKEN}` },
        });
        if (socket.answer.status !== 101) {
          throw new Error(`upgrade answered ${socket.answer.status}`);
        }
        const request = { id: 1, method: "initialize", params: { clientName: "measure" } };
        await socket.sendFrame(1, new TextEncoder().encode(JSON.stringify(request)));
        const text = await socket.readMessage();
        if (text !== null && text.includes('"sessionId"')) return performance.now() - started;
      } catch {
        // Not serving yet.
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
      if (performance.now() - started > 30_000) throw new Error("no initialize answer in 30 s");
    }
  } finally {
    await removeContainer(name);
  }
}

if (import.meta.main) {
  const runs = Number(Deno.args[0] ?? 5);
  const image = await buildImage();
  const size = Number(
    (await podmanOk(["image", "inspect", "--format", "{{.Size}}", image])).trim(),
  );
  const tokenDir = await writeTokenDir(TOKEN);
  try {
    const times: number[] = [];
    for (let i = 0; i < runs; i++) times.push(await oneRun(image, tokenDir));
    const sorted = [...times].sort((a, b) => a - b);
    console.log(`image ${image}: ${size} bytes (${(size / 1e6).toFixed(1)} MB)`);
    console.log(
      `podman run -> initialize answered: median ${sorted[Math.floor(runs / 2)]!.toFixed(0)} ms ` +
        `over ${runs} runs (${times.map((t) => t.toFixed(0)).join(", ")} ms)`,
    );
  } finally {
    await Deno.remove(tokenDir, { recursive: true });
  }
}
