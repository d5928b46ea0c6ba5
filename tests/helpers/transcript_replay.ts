/**
 * Replays a recorded transcript (`tests/fixtures/transcripts/`) against a
 * server process: ours for the conformance test, the reference for the
 * recorder (`tests/fixtures/record.ts`).
 *
 * Each `send` line is written as recorded (raw text when `raw`). Before a
 * `send` or `event` line the replay waits until the server has produced
 * everything the recording shows as received before that line (responses by
 * id, process output by byte count per stream, exits, closes, body deltas,
 * watch notifications), which reproduces the recorded timing intent without
 * fixed sleeps. Everything received is kept, with its place among the sent
 * lines, in {@linkcode Replayed.timeline}.
 *
 * @module
 */

import assert from "node:assert/strict";
import { decodeJson } from "../../lib/protocol/json_decode.ts";
import {
  concat,
  delay,
  eventually,
  type Json,
  type MessageLog,
  pidsMatching,
  type ProtocolClient,
  ServerProcess,
  toJson,
  WsClient,
} from "./server_harness.ts";

/** The transcripts directory. */
export const TRANSCRIPTS: string = new URL("../fixtures/transcripts", import.meta.url).pathname;
const FIXTURE_SCRIPT = `${TRANSCRIPTS}/fixture.sh`;
/** Where the transcripts' fs lines point; a replay substitutes its own fixture directory. */
export const FIXTURE_PLACEHOLDER = "/tmp/es-fixture";
/** The server's whole environment (plus `ReplayOptions.env`). */
export const SERVER_ENV: Record<string, string> = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: "/root",
  LANG: "C.UTF-8",
};

/** One line of a transcript (see the transcripts README). */
export interface Line {
  /** Direction, or a harness event. */
  dir: "send" | "recv" | "event";
  /** The message. */
  msg?: Json;
  /** The exact text sent, instead of `msg`. */
  raw?: string;
  /** Sent as a binary WebSocket frame. */
  frame?: "binary";
  /** Connection name in multi-connection transcripts. */
  conn?: string;
  /** The server closed the stream. */
  eof?: boolean;
  /** What the harness did or observed. */
  event?: string;
  /** A remark. */
  note?: string;
}

/** How to run one transcript. */
export interface ReplayOptions {
  /** Transport. */
  listen?: "stdio" | "ws";
  /** Extra server flags. */
  args?: string[];
  /** The server program instead of our `main.ts` (see `StartServerOptions.command`). */
  command?: readonly string[];
  /** Needs the filesystem fixture (`fixture.sh`). */
  fixture?: boolean;
  /**
   * Where to build the fixture: by default a fresh temp dir; the recorder uses
   * {@linkcode FIXTURE_PLACEHOLDER} itself so paths need no rewriting, not even inside output.
   */
  fixtureDir?: string;
  /** Files to add to the fixture: path relative to it → content. */
  fixtureFiles?: Record<string, string>;
  /** Needs the HTTP fixture server. */
  http?: boolean;
  /** Extra environment for the server. */
  env?: Record<string, string>;
  /**
   * Gives the `sleep` commands of the transcript unique durations, so that parallel runs never
   * count each other's processes (the replay of our server does; the recorder must not).
   */
  uniqueSleeps?: boolean;
  /**
   * After a fatal message, require the server to close the stream (ours does). When false (the
   * reference keeps some connections open until stdin closes), wait up to 2 s for it and go on.
   *
   * @default {true}
   */
  requireEofAfterFatal?: boolean;
  /**
   * How long to wait for a detached session's processes to be gone (transcript 24).
   *
   * @default {30_000}
   */
  expiryTimeoutMs?: number;
}

/** One client connection of a replay. */
export interface Conn {
  /** The protocol client. */
  client: ProtocolClient;
  /** The messages sent on it (placeholders filled in). */
  sent: Json[];
  /** `performance.now()` when it was opened (orders messages across connections). */
  openedAt: number;
}

