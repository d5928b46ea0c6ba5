/**
 * The web console's login and what a login is worth, over plain HTTP (the
 * browser test drives the same page in Chromium): the form posts its token
 * (no token in any URL, with or without the page's script); the cookie is
 * named after the server's port (`__Host-` under TLS), so two servers on a
 * host keep their own logins; the feed needs, besides the cookie, the
 * login's key that only the page it was served with holds; every console
 * answer and `/metrics` carries `Cache-Control: no-store` and `nosniff`; a
 * console credential's logins watch, and terminate only with
 * `--console-can-terminate`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CONSOLE_KEY_META, CONSOLE_SUBPROTOCOL } from "../lib/server/observe/console_access.ts";
import { nextFeedMessage, tokenAuth } from "./helpers/observe.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { selfSignedCertificate } from "./helpers/tls.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { call, sh, startProcess } from "./helpers/rpc.ts";
import { handshake, MAIN_TS, SERVER_PERMISSIONS, WsClient } from "./helpers/server_harness.ts";

const TOKEN = "console-login-token-0123456789";
const CONSOLE_TOKEN = "operator-watch-token-9876543210";

function portOf(server: InProcessServer): number {
  return Number(new URL(server.url).port);
}

function httpOf(server: InProcessServer): string {
  return `http://127.0.0.1:${portOf(server)}`;
}

/** What a login answered: status, cookie (name=value), the key in its page, the page. */
interface Login {
  status: number;
  cookie: string | undefined;
  setCookie: string | null;
  key: string | undefined;
  body: string;
  location: string | null;
}

