/**
 * Turns of the event loop for everything else while several output pipes are read in bulk.
 *
 * A reader of a pipe that is always full never waits: each of its reads completes at once, and
 * with several of them every turn of the event loop is long. Deno's runtime then looks for
 * other readiness (a client's next request on its socket, say) only every few dozen turns, and
 * a keystroke's `process/write` waited about 60 ms behind eight such readers on this project's
 * 2-core VM (docs/benchmarks.md, `load`). So while at least {@linkcode BULK_GATE_STREAMS} streams
 * read in bulk, a bulk read that comes more than {@linkcode BULK_GATE_MS} after the last rest
 * pauses its stream until a timer turn, which lets the runtime poll for everything else; one
 * stream alone is never paused.
 *
 * @module
 */

/** How long (ms) bulk readers run between two rests while several read at once. */
export const BULK_GATE_MS = 1;

/** How many streams must be reading in bulk at once before they rest. */
export const BULK_GATE_STREAMS = 2;

/** One output stream's view of the gate. */
export interface BulkGateStream {
  /**
   * Reports one read: `bulk` when it found the pipe full. Returns a promise when the stream
   * should pause until it resolves.
   */
  read(bulk: boolean): Promise<void> | undefined;
  /** The stream ended. */
  end(): void;
}

/**
 * A gate shared by the output streams of a server (its clock and its rest).
 *
 * @example Two streams in bulk rest once the budget is spent
 * ```ts
 * import { BulkGate } from "./bulk_gate.ts";
 * let now = 0;
 * const gate = new BulkGate({ now: () => now, rest: () => Promise.resolve() });
 * const [a, b] = [gate.stream(), gate.stream()];
 * a.read(true);
 * b.read(true);
 * now += 5;
 * console.log(a.read(true) instanceof Promise); // true
 * ```
 */
export class BulkGate {
  #bulk = 0;
  #since: number;
  #rest: Promise<void> | undefined;
  #now: () => number;
  #wait: () => Promise<void>;

  /**
   * Creates a gate.
   *
   * @param clock The time in ms, and the rest (a timer turn).
   */
  constructor(
    clock: { now(): number; rest(): Promise<void> } = {
      now: () => performance.now(),
      rest: () => new Promise((resolve) => setTimeout(resolve, 0)),
    },
  ) {
    this.#now = clock.now;
    this.#wait = clock.rest;
    this.#since = this.#now();
  }

  /** Registers a stream. */
  stream(): BulkGateStream {
    let bulk = false;
    const set = (now: boolean) => {
      if (now === bulk) return;
      bulk = now;
      this.#bulk += now ? 1 : -1;
    };
    return {
      read: (isBulk) => {
        set(isBulk);
        if (!isBulk || this.#bulk < BULK_GATE_STREAMS) return undefined;
        if (this.#rest !== undefined) return this.#rest;
        if (this.#now() - this.#since <= BULK_GATE_MS) return undefined;
        return this.#rest = this.#wait().then(() => {
          this.#rest = undefined;
          this.#since = this.#now();
        });
      },
      end: () => set(false),
    };
  }
}

/** The gate of this server's pipe processes. */
export const PIPE_BULK_GATE: BulkGate = new BulkGate();
