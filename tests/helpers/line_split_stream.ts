/**
 * {@linkcode LineSplitter} as a web stream, for tests reading a spawned
 * server's stdout pipe line by line.
 *
 * @module
 */

import { type LineSplitOptions, LineSplitter } from "../../lib/rpc/line_splitter.ts";
import type { Inbound } from "../../lib/rpc/transport.ts";

/**
 * {@linkcode LineSplitter} as a web stream: bytes in, lines out.
 *
 * @example Split two messages
 * ```ts
 * import { LineSplitStream } from "./line_split_stream.ts";
 * const input = ReadableStream.from([new TextEncoder().encode('{"a":1}\n\n{"b":2}\n')]);
 * const lines = await Array.fromAsync(input.pipeThrough(new LineSplitStream()));
 * console.log(lines); // ['{"a":1}', '{"b":2}']
 * ```
 */
export class LineSplitStream extends TransformStream<Uint8Array, Inbound> {
  /**
   * Creates a splitter.
   *
   * @param options The line length limit.
   */
  constructor(options: LineSplitOptions = {}) {
    let controller: TransformStreamDefaultController<Inbound>;
    const splitter = new LineSplitter((message) => controller.enqueue(message), options);
    super({
      start(c) {
        controller = c;
      },
      transform(chunk) {
        splitter.push(chunk);
      },
      flush() {
        splitter.end();
      },
    });
  }
}
