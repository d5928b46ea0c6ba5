/**
 * The web console's HTTP side without a browser: the login answers a
 * cookie that holds no token, the feed needs that cookie and the server's
 * own origin, it lists the processes, and any number of feeds follow one
 * process's output (from the retained output on) without taking it from
 * the client that owns it.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  CONSOLE_KEY_META,
  CONSOLE_SUBPROTOCOL,
  MAX_CONSOLE_LOGINS,
} from "../lib/server/observe/console_access.ts";
import {
  CONSOLE_MAX_MESSAGE_BYTES,
  MAX_LISTED_PROCESSES,
  MAX_WATCHES_PER_FEED,
  sessionsMessage,
} from "../lib/server/observe/console_feed.ts";
import { signedBearerAuth } from "../lib/server/listen/signed_bearer.ts";
import { MATRIX_SECRET, mint } from "./helpers/jwt_matrix.ts";
import { nextFeedMessage, tokenAuth } from "./helpers/observe.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { call, sh, startProcess } from "./helpers/rpc.ts";
import { handshake, type Json, ServerProcess } from "./helpers/server_harness.ts";
import { XTERM_JS } from "../lib/server/observe/xterm_assets.ts";

const TOKEN = "console-token-0123456789";

async function authServer(): Promise<InProcessServer> {
  return await InProcessServer.websocket({
    authorize: await tokenAuth(TOKEN),
  });
}

function portOf(server: InProcessServer): number {
  return Number(new URL(server.url).port);
}

/**
 * Logs in with `POST /console/login` and returns the answer's status, `Set-Cookie` and the
 * feed's upgrade headers for that login (its cookie and key).
 */
async function login(
  server: InProcessServer,
  token: string,
): Promise<{ status: number; cookie: string | null; feed: Record<string, string> }> {
  const answer = await fetch(`http://127.0.0.1:${portOf(server)}/console/login`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
  });
  const key = new RegExp(`<meta name="${CONSOLE_KEY_META}" content="([0-9a-f]+)">`)
    .exec(await answer.text())?.[1];
  const cookie = answer.headers.get("set-cookie");
  return {
    status: answer.status,
    cookie,
    feed: {
      Cookie: cookie?.split(";")[0] ?? "",
      "Sec-WebSocket-Protocol": `${CONSOLE_SUBPROTOCOL}, ${CONSOLE_SUBPROTOCOL}.key.${key}`,
    },
  };
}

Deno.test("console login: a refused token gets 401; an accepted one an HttpOnly SameSite=Strict cookie without the token", async () => {
  await using server = await authServer();
  assert.equal((await login(server, "wrong")).status, 401);
  const { status, cookie } = await login(server, TOKEN);
  assert.equal(status, 200);
  assert.match(
    cookie ?? "",
    /^exec_server_console_\d+=[0-9a-f]{64}; Path=\/; Max-Age=28800; HttpOnly; SameSite=Strict$/,
  );
  assert.ok(!cookie!.includes(TOKEN));
});

Deno.test("console feed: refused without a login (401), from another origin (403) and for a DNS name that could be rebound (403)", async () => {
  await using server = await authServer();
  const port = portOf(server);
  const feed = (await login(server, TOKEN)).feed;
  const answer = async (headers: Record<string, string>) => {
    await using raw = await RawWebSocket.connect(port, { path: "/console/feed", headers });
    return raw.answer.status;
  };
  assert.equal(await answer({}), 401);
  assert.equal(await answer({ ...feed, Cookie: `exec_server_console_${port}=forged` }), 401);
  assert.equal(await answer({ ...feed, Origin: "https://evil.example" }), 403);
  assert.equal(
    await answer({
      ...feed,
      Host: `evil.example:${port}`,
      Origin: `http://evil.example:${port}`,
    }),
    403,
  );
  assert.equal(await answer({ ...feed, Origin: `http://127.0.0.1:${port}` }), 101);
  // The protocol's own endpoint keeps refusing every Origin, its own included.
  await using own = await RawWebSocket.connect(port, {
    headers: { Origin: `http://127.0.0.1:${port}` },
  });
  assert.equal(own.answer.status, 403);
});

Deno.test("console login: only the newest logins are kept", async () => {
  await using server = await authServer();
  const first = (await login(server, TOKEN)).feed;
  const open = async (headers: Record<string, string>) => {
    await using raw = await RawWebSocket.connect(portOf(server), {
      path: "/console/feed",
      headers,
    });
    return raw.answer.status;
  };
  assert.equal(await open(first), 101);
  for (let i = 0; i < MAX_CONSOLE_LOGINS - 1; i++) await login(server, TOKEN);
  assert.equal(await open(first), 101, "a login among the newest was dropped");
  await login(server, TOKEN);
  assert.equal(await open(first), 401);
});

