/**
 * Response bodies of `http/request`: transparent `gzip`/`zstd` decoding and
 * the bound of a buffered body.
 *
 * @module
 */

import { RpcError } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { BODY_DECODE_ERROR, bodyFailed } from "./errors.ts";
import { isVisibleAscii } from "./headers.ts";
import type { ReceivedResponse } from "./redirects.ts";

/**
 * Largest response body returned by a buffered request: 512 MiB (the reference
 * sets none; this is `fs/readFile`'s). Larger bodies fail with `-32603` naming
 * `streamResponse`. The body is held as it arrived, in its chunks, until it has
 * all arrived (so that a failure is still answered as an error), and its base64
 * is then made a piece at a time while the reply is written: the server holds
 * about the body, not the several copies a reply built whole takes.
 */
export const MAX_BUFFERED_BODY_BYTES: number = 512 * 1024 * 1024;

/** The content coding of a response body that is undone, or `null` for none. */
export type BodyCoding = "gzip" | "zstd" | null;

/**
 * The response status and headers for the client, and the body's content
 * coding: a single `gzip` or `zstd` coding is undone (and its
 * `content-encoding` and `content-length` headers dropped); response header
 * values other than visible ASCII are left out. Headers are grouped by name
 * where the name first appears (`headers.ts`).
 *
 * @param response The final response of the exchange.
 */
export function responseResult(
  response: ReceivedResponse,
): { result: Omit<ResultOf<"http/request">, "bodyBase64">; coding: BodyCoding } {
  const lines = response.head.headers;
  const grouped = new Map<string, string[]>();
  for (let i = 0; i < lines.length; i++) {
    const name = lines[i]![0];
    const values = grouped.get(name);
    if (values) values.push(lines[i]![1]);
    else grouped.set(name, [lines[i]![1]]);
  }
  const encodings = grouped.get("content-encoding");
  const named = encodings?.length === 1 ? encodings[0]!.toLowerCase() : "";
  const coding = named === "gzip" || named === "zstd" ? named : null;
  if (coding !== null) {
    grouped.delete("content-encoding");
    grouped.delete("content-length");
  }
  const headers: { name: string; value: string }[] = [];
  grouped.forEach((values, name) => {
    for (let i = 0; i < values.length; i++) {
      if (isVisibleAscii(values[i]!)) headers.push({ name, value: values[i]! });
    }
  });
  return { result: { status: response.head.status, headers }, coding };
}

/**
 * The decoded body chunks of a response.
 *
 * @param response The final response of the exchange.
 * @param coding Its content coding ({@linkcode responseResult}).
 */
export function bodyChunks(
  response: ReceivedResponse,
  coding: BodyCoding,
): AsyncIterable<Uint8Array> {
  const raw = response.reader.body(response.framing);
  if (coding === null) return raw;
  return decompress(raw, coding === "gzip" ? gunzip() : unzstd());
}

/** A buffered body: its chunks as they arrived, and their total size. */
export interface BufferedBody {
  /** The chunks, in order. */
  readonly parts: Uint8Array[];
  /** Their total size in bytes. */
  readonly length: number;
}

/**
 * The whole decoded body of a buffered request, bounded by
 * {@linkcode MAX_BUFFERED_BODY_BYTES}; an uncoded body that arrived with the
 * head is returned as it is.
 *
 * @param response The final response of the exchange.
 * @param coding Its content coding ({@linkcode responseResult}).
 * @throws {RpcError} `-32603` beyond the bound or when the body fails to decode.
 */
export function bufferedBody(
  response: ReceivedResponse,
  coding: BodyCoding,
): BufferedBody | Promise<BufferedBody> {
  const received = coding === null ? response.reader.takeReceivedBody(response.framing) : null;
  if (received === null) return collect(bodyChunks(response, coding));
  if (received.length > MAX_BUFFERED_BODY_BYTES) throw tooLarge();
  return { parts: [received], length: received.length };
}

/** Decodes a content-coded body; an empty body stays empty instead of failing. */
async function* decompress(
  raw: AsyncGenerator<Uint8Array, void, undefined>,
  decoder: TransformStream<Uint8Array, Uint8Array>,
): AsyncGenerator<Uint8Array, void, undefined> {
  let first: Uint8Array | undefined;
  for await (const chunk of raw) {
    if (chunk.length > 0) {
      first = chunk;
      break;
    }
  }
  if (first === undefined) return;
  const input = first;
  async function* source(): AsyncGenerator<Uint8Array, void, undefined> {
    yield input;
    yield* raw;
  }
  for await (const chunk of ReadableStream.from(source()).pipeThrough(decoder)) {
    if (chunk.length > 0) yield chunk;
  }
}

function gunzip(): TransformStream<Uint8Array, Uint8Array> {
  return new DecompressionStream("gzip") as TransformStream<Uint8Array, Uint8Array>;
}

/**
 * A web `TransformStream` over `node:zlib`'s zstd decoder (Web `DecompressionStream` has no zstd).
 * `node:zlib` is imported on first use: loading it costs about 15 ms of server start-up.
 */
function unzstd(): TransformStream<Uint8Array, Uint8Array> {
  let zstd: ReturnType<typeof import("node:zlib").createZstdDecompress>;
  let ended: Promise<void>;
  return new TransformStream<Uint8Array, Uint8Array>({
    async start(controller): Promise<void> {
      const { createZstdDecompress } = await import("node:zlib");
      zstd = createZstdDecompress();
      ended = new Promise<void>((resolve, reject) => {
        zstd.once("end", resolve);
        zstd.once("error", reject);
      });
      ended.catch(() => {});
      zstd.on("data", (chunk: Uint8Array) => {
        try {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        } catch {
          // The stream was already errored or cancelled.
        }
      });
    },
    transform(chunk): Promise<void> {
      return new Promise((resolve, reject) => {
        zstd.write(chunk, (err) => err ? reject(err) : resolve());
      });
    },
    flush(): Promise<void> {
      zstd.end();
      return ended;
    },
    cancel(): void {
      zstd.destroy();
    },
  });
}

/** Reads a whole buffered body, bounded by {@linkcode MAX_BUFFERED_BODY_BYTES}. */
async function collect(chunks: AsyncIterable<Uint8Array>): Promise<BufferedBody> {
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of chunks) {
      total += chunk.length;
      if (total > MAX_BUFFERED_BODY_BYTES) {
        throw tooLarge();
      }
      parts.push(chunk);
    }
  } catch (err) {
    if (err instanceof RpcError) throw err;
    throw bodyFailed(BODY_DECODE_ERROR);
  }
  return { parts, length: total };
}

function tooLarge(): RpcError {
  return bodyFailed(
    `response body exceeds the ${MAX_BUFFERED_BODY_BYTES} byte limit of buffered requests; ` +
      "use streamResponse",
  );
}
