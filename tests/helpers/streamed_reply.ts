/**
 * Reading a large `fs/readFile` reply as a stream: the reply's messages in pieces as they
 * arrive (a stdio line, a WebSocket message's frames), its base64 decoded and hashed as it
 * comes, and the server's peak RSS growth while it answers. Used by
 * tests/streamed_reply_test.ts and tools/read_file_peak.ts (the reference's peak).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ServerProcess, type StartServerOptions } from "./server_harness.ts";
import { RawWebSocket } from "./reliability_server.ts";

const encoder = new TextEncoder();

/** Writes `mib` MiB of data that differs in every MiB (a reordered chunk would show); its SHA-256. */
export async function writeFileOf(path: string, mib: number): Promise<string> {
  const hash = createHash("sha256");
  using file = await Deno.open(path, { write: true, create: true, truncate: true });
  const block = new Uint8Array(1 << 20);
  const words = new Uint32Array(block.buffer);
  for (let i = 0; i < mib; i++) {
    for (let w = 0; w < words.length; w += 1024) words[w] = i * 2654435761 + w;
    hash.update(block);
    for (let at = 0; at < block.length;) at += await file.write(block.subarray(at));
  }
  return hash.digest("hex");
}

/** Peak and current resident set size of a process, in KiB. */
export function memoryKib(pid: number): { hwm: number; rss: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return {
    hwm: Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]),
    rss: Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]),
  };
}

/**
 * Resets the peak RSS of `pid` to its current RSS (`clear_refs` 5, Linux 4.0+), so the peak
 * measured next is this request's; returns the RSS it starts from.
 */
export function resetPeak(pid: number): number {
  try {
    Deno.writeTextFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // Not permitted: the peak since start stands (a larger baseline only hides growth below it).
  }
  return memoryKib(pid).rss;
}

/** A piece of one message's bytes, and whether it ends the message. */
interface Piece {
  bytes: Uint8Array;
  end: boolean;
}

/** The messages of a newline-delimited byte stream, in pieces as they are read. */
async function* linePieces(source: ReadableStream<Uint8Array>): AsyncGenerator<Piece> {
  for await (const chunk of source) {
    let start = 0;
    for (let at = chunk.indexOf(10); at >= 0; at = chunk.indexOf(10, start)) {
      yield { bytes: chunk.subarray(start, at), end: true };
      start = at + 1;
    }
    if (start < chunk.length) yield { bytes: chunk.subarray(start), end: false };
  }
}

/** The data messages of a server's WebSocket frames (unmasked), in pieces as they are read. */
async function* framePieces(conn: Deno.Conn, buffered: Uint8Array): AsyncGenerator<Piece> {
  let buffer = buffered;
  const buf = new Uint8Array(256 * 1024);
  const more = async () => {
    const n = await conn.read(buf);
    if (n === null) return false;
    const joined = new Uint8Array(buffer.length + n);
    joined.set(buffer);
    joined.set(buf.subarray(0, n), buffer.length);
    buffer = joined;
    return true;
  };
  while (true) {
    while (buffer.length < 2) if (!(await more())) return;
    let length = buffer[1]! & 0x7f;
    let offset = 2;
    if (length >= 126) {
      offset = length === 126 ? 4 : 10;
      while (buffer.length < offset) if (!(await more())) return;
      const view = new DataView(buffer.buffer, buffer.byteOffset);
      length = length === 126 ? view.getUint16(2) : Number(view.getBigUint64(2));
    }
    const fin = (buffer[0]! & 0x80) !== 0;
    const control = (buffer[0]! & 0x08) !== 0;
    buffer = buffer.subarray(offset);
    // The payload, passed on as it arrives (only what is buffered is held).
    let left = length;
    while (true) {
      const take = Math.min(left, buffer.length);
      left -= take;
      if (!control && (take > 0 || left === 0)) {
        yield { bytes: buffer.slice(0, take), end: fin && left === 0 };
      }
      buffer = buffer.subarray(take);
      if (left === 0) break;
      if (!(await more())) return;
    }
  }
}

/** Hashes the bytes of base64 text given in pieces of any length. */
class Base64Hasher {
  #hash = createHash("sha256");
  #carry = "";
  bytes = 0;

  push(text: string): void {
    const all = this.#carry + text;
    const whole = all.length - (all.length % 4);
    if (whole > 0) {
      const bytes = Uint8Array.fromBase64(all.slice(0, whole));
      this.bytes += bytes.length;
      this.#hash.update(bytes);
    }
    this.#carry = all.slice(whole);
  }

