/**
 * The floor of the `cold`, `stdin`, `rpc`, `http` and `stream` metrics: the least a `deno run`
 * program does to answer the harness. It answers `fs/getMetadata` with one `lstat` of the path,
 * `initialize` and every other request with a fixed result, and runs a
 * `process/start` with `Deno.Command` (stdout and stderr piped, as a server would), sending
 * `process/exited` and `process/closed` when it ends. Its stdout is read as Deno's stream hands
 * it over and each chunk goes out as one `process/output` notification (`toBase64`, a template
 * string, encoded straight into the frame batch the socket writes; the pipe is not read while
 * more than 1 MiB of messages wait for the socket). It validates nothing, keeps no session, no
 * output ring and no pacing, and speaks only the WebSocket frames a harness client sends
 * (masked, unfragmented text, unmasked a 32-bit word at a time as the server does). Not a
 * server: a measuring stick for what Deno itself costs on this machine.
 *
 * A process started with `pipeStdin` is handled as `--stdin MODE` says (`cat` when not given):
 * - `null`: no child at all; each `process/write` is answered at once and its chunk (still
 *   base64) sent straight back as the process's output: what the harness client alone costs.
 * - `devnull`: the same echo, and the decoded chunk is also written to a `cat > /dev/null`
 *   child's stdin (answered at once, written in order): the client plus the pipe write.
 * - `cat`: the chunk is decoded and written to `cat`, whose output is read, base64 encoded and
 *   sent as `process/output`: the whole pipeline with the least JavaScript.
 *
 * An `http/request` is relayed to its origin over one kept-alive connection per origin (one
 * write of the head and body, reads until the `content-length` body is in; no chunked bodies,
 * redirects, proxies or checks) and answered with the status, the header lines and the body in
 * base64, the reference's result shape: the least a Deno server does per `http/request`.
 *
 * ```sh
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts" --only cold
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts" --only rpc
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts --stdin null" --only stdin
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts" --only http
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts" --only stream
 * ```
 *
 * @module
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Queues one message; a promise when more than `QUEUED_CHARS` wait, settled once they are taken. */
type Send = (text: string) => Promise<void> | undefined;

/** How much queued text makes a reader wait for the socket (the floor's only flow control). */
const QUEUED_CHARS = 1 << 20;
type StdinMode = "null" | "devnull" | "cat";

const argValue = (name: string): string | undefined => {
  const at = Deno.args.indexOf(name);
  return at < 0 ? undefined : Deno.args[at + 1];
};
const STDIN_MODE = (argValue("--stdin") ?? "cat") as StdinMode;

/** A process started with `pipeStdin`: where its writes go. */
interface Piped {
  seq: number;
  stdin: WritableStreamDefaultWriter<Uint8Array> | null;
  child: Deno.ChildProcess | null;
}
const piped = new Map<string, Piped>();

function output(processId: string, seq: number, chunk: string): string {
  return `{"method":"process/output","params":{"processId":${
    JSON.stringify(processId)
  },"seq":${seq},"stream":"stdout","chunk":"${chunk}"}}`;
}

async function drain(
  stream: ReadableStream<Uint8Array>,
  forward?: (bytes: Uint8Array) => Promise<void> | undefined,
): Promise<void> {
  for await (const bytes of stream) await forward?.(bytes);
}

function ended(processId: string, exitCode: number, send: Send): void {
  send(JSON.stringify({ method: "process/exited", params: { processId, exitCode } }));
  send(JSON.stringify({ method: "process/closed", params: { processId } }));
}

