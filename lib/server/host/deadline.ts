/**
 * A cancellable one-shot timer that does not use Deno's global `setTimeout`:
 * the first `setTimeout` or `clearTimeout` call of a Deno process loads its
 * Node timers module (about 10 ms of CPU), which on the WebSocket path would
 * land before the first `initialize` answer. `AbortSignal.timeout` runs on
 * the runtime's own timers, and does not keep the process alive.
 *
 * @module
 */

/**
 * Runs `onExpire` after `ms` milliseconds unless the returned function is called first.
 *
 * @param ms The delay.
 * @param onExpire What to run.
 * @returns Cancels the timer (and drops `onExpire`, so nothing it holds is retained).
 *
 * @example
 * ```ts
 * import { deadline } from "./deadline.ts";
 * const cancel = deadline(10_000, () => console.log("expired"));
 * cancel();
 * ```
 */
export function deadline(ms: number, onExpire: () => void): () => void {
  let pending: (() => void) | null = onExpire;
  AbortSignal.timeout(ms).addEventListener("abort", () => pending?.(), { once: true });
  return () => {
    pending = null;
  };
}
