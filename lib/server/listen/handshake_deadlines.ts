/**
 * The handshake timeout of accepted connections: each has the same time to
 * complete its upgrade, so the oldest runs out first and one timer, set for
 * the oldest, serves them all (not one timer per connection).
 *
 * @module
 */

import { deadline } from "../host/deadline.ts";

/** Where a {@linkcode HandshakeDeadlines} reads the time and sets its timer (a test's fake clock). */
export interface DeadlineClock {
  /** The time in milliseconds (`performance.now()`). */
  now(): number;
  /** Runs `onExpire` after `ms` milliseconds. */
  after(ms: number, onExpire: () => void): void;
}

const REAL_CLOCK: DeadlineClock = {
  now: () => performance.now(),
  after: (ms, onExpire) => void deadline(ms, onExpire),
};

/**
 * Handshakes in progress, oldest first, each with the time it runs out;
 * `onExpire` gets each one whose time ran out (it is no longer held then).
 *
 * @example Two handshakes 100 ms apart run out 100 ms apart
 * ```ts
 * import { type DeadlineClock, HandshakeDeadlines } from "./handshake_deadlines.ts";
 * let now = 0;
 * const timers: [number, () => void][] = [];
 * const clock: DeadlineClock = { now: () => now, after: (ms, run) => void timers.push([now + ms, run]) };
 * const expired: string[] = [];
 * const handshakes = new HandshakeDeadlines<string>(300, (name) => expired.push(name), clock);
 * handshakes.add("a");
 * now = 100;
 * handshakes.add("b");
 * [now] = timers[0]!;
 * timers.shift()![1]();
 * console.log(expired, handshakes.has("b")); // ["a"] true
 * ```
 */
export class HandshakeDeadlines<T> {
  #expires = new Map<T, number>();
  #timerSet = false;
  #timeoutMs: number;
  #onExpire: (item: T) => void;
  #clock: DeadlineClock;

  /**
   * @param timeoutMs How long each handshake may take.
   * @param onExpire Gets each handshake whose time ran out.
   * @param clock The time and the timer (the real ones by default).
   */
  constructor(timeoutMs: number, onExpire: (item: T) => void, clock: DeadlineClock = REAL_CLOCK) {
    this.#timeoutMs = timeoutMs;
    this.#onExpire = onExpire;
    this.#clock = clock;
  }

  /** How many handshakes are held. */
  get size(): number {
    return this.#expires.size;
  }

  /** Holds `item` until its handshake completes ({@linkcode HandshakeDeadlines.delete}) or runs out. */
  add(item: T): void {
    this.#expires.set(item, this.#clock.now() + this.#timeoutMs);
    if (!this.#timerSet) {
      this.#timerSet = true;
      this.#clock.after(this.#timeoutMs, () => this.#sweep());
    }
  }

  /** Whether `item`'s handshake is still held (it has neither completed nor run out). */
  has(item: T): boolean {
    return this.#expires.has(item);
  }

  /** Lets go of `item`; false when it was not held. */
  delete(item: T): boolean {
    return this.#expires.delete(item);
  }

  /** Lets go of the oldest handshake and returns it. */
  takeOldest(): T | undefined {
    const oldest = this.#expires.keys().next().value;
    if (oldest !== undefined) this.#expires.delete(oldest);
    return oldest;
  }

  /** Lets go of every handshake and returns them. */
  takeAll(): T[] {
    const all = [...this.#expires.keys()];
    this.#expires.clear();
    return all;
  }

  #sweep(): void {
    this.#timerSet = false;
    const now = this.#clock.now();
    for (const [item, expires] of this.#expires) {
      if (expires > now) {
        this.#timerSet = true;
        this.#clock.after(expires - now, () => this.#sweep());
        return;
      }
      this.#expires.delete(item);
      this.#onExpire(item);
    }
  }
}
