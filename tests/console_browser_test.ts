/**
 * The web console in a real headless Chromium (Debian's `chromium`, driven
 * by `puppeteer-core`): an operator logs in with the token, sees a process
 * that a protocol client started and its output (a pipe as text, a tty in
 * the terminal emulator with its screen text in the DOM), terminates it,
 * and the owning client still reads all of its output. A page of another
 * origin cannot use the console. The login form works with the page's
 * script off, and a login with the console's own token watches without a
 * Terminate button. Skipped, saying why, without Chromium.
 *
 * `EXEC_SERVER_CONSOLE_SCREENSHOT=docs/console.png` also saves a screenshot.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readUntilClosed } from "./helpers/observe.ts";
import { call, sh, startProcess } from "./helpers/rpc.ts";
import { handshake, ServerProcess, WsClient } from "./helpers/server_harness.ts";

const CHROMIUM = "/usr/bin/chromium";

/** The little of a page's globals the checks below read (they run in the browser). */
interface Browser {
  location: { pathname: string };
  document: {
    getElementById(id: string): { textContent: string | null } | null;
    querySelector(selector: string): { textContent: string | null } | null;
  };
}
/**
 * Clicks the element `selector` names now, in one step in the page: the live table redraws its
 * rows, so an element looked up first and clicked a moment later can be gone (puppeteer's
 * `page.click` does exactly that: "Node is detached from document").
 */
async function clickNow(
  page: { evaluate(fn: (selector: string) => void, selector: string): Promise<unknown> },
  selector: string,
): Promise<void> {
  await page.evaluate((selector) => {
    const element = (globalThis as unknown as {
      document: { querySelector(selector: string): { click(): void } | null };
    }).document.querySelector(selector);
    if (element === null) throw new Error(`no element ${selector}`);
    element.click();
  }, selector);
}

const chromiumMissing = (() => {
  try {
    return !Deno.statSync(CHROMIUM).isFile;
  } catch {
    return true;
  }
})();
/** A test that drives Chromium: ignored, saying why, without it. */
function browserTest(name: string, fn: () => Promise<void>): void {
  Deno.test({
    name: chromiumMissing ? `${name} (ignored: ${CHROMIUM} is not installed)` : name,
    ignore: chromiumMissing,
    sanitizeOps: false,
    sanitizeResources: false,
    fn,
  });
}

/** Hex: usable as a browser's bearer subprotocol too. */
const TOKEN = "6f70657261746f722d636f6e736f6c652d746f6b656e";
const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