/** What happened, in order: transcript lines acted on, and what the server sent in between. */
export type TimelineEntry =
  | { kind: "line"; index: number }
  | { kind: "recv"; conn: string; text: string; msg: Json }
  | { kind: "eof"; conn: string };

/** The outcome of {@linkcode replayTranscript}. */
export interface Replayed {
  /** The transcript's lines, with the fixture directory and HTTP port filled in. */
  lines: Line[];
  /** The original lines, as in the file. */
  original: Line[];
  /** Connections by name (`""` in single-connection transcripts). */
  conns: Map<string, Conn>;
  /** Placeholders learned (session ids). */
  ctx: Context;
  /** Sends, events and receptions in order. */
  timeline: TimelineEntry[];
  /** The fixture directory used (already removed), if any. */
  fixture: string | undefined;
  /** The HTTP fixture's port, if any. */
  httpPort: number | undefined;
}

/**
 * Every transcript and the setup it was recorded with; the conformance test and the recorder
 * both run from this table.
 */
export const TRANSCRIPT_SETUPS: Readonly<Record<string, ReplayOptions>> = {
  "01_handshake_stdio.jsonl": {},
  "02_gating_before_initialize.jsonl": {},
  "03_envelope_and_decoding.jsonl": {},
  "04_fatal_unexpected_notification.jsonl": {},
  "05_fatal_client_response.jsonl": {},
  "05b_fatal_client_error.jsonl": {},
  "06_fatal_initialized_before_initialize.jsonl": {},
  "07_process_basic.jsonl": {},
  "08_process_read_long_poll_and_paging.jsonl": {},
  "09_process_stdin_write.jsonl": {},
  "10_process_tty.jsonl": {},
  "11_process_signal_terminate.jsonl": {},
  "12_process_output_after_exit_ordering.jsonl": {},
  "13_fs_basic.jsonl": { fixture: true },
  "14_fs_walk.jsonl": { fixture: true },
  "15_fs_file_handles.jsonl": { fixture: true },
  "16_fs_watch_missing.jsonl": { fixture: true },
  // A dummy token: the transcript shows `valueEnvVar` reading it.
  "17_http_request_buffered.jsonl": { http: true, env: { MY_TOKEN: "secret-token" } },
  "18_http_request_streaming.jsonl": { http: true },
  "19_ws_session_resume.jsonl": { listen: "ws", fixture: true },
  "20_ws_framing.jsonl": { listen: "ws" },
  "21_concurrency_concurrent_requests_4.jsonl": {
    fixture: true,
    args: ["--concurrent-requests", "4"],
  },
  "21b_concurrency_default_inline.jsonl": {},
  "22_codex_specific_methods.jsonl": {
    fixture: true,
    // A capability root with a plugin manifest and one skill.
    fixtureFiles: {
      "caproot/.codex-plugin/plugin.json": `{"name":"demo","version":"1.0.0","description":"d"}\n`,
      "caproot/skills/myskill/SKILL.md": "---\nname: myskill\ndescription: test skill\n---\nbody\n",
    },
  },
  "23_stdio_eof_kills_processes.jsonl": {},
  "24_ws_detach_and_ttl_expiry.jsonl": { listen: "ws" },
};

/** Reads a transcript file into lines (64-bit integers stay exact). */
export function readTranscript(text: string): Line[] {
  return text.split("\n").filter((l) => l.trim() !== "").map((l) => decodeJson(l) as Line);
}

// ---------------------------------------------------------------------------
// Fixtures

/**
 * Builds the fs fixture of `fixture.sh` in `dir` (by default a fresh directory under /tmp) and
 * returns the directory.
 */