Deno.test("console feed: lists processes and lets two observers follow one from its retained output while the owner reads it all", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  const sessionId = await handshake(client);
  await startProcess(client, "job", sh("printf early; read line; printf late"), {
    pipeStdin: true,
  });
  await client.log.waitUntil(
    () => client.log.outputText("job") === "early" || undefined,
    "the early output",
  );
  const origin = { Origin: `http://127.0.0.1:${portOf(server)}` };
  await using first = await RawWebSocket.connect(portOf(server), {
    path: "/console/feed",
    headers: origin,
  });
  await using second = await RawWebSocket.connect(portOf(server), { path: "/console/feed" });
  const listed = await nextFeedMessage(first, (m) => m.type === "sessions");
  const [session] = listed.sessions as Json[];
  assert.deepEqual([session?.id, session?.clientName], [sessionId, "harness"]);
  const [job] = session?.processes as Json[];
  assert.deepEqual(
    [job?.processId, job?.argv, job?.cwd, job?.tty, job?.state, job?.exitCode, job?.sandboxType],
    ["job", sh("printf early; read line; printf late"), "/tmp", false, "running", null, "none"],
  );
  const text = (m: Json) => new TextDecoder().decode(Uint8Array.fromBase64(String(m.data)));
  for (const feed of [first, second]) {
    await feed.sendText(JSON.stringify({ type: "watch", session: sessionId, processId: "job" }));
    assert.equal(text(await nextFeedMessage(feed, (m) => m.type === "output")), "early");
  }
  await call(client, "process/write", { processId: "job", writeId: "w1", chunk: "eA==" });
  await call(client, "process/write", { processId: "job", writeId: "w2", chunk: "Cg==" });
  for (const feed of [first, second]) {
    assert.equal(text(await nextFeedMessage(feed, (m) => m.type === "output")), "late");
    await nextFeedMessage(feed, (m) => m.type === "ended");
  }
  const read = await call(client, "process/read", { processId: "job", afterSeq: 0 });
  assert.equal(
    (read.chunks as Json[]).map((c) =>
      new TextDecoder().decode(Uint8Array.fromBase64(String(c.chunk)))
    ).join(""),
    "earlylate",
  );
});

Deno.test("GET / from a browser is the console (the login form with auth on); other GET / requests keep the protocol's 400", async () => {
  await using server = await authServer();
  const http = `http://127.0.0.1:${portOf(server)}`;
  const page = await fetch(`${http}/`, { headers: { accept: "text/html" } });
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("x-frame-options"), "DENY");
  assert.match(page.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
  assert.match(await page.text(), /<input id="token" name="token" type="password"/);
  const plain = await fetch(`${http}/`);
  assert.equal(plain.status, 400);
  assert.equal(await plain.text(), "Connection header did not include 'upgrade'");
  const xterm = await fetch(`${http}/console/xterm.js`);
  assert.equal(xterm.headers.get("content-type"), "text/javascript; charset=utf-8");
  assert.ok((await xterm.text()).length > 100_000);
});

const root = new URL("..", import.meta.url).pathname;
const compiled = Deno.env.get("EXEC_SERVER_BIN") ??
  `${root}dist/exec-server-${
    Deno.build.arch === "aarch64" ? "aarch64" : "x86_64"
  }-unknown-linux-gnu`;
const noBinary = (() => {
  try {
    return !Deno.statSync(compiled).isFile;
  } catch {
    return true;
  }
})();

Deno.test({
  name: noBinary
    ? "a deno compile binary serves the console with its embedded terminal emulator (ignored: no binary; run ./compile.sh or set EXEC_SERVER_BIN)"
    : "a deno compile binary serves the console with its embedded terminal emulator",
  ignore: noBinary,
  async fn() {
    await using server = await ServerProcess.start({ command: [compiled], listen: "ws" });
    const http = server.url.replace(/^ws/, "http");
    const page = await fetch(`${http}/`, { headers: { accept: "text/html" } });
    assert.match(await page.text(), /<table id="processes">/);
    const xterm = await fetch(`${http}/console/xterm.js`);
    assert.equal(await xterm.text(), XTERM_JS);
  },
});