  digest(): string {
    assert.equal(this.#carry, "", "base64 length is a multiple of 4");
    return this.#hash.digest("hex");
  }
}

/**
 * Reads messages until the reply to request `id`, which must carry `member`: the
 * SHA-256 of its decoded data and the count of its bytes. Other messages are skipped.
 */
async function digestReadFileReply(
  pieces: AsyncIterator<Piece>,
  id: number,
  member = "dataBase64",
): Promise<{ digest: string; bytes: number }> {
  const marker = `"${member}":"`;
  const latin1 = new TextDecoder("latin1");
  const next = async () => {
    const { value, done } = await pieces.next();
    if (done) throw new Error("the server closed before the reply's end");
    return value;
  };
  while (true) {
    // The start of a message: enough of it to tell whether it is the reply.
    let start = "";
    let end = false;
    while (!start.includes(marker) && !end && start.length < 4096) {
      const piece = await next();
      start += latin1.decode(piece.bytes);
      end = piece.end;
    }
    if (!start.includes(marker)) {
      assert.ok(!start.includes(`"id":${id},`), `the request failed: ${start.slice(0, 300)}`);
      while (!end) end = (await next()).end;
      continue;
    }
    const hasher = new Base64Hasher();
    let rest = start.slice(start.indexOf(marker) + marker.length);
    while (true) {
      const quote = rest.indexOf('"');
      if (quote >= 0) {
        hasher.push(rest.slice(0, quote));
        let tail = rest.slice(quote);
        while (!end) {
          const piece = await next();
          tail += latin1.decode(piece.bytes);
          end = piece.end;
        }
        assert.match(tail, /^"\}.*\}$/);
        return { digest: hasher.digest(), bytes: hasher.bytes };
      }
      hasher.push(rest);
      assert.ok(!end, "the reply ended inside its string");
      const piece = await next();
      rest = latin1.decode(piece.bytes);
      end = piece.end;
    }
  }
}

const INITIALIZE = JSON.stringify({ id: 1, method: "initialize", params: { clientName: "big" } });
const INITIALIZED = JSON.stringify({ method: "initialized", params: {} });
/**
 * The request a read sends (id 2) and the reply's base64 member: `fs/readFile` of a path, or
 * any other request given as its text.
 */
export interface BigRequest {
  /** The request's JSON text, with id 2. */
  text: string;
  /** The reply's base64 member. */
  member: string;
}

const readFileRequest = (path: string) =>
  JSON.stringify({ id: 2, method: "fs/readFile", params: { path: `file://${path}` } });

/** One 400 MiB read over a transport: the digest, size and peak growth it measured. */
export interface BigRead {
  digest: string;
  bytes: number;
  growthKib: number;
  seconds: number;
}

/**
 * Reads `path` with one `fs/readFile` over a WebSocket (a raw client that hashes the reply
 * as it arrives) from a server started with `options`.
 */
export async function readOverWebSocket(
  path: string,
  options: StartServerOptions = {},
  request?: BigRequest,
): Promise<BigRead> {
  await using server = await ServerProcess.start({ ...options, listen: "ws" });
  await using socket = await RawWebSocket.connect(server.port);
  assert.equal(socket.answer.status, 101);
  await socket.sendText(INITIALIZE);
  await socket.sendText(INITIALIZED);
  assert.match((await socket.readMessage())!, /"sessionId"/);
  const before = resetPeak(server.pid);
  const started = performance.now();
  await socket.sendText(request?.text ?? readFileRequest(path));
  const pieces = framePieces(socket.conn, socket.takeBuffered());
  const read = await digestReadFileReply(pieces, 2, request?.member);
  const seconds = (performance.now() - started) / 1000;
  return { ...read, growthKib: memoryKib(server.pid).hwm - before, seconds };
}

/** Reads `path` with one `fs/readFile` over stdio from a server started with `options`. */
export async function readOverStdio(
  path: string,
  options: StartServerOptions = {},
  request?: BigRequest,
): Promise<BigRead> {
  await using server = await ServerProcess.start({
    ...options,
    listen: "stdio",
    manualStdout: true,
  });
  const writer = server.child.stdin.getWriter();
  try {
    await writer.write(encoder.encode(`${INITIALIZE}\n${INITIALIZED}\n`));
    const pieces = linePieces(server.child.stdout);
    // The initialize reply first (skipped as not the reply to id 2 would be: read it here).
    const first = await pieces.next();
    let line = new TextDecoder().decode(first.value!.bytes);
    let end = first.value!.end;
    while (!end) {
      const next = await pieces.next();
      line += new TextDecoder().decode(next.value!.bytes);
      end = next.value!.end;
    }
    assert.match(line, /"sessionId"/);
    const before = resetPeak(server.pid);
    const started = performance.now();
    await writer.write(encoder.encode(`${request?.text ?? readFileRequest(path)}\n`));
    const read = await digestReadFileReply(pieces, 2, request?.member);
    const seconds = (performance.now() - started) / 1000;
    const growthKib = memoryKib(server.pid).hwm - before;
    await pieces.return(undefined);
    return { ...read, growthKib, seconds };
  } finally {
    await writer.close().catch(() => {});
  }
}
