/**
 * Newline-delimited JSON over a pair of byte channels: the server's stdin and
 * stdout, read and written directly, or a spawned server's pipes (web
 * streams) on the client side.
 *
 * @module
 */

import { type LineSplitOptions, LineSplitter } from "./line_splitter.ts";
import { OutboundQueue } from "./outbound_queue.ts";
import { type Inbound, receiveStream, type Transport } from "./transport.ts";

/** Options for {@linkcode stdioTransport}. */
export interface StdioTransportOptions extends LineSplitOptions {
  /**
   * Prefix of malformed-message replies.
   *
   * @default {"failed to parse JSON-RPC message from exec-server stdio"}
   */
  parseErrorPrefix?: string;
  /**
   * Label for logs.
   *
   * @default {"exec-server stdio"}
   */
  label?: string;
}

/**
 * Bytes read into the caller's buffer, as `Deno.stdin` gives them: no web stream in between
 * (a server answering its first request over byte streams ran about 25 M more instructions
 * than one reading `Deno.stdin` directly).
 */
export interface ByteReader {
  /** Reads into `buffer`: the count of bytes read, or `null` at the end. */
  read(buffer: Uint8Array): Promise<number | null>;
}

/** A sink that may take part of each write, as `Deno.stdout`. */
export interface ByteWriter {
  /** Writes a prefix of `bytes`: the count written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes the sink (the peer sees the end of the output). */
  close(): void;
}

/** Bytes from the peer: a byte stream or a {@linkcode ByteReader}. */
export type ByteSource = ReadableStream<Uint8Array> | ByteReader;

/** Bytes to the peer: a byte stream or a {@linkcode ByteWriter}. */
export type ByteSink = WritableStream<Uint8Array> | ByteWriter;

/** Size of each read of a {@linkcode ByteReader}. */
const READ_BYTES = 64 * 1024;

/** Reads chunks of `input`: the next one, `null` at the end; and how to stop reading it. */
function chunksOf(
  input: ByteSource,
  splitter: LineSplitter,
): { next(): Promise<Uint8Array | null>; cancel(): void } {
  if ("getReader" in input) {
    const reader = input.getReader();
    return {
      next: () => reader.read().then(({ done, value }) => done ? null : value),
      cancel: () => void reader.cancel().catch(() => {}),
    };
  }
  let buffer = new Uint8Array(READ_BYTES);
  // A read under way cannot be taken back: cancelling settles its wait with the end instead.
  let waiting: PromiseWithResolvers<number | null> | undefined;
  let reading = true;
  return {
    async next() {
      if (!reading) return null;
      // An unfinished line is kept as a view of the last buffer: read into a new one.
      if (splitter.holding) buffer = new Uint8Array(READ_BYTES);
      const wait = waiting = Promise.withResolvers<number | null>();
      input.read(buffer).then(wait.resolve, wait.reject);
      const n = await wait.promise;
      waiting = undefined;
      return n === null || !reading ? null : buffer.subarray(0, n);
    },
    // The abandoned read may still fill the buffer; nothing reads it again.
    cancel() {
      reading = false;
      waiting?.resolve(null);
    },
  };
}

/** Writes whole texts to `output` one after the other, and closes it after the last write. */
function writerOf(output: ByteSink): { write(bytes: Uint8Array): Promise<void>; close(): void } {
  if ("getWriter" in output) {
    const writer = output.getWriter();
    return {
      write: (bytes) => writer.write(bytes),
      close: () => void writer.close().catch(() => {}),
    };
  }
  let last: Promise<void> = Promise.resolve();
  return {
    write(bytes) {
      last = (async () => {
        for (let at = 0; at < bytes.length;) at += await output.write(bytes.subarray(at));
      })();
      return last;
    },
    close() {
      last.catch(() => {}).finally(() => {
        try {
          output.close();
        } catch { /* already closed */ }
      });
    },
  };
}

/**
 * Builds a newline-delimited JSON transport over a pair of byte channels: web streams
 * (a spawned server's pipes), or a reader and a writer such as `Deno.stdin` and
 * `Deno.stdout`.
 *
 * @param input Bytes from the peer.
 * @param output Bytes to the peer.
 * @param options Limits and labels.
 */
export function stdioTransport(
  input: ByteSource,
  output: ByteSink,
  options: StdioTransportOptions = {},
): Transport {
  const writer = writerOf(output);
  const encoder = new TextEncoder();
  let closed = false;
  const queue = new OutboundQueue(
    (text) => writer.write(encoder.encode(text)),
    () => close(),
  );
  const messages: Inbound[] = [];
  let taken = 0;
  const splitter = new LineSplitter((message) => messages.push(message), options);
  const source = chunksOf(input, splitter);
  let ended = false;
  /** The next message already split off, if any. */
  function split(): Inbound | undefined {
    if (taken === messages.length) return undefined;
    const message = messages[taken++]!;
    if (taken === messages.length) messages.length = taken = 0;
    return message;
  }
  async function read(): Promise<Inbound | null> {
    while (!closed && !ended) {
      const chunk = await source.next();
      if (closed) break;
      if (chunk === null) {
        ended = true;
        splitter.end();
      } else splitter.push(chunk);
      const message = split();
      if (message !== undefined) return message;
    }
    return null;
  }
  function receive(): Inbound | null | Promise<Inbound | null> {
    if (closed) return null;
    return split() ?? (ended ? null : read());
  }
  let stream: ReadableStream<Inbound> | undefined;
  /** `receive` as a stream, made for a reader that asks for one. */
  function readable(): ReadableStream<Inbound> {
    return stream ??= receiveStream(receive, close);
  }
  function close(): void {
    if (closed) return;
    closed = true;
    queue.close();
    source.cancel();
    writer.close();
  }
  return {
    get readable() {
      return readable();
    },
    receive,
    send: (text) => queue.push(text),
    close,
    parseErrorPrefix: options.parseErrorPrefix ??
      "failed to parse JSON-RPC message from exec-server stdio",
    label: options.label ?? "exec-server stdio",
  };
}
