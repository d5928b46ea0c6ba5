/**
 * Waits for one poll of the runtime's I/O driver: a byte written to a pipe of this process and
 * read back through `node:net` can only be read once Deno's runtime has asked the kernel which
 * of its descriptors are ready, and that same poll finds every socket that has data waiting.
 * A timer does not do this: an expired timer runs without that poll.
 *
 * @module
 */

import type { Socket } from "node:net";
import { deadline } from "../host/deadline.ts";
import { C, closeFd, fileControl, pipeFds, writeFd } from "../host/libc.ts";

type NetModule = typeof import("node:net");

/**
 * A self-pipe, opened on first use and closed by {@linkcode IoTurn.close} (until the next use).
 *
 * @example
 * ```ts
 * import * as net from "node:net";
 * import { IoTurn } from "./io_turn.ts";
 * const turn = new IoTurn(net);
 * await turn.next();
 * turn.close();
 * ```
 */
export class IoTurn {
  #net: NetModule;
  #socket: Socket | undefined;
  #writeFd = -1;
  #waiters: (() => void)[] = [];
  #byte = new Uint8Array(1);

  /**
   * @param net `node:net`, whose sockets read the pipe on Deno's event loop.
   */
  constructor(net: NetModule) {
    this.#net = net;
  }

  /**
   * Resolves after the runtime's next poll for readiness (on a timer turn instead when no pipe
   * can be made, e.g. with every descriptor in use).
   */
  next(): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    if (!this.#open()) {
      deadline(0, resolve);
      return promise;
    }
    this.#waiters.push(resolve);
    // One byte for all who wait for the same poll.
    if (this.#waiters.length === 1 && writeFd(this.#writeFd, this.#byte) !== 1) {
      this.#wakeAll();
    }
    return promise;
  }

  /** Closes the pipe (the next {@linkcode next} opens another); resolves who waits. */
  close(): void {
    this.#socket?.destroy();
    this.#socket = undefined;
    if (this.#writeFd >= 0) closeFd(this.#writeFd);
    this.#writeFd = -1;
    this.#wakeAll();
  }

  #open(): boolean {
    if (this.#socket !== undefined) return true;
    const fds = new Int32Array(2);
    if (pipeFds(fds, C.O_CLOEXEC) !== 0) return false;
    // The write end never blocks (it holds at most a byte per poll anyway).
    fileControl(fds[1]!, C.F_SETFL, C.O_NONBLOCK);
    this.#writeFd = fds[1]!;
    const socket = new this.#net.Socket({ fd: fds[0]!, readable: true, writable: false });
    socket.on("data", () => this.#wakeAll());
    socket.on("error", () => this.close());
    this.#socket = socket;
    return true;
  }

  #wakeAll(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
