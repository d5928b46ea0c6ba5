/**
 * The floor of the `cold` metric: the least a `deno run` program does to answer the harness's
 * cold-start exchange. It answers `initialize` and every other request with a fixed result, and
 * runs a `process/start` with `Deno.Command` (stdout and stderr piped, as a server would),
 * sending `process/exited` and `process/closed` when it ends. It validates nothing, keeps no
 * session and speaks only the WebSocket frames a harness client sends (masked, unfragmented
 * text). Not a server: a measuring stick for what Deno itself costs on this machine.
 *
 * ```sh
 * deno task bench --server "deno run --allow-all $PWD/bench/floor_server.ts" --only cold
 * ```
 *
 * @module
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

type Send = (text: string) => void;

async function drain(stream: ReadableStream<Uint8Array>): Promise<void> {
  const reader = stream.getReader();
  while (!(await reader.read()).done) { /* output is not forwarded */ }
}

function answer(text: string, send: Send): void {
  const message = JSON.parse(text);
  if (typeof message.id !== "number") return;
  if (message.method !== "process/start") {
    send(JSON.stringify({ id: message.id, result: { sessionId: "floor" } }));
    return;
  }
  const { processId, argv } = message.params as { processId: string; argv: string[] };
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  send(JSON.stringify({ id: message.id, result: { processId } }));
  Promise.all([child.status, drain(child.stdout), drain(child.stderr)])
    .then(([status]) => {
      send(
        JSON.stringify({ method: "process/exited", params: { processId, exitCode: status.code } }),
      );
      send(JSON.stringify({ method: "process/closed", params: { processId } }));
    });
}

async function serveStdio(): Promise<void> {
  const buffer = new Uint8Array(65536);
  let pending = "";
  const send: Send = (text) => void Deno.stdout.writeSync(encoder.encode(text + "\n"));
  for (let n = await Deno.stdin.read(buffer); n !== null; n = await Deno.stdin.read(buffer)) {
    pending += decoder.decode(buffer.subarray(0, n));
    for (let end = pending.indexOf("\n"); end >= 0; end = pending.indexOf("\n")) {
      answer(pending.slice(0, end), send);
      pending = pending.slice(end + 1);
    }
  }
}

function frame(text: string): Uint8Array {
  const payload = encoder.encode(text);
  const head = payload.length < 126
    ? [0x81, payload.length]
    : payload.length < 65536
    ? [0x81, 126, payload.length >> 8, payload.length & 0xff]
    : [0x81, 127, 0, 0, 0, 0, ...[24, 16, 8, 0].map((s) => (payload.length >>> s) & 0xff)];
  const out = new Uint8Array(head.length + payload.length);
  out.set(head);
  out.set(payload, head.length);
  return out;
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
  const send: Send = (text) => void conn.write(frame(text)).catch(() => {});
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
    const mask = bytes.subarray(offset, offset + 4);
    const payload = bytes.slice(offset + 4, offset + 4 + length);
    for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
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