export async function makeFixture(dir?: string): Promise<string> {
  dir ??= await Deno.makeTempDir({ dir: "/tmp", prefix: "es-fixture-" });
  const script = (await Deno.readTextFile(FIXTURE_SCRIPT)).replaceAll(FIXTURE_PLACEHOLDER, dir);
  const { code, stderr } = await new Deno.Command("/bin/sh", {
    args: ["-c", script],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, `fixture.sh failed: ${new TextDecoder().decode(stderr)}`);
  return dir;
}

/** Python's `json.dumps` formatting (`", "` and `": "` separators), as the recorder's echo server. */
function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${
      Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`).join(", ")
    }}`;
  }
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * The recorder's tiny HTTP/1.1 server (transcripts README): fixed `Server`
 * and `Date` headers, written byte by byte so header order is exact.
 */
export class HttpFixture implements AsyncDisposable {
  /** The port it listens on (127.0.0.1). */
  readonly port: number;
  #listener: Deno.Listener;
  #conns = new Set<Deno.Conn>();
  #timers = new Map<ReturnType<typeof setTimeout>, () => void>();
  #tasks = new Set<Promise<void>>();
  #closed = false;
  #accepting: Promise<void>;

  constructor() {
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        this.#conns.add(conn);
        const task = this.#serve(conn).catch(() => {}).finally(() => {
          this.#conns.delete(conn);
          this.#tasks.delete(task);
          try {
            conn.close();
          } catch {
            // Closed already.
          }
        });
        this.#tasks.add(task);
      }
    } catch {
      // Listener closed.
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, ms);
      this.#timers.set(timer, resolve);
    });
  }

  async #serve(conn: Deno.Conn): Promise<void> {
    const encoder = new TextEncoder();
    let buffer: Uint8Array = new Uint8Array(0);
    const chunk = new Uint8Array(65536);
    const readMore = async (): Promise<boolean> => {
      const n = await conn.read(chunk);
      if (n === null) return false;
      buffer = concat([buffer, chunk.subarray(0, n)]);
      return true;
    };
    const write = async (text: string | Uint8Array) => {
      const bytes = typeof text === "string" ? encoder.encode(text) : text;
      let written = 0;
      while (written < bytes.length) written += await conn.write(bytes.subarray(written));
    };
    while (!this.#closed) {
      let end: number;
      while ((end = indexOfCrlfCrlf(buffer)) === -1) {
        if (!(await readMore())) return;
      }
      const head = new TextDecoder().decode(buffer.subarray(0, end));
      buffer = buffer.subarray(end + 4);
      const [requestLine, ...headerLines] = head.split("\r\n");
      const [method, path] = requestLine!.split(" ") as [string, string];
      const headers = headerLines.map((line) => {
        const colon = line.indexOf(":");
        return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as [
          string,
          string,
        ];
      });
      const length = Number(headers.find(([n]) => n === "content-length")?.[1] ?? 0);
      while (buffer.length < length) {
        if (!(await readMore())) return;
      }
      const body = new TextDecoder().decode(buffer.subarray(0, length));
      buffer = buffer.subarray(length);
      const base = "Server: testsrv/1.0\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n";
      const send = async (status: string, extra: string, payload = "") => {
        await write(
          `HTTP/1.1 ${status}\r\n${base}${extra}Content-Length: ${
            encoder.encode(payload).length
          }\r\n\r\n${method === "HEAD" ? "" : payload}`,
        );
      };
      if (path === "/hello") {
        await send(
          "200 OK",
          "Content-Type: text/plain\r\nX-Multi: one\r\nX-Multi: two\r\n",
          "hello from server\n",
        );
      } else if (path === "/echo") {
        const echoed = pyJson({
          method,
          path,
          headers: headers.filter(([n]) => n !== "host"),
          body,
        });
        await send("200 OK", "Content-Type: application/json\r\n", echoed);
      } else if (path === "/redirect") {
        await send("302 Found", "Location: /hello\r\n");
      } else if (path === "/loop") {
        await send("302 Found", "Location: /loop\r\n");
      } else if (path.startsWith("/status/")) {
        await send(`${path.slice(8)} Status`, "", "status body");
      } else if (path === "/slow") {
        await this.#sleep(3000);
        await send("200 OK", "Content-Type: text/plain\r\n", "slow\n");
      } else if (path === "/stream") {
        await write(
          `HTTP/1.1 200 OK\r\n${base}Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        for (let i = 0; i < 4; i++) {
          if (i > 0) await this.#sleep(300);
          const event = `data: ${i}\n\n`;
          await write(`${event.length.toString(16)}\r\n${event}\r\n`);
        }
        await write("0\r\n\r\n");
      } else if (path === "/abort") {
        await write(`HTTP/1.1 200 OK\r\n${base}Content-Length: 1000\r\n\r\npartial`);
        return;
      } else if (path === "/stall") {
        await write(`HTTP/1.1 200 OK\r\n${base}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n`);
        await this.#sleep(5000);
        await write("0\r\n\r\n");
      } else {
        await send("404 Not Found", "");
      }
    }
  }

  /** Stops listening and cuts every connection and pending delay short. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    this.#listener.close();
    // Cut pending sleeps short; the handlers then fail writing to the closed connections.
    for (const [timer, resolve] of this.#timers) {
      clearTimeout(timer);
      resolve();
    }
    this.#timers.clear();
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch {
        // Closed already.
      }
    }
    await this.#accepting;
    await Promise.allSettled([...this.#tasks]);
  }
}

function indexOfCrlfCrlf(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Transcript model

/** A response (result or error), not a request or notification. */
export function isResponse(msg: Json): boolean {
  return !("method" in msg) && ("result" in msg || "error" in msg);
}

/** The `params` of a message, `{}` when absent. */
export function params(msg: Json): Json {
  return (msg.params ?? {}) as Json;
}

/** The bytes of a base64 member, empty when it is not a string. */
export function bytesOf(base64: unknown): Uint8Array {
  return typeof base64 === "string" ? Uint8Array.fromBase64(base64) : new Uint8Array();
}

/** What must have arrived for a recorded `recv` line to count as reproduced. */
type Requirement =
  | { kind: "response"; id: unknown; count: number }
  | { kind: "output"; processId: string; stream: string; bytes: number }
  | { kind: "processEvent"; processId: string; method: string }
  | { kind: "delta"; requestId: string; bytes: number; done: boolean }
  | { kind: "notification"; method: string; key: string; count: number }
  | { kind: "eof" };

function requirements(lines: Line[]): Map<number, Requirement> {
  const out = new Map<number, Requirement>();
  const counts = new Map<string, number>();
  const bump = (key: string, by = 1) => {
    const next = (counts.get(key) ?? 0) + by;
    counts.set(key, next);
    return next;
  };
  lines.forEach((line, index) => {
    if (line.dir !== "recv") return;
    const conn = line.conn ?? "";
    if (line.eof) return void out.set(index, { kind: "eof" });
    const msg = line.msg!;
    if (isResponse(msg)) {
      const count = bump(`${conn}\0response\0${toJson(msg.id)}`);
      return void out.set(index, { kind: "response", id: msg.id, count });
    }
    const p = params(msg);
    switch (msg.method) {
      case "process/output": {
        const processId = String(p.processId);
        const stream = String(p.stream);
        const bytes = bump(`${conn}\0out\0${processId}\0${stream}`, bytesOf(p.chunk).length);
        return void out.set(index, { kind: "output", processId, stream, bytes });
      }
      case "process/exited":
      case "process/closed":
        return void out.set(index, {
          kind: "processEvent",
          processId: String(p.processId),
          method: String(msg.method),
        });
      case "http/request/bodyDelta": {
        const requestId = String(p.requestId);
        const bytes = bump(`${conn}\0delta\0${requestId}`, bytesOf(p.deltaBase64).length);
        return void out.set(index, { kind: "delta", requestId, bytes, done: p.done === true });
      }
      default: {
        const key = toJson(p);
        const count = bump(`${conn}\0notif\0${msg.method}\0${key}`);
        return void out.set(index, {
          kind: "notification",
          method: String(msg.method),
          key,
          count,
        });
      }
    }
  });
  return out;
}

function satisfied(req: Requirement, log: MessageLog): boolean {
  const msgs = log.received.map((r) => r.msg);
  switch (req.kind) {
    case "eof":
      return log.eof;
    case "response":
      return msgs.filter((m) => isResponse(m) && sameId(m.id, req.id)).length >= req.count;
    case "output":
      return msgs.filter((m) =>
        m.method === "process/output" && params(m).processId === req.processId &&
        params(m).stream === req.stream
      ).reduce((n, m) => n + bytesOf(params(m).chunk).length, 0) >= req.bytes;
    case "processEvent":
      return msgs.some((m) => m.method === req.method && params(m).processId === req.processId);
    case "delta": {
      const deltas = msgs.filter((m) =>
        m.method === "http/request/bodyDelta" && params(m).requestId === req.requestId
      );
      const bytes = deltas.reduce((n, m) => n + bytesOf(params(m).deltaBase64).length, 0);
      const done = deltas.filter((m) => params(m).done === true).length;
      // A requestId may be reused after its final delta: count finals, not just presence.
      return bytes >= req.bytes && (!req.done || done >= 1);
    }
    case "notification":
      return msgs.filter((m) => m.method === req.method && toJson(params(m)) === req.key)
        .length >= req.count;
  }
}

/** Request ids compare by type and value (`1` is not `"1"`). */
export function sameId(a: unknown, b: unknown): boolean {
  return typeof a === typeof b && a === b;
}

/** A session id placeholder of a transcript. */
export const SESSION_PLACEHOLDER = /^<SESSION_ID(_\d+)?>$/;

/** What a replay learned while running. */
export interface Context {
  /** placeholder → our value (session ids). */
  placeholders: Map<string, string>;
}

/** Applies `fn` to every string inside a JSON value. */
export function replaceStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === "string") return fn(value);
  if (Array.isArray(value)) return value.map((v) => replaceStrings(v, fn));
  if (value !== null && typeof value === "object") {
    const out: Json = {};
    for (const [k, v] of Object.entries(value)) out[k] = replaceStrings(v, fn);
    return out;
  }
  return value;
}

/** Puts our session ids back to their placeholders so both sides read alike. */
export function unsubstitute(value: unknown, ctx: Context): unknown {
  return replaceStrings(value, (s) => {
    for (const [placeholder, actual] of ctx.placeholders) s = s.replaceAll(actual, placeholder);
    return s;
  });
}

/** Fills placeholders (session ids) into a message we are about to send. */
export function substitute(value: unknown, ctx: Context): unknown {
  return replaceStrings(value, (s) => {
    for (const [placeholder, actual] of ctx.placeholders) s = s.replaceAll(placeholder, actual);
    return s;
  });
}

// ---------------------------------------------------------------------------
// Replay

/** Runs one transcript against a fresh server; the caller compares or records the result. */
export async function replayTranscript(
  file: string,
  options: ReplayOptions = {},
): Promise<Replayed> {
  const listen = options.listen ?? "stdio";
  const fixture = options.fixture ? await makeFixture(options.fixtureDir) : undefined;
  for (const [relative, content] of Object.entries(options.fixtureFiles ?? {})) {
    const path = `${fixture}/${relative}`;
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    await Deno.writeTextFile(path, content);
  }
  await using http = options.http ? new HttpFixture() : undefined;
  try {
    const original = await Deno.readTextFile(`${TRANSCRIPTS}/${file}`);
    let text = original;
    if (fixture) text = text.replaceAll(FIXTURE_PLACEHOLDER, fixture);
    if (http) text = text.replaceAll("<HTTP_PORT>", String(http.port));
    if (options.uniqueSleeps) {
      const unique = crypto.randomUUID().slice(0, 8).replace(/\D/g, "1");
      text = text.replaceAll("sleep 4242", `sleep 4242.${unique}`)
        .replaceAll("sleep 4243", `sleep 4243.${unique}`)
        .replaceAll("sleep 424[23]", `sleep 424[23].${unique}`)
        .replaceAll("sleep 3333", `sleep 3333.${unique}`);
    }
    const lines = readTranscript(text);
    await using server = await ServerProcess.start({
      listen,
      args: options.args,
      command: options.command,
      env: { ...SERVER_ENV, ...options.env },
      cwd: "/tmp",
    });
    const conns = new Map<string, Conn>();
    const ctx: Context = { placeholders: new Map() };
    const reqs = requirements(lines);
    const serverStops = lines.some((l) =>
      l.dir === "event" && /the server stopped serving/.test(l.event ?? "")
    );
    const timeline: TimelineEntry[] = [];
    const seen = new Map<string, { count: number; eof: boolean }>();
    /** Appends what arrived since the last call, ordered by arrival across connections. */
    const catchUp = () => {
      const fresh: { at: number; entry: TimelineEntry }[] = [];
      for (const [name, { client, openedAt }] of conns) {
        const mark = seen.get(name) ?? { count: 0, eof: false };
        for (const r of client.log.received.slice(mark.count)) {
          fresh.push({
            at: openedAt + r.at,
            entry: { kind: "recv", conn: name, text: r.text, msg: r.msg },
          });
        }
        mark.count = client.log.received.length;
        if (client.log.eof && !mark.eof) {
          mark.eof = true;
          fresh.push({ at: Infinity, entry: { kind: "eof", conn: name } });
        }
        seen.set(name, mark);
      }
      fresh.sort((a, b) => a.at - b.at);
      timeline.push(...fresh.map((f) => f.entry));
    };

    const conn = async (name = ""): Promise<Conn> => {
      let entry = conns.get(name);
      if (!entry) {
        const openedAt = performance.now();
        const client = listen === "stdio" ? server.stdio! : await server.connect();
        entry = { client, sent: [], openedAt };
        conns.set(name, entry);
      }
      return entry;
    };
    const learnPlaceholders = () => {
      const seenIds = new Map<string, number>();
      for (const line of lines) {
        if (line.dir !== "recv" || !line.msg || !isResponse(line.msg)) continue;
        const name = line.conn ?? "";
        const key = `${name}\0${toJson(line.msg.id)}`;
        const nth = (seenIds.get(key) ?? 0) + 1;
        seenIds.set(key, nth);
        const placeholder = (line.msg.result as Json | undefined)?.sessionId;
        if (typeof placeholder !== "string" || !SESSION_PLACEHOLDER.test(placeholder)) continue;
        if (ctx.placeholders.has(placeholder)) continue;
        const ours = conns.get(name)?.client.log.received.map((r) => r.msg)
          .filter((m) => isResponse(m) && sameId(m.id, line.msg!.id))[nth - 1];
        const actual = (ours?.result as Json | undefined)?.sessionId;
        if (typeof actual === "string") ctx.placeholders.set(placeholder, actual);
      }
    };
    const syncBefore = async (limit: number) => {
      for (let i = 0; i < limit; i++) {
        const req = reqs.get(i);
        if (!req) continue;
        const name = lines[i]!.conn ?? "";
        const { client } = await conn(name);
        if (req.kind === "eof" && !serverStops) await client.close();
        await client.log.waitUntil(
          () => satisfied(req, client.log),
          `${file} line ${i + 1}: ${toJson(lines[i]).slice(0, 300)}`,
        );
      }
      learnPlaceholders();
      catchUp();
    };

    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line.dir === "recv") continue;
      await syncBefore(i);
      timeline.push({ kind: "line", index: i });
      if (line.dir === "send") {
        const entry = await conn(line.conn);
        const msg = line.msg ? substitute(line.msg, ctx) as Json : undefined;
        const payload = line.raw ?? toJson(msg);
        if (msg) entry.sent.push(msg);
        try {
          if (line.frame === "binary" && entry.client instanceof WsClient) {
            entry.client.sendBinary(new TextEncoder().encode(payload));
          } else {
            await entry.client.sendRaw(payload);
          }
        } catch (err) {
          // Writing after the server stopped serving (fatal transcripts) may fail.
          if (!serverStops) throw err;
        }
        continue;
      }
      await handleEvent(line, {
        server,
        conn,
        fixture,
        file,
        expiryTimeoutMs: options.expiryTimeoutMs ?? 30_000,
        requireEofAfterFatal: options.requireEofAfterFatal ?? true,
      });
    }
    await syncBefore(lines.length);
    if (serverStops && options.requireEofAfterFatal !== false) {
      // The server should exit after a fatal error.
      await server.stdio?.log.waitEof();
    }
    catchUp();
    return {
      lines,
      original: readTranscript(original),
      conns,
      ctx,
      timeline,
      fixture,
      httpPort: http?.port,
    };
  } finally {
    if (fixture) await Deno.remove(fixture, { recursive: true }).catch(() => {});
  }
}

async function handleEvent(
  line: Line,
  env: {
    server: ServerProcess;
    conn: (name?: string) => Promise<Conn>;
    fixture: string | undefined;
    file: string;
    expiryTimeoutMs: number;
    requireEofAfterFatal: boolean;
  },
): Promise<void> {
  const event = line.event ?? "";
  let match: RegExpExecArray | null;
  if (/the server stopped serving/.test(event)) {
    if (env.requireEofAfterFatal) await env.server.stdio?.log.waitEof();
    else await env.server.stdio?.log.waitEof(2000).catch(() => {});
  } else if ((match = /client closed stdin; server process exit code (\d+)/.exec(event))) {
    await env.server.stdio!.close();
    assert.equal((await env.server.status).code, Number(match[1]), `${env.file}: exit code`);
  } else if ((match = /processes matching '([^']+)' alive: (\d+)/.exec(event))) {
    const pattern = new RegExp(match[1]!);
    const expected = Number(match[2]);
    const alive = () => pidsMatchingRegex(pattern).length;
    await eventually(() => alive() === expected, 5000);
    assert.equal(alive(), expected, `${env.file}: processes alive before stdin EOF`);
  } else if (
    (match =
      /closed the server's stdin; server exit code (\d+); processes matching '([^']+)' alive afterwards: (\d+)/
        .exec(event))
  ) {
    await env.server.stdio!.close();
    assert.equal((await env.server.status).code, Number(match[1]), `${env.file}: exit code`);
    const pattern = new RegExp(match[2]!);
    const ok = await eventually(() => pidsMatchingRegex(pattern).length === Number(match![3]));
    assert.ok(
      ok,
      `${env.file}: processes still alive after stdin EOF: ${pidsMatchingRegex(pattern)}`,
    );
  } else if ((match = /harness: '([^']+)' processes alive right after detach: (\d+)/.exec(event))) {
    const pattern = new RegExp(match[1]!);
    const expected = Number(match[2]);
    await eventually(() => pidsMatching(pattern).length === expected, 5000);
    assert.equal(pidsMatching(pattern).length, expected, `${env.file}: alive after detach`);
  } else if (
    (match = /after the second disconnect; harness: '([^']+)' processes alive: (\d+)/.exec(event))
  ) {
    // Our server runs with a short --session-ttl: wait for the expiry instead of 85 s.
    const pattern = new RegExp(match[1]!);
    const expected = Number(match[2]);
    const ok = await eventually(
      () => pidsMatching(pattern).length === expected,
      env.expiryTimeoutMs,
    );
    assert.ok(ok, `${env.file}: processes alive after the TTL: ${pidsMatching(pattern)}`);
  } else if ((match = /^(\d+) s after the disconnect$/.exec(event))) {
    await delay(Number(match[1]) * 1000);
  } else if (/closes its websocket|closes; the session is detached again/.test(event)) {
    const { client } = await env.conn(line.conn);
    await client.close();
  } else if ((match = /creates directory (\S+)/.exec(event))) {
    await Deno.mkdir(match[1]!);
  } else if ((match = /creates file (\S+)/.exec(event))) {
    await Deno.writeTextFile(match[1]!, "");
  } else if (
    (match = /client (\w+) drops the TCP connection|client (\w+) sends a websocket close frame/
      .exec(event))
  ) {
    const { client } = await env.conn(line.conn);
    await client.close();
    // Let the server notice the disconnect and detach the session.
    await delay(200);
  } else if (/client sends a close frame/.test(event)) {
    const { client } = await env.conn(line.conn);
    await client.close();
  } else {
    throw new Error(`${env.file}: unhandled event ${event}`);
  }
}

function pidsMatchingRegex(pattern: RegExp): number[] {
  return pidsMatching(pattern);
}