function start(processId: string, argv: string[], pipeStdin: boolean, send: Send): void {
  if (pipeStdin && STDIN_MODE === "null") {
    piped.set(processId, { seq: 0, stdin: null, child: null });
    return;
  }
  const devnull = pipeStdin && STDIN_MODE === "devnull";
  const child = new Deno.Command(devnull ? "/bin/sh" : argv[0]!, {
    args: devnull ? ["-c", "cat > /dev/null"] : argv.slice(1),
    stdin: pipeStdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const entry: Piped = { seq: 0, stdin: pipeStdin ? child.stdin.getWriter() : null, child };
  if (pipeStdin) piped.set(processId, entry);
  const forward = devnull
    ? undefined
    : (bytes: Uint8Array) => send(output(processId, ++entry.seq, bytes.toBase64()));
  Promise.all([child.status, drain(child.stdout, forward), drain(child.stderr)])
    .then(([status]) => ended(processId, status.code, send));
}

function write(processId: string, chunk: string, send: Send): void {
  const entry = piped.get(processId);
  if (entry === undefined) return;
  if (STDIN_MODE !== "cat") send(output(processId, ++entry.seq, chunk));
  if (STDIN_MODE !== "null") entry.stdin?.write(Uint8Array.fromBase64(chunk)).catch(() => {});
}

function terminate(processId: string, send: Send): void {
  const entry = piped.get(processId);
  piped.delete(processId);
  if (entry?.child) entry.child.kill("SIGKILL");
  else if (entry) ended(processId, 137, send);
}

/** One kept-alive connection per origin, read by one relayed request at a time. */
const origins = new Map<string, Promise<Deno.TcpConn>>();

/** Relays one `http/request` over its origin's kept-alive connection (see the module doc). */
async function relay(id: number, params: Record<string, unknown>, send: Send): Promise<void> {
  const url = new URL(params.url as string);
  let conn = origins.get(url.host);
  if (conn === undefined) {
    conn = Deno.connect({ hostname: url.hostname, port: Number(url.port || 80) }).then((c) => {
      c.setNoDelay(true);
      return c;
    });
    origins.set(url.host, conn);
  }
  const tcp = await conn;
  const body = typeof params.bodyBase64 === "string"
    ? Uint8Array.fromBase64(params.bodyBase64)
    : null;
  let head = `${params.method} ${url.pathname}${url.search} HTTP/1.1\r\n`;
  for (const header of (params.headers ?? []) as { name: string; value: string }[]) {
    head += `${header.name}: ${header.value}\r\n`;
  }
  head += `host: ${url.host}\r\n${body ? `content-length: ${body.length}\r\n` : ""}\r\n`;
  const headBytes = encoder.encode(head);
  const message = new Uint8Array(headBytes.length + (body?.length ?? 0));
  message.set(headBytes);
  if (body) message.set(body, headBytes.length);
  await tcp.write(message);
  const buffer = new Uint8Array(65536);
  let received = 0;
  while (true) {
    const n = await tcp.read(buffer.subarray(received));
    if (n === null) throw new Error("origin closed");
    received += n;
    const text = decoder.decode(buffer.subarray(0, received));
    const end = text.indexOf("\r\n\r\n");
    if (end < 0) continue;
    const lines = text.slice(0, end).split("\r\n");
    const headers = lines.slice(1).map((line) => {
      const colon = line.indexOf(":");
      return { name: line.slice(0, colon).toLowerCase(), value: line.slice(colon + 1).trim() };
    });
    const length = Number(headers.find((h) => h.name === "content-length")?.value ?? 0);
    if (received < end + 4 + length) continue;
    const bodyBase64 = buffer.subarray(end + 4, end + 4 + length).toBase64();
    const status = Number(lines[0]!.split(" ")[1]);
    send(JSON.stringify({ id, result: { status, headers, bodyBase64 } }));
    return;
  }
}

function answer(text: string, send: Send): void {
  const message = JSON.parse(text);
  if (typeof message.id !== "number") return;
  const params = message.params as Record<string, unknown>;
  const processId = params?.processId as string;
  if (message.method === "http/request") {
    relay(message.id, params, send).catch(() =>
      send(JSON.stringify({ id: message.id, error: { code: -32603, message: "relay failed" } }))
    );
  } else if (message.method === "process/write") {
    send(`{"id":${message.id},"result":{"status":"accepted"}}`);
    write(processId, params.chunk as string, send);
  } else if (message.method === "fs/getMetadata") {
    // One lstat of the path, as the server makes for anything but a symlink.
    const info = Deno.lstatSync((params.path as string).slice("file://".length));
    send(JSON.stringify({
      id: message.id,
      result: {
        isDirectory: info.isDirectory,
        isFile: info.isFile,
        isSymlink: info.isSymlink,
        size: info.size,
        createdAtMs: info.birthtime?.getTime() ?? 0,
        modifiedAtMs: info.mtime?.getTime() ?? 0,
      },
    }));
  } else if (message.method === "process/start") {
    send(JSON.stringify({ id: message.id, result: { processId } }));
    start(processId, params.argv as string[], params.pipeStdin === true, send);
  } else {
    send(JSON.stringify({ id: message.id, result: { sessionId: "floor" } }));
    if (message.method === "process/terminate") terminate(processId, send);
  }
}

async function serveStdio(): Promise<void> {
  const buffer = new Uint8Array(65536);
  let pending = "";
  const send = sender(Deno.stdout, lineInto);
  for (let n = await Deno.stdin.read(buffer); n !== null; n = await Deno.stdin.read(buffer)) {
    pending += decoder.decode(buffer.subarray(0, n));
    for (let end = pending.indexOf("\n"); end >= 0; end = pending.indexOf("\n")) {
      answer(pending.slice(0, end), send);
      pending = pending.slice(end + 1);
    }
  }
}

/** Writes `text` framed into `out` at `at` (room for its UTF-8 and a header assumed). */
type FrameInto = (text: string, out: Uint8Array, at: number) => number;

/**
 * Sends each message whole and in order: the ones queued while a write is under way are
 * encoded together into one reused buffer and leave in the next write (a write may take only
 * part of what it is given).
 */
function sender(to: { write(bytes: Uint8Array): Promise<number> }, into: FrameInto): Send {
  let queued: string[] = [];
  let chars = 0;
  let buffer = new Uint8Array(1 << 18);
  let writing = false;
  let room: PromiseWithResolvers<void> | null = null;
  const flush = async () => {
    writing = true;
    try {
      while (queued.length > 0) {
        const texts = queued;
        const most = chars * 3 + texts.length * 10;
        queued = [];
        chars = 0;
        room?.resolve();
        room = null;
        if (buffer.length < most) buffer = new Uint8Array(most);
        let end = 0;
        for (const text of texts) end = into(text, buffer, end);
        for (let done = 0; done < end;) done += await to.write(buffer.subarray(done, end));
      }
    } finally {
      writing = false;
    }
  };
  return (text) => {
    queued.push(text);
    chars += text.length;
    if (!writing) flush().catch(() => {});
    if (chars <= QUEUED_CHARS) return undefined;
    room ??= Promise.withResolvers<void>();
    return room.promise;
  };
}

function lineInto(text: string, out: Uint8Array, at: number): number {
  const end = at + encoder.encodeInto(text, out.subarray(at)).written;
  out[end] = 0x0a;
  return end + 1;
}

function headLength(length: number): number {
  return length < 126 ? 2 : length < 65536 ? 4 : 10;
}

/** An unmasked text frame: the header's size is guessed from the text's length, then checked. */
function frameInto(text: string, out: Uint8Array, at: number): number {
  let head = headLength(text.length);
  let written = encoder.encodeInto(text, out.subarray(at + head)).written;
  while (headLength(written) !== head) {
    head = headLength(written);
    written = encoder.encodeInto(text, out.subarray(at + head)).written;
  }
  out[at] = 0x81;
  if (head === 2) out[at + 1] = written;
  else if (head === 4) out.set([126, written >> 8, written & 0xff], at + 1);
  else out.set([127, 0, 0, 0, 0, ...[24, 16, 8, 0].map((s) => (written >>> s) & 0xff)], at + 1);
  return at + head + written;
}

async function serveWebSocket(conn: Deno.TcpConn): Promise<void> {
  conn.setNoDelay(true);
  const buffer = new Uint8Array(65536);
  let bytes = new Uint8Array(0);
  const fill = async (): Promise<boolean> => {
    const n = await conn.read(buffer);
    if (n === null) return false;
    const next = new Uint8Array(bytes.length + n);
    next.set(bytes);
    next.set(buffer.subarray(0, n), bytes.length);
    bytes = next;
    return true;
  };
  while (!decoder.decode(bytes).includes("\r\n\r\n")) if (!(await fill())) return;
  const head = decoder.decode(bytes);
  bytes = bytes.subarray(encoder.encode(head.slice(0, head.indexOf("\r\n\r\n") + 4)).length);
  const key = /^sec-websocket-key:\s*(\S+)/im.exec(head)?.[1] ?? "";
  const digest = await crypto.subtle.digest("SHA-1", encoder.encode(key + WS_GUID));
  await conn.write(encoder.encode(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${new Uint8Array(digest).toBase64()}\r\n\r\n`,
  ));
  const send = sender(conn, frameInto);
  while (true) {
    while (bytes.length < 2) if (!(await fill())) return;
    const opcode = bytes[0]! & 0x0f;
    let length = bytes[1]! & 0x7f;
    let offset = 2;
    if (length === 126) {
      while (bytes.length < 4) if (!(await fill())) return;
      length = (bytes[2]! << 8) | bytes[3]!;
      offset = 4;
    }
    while (bytes.length < offset + 4 + length) if (!(await fill())) return;
    // One copy of the key and payload; the payload unmasked a word at a time with the key's word.
    const framed = bytes.slice(offset, offset + 4 + length);
    const words = new Uint32Array(framed.buffer, 0, framed.length >>> 2);
    const key = words[0]!;
    for (let w = 1; w < words.length; w++) words[w]! ^= key;
    for (let i = words.length * 4; i < framed.length; i++) framed[i]! ^= framed[i & 3]!;
    const payload = framed.subarray(4);
    bytes = bytes.subarray(offset + 4 + length);
    if (opcode === 8) return;
    answer(decoder.decode(payload), send);
  }
}

if (import.meta.main) {
  const listen = Deno.args[Deno.args.indexOf("--listen") + 1] ?? "stdio";
  if (listen === "stdio") {
    await serveStdio();
  } else {
    const { hostname, port } = new URL(listen.replace(/^ws:/, "http:"));
    const listener = Deno.listen({ hostname, port: Number(port || 0) });
    console.log(`ws://${hostname}:${(listener.addr as Deno.NetAddr).port}`);
    for await (const conn of listener) serveWebSocket(conn).finally(() => conn.close());
  }
}
