/**
 * Container test helpers: build the repository's `Containerfile` with podman
 * (once per test run, podman's layer cache makes later builds cheap), run
 * containers from it under a name prefix, and clean them up. Used by
 * tests/container_image_test.ts and by the Kubernetes manifests' tests.
 *
 * The machines these tests run on reach no image registry, so
 * {@linkcode ensureBaseImages} first builds local stand-ins for the two
 * public base images (tests/helpers/base_images.sh) under their public
 * names. Traffic to a container goes to a port published on 127.0.0.1
 * (`-p 127.0.0.1:PORT:8080`, see {@linkcode freePort}), never to the
 * container's bridge address.
 *
 * @example
 * ```ts ignore
 * import { buildImage, containerSkipReason, runContainer } from "./container.ts";
 *
 * Deno.test({
 *   name: `the image runs${containerSkipReason() ?? ""}`,
 *   ignore: containerSkipReason() !== undefined,
 *   async fn() {
 *     const image = await buildImage();
 *     await using box = await runContainer({ prefix: "es-example-", image, command: ["--version"] });
 *     console.log(await box.wait());
 *   },
 * });
 * ```
 *
 * @module
 */

/** The tag {@linkcode buildImage} gives the image built from the repository. */
export const IMAGE_TAG = "localhost/exec-server:test";

/** The repository's root directory (the build context). */
export const REPO_DIR: string = decodeURIComponent(new URL("../../", import.meta.url).pathname)
  .replace(/\/$/, "");

/** The port the image's default command listens on inside the container. */
export const CONTAINER_PORT = 8080;

/** Where the image's default command reads its capability token. */
export const TOKEN_DIR_IN_CONTAINER = "/run/secrets/exec-server";

/** The podman binary, or `undefined` where podman is not installed. */
export const PODMAN: string | undefined = ["/usr/bin/podman", "/usr/local/bin/podman"].find(
  isFile,
);

/** Podman's own environment (a clean one: the test's variables are not the container's). */
const PODMAN_ENV = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: Deno.env.get("HOME") ?? "/root",
};

/** A CA bundle on the host, passed to the build's `deno cache` (a TLS-intercepting proxy). */
const HOST_CA_BUNDLE = [Deno.env.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"].find(
  (path): path is string => path !== undefined && isFile(path),
);

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Whether podman is installed.
 *
 * @example
 * ```ts
 * import { podmanAvailable } from "./container.ts";
 * console.log(typeof podmanAvailable()); // "boolean"
 * ```
 */
export function podmanAvailable(): boolean {
  return PODMAN !== undefined;
}

/**
 * Why the container tests cannot run here, as a suffix for a test's name
 * (` (ignored: …)`), or `undefined` when they can: podman missing, not
 * root (the containers here are made as root), or the tools the base
 * images' stand-ins need missing while the images are.
 *
 * @example
 * ```ts
 * import { containerSkipReason } from "./container.ts";
 * const reason = containerSkipReason();
 * console.log(reason === undefined || reason.startsWith(" (ignored: "));
 * ```
 */
export function containerSkipReason(): string | undefined {
  if (PODMAN === undefined) return " (ignored: podman is not installed)";
  if (Deno.uid() !== 0) return " (ignored: these containers are made as root here)";
  return undefined;
}

/** What a podman command printed and how it exited. */
export interface PodmanResult {
  /** The exit code. */
  code: number;
  /** Standard output, decoded. */
  stdout: string;
  /** Standard error, decoded. */
  stderr: string;
}

/**
 * Runs `podman ARGS...` and returns its outcome (it does not throw on a
 * non-zero exit; see {@linkcode podmanOk}).
 *
 * @example
 * ```ts ignore
 * const { stdout } = await podman(["image", "inspect", "--format", "{{.Size}}", IMAGE_TAG]);
 * ```
 */
