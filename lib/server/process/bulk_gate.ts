/**
 * Turns among the output pipes that are read in bulk, so that everything else is read too.
 *
 * A reader of a pipe that is always full never waits: each of its reads completes at once, and
 * Deno's runtime (tokio's single-threaded scheduler) keeps running the JavaScript that handles
 * them. It asks the kernel which sockets are ready, and collects what its thread pool finished,
 * only when that work runs out, or after 61 runs of it. With several such readers the work
 * never runs out: a keystroke's `process/write` then sat in the server socket's receive queue
 * for up to a hundred milliseconds, and the read of its echo from the pty waited too; a server
 * started with `DENO_TOKIO_EVENT_INTERVAL=1` (a poll after every run) did not wait
 * (docs/benchmarks.md, under `load`).
 *
 * So a stream reads in bulk only while it holds the turn, and the others that find their pipe
 * full wait in line. After {@linkcode BULK_TURN_MS} (or at once when its holder's pipe is
 * drained or its stream ends), the holder stops at its next read, nothing reads in bulk until
 * the runtime has polled once (the clock's `poll`: `io_turn.ts`), and the first in line takes
 * the turn. A stream whose reads do not fill its pipe (output that trickles, an echo) never
 * waits, and a stream alone in bulk keeps the turn.
 *
 * @module
 */

/** How long (ms) one stream reads in bulk while others wait for the turn. */
export const BULK_TURN_MS = 2;

/** One output stream's view of the gate. */
export interface BulkGateStream {
  /**
   * Reports one read: `bulk` when it found the pipe full. Returns a promise when the stream
   * must pause until it resolves (it holds the turn then).
   */
  read(bulk: boolean): Promise<void> | undefined;
  /** The stream ended: it leaves the line, or gives up the turn. */
  end(): void;
}

/** What a gate waits on. */
export interface BulkGateClock {
  /** The time in ms. */
  now(): number;
  /** Resolves after `ms` ms. */
  after(ms: number): Promise<void>;
  /** Resolves once the runtime has polled its sockets and threads (between two turns). */
  poll(): Promise<void>;
  /** Nothing reads in bulk any more, or waits to (what `poll` holds may be let go). */
  idle?(): void;
}

/** A stream in line, and what resumes it. */
interface Waiter {
  id: object;
  resumed: Promise<void>;
  resume(): void;
}

/**
 * A gate shared by output streams: who holds the turn, and who waits for it.
 *
 * @example A second stream in bulk waits for the first one's turn to end
 * ```ts
 * import { BULK_TURN_MS, BulkGate } from "./bulk_gate.ts";
 * let now = 0;
 * const timers: (() => void)[] = [];
 * const gate = new BulkGate({
 *   now: () => now,
 *   after: () => new Promise((resolve) => timers.push(resolve)),
 *   poll: () => Promise.resolve(),
 * });
 * const [a, b] = [gate.stream(), gate.stream()];
 * console.log(a.read(true)); // undefined
 * const waiting = b.read(true);
 * now += BULK_TURN_MS;
 * timers.shift()!();
 * await waiting; // b holds the turn
 * console.log(a.read(true) instanceof Promise); // true
 * ```
 */
export class BulkGate {
  #clock: BulkGateClock;
  #holder: object | undefined;
  #since = 0;
  /** Counts the turns given, so that a timer knows whether its turn is still on. */
  #turn = 0;
  /** The turn whose end a timer is set for. */
  #timed = -1;
  #line: Waiter[] = [];
  /** Between two turns: waiting for the clock's `poll`. */
  #handing = false;

  /**
   * Creates a gate.
   *
   * @param clock The time, the timers and the poll between turns.
   */
  constructor(clock: BulkGateClock) {
    this.#clock = clock;
  }

  /** Registers a stream. */
  stream(): BulkGateStream {
    const id = {};
    return {
      read: (bulk) => {
        if (this.#holder === id) {
          if (!bulk) this.#release();
          return undefined;
        }
        if (!bulk) return undefined;
        if (this.#holder === undefined && this.#line.length === 0 && !this.#handing) {
          this.#grant(id);
          return undefined;
        }
        return this.#wait(id);
      },
      end: () => {
        const at = this.#line.findIndex((w) => w.id === id);
        if (at >= 0) this.#line.splice(at, 1)[0]!.resume();
        if (this.#holder === id) this.#release();
        else this.#checkIdle();
      },
    };
  }

  #grant(id: object): void {
    this.#holder = id;
    this.#since = this.#clock.now();
    this.#turn++;
    if (this.#line.length > 0) this.#timeTurn();
  }

  /** Ends the current turn after what is left of its time (once per turn). */
  #timeTurn(): void {
    const turn = this.#turn;
    if (this.#timed === turn) return;
    this.#timed = turn;
    const left = Math.max(0, BULK_TURN_MS - (this.#clock.now() - this.#since));
    void this.#clock.after(left).then(() => {
      if (this.#turn === turn && this.#holder !== undefined && this.#line.length > 0) {
        this.#handOver();
      }
    });
  }

  /** Puts a stream in line (once: a read under way when it paused finds it there). */
  #wait(id: object): Promise<void> {
    const waiting = this.#line.find((w) => w.id === id);
    if (waiting !== undefined) return waiting.resumed;
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#line.push({ id, resumed: promise, resume: resolve });
    if (this.#holder !== undefined) this.#timeTurn();
    else this.#handOver();
    return promise;
  }

  /** The holder's pipe is drained, or its stream ended. */
  #release(): void {
    this.#holder = undefined;
    if (this.#line.length > 0) this.#handOver();
    else this.#checkIdle();
  }

  /** Takes the turn from its holder; the first in line gets it once the runtime has polled. */
  #handOver(): void {
    this.#holder = undefined;
    if (this.#handing) return;
    this.#handing = true;
    void this.#clock.poll().then(() => {
      this.#handing = false;
      const next = this.#line.shift();
      if (next === undefined) {
        this.#checkIdle();
        return;
      }
      this.#grant(next.id);
      next.resume();
    });
  }

  #checkIdle(): void {
    if (this.#holder === undefined && this.#line.length === 0 && !this.#handing) {
      this.#clock.idle?.();
    }
  }
}