Deno.test("console feed: watching a 17th process ends the oldest of the 16 watches, saying so", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  const sessionId = await handshake(client);
  const ids = Array.from({ length: MAX_WATCHES_PER_FEED + 1 }, (_, i) => `w${i}`);
  for (const id of ids) await startProcess(client, id, sh("exec sleep 30"));
  await using feed = await RawWebSocket.connect(portOf(server), { path: "/console/feed" });
  for (const id of ids) {
    await feed.sendText(JSON.stringify({ type: "watch", session: sessionId, processId: id }));
  }
  const unwatched = await nextFeedMessage(feed, (m) => m.type === "unwatched");
  assert.deepEqual([unwatched.session, unwatched.processId], [sessionId, "w0"]);
  for (const id of ids) await call(client, "process/terminate", { processId: id });
  // Every other watch follows its process to the end; the ended one does not.
  const ended = new Set<unknown>();
  while (ended.size < MAX_WATCHES_PER_FEED) {
    ended.add((await nextFeedMessage(feed, (m) => m.type === "ended")).processId);
  }
  assert.deepEqual([...ended].sort(), ids.slice(1).sort());
});

Deno.test("console feed: a message of 4 KiB is read, a longer one is dropped", async () => {
  await using server = await InProcessServer.websocket();
  await using client = await server.connect();
  const sessionId = await handshake(client);
  await startProcess(client, "long", sh("printf from-long"));
  await startProcess(client, "short", sh("printf from-short"));
  await using feed = await RawWebSocket.connect(portOf(server), { path: "/console/feed" });
  const padded = (processId: string, bytes: number) => {
    const text = JSON.stringify({ type: "watch", session: sessionId, processId });
    return text.slice(0, -1) + " ".repeat(bytes - text.length) + "}";
  };
  /** The feed's output and end messages, as `type processId`, until each of `wanted` arrived (in any order). */
  const until = async (wanted: string[]) => {
    const seen: string[] = [];
    while (!wanted.every((event) => seen.includes(event))) {
      const m = await nextFeedMessage(feed, (m) => m.type === "output" || m.type === "ended");
      seen.push(`${m.type} ${m.processId}`);
    }
    return seen;
  };
  assert.equal(padded("long", CONSOLE_MAX_MESSAGE_BYTES + 1).length, CONSOLE_MAX_MESSAGE_BYTES + 1);
  await feed.sendText(padded("long", CONSOLE_MAX_MESSAGE_BYTES + 1));
  await feed.sendText(padded("short", CONSOLE_MAX_MESSAGE_BYTES));
  // Had the longer watch been read, its first output would have been sent before short's.
  const shortEvents = ["output short", "ended short"];
  assert.deepEqual(new Set(await until(shortEvents)), new Set(shortEvents));
  await feed.sendText(padded("long", CONSOLE_MAX_MESSAGE_BYTES));
  const longEvents = ["output long", "ended long"];
  assert.deepEqual(new Set(await until(longEvents)), new Set(longEvents));
});

Deno.test("console feed: the process list holds at most 1,000 processes", () => {
  const fakeProcess = (i: number) => ({
    id: `p${i}`,
    state: "running",
    exitCode: null,
    exitSignal: null,
    watch: undefined,
  });
  const session = (id: string, count: number) => ({
    id,
    attached: true,
    processes: { list: () => Array.from({ length: count }, (_, i) => fakeProcess(i)) },
  });
  const sessions = [session("a", MAX_LISTED_PROCESSES - 1), session("b", 2), session("c", 1)];
  const message = JSON.parse(
    sessionsMessage({ list: () => sessions } as unknown as Parameters<typeof sessionsMessage>[0]),
  );
  assert.deepEqual(
    message.sessions.map((s: Json) => (s.processes as Json[]).length),
    [MAX_LISTED_PROCESSES - 1, 1, 0],
  );
});

Deno.test("console login with a signed bearer token lasts no longer than the token", async () => {
  const exp = Math.floor(Date.now() / 1000) + 600;
  await using server = await InProcessServer.websocket({
    authorize: signedBearerAuth({ secret: new TextEncoder().encode(MATRIX_SECRET) }),
  });
  const { status, cookie } = await login(server, await mint(`{"exp":${exp}}`));
  assert.equal(status, 200);
  const maxAge = Number(/Max-Age=(\d+)/.exec(cookie ?? "")?.[1]);
  assert.ok(maxAge <= 600 && maxAge > 0, `Max-Age=${maxAge} for a token valid 600 s`);
});