/** The attributes of the first `<tag ...>` in `html` whose text matches `which`. */
function attributes(html: string, tag: string, which: RegExp = /./): Record<string, string> {
  const element = [...html.matchAll(new RegExp(`<${tag}\\b[^>]*>`, "g"))].map((m) => m[0])
    .find((e) => which.test(e));
  assert.ok(element, `no <${tag}> matching ${which} in the page`);
  return Object.fromEntries(
    [...element.matchAll(/([\w-]+)(?:="([^"]*)")?/g)].slice(1).map((m) => [m[1]!, m[2] ?? ""]),
  );
}

/** The console key a page carries, if any. */
function keyOf(html: string): string | undefined {
  return new RegExp(`<meta name="${CONSOLE_KEY_META}" content="([0-9a-f]+)">`).exec(html)?.[1];
}

/** Submits the login form as a browser does without the page's script: a urlencoded body. */
async function submitForm(
  base: string,
  token: string,
  fetchOptions: RequestInit & { client?: Deno.HttpClient } = {},
) {
  const answer = await fetch(`${base}/console/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "text/html" },
    body: new URLSearchParams({ token }).toString(),
    redirect: "manual",
    ...fetchOptions,
  });
  const body = await answer.text();
  const setCookie = answer.headers.get("set-cookie");
  return {
    status: answer.status,
    setCookie,
    cookie: setCookie?.split(";")[0],
    key: keyOf(body),
    body,
    location: answer.headers.get("location"),
  } satisfies Login;
}

/** Opens the feed with the given cookie and key (either may be left out). */
async function openFeed(port: number, cookie?: string, key?: string): Promise<RawWebSocket> {
  const headers: Record<string, string> = {};
  if (cookie !== undefined) headers.Cookie = cookie;
  if (key !== undefined) {
    headers["Sec-WebSocket-Protocol"] = `${CONSOLE_SUBPROTOCOL}, ${CONSOLE_SUBPROTOCOL}.key.${key}`;
  }
  return await RawWebSocket.connect(port, { path: "/console/feed", headers });
}

Deno.test("console login: the form posts the token (method post, action /console/login); a submission without the script logs in, the token in no URL", async () => {
  await using server = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const base = httpOf(server);
  const page = await (await fetch(`${base}/`, { headers: { accept: "text/html" } })).text();
  const form = attributes(page, "form", /id="login"/);
  assert.equal(form.method, "post");
  assert.equal(form.action, "/console/login");
  assert.equal(attributes(page, "input", /id="token"/).name, "token");

  const refused = await submitForm(base, "not-the-token");
  assert.equal(refused.status, 401);
  assert.equal(refused.setCookie, null);
  assert.match(refused.body, /The token was refused\./);
  assert.match(refused.body, /<form id="login" method="post" action="\/console\/login">/);

  const accepted = await submitForm(base, TOKEN);
  assert.equal(accepted.status, 200);
  assert.equal(accepted.location, null, "answered in place, not redirected to a URL");
  assert.match(accepted.cookie ?? "", /^exec_server_console_\d+=[0-9a-f]{64}$/);
  assert.match(accepted.body, /<table id="processes">/);
  assert.match(accepted.key ?? "", /^[0-9a-f]{64}$/);
  assert.ok(!accepted.body.includes(TOKEN) && !accepted.setCookie!.includes(TOKEN));

  // A token in the URL logs nobody in.
  const inUrl = await fetch(`${base}/?token=${TOKEN}`, { headers: { accept: "text/html" } });
  assert.equal(inUrl.headers.get("set-cookie"), null);
  assert.match(await inUrl.text(), /<form id="login"/);
});

Deno.test("console login: the Authorization header logs in too (the page's script, or a program)", async () => {
  await using server = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const answer = await fetch(`${httpOf(server)}/console/login`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(answer.status, 200);
  assert.match(answer.headers.get("set-cookie") ?? "", /^exec_server_console_\d+=/);
  assert.ok(keyOf(await answer.text()));
});

Deno.test("console login: a form body over 64 KiB is refused with 413, and a chunked one with 411", async () => {
  await using server = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const port = portOf(server);
  const send = async (head: string, body: string) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    await conn.write(new TextEncoder().encode(head + body));
    const bytes = new Uint8Array(4096);
    const n = await conn.read(bytes);
    conn.close();
    return new TextDecoder().decode(bytes.subarray(0, n ?? 0)).split("\r\n")[0];
  };
  const type = "Content-Type: application/x-www-form-urlencoded\r\n";
  const over = `token=${"a".repeat(64 * 1024)}`;
  assert.equal(
    await send(
      `POST /console/login HTTP/1.1\r\nHost: 127.0.0.1\r\n${type}Content-Length: ${over.length}\r\n\r\n`,
      "",
    ),
    "HTTP/1.1 413 Content Too Large",
  );
  assert.equal(
    await send(
      `POST /console/login HTTP/1.1\r\nHost: 127.0.0.1\r\n${type}Transfer-Encoding: chunked\r\n\r\n`,
      "0\r\n\r\n",
    ),
    "HTTP/1.1 411 Length Required",
  );
  const exact = `token=${TOKEN}&pad=${"a".repeat(64 * 1024 - TOKEN.length - 11)}`;
  assert.equal(exact.length, 64 * 1024);
  const accepted = await fetch(`${httpOf(server)}/console/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: exact,
  });
  await accepted.body?.cancel();
  assert.equal(accepted.status, 200);
});

Deno.test("console cookie: named after the server's port, so two servers on one host keep their own logins", async () => {
  await using first = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  await using second = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const a = await submitForm(httpOf(first), TOKEN);
  const b = await submitForm(httpOf(second), TOKEN);
  assert.equal(a.cookie?.split("=")[0], `exec_server_console_${portOf(first)}`);
  assert.equal(b.cookie?.split("=")[0], `exec_server_console_${portOf(second)}`);
  assert.match(a.setCookie ?? "", /; Path=\/; Max-Age=28800; HttpOnly; SameSite=Strict$/);
  // A browser sends both cookies to both ports: each server reads its own.
  const both = `${a.cookie}; ${b.cookie}`;
  for (const [server, login] of [[first, a], [second, b]] as const) {
    await using feed = await openFeed(portOf(server), both, login.key);
    assert.equal(feed.answer.status, 101);
  }
  await using crossed = await openFeed(portOf(first), both, b.key);
  assert.equal(crossed.answer.status, 401, "the other server's key opened the feed");
});

