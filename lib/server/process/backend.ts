/**
 * What the process table needs from a running child, whichever way it was
 * spawned (pipes in `pipe.ts`, a pseudo-terminal in `tty.ts`).
 *
 * @module
 */

import type { SignalName } from "../../protocol/methods.ts";
import type { OutputStream } from "./output_ring.ts";

/** A spawned child. */
export interface Backend {
  /** The child's pid, also its process group's id. */
  readonly pid: number;
  /** It runs on a pseudo-terminal. */
  readonly tty: boolean;
  /** Its stdin accepts writes. */
  readonly stdin: boolean;
  /** Queues bytes for its stdin. */
  write(bytes: Uint8Array): Promise<void>;
  /** Ends the input: closes the pipe after queued writes, or types EOF on a tty. */
  closeStdin(): Promise<void>;
  /**
   * Every signal goes to the whole process group; `interrupt` on a tty goes to the terminal's
   * foreground group, as a typed Ctrl-C.
   */
  signal(name: SignalName): void;
  /** Sends a signal to the whole process group; a gone group is not an error. */
  kill(signal: Deno.Signal): void;
  /** Sets the terminal size (tty only). */
  resize(rows: number, cols: number): void;
}

/** Where a backend reports what the child does. */
export interface BackendEvents {
  /**
   * A chunk of output. Returns a promise when the reader must wait before
   * reading more (backpressure reaches the child's pipe or terminal).
   */
  output(stream: OutputStream, bytes: Uint8Array): Promise<void> | void;
  /** One of the child's output streams ended. */
  streamEnded(): void;
  /** The child exited with a code, or was ended by a signal (its POSIX name). */
  exit(code: number, signal: string | null): void;
}