export async function podman(args: string[], stdin?: string): Promise<PodmanResult> {
  if (PODMAN === undefined) throw new Error("podman is not installed");
  const child = new Deno.Command(PODMAN, {
    args,
    clearEnv: true,
    env: PODMAN_ENV,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const output = await child.output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/**
 * Runs `podman ARGS...` and returns its standard output; throws with its
 * standard error when it exits non-zero.
 *
 * @example
 * ```ts ignore
 * const id = (await podmanOk(["create", IMAGE_TAG])).trim();
 * ```
 */
export async function podmanOk(args: string[], stdin?: string): Promise<string> {
  const result = await podman(args, stdin);
  if (result.code !== 0) {
    throw new Error(`podman ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
  }
  return result.stdout;
}

/**
 * Makes sure the two base images the `Containerfile` names exist locally,
 * building stand-ins for missing ones (tests/helpers/base_images.sh:
 * mmdebstrap for Debian, the npm package's binary for Deno). Throws when
 * that fails.
 *
 * @example
 * ```ts ignore
 * await ensureBaseImages();
 * ```
 */
export async function ensureBaseImages(): Promise<void> {
  const script = `${REPO_DIR}/tests/helpers/base_images.sh`;
  const output = await new Deno.Command("/bin/bash", {
    args: [script],
    clearEnv: true,
    env: { ...PODMAN_ENV, ...(HOST_CA_BUNDLE ? { SSL_CERT_FILE: HOST_CA_BUNDLE } : {}) },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!output.success) {
    throw new Error(`${script} failed: ${new TextDecoder().decode(output.stderr).trim()}`);
  }
}

let built: Promise<string> | undefined;

/**
 * Builds the repository's `Containerfile` as {@linkcode IMAGE_TAG} (after
 * {@linkcode ensureBaseImages}) and returns the tag. The build runs once
 * per test process; podman's layer cache makes a rebuild of an unchanged
 * tree take seconds. Docker format, so the image keeps its `HEALTHCHECK`.
 *
 * @example
 * ```ts ignore
 * const image = await buildImage(); // "localhost/exec-server:test"
 * ```
 */
export function buildImage(): Promise<string> {
  built ??= (async () => {
    await ensureBaseImages();
    const ca = HOST_CA_BUNDLE === undefined ? [] : [
      "--volume",
      `${HOST_CA_BUNDLE}:/run/build-ca.crt:ro`,
      "--build-arg",
      "DENO_CERT=/run/build-ca.crt",
    ];
    await podmanOk(["build", "--quiet", "--format", "docker", ...ca, "-t", IMAGE_TAG, REPO_DIR]);
    return IMAGE_TAG;
  })();
  return built;
}

/**
 * A fresh container name: `prefix` and random hex (`es-image-1a2b3c4d`).
 *
 * @example
 * ```ts
 * import { containerName } from "./container.ts";
 * console.log(containerName("es-image-").startsWith("es-image-")); // true
 * ```
 */
export function containerName(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return prefix + Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * A free TCP port on 127.0.0.1 (for `-p 127.0.0.1:PORT:8080`).
 *
 * @example
 * ```ts
 * import { freePort } from "./container.ts";
 * console.log(freePort() > 0); // true
 * ```
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Writes `token` to a new temporary directory, readable by the image's
 * uid 10001, for `-v DIR:/run/secrets/exec-server:ro`; returns the
 * directory (remove it when done).
 *
 * @example
 * ```ts ignore
 * const dir = await writeTokenDir("s3cret");
 * // podman run -v `${dir}:${TOKEN_DIR_IN_CONTAINER}:ro` ...
 * ```
 */
export async function writeTokenDir(token: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "es-token-" });
  await Deno.chmod(dir, 0o755);
  await Deno.writeTextFile(`${dir}/token`, `${token}\n`, { mode: 0o644 });
  await Deno.chmod(`${dir}/token`, 0o644);
  return dir;
}

/** Options for {@linkcode runContainer}. */
export interface RunContainerOptions {
  /** The name prefix (each helper's own, e.g. `es-image-`); a random suffix is added. */
  prefix: string;
  /**
   * The image.
   * @default {IMAGE_TAG}
   */
  image?: string;
  /** `podman run` options before the image (`--read-only`, `-p`, `-v`, ...). */
  options?: string[];
  /** Arguments after the image (the entrypoint's arguments); omitted, the image's CMD. */
  command?: string[];
}

/** A container started by {@linkcode runContainer}; disposing it removes it. */
export interface Container extends AsyncDisposable {
  /** The container's name. */
  readonly name: string;
  /** Waits until the container has exited and returns its exit code. */
  wait(): Promise<number>;
  /** Its output so far (`podman logs`: stdout and stderr). */
  logs(): Promise<PodmanResult>;
  /** `podman exec NAME ARGS...` (options such as `-i` go first in `args`). */
  exec(args: string[], stdin?: string): Promise<PodmanResult>;
  /** `podman stop -t SECONDS NAME`: SIGTERM (the image's STOPSIGNAL), SIGKILL after the grace. */
  stop(seconds?: number): Promise<PodmanResult>;
  /** Removes the container, running or not (`podman rm -f -v -t 0`: its anonymous `/workspace` volume too). */
  remove(): Promise<void>;
}

/**
 * Starts a detached container (`podman run -d --name PREFIX… OPTIONS IMAGE
 * COMMAND`). Use it with `await using` so it is removed however the test
 * ends.
 *
 * @example
 * ```ts ignore
 * await using box = await runContainer({
 *   prefix: "es-image-",
 *   options: ["--read-only", "--tmpfs", "/tmp"],
 *   command: ["--version"],
 * });
 * console.log(await box.wait(), (await box.logs()).stdout);
 * ```
 */
export async function runContainer(options: RunContainerOptions): Promise<Container> {
  const name = containerName(options.prefix);
  await podmanOk([
    "run",
    "-d",
    "--name",
    name,
    ...(options.options ?? []),
    options.image ?? IMAGE_TAG,
    ...(options.command ?? []),
  ]);
  const remove = () => removeContainer(name);
  return {
    name,
    wait: async () => Number((await podmanOk(["wait", name])).trim()),
    logs: () => podman(["logs", name]),
    exec: (args, stdin) =>
      podman(["exec", ...(stdin === undefined ? [] : ["-i"]), name, ...args], stdin),
    stop: (seconds = 10) => podman(["stop", "-t", String(seconds), name]),
    remove,
    [Symbol.asyncDispose]: remove,
  };
}

/**
 * Removes the container `name` if it exists, without a grace period.
 *
 * @example
 * ```ts ignore
 * await removeContainer("es-image-1a2b3c4d");
 * ```
 */
export async function removeContainer(name: string): Promise<void> {
  await podman(["rm", "-f", "-v", "-t", "0", "--ignore", name]);
}

/**
 * Polls `http://127.0.0.1:PORT/healthz` until it answers 200; returns
 * false when it has not within `timeoutMs`.
 *
 * @example
 * ```ts ignore
 * if (!await waitForHealthz(port)) throw new Error("the container never became healthy");
 * ```
 */
export async function waitForHealthz(port: number, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      await response.body?.cancel();
      if (response.status === 200) return true;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}