Deno.test("console cookie: under TLS it is __Host- prefixed and Secure", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { cert, key } = await selfSignedCertificate(dir);
    await using server = await InProcessServer.websocket({
      authorize: await tokenAuth(TOKEN),
      tls: { cert, key },
    });
    using client = Deno.createHttpClient({ caCerts: [cert] });
    const login = await submitForm(`https://127.0.0.1:${portOf(server)}`, TOKEN, { client });
    assert.equal(login.status, 200);
    assert.match(
      login.setCookie ?? "",
      new RegExp(
        `^__Host-exec_server_console_${
          portOf(server)
        }=[0-9a-f]{64}; Path=/; Max-Age=28800; HttpOnly; SameSite=Strict; Secure$`,
      ),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("console feed: the cookie alone does not open it; the login's key (a subprotocol, never echoed) must come with it", async () => {
  await using server = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const port = portOf(server);
  const one = await submitForm(httpOf(server), TOKEN);
  const other = await submitForm(httpOf(server), TOKEN);
  assert.notEqual(one.key, other.key);
  // What another web app on this host receives (cookies are not port-scoped) and replays.
  await using cookieOnly = await openFeed(port, one.cookie);
  assert.equal(cookieOnly.answer.status, 401);
  await using wrongKey = await openFeed(port, one.cookie, other.key);
  assert.equal(wrongKey.answer.status, 401);
  await using keyOnly = await openFeed(port, undefined, one.key);
  assert.equal(keyOnly.answer.status, 401);
  // The page visited with the cookie alone carries no key.
  const visit = await fetch(`http://127.0.0.1:${port}/`, {
    headers: { accept: "text/html", cookie: one.cookie! },
  });
  const visited = await visit.text();
  assert.match(visited, /<table id="processes">/);
  assert.equal(keyOf(visited), undefined);
  await using opened = await openFeed(port, one.cookie, one.key);
  assert.equal(opened.answer.status, 101);
  assert.equal(opened.answer.headers.get("sec-websocket-protocol"), CONSOLE_SUBPROTOCOL);
  // Logging out ends the key with the cookie.
  const out = await fetch(`http://127.0.0.1:${port}/console/logout`, {
    method: "POST",
    headers: { cookie: one.cookie! },
  });
  await out.body?.cancel();
  await using after = await openFeed(port, one.cookie, one.key);
  assert.equal(after.answer.status, 401);
});

Deno.test("every console answer and /metrics, refusals included, carry Cache-Control: no-store and X-Content-Type-Options: nosniff", async () => {
  await using server = await InProcessServer.websocket({ authorize: await tokenAuth(TOKEN) });
  const base = httpOf(server);
  const login = await submitForm(base, TOKEN);
  const answers: [string, Response][] = [
    ["login page", await fetch(`${base}/`, { headers: { accept: "text/html" } })],
    [
      "console page",
      await fetch(`${base}/`, { headers: { accept: "text/html", cookie: login.cookie! } }),
    ],
    ["app.js", await fetch(`${base}/console/app.js`)],
    [
      "refused login",
      await fetch(`${base}/console/login`, {
        method: "POST",
        headers: { authorization: "Bearer no" },
      }),
    ],
    [
      "foreign origin",
      await fetch(`${base}/console/app.js`, { headers: { origin: "https://evil.example" } }),
    ],
    ["unknown console path", await fetch(`${base}/console/nothing`)],
    ["metrics", await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })],
    ["refused metrics", await fetch(`${base}/metrics`)],
  ];
  const missing = [];
  for (const [name, answer] of answers) {
    await answer.body?.cancel();
    if (answer.headers.get("cache-control") !== "no-store") missing.push(`${name}: cache-control`);
    if (answer.headers.get("x-content-type-options") !== "nosniff") {
      missing.push(`${name}: nosniff`);
    }
  }
  assert.deepEqual(missing, []);
  await using refusedFeed = await openFeed(portOf(server), login.cookie);
  assert.equal(refusedFeed.answer.status, 401);
  assert.equal(refusedFeed.answer.headers.get("cache-control"), "no-store");
  assert.equal(refusedFeed.answer.headers.get("x-content-type-options"), "nosniff");
});