async function launchBrowser() {
  const { default: puppeteer } = await import("puppeteer-core");
  const profile = await Deno.makeTempDir({ prefix: "exec-server-chromium-" });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`],
  });
  return {
    browser,
    async [Symbol.asyncDispose]() {
      await browser.close();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    },
  };
}

async function startServer(dir: string): Promise<ServerProcess> {
  await Deno.writeTextFile(`${dir}/token`, TOKEN);
  return await ServerProcess.start({
    listen: "ws",
    args: ["--ws-auth", "capability-token", "--ws-token-file", `${dir}/token`],
  });
}

browserTest("web console: log in, watch a client's processes live, terminate one", async () => {
  const dir = await Deno.makeTempDir();
  await using server = await startServer(dir);
  const http = server.url.replace(/^ws/, "http");
  await using client = await WsClient.connect(server.url, [
    "exec-server",
    `exec-server.bearer.${TOKEN}`,
  ]);
  await handshake(client);
  await startProcess(client, "agent-task", sh("echo hello-from-the-agent; exec sleep 60"));
  await startProcess(client, "agent-shell", sh("printf 'tty screen text'; exec sleep 60"), {
    tty: true,
  });
  await using chromium = await launchBrowser();
  const page = await chromium.browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });

  await page.goto(`${http}/`);
  assert.ok(await page.$("#token"), "the login form is shown first");
  assert.equal(
    await page.$eval("#token", (e) => (e as unknown as { type: string }).type),
    "password",
  );
  await page.type("#token", "not-the-token");
  await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
  assert.equal(
    await page.$eval(
      "#login-error",
      (e) => (e as unknown as { textContent: string }).textContent,
    ),
    "The token was refused.",
  );
  await page.type("#token", TOKEN);
  await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
  // The login's answer is the console itself; its script keeps the key and shows "/".
  await page.waitForFunction(() => (globalThis as unknown as Browser).location.pathname === "/");
  assert.ok(!page.url().includes(TOKEN), "the token is not in the URL");
  const cookies = await page.cookies();
  assert.deepEqual(
    cookies.map((c) => [c.name, c.httpOnly, c.sameSite, c.value.includes(TOKEN)]),
    [[`exec_server_console_${server.port}`, true, "Strict", false]],
  );
  // A reload keeps the console (the key is the tab's); another tab, with the cookie and no
  // key, is sent to the login form.
  await page.reload();
  await page.waitForFunction(() =>
    (globalThis as unknown as Browser).document.getElementById("status")?.textContent === "live"
  );
  const other = await chromium.browser.newPage();
  await other.goto(`${http}/`);
  await other.waitForSelector("#token");
  assert.equal(new URL(other.url()).pathname, "/console/login");
  await other.close();

  await page.waitForSelector("tr[data-process-id=agent-task] td.state-running");
  const row = await page.$eval(
    "tr[data-process-id=agent-task]",
    (tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent),
  );
  assert.deepEqual(row.slice(1, 6), [
    "harness",
    "agent-task",
    "/bin/sh -c echo hello-from-the-agent; exec sleep 60",
    "/tmp",
    "running",
  ]);
  assert.equal(row[8], "none");

  await clickNow(page, "tr[data-process-id=agent-task] button.watch");
  await page.waitForFunction(() =>
    (globalThis as unknown as Browser).document.getElementById("pipe-output")?.textContent ===
      "hello-from-the-agent\n"
  );

  await clickNow(page, "tr[data-process-id=agent-shell] button.watch");
  // The terminal's screen text is in the DOM (xterm's screen reader tree and rows).
  await page.waitForFunction(() =>
    ((globalThis as unknown as Browser).document.querySelector(
      "#tty-output .xterm-accessibility-tree",
    )?.textContent ?? "")
      .includes("tty screen text")
  );
  const screenshot = Deno.env.get("EXEC_SERVER_CONSOLE_SCREENSHOT");
  if (screenshot) await page.screenshot({ path: screenshot });

  await clickNow(page, "tr[data-process-id=agent-task] button.terminate");
  await page.waitForFunction(() =>
    (globalThis as unknown as Browser).document.querySelector(
      "tr[data-process-id=agent-task] td.exit",
    )?.textContent ===
      "137 (SIGKILL)"
  );
  // The owner still reads everything: watching took nothing away.
  const read = await readUntilClosed(client, "agent-task");
  const chunks = read.chunks as { chunk: string }[];
  assert.equal(
    new TextDecoder().decode(Uint8Array.fromBase64(chunks.map((c) => c.chunk).join(""))),
    "hello-from-the-agent\n",
  );
  assert.equal(read.exitCode, 137);
  await call(client, "process/terminate", { processId: "agent-shell" });
  await client.close();
  await server.stop();
  await Deno.remove(dir, { recursive: true });
  const log = await server.stderr;
  assert.match(log, /console\.terminate .*processId=agent-task/);
});

browserTest(
  "web console: a page of another origin cannot open its feed, log in or read it",
  async () => {
    // Without --ws-auth the origin rule alone protects the console.
    await using server = await ServerProcess.start({ listen: "ws" });
    const port = new URL(server.url).port;
    await using foreign = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () =>
        new Response("<!doctype html><title>elsewhere</title>", {
          headers: { "content-type": "text/html" },
        }),
    );
    await using chromium = await launchBrowser();
    const own = await chromium.browser.newPage();
    await own.goto(`http://127.0.0.1:${port}/`);
    await own.waitForFunction(() =>
      (globalThis as unknown as Browser).document.getElementById("status")?.textContent === "live"
    );
    const other = await chromium.browser.newPage();
    await other.goto(`http://localhost:${foreign.addr.port}/`);
    const attempts = await other.evaluate(
      async (target: string, token: string) => {
        const feed = await new Promise<string>((resolve) => {
          const socket = new WebSocket(`ws://${target}/console/feed`);
          socket.onopen = () => resolve("opened");
          socket.onerror = () => resolve("refused");
        });
        const login = await fetch(`http://${target}/console/login`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}` },
          credentials: "include",
        }).then((r) => `status ${r.status}`, () => "refused");
        const page = await fetch(`http://${target}/`, { credentials: "include" })
          .then((r) => r.text().then((t) => t.slice(0, 20)), () => "refused");
        return { feed, login, page };
      },
      `127.0.0.1:${port}`,
      TOKEN,
    );
    assert.deepEqual(attempts, { feed: "refused", login: "refused", page: "refused" });
    await server.stop();
  },
);

browserTest(
  "web console: with the page's script off, the login form still posts the token, never in a URL",
  async () => {
    const dir = await Deno.makeTempDir();
    try {
      await using server = await startServer(dir);
      await using chromium = await launchBrowser();
      const page = await chromium.browser.newPage();
      await page.setJavaScriptEnabled(false);
      await page.goto(`${server.url.replace(/^ws/, "http")}/`);
      await page.type("#token", TOKEN);
      await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
      assert.equal(new URL(page.url()).pathname, "/console/login");
      assert.ok(!page.url().includes(TOKEN), "the token is in the URL");
      assert.ok(await page.$("#processes"), "the login did not answer with the console");
      assert.deepEqual((await page.cookies()).map((c) => c.name), [
        `exec_server_console_${server.port}`,
      ]);
      await server.stop();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

browserTest(
  "web console: a --console-token-file login watches and is offered no Terminate",
  async () => {
    const dir = await Deno.makeTempDir();
    try {
      const operator = "watch-only-operator-token";
      await Deno.writeTextFile(`${dir}/token`, TOKEN);
      await Deno.writeTextFile(`${dir}/console`, operator);
      await using server = await ServerProcess.start({
        listen: "ws",
        args: [
          ...["--ws-auth", "capability-token", "--ws-token-file", `${dir}/token`],
          ...["--console-token-file", `${dir}/console`],
        ],
      });
      await using client = await WsClient.connect(server.url, [
        "exec-server",
        `exec-server.bearer.${TOKEN}`,
      ]);
      await handshake(client);
      await startProcess(client, "watched", sh("echo seen-by-the-operator; exec sleep 60"));
      await using chromium = await launchBrowser();
      const page = await chromium.browser.newPage();
      await page.goto(`${server.url.replace(/^ws/, "http")}/`);
      await page.type("#token", operator);
      await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
      await page.waitForSelector("tr[data-process-id=watched] td.state-running");
      assert.equal(await page.$("tr[data-process-id=watched] button.terminate"), null);
      await clickNow(page, "tr[data-process-id=watched] button.watch");
      await page.waitForFunction(() =>
        (globalThis as unknown as Browser).document.getElementById("pipe-output")?.textContent ===
          "seen-by-the-operator\n"
      );
      await call(client, "process/terminate", { processId: "watched" });
      await client.close();
      await server.stop();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
