/**
 * What the tests that run README and docs/ recipes share: an `exec-server`
 * command on `PATH` that is this checkout, a free port to put in place of a
 * recipe's, a server started from a recipe's block, and this tree served over
 * HTTP on 127.0.0.1 in place of a release URL.
 *
 * @module
 */

const REPO_ROOT = decodeURIComponent(new URL("../../", import.meta.url).pathname).replace(
  /\/$/,
  "",
);

/** The port the recipes show; a test replaces it with {@linkcode freePort}'s. */
export const RECIPE_PORT = "8765";

/**
 * A TCP port on 127.0.0.1 that was free a moment ago.
 *
 * @example
 * ```ts
 * import { freePort } from "./doc_recipes.ts";
 * console.log(freePort() > 0); // true
 * ```
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr;
  listener.close();
  return port;
}

/**
 * Makes `DIR/bin/exec-server`: this checkout's main.ts with every permission,
 * as the compiled binary has them.
 *
 * @returns The `bin` directory, to put first on `PATH`.
 */
export async function execServerOnPath(dir: string): Promise<string> {
  const bin = `${dir}/bin`;
  await Deno.mkdir(bin, { recursive: true });
  const script =
    `#!/bin/sh\nexec '${Deno.execPath()}' run --allow-all '${REPO_ROOT}/main.ts' "$@"\n`;
  await Deno.writeTextFile(`${bin}/exec-server`, script, { mode: 0o755 });
  return bin;
}

/** Reads `stream` until its first line; the rest keeps draining in the background. */
export async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })().catch(() => {});
  return text.split("\n")[0]!.trim();
}

/** A server a recipe's block started; dispose it to stop it. */
export interface RecipeServer extends AsyncDisposable {
  /** The first line it printed. */
  readonly url: string;
  /** What it wrote to stderr so far. */
  stderr(): string;
}

/**
 * Runs a block whose last command starts a server (`sh -c`), with
 * `RECIPE_PORT` replaced by `port`, and waits for the URL it prints first.
 */
export async function startRecipeServer(
  block: string,
  port: number,
  options: { cwd: string; env: Record<string, string> },
): Promise<RecipeServer> {
  const child = new Deno.Command("/bin/sh", {
    // `exec` so that the shell becomes the server, which the test then stops by its pid.
    args: ["-c", block.replaceAll(RECIPE_PORT, String(port)).replace(/^exec-server /m, "exec $&")],
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderr = "";
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      write(chunk) {
        stderr += chunk;
      },
    }),
  ).catch(() => {});
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
    await stderrDone;
  };
  try {
    return {
      url: await firstLine(child.stdout),
      stderr: () => stderr,
      [Symbol.asyncDispose]: stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** This repository served over HTTP on 127.0.0.1; dispose it to stop serving. */
export interface ServedTree extends AsyncDisposable {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
}

/** Serves the repository's files on 127.0.0.1, as a release's raw URL would. */
export function serveTree(): ServedTree {
  const controller = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: controller.signal, onListen() {} },
    async (request) => {
      const path = decodeURIComponent(new URL(request.url).pathname);
      try {
        return new Response(await Deno.readFile(`${REPO_ROOT}${path}`));
      } catch {
        return new Response("not found", { status: 404 });
      }
    },
  );
  return {
    host: `127.0.0.1:${server.addr.port}`,
    async [Symbol.asyncDispose]() {
      controller.abort();
      await server.finished;
    },
  };
}

/**
 * `block` with the release URL prefix replaced by `tree`'s, and
 * `--allow-import=HOST` added after `deno <subcommand>` (raw.githubusercontent.com
 * is in Deno's default list; 127.0.0.1 is not).
 */
export function fromServedTree(block: string, tree: ServedTree): string {
  const local = block.replaceAll(
    "https://raw.githubusercontent.com/<repo>/<tag>/",
    `http://${tree.host}/`,
  ).replace(/\bdeno (install|run) /, `deno $1 --allow-import=${tree.host} `);
  if (!local.includes(`http://${tree.host}/main.ts`)) throw new Error(`no release URL in ${block}`);
  return local;
}
