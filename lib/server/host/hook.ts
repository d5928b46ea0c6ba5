/**
 * A typed event hook: a subsystem publishes what happens in it, and whoever
 * watches it subscribes. The publisher never imports its subscribers, so the
 * core of the server (sessions, processes) does not know that the operator's
 * view (`observe/`, a floor above it) records its events.
 *
 * @module
 */

/**
 * An event with the arguments `A`, published to every subscriber in the
 * order they subscribed. Publishing with no subscriber costs one length
 * check.
 *
 * @example
 * ```ts
 * import { Hook } from "./hook.ts";
 * const exited = new Hook<[pid: number, code: number]>();
 * const unsubscribe = exited.subscribe((pid, code) => console.log(pid, code));
 * exited.publish(42, 0); // logs 42 0
 * unsubscribe();
 * exited.publish(43, 1); // logs nothing
 * console.log(exited.subscribed); // false
 * ```
 */
export class Hook<A extends readonly unknown[]> {
  #listeners: ((...args: A) => void)[] = [];

  /** Whether anyone listens (a publisher may skip building an event nobody reads). */
  get subscribed(): boolean {
    return this.#listeners.length > 0;
  }

  /**
   * Adds a listener.
   *
   * @param listener Called with each published event's arguments.
   * @returns A function that removes the listener.
   */
  subscribe(listener: (...args: A) => void): () => void {
    this.#listeners = [...this.#listeners, listener];
    return () => {
      this.#listeners = this.#listeners.filter((other) => other !== listener);
    };
  }

  /**
   * Tells every listener. A listener that throws is not caught: listeners
   * record, they do not fail.
   *
   * @param args The event's arguments.
   */
  publish(...args: A): void {
    for (const listener of this.#listeners) listener(...args);
  }
}
