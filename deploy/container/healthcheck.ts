/**
 * The image's `HEALTHCHECK`: asks the server in the same container for
 * `GET /healthz` on the container's loopback and exits 0 on `200`, 1
 * otherwise, with one line saying why (the image has no curl). The address
 * is `http://127.0.0.1:8080/healthz`, or the first argument:
 *
 * ```sh
 * deno run --allow-net=127.0.0.1:8080 deploy/container/healthcheck.ts
 * ```
 *
 * @module
 */

/** Where the image's server answers `/healthz` by default. */
export const DEFAULT_HEALTH_URL = "http://127.0.0.1:8080/healthz";

/**
 * Whether `url` answers `200` within `timeoutMs`: `""` when healthy, or the
 * reason it is not.
 *
 * @example
 * ```ts ignore
 * const problem = await healthProblem("http://127.0.0.1:8080/healthz");
 * if (problem) console.error(problem);
 * ```
 */
export async function healthProblem(url: string, timeoutMs = 4000): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.status === 200 ? "" : `${url} answered ${response.status}`;
  } catch (err) {
    return `${url} did not answer: ${(err as Error).message}`;
  }
}

if (import.meta.main) {
  const problem = await healthProblem(Deno.args[0] ?? DEFAULT_HEALTH_URL);
  if (problem) console.error(`unhealthy: ${problem}`);
  Deno.exit(problem ? 1 : 0);
}
