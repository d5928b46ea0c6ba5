/**
 * Response bodies of `http/request`: transparent `gzip`/`zstd` decoding and
 * the bound of a buffered body.
 *
 * @module
 */

import { RpcError } from "../../protocol/errors.ts";
import type { ResultOf } from "../../protocol/methods.ts";
import { concatBytes } from "../host/bytes.ts";
import { MAX_REPLY_DATA_BYTES } from "../host/reply_limit.ts";
import { BODY_DECODE_ERROR, bodyFailed } from "./errors.ts";
import { headerDelete, headerGet, type HeaderMap, isVisibleAscii } from "./headers.ts";
import type { ReceivedResponse } from "./redirects.ts";

/**
 * Largest response body returned by a buffered request (32 MiB, the reply
 * data bound); larger bodies fail with `-32603` naming `streamResponse`.
 */
export const MAX_BUFFERED_BODY_BYTES: number = MAX_REPLY_DATA_BYTES;

/**
 * The response headers for the client plus the decoded body chunks: a
 * single `gzip` or `zstd` content coding is undone (and its
 * `content-encoding` and `content-length` headers dropped); response header
 * values other than visible ASCII are left out.
 *
 * @param response The final response of the exchange.
 */
export function decodedBody(
  response: ReceivedResponse,
): {
  result: Omit<ResultOf<"http/request">, "bodyBase64">;
  chunks: AsyncIterable<Uint8Array>;
} {
  const grouped: HeaderMap = [];
  for (const [name, value] of response.head.headers) {
    const values = headerGet(grouped, name);
    if (values) values.push(value);
    else grouped.push({ name, values: [value] });
  }
  const encodings = headerGet(grouped, "content-encoding") ?? [];
  const coding = encodings.length === 1 ? encodings[0]!.toLowerCase() : "";
  const decode = coding === "gzip" || coding === "zstd";
  const kept = decode ? headerDelete(grouped, ["content-encoding", "content-length"]) : grouped;
  const headers = kept.flatMap((entry) =>
    entry.values.filter(isVisibleAscii).map((value) => ({ name: entry.name, value }))
  );
  const raw = response.reader.body(response.framing);
  const chunks = decode ? decompress(raw, coding === "gzip" ? gunzip() : unzstd()) : raw;
  return { result: { status: response.head.status, headers }, chunks };
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

/**
 * Reads a whole buffered body, bounded by {@linkcode MAX_BUFFERED_BODY_BYTES}.
 *
 * @param chunks The decoded body.
 * @throws {RpcError} `-32603` beyond the bound or when the body fails to decode.
 */
export async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of chunks) {
      total += chunk.length;
      if (total > MAX_BUFFERED_BODY_BYTES) {
        throw bodyFailed(
          `response body exceeds the ${MAX_BUFFERED_BODY_BYTES} byte limit of buffered requests; ` +
            "use streamResponse",
        );
      }
      parts.push(chunk);
    }
  } catch (err) {
    if (err instanceof RpcError) throw err;
    throw bodyFailed(BODY_DECODE_ERROR);
  }
  return concatBytes(parts, total);
}
