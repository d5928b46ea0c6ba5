/**
 * A counting semaphore for bounding concurrent work.
 *
 * @module
 */

/**
 * Hands out a fixed number of permits; `acquire` waits in FIFO order.
 *
 * @example Bound concurrency to two
 * ```ts
 * import { Semaphore } from "./semaphore.ts";
 * const sem = new Semaphore(2);
 * const release = await sem.acquire();
 * release();
 * ```
 */
export class Semaphore {
  #available: number;
  #waiters: (() => void)[] = [];

  /**
   * Creates a semaphore.
   *
   * @param permits How many holders may run at once.
   */
  constructor(permits: number) {
    this.#available = permits;
  }

  /** Permits currently free. */
  get available(): number {
    return this.#available;
  }

  /** Waits for a permit and returns its release function (call it once). */
  async acquire(): Promise<() => void> {
    if (this.#available > 0) {
      this.#available--;
    } else {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next) next();
      else this.#available++;
    };
  }
}