/** A server with the agent's token and a console token; `canTerminate` as the flag. */
async function twoCredentialServer(canTerminate: boolean): Promise<InProcessServer> {
  return await InProcessServer.websocket({
    authorize: await tokenAuth(TOKEN),
    consoleAuthorize: await tokenAuth(CONSOLE_TOKEN),
    consoleCanTerminate: canTerminate,
  });
}

/** Logs in with `token`, watches process `job` of the session and tries to terminate it. */
async function watchAndTerminate(server: InProcessServer, token: string) {
  await using client = await WsClient.connect(server.url, [
    "exec-server",
    `exec-server.bearer.${TOKEN}`,
  ]);
  const session = await handshake(client);
  await startProcess(client, "job", sh("echo watched; exec sleep 60"));
  const login = await submitForm(httpOf(server), token);
  assert.equal(login.status, 200, `login with ${token}`);
  await using feed = await openFeed(portOf(server), login.cookie, login.key);
  assert.equal(feed.answer.status, 101);
  const access = await nextFeedMessage(feed, (m) => m.type === "access");
  await feed.sendText(JSON.stringify({ type: "watch", session, processId: "job" }));
  const output = await nextFeedMessage(feed, (m) => m.type === "output");
  await feed.sendText(JSON.stringify({ type: "terminate", session, processId: "job" }));
  const answer = await nextFeedMessage(feed, (m) => m.type === "refused" || m.type === "ended");
  const read = await call(client, "process/read", { processId: "job", afterSeq: 0 });
  await call(client, "process/terminate", { processId: "job" });
  return {
    access: access.terminate,
    watched: output.processId,
    answer: answer.type,
    exited: read.exited,
  };
}

Deno.test("console credential: its logins watch and may not terminate; the agent's token may; the console token opens no protocol connection", async () => {
  await using server = await twoCredentialServer(false);
  assert.deepEqual(await watchAndTerminate(server, CONSOLE_TOKEN), {
    access: false,
    watched: "job",
    answer: "refused",
    exited: false,
  });
  assert.deepEqual(await watchAndTerminate(server, TOKEN), {
    access: true,
    watched: "job",
    answer: "ended",
    exited: true,
  });
  await using protocol = await RawWebSocket.connect(portOf(server), {
    headers: { Authorization: `Bearer ${CONSOLE_TOKEN}` },
  });
  assert.equal(protocol.answer.status, 401);
});

Deno.test("console credential: with --console-can-terminate its logins terminate too", async () => {
  await using server = await twoCredentialServer(true);
  assert.deepEqual(await watchAndTerminate(server, CONSOLE_TOKEN), {
    access: true,
    watched: "job",
    answer: "ended",
    exited: true,
  });
});

Deno.test("--console-token-file: read at start-up, its logins watch; --console-can-terminate without it is a flag error", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/console`, `${CONSOLE_TOKEN}\n`);
    const run = (args: string[]) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "--listen", "ws://127.0.0.1:0", ...args],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      });
    const bad = await run(["--console-can-terminate"]).output();
    assert.equal(bad.code, 2);
    assert.match(
      new TextDecoder().decode(bad.stderr),
      /--console-can-terminate needs --console-token-file/,
    );
    const missing = await run(["--console-token-file", `${dir}/absent`]).output();
    assert.equal(missing.code, 2);
    assert.match(new TextDecoder().decode(missing.stderr), /Cannot read secret file/);
    const child = run(["--console-token-file", `${dir}/console`]).spawn();
    try {
      const reader = child.stdout.getReader();
      const { value } = await reader.read();
      reader.releaseLock();
      const url = new TextDecoder().decode(value).trim().replace(/^ws/, "http");
      const login = await submitForm(url, CONSOLE_TOKEN);
      assert.equal(login.status, 200);
      const refused = await submitForm(url, "another");
      assert.equal(refused.status, 401);
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await child.stdout.cancel().catch(() => {});
      await child.stderr.cancel();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
