/**
 * The backend of tty processes (`tty: true`): a real pseudo-terminal from
 * {@linkcode spawnPty}, read until its output ends.
 *
 * @module
 */

import { internalError } from "../../protocol/errors.ts";
import { PROCESS_SIGNALS } from "../../protocol/methods.ts";
import type { Backend, BackendEvents } from "./backend.ts";
import { OutputCoalescer } from "./output_coalescer.ts";
import { spawnPty } from "./pty.ts";
import { signalNameOf } from "./signals.ts";

/** How to spawn a tty process. */
export interface TtyOptions {
  /** Working directory (native absolute path). */
  cwd: string;
  /** The complete environment. */
  env: Record<string, string>;
  /** What the child sees as `argv[0]`. */
  arg0?: string;
  /** The initial terminal size. */
  size?: { rows: number; cols: number };
}

/**
 * Spawns `argv` on a new pseudo-terminal, reporting to `events`.
 *
 * @param events Receives the output (stream `pty`), its end and the exit.
 * @param argv The command line; `argv[0]` is looked up on the environment's `PATH`.
 * @param options Working directory, environment, `arg0`, size.
 * @throws {RpcError} A `spawn*` error when the spawn failed.
 */
export function startTty(events: BackendEvents, argv: string[], options: TtyOptions): Backend {
  const pty = spawnPty(argv, {
    cwd: options.cwd,
    env: options.env,
    arg0: options.arg0,
    rows: options.size?.rows,
    cols: options.size?.cols,
  });
  const merge = new OutputCoalescer((bytes) => events.output("pty", bytes), {});
  // The `process/start` answer is sent in this turn of the event loop: the process's events come
  // on a later one (a child that printed and died at once had its output and exit sent first).
  const afterAnswer = new Promise<void>((resolve) => setTimeout(resolve, 0));
  (async () => {
    await afterAnswer;
    try {
      while (true) {
        const bytes = await pty.read();
        if (bytes === null) break;
        const pending = merge.push(bytes);
        if (pending) await pending;
      }
      await merge.end();
    } finally {
      pty.close();
      events.streamEnded();
    }
  })();
  Promise.all([pty.status, afterAnswer]).then(([status]) =>
    events.exit(status.code, status.signal === null ? null : signalNameOf(status.signal))
  );
  // Whether the terminal's current input line is empty, as far as our writes tell.
  let atLineStart = true;
  return {
    pid: pty.pid,
    tty: true,
    stdin: true,
    write(bytes) {
      if (bytes.length > 0) {
        const last = bytes[bytes.length - 1];
        atLineStart = last === 0x0a || last === 0x0d;
      }
      return pty.write(bytes);
    },
    closeStdin() {
      // ^D (VEOF) ends the input at the start of a line; after a partial line the first one
      // only hands the line to the reader, so a second one is needed.
      const eof = atLineStart ? new Uint8Array([4]) : new Uint8Array([4, 4]);
      atLineStart = true;
      return pty.write(eof);
    },
    signal(name) {
      try {
        if (name === "interrupt") pty.interrupt();
        else pty.kill(PROCESS_SIGNALS[name]);
      } catch (err) {
        throw internalError(`failed to signal process: ${(err as Error).message}`);
      }
    },
    kill: (signal) => pty.kill(signal),
    resize: (rows, cols) => pty.resize(rows, cols),
  };
}
