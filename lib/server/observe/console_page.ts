/**
 * The web console's own page, style and script (the terminal emulator,
 * `@xterm/xterm`, is served beside them from `xterm_assets.ts`). The script
 * builds every element with `textContent`, never markup, so nothing a
 * process prints or a client names can become HTML.
 *
 * @module
 */

import { CONSOLE_KEY_META, CONSOLE_LOGIN_META, CONSOLE_SUBPROTOCOL } from "./console_access.ts";

/** The page's shell: `body` is the login form or the console; `meta` are `name: content` pairs. */
function page(
  title: string,
  body: string,
  scripts: readonly string[],
  meta: Readonly<Record<string, string>> = {},
): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${
    Object.entries(meta).map(([name, content]) => `<meta name="${name}" content="${content}">\n`)
      .join("")
  }<title>${title}</title>
<link rel="stylesheet" href="/console/xterm.css">
<link rel="stylesheet" href="/console/app.css">
</head>
<body>
${body}
${scripts.map((src) => `<script src="${src}"></script>`).join("\n")}
</body>
</html>
`;
}

/** What {@linkcode loginHtml} says under the form after a refused token. */
export const LOGIN_REFUSED = "The token was refused.";

/**
 * The login form: its password field takes the token, and the form posts it to
 * `/console/login` (the token is in the request's body, never in a URL, whether the page's
 * script has run or not).
 *
 * @param refused Whether the last token was refused (said under the form).
 * @returns The page.
 */
export function loginHtml(refused = false): string {
  return page(
    "exec-server console: log in",
    `<main class="login">
<h1>exec-server</h1>
<form id="login" method="post" action="/console/login">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Log in</button>
<p id="login-error" role="alert">${refused ? LOGIN_REFUSED : ""}</p>
</form>
</main>`,
    ["/console/app.js"],
  );
}

/** How the console page was reached. */
export interface ConsolePageOptions {
  /** Whether authentication is on: the page shows a log-out button and its feed needs a key. */
  login: boolean;
  /** The login's key, in the page that answers the login only (`console_access.ts`). */
  key?: string;
}

/**
 * The console: the live process list and the output of the watched process.
 *
 * @param options Whether a login is needed, and the key of the login that just happened.
 * @returns The page.
 */
export function consoleHtml(options: ConsolePageOptions): string {
  return page(
    "exec-server console",
    `<header>
<h1>exec-server</h1>
<span id="status" role="status">connecting…</span>
${options.login ? '<button id="logout" type="button">Log out</button>' : ""}
</header>
<main id="console">
<section aria-labelledby="processes-title">
<h2 id="processes-title">Processes</h2>
<table id="processes">
<thead><tr><th>Session</th><th>Client</th><th>Process</th><th>Command</th><th>Directory</th><th>State</th><th>Exit</th><th>Duration</th><th>Sandbox</th><th>Output</th><th></th></tr></thead>
<tbody></tbody>
</table>
<p id="empty">No processes.</p>
</section>
<section id="output" aria-labelledby="output-title" hidden>
<h2 id="output-title">Output</h2>
<pre id="pipe-output" aria-live="polite"></pre>
<div id="tty-output"></div>
</section>
</main>`,
    ["/console/xterm.js", "/console/app.js"],
    {
      [CONSOLE_LOGIN_META]: options.login ? "required" : "none",
      ...(options.key === undefined ? {} : { [CONSOLE_KEY_META]: options.key }),
    },
  );
}

/** The console's style. */
export const APP_CSS =
  `body { font-family: system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f8fa; }
header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; background: #24292f; color: #fff; }
header h1 { font-size: 1.1rem; margin: 0; }
#status { flex: 1; font-size: .9rem; }
main { padding: 1rem; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: .9rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left; vertical-align: top; }
td.command, td.cwd { font-family: ui-monospace, monospace; word-break: break-all; }
tr.selected { background: #ddf4ff; }
td.state-running { color: #1a7f37; font-weight: 600; }
button { cursor: pointer; }
#output pre { background: #0d1117; color: #e6edf3; padding: .5rem; min-height: 6rem; max-height: 50vh; overflow: auto; white-space: pre-wrap; }
.login { max-width: 22rem; margin: 4rem auto; background: #fff; padding: 1.5rem; border: 1px solid #d0d7de; }
.login input { display: block; width: 100%; margin: .5rem 0 1rem; padding: .4rem; box-sizing: border-box; }
#login-error { color: #cf222e; }
`;

/** The console's script. */
export const APP_JS = `"use strict";
(() => {
  // The login form posts itself: nothing to do before its answer.
  if (document.getElementById("login")) return;
  const needsKey = document.querySelector('meta[name="${CONSOLE_LOGIN_META}"]')?.content === "required";
  // The page that answered a login carries its key: kept for this tab only, the URL made "/".
  const keyMeta = document.querySelector('meta[name="${CONSOLE_KEY_META}"]');
  if (keyMeta) {
    sessionStorage.setItem("${CONSOLE_KEY_META}", keyMeta.content);
    keyMeta.remove();
    history.replaceState(null, "", "/");
  }
  const key = sessionStorage.getItem("${CONSOLE_KEY_META}");
  const toLogin = () => {
    sessionStorage.removeItem("${CONSOLE_KEY_META}");
    location.replace("/console/login");
  };
  if (needsKey && !key) return toLogin();
  const logout = document.getElementById("logout");
  if (logout) {
    logout.addEventListener("click", async () => {
      await fetch("/console/logout", { method: "POST", credentials: "same-origin" });
      toLogin();
    });
  }
  const status = document.getElementById("status");
  const rows = document.querySelector("#processes tbody");
  const empty = document.getElementById("empty");
  const outputSection = document.getElementById("output");
  const outputTitle = document.getElementById("output-title");
  const pipeOutput = document.getElementById("pipe-output");
  const ttyOutput = document.getElementById("tty-output");
  let socket;
  let canTerminate = false;
  let watched; // { session, processId, tty, terminal, decoders }
  const send = (message) => socket && socket.readyState === 1 && socket.send(JSON.stringify(message));
  const keyOf = (session, processId) => JSON.stringify([session, processId]);
  const bytesOf = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const cell = (row, text, className) => {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  };
  const duration = (ms) => ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";

  function watch(session, proc) {
    if (watched) send({ type: "unwatch", session: watched.session, processId: watched.processId });
    if (watched && watched.terminal) watched.terminal.dispose();
    pipeOutput.textContent = "";
    ttyOutput.textContent = "";
    outputSection.hidden = false;
    outputTitle.textContent = "Output of " + proc.processId + ": " + proc.argv.join(" ");
    watched = { session, processId: proc.processId, tty: proc.tty, decoders: {} };
    pipeOutput.hidden = proc.tty;
    if (proc.tty) {
      watched.terminal = new Terminal({ screenReaderMode: true, convertEol: false, rows: 24, cols: 100, disableStdin: true });
      watched.terminal.open(ttyOutput);
    }
    send({ type: "watch", session, processId: proc.processId });
    render();
  }

  function onOutput(message) {
    if (!watched || keyOf(message.session, message.processId) !== keyOf(watched.session, watched.processId)) return;
    const bytes = bytesOf(message.data);
    if (watched.terminal) {
      watched.terminal.write(bytes);
      return;
    }
    const decoder = watched.decoders[message.stream] ??= new TextDecoder();
    pipeOutput.append(decoder.decode(bytes, { stream: true }));
  }

  let sessions = [];
  function render() {
    rows.textContent = "";
    let count = 0;
    for (const session of sessions) {
      for (const proc of session.processes) {
        count++;
        const row = rows.insertRow();
        row.dataset.processId = proc.processId;
        if (watched && keyOf(session.id, proc.processId) === keyOf(watched.session, watched.processId)) {
          row.className = "selected";
        }
        cell(row, session.id.slice(0, 8) + (session.attached ? "" : " (detached)"));
        cell(row, session.clientName, "client");
        cell(row, proc.processId, "process-id");
        cell(row, proc.argv.join(" "), "command");
        cell(row, proc.cwd, "cwd");
        cell(row, proc.state, "state state-" + proc.state);
        cell(row, proc.exitCode === null ? "" : String(proc.exitCode) + (proc.signal ? " (" + proc.signal + ")" : ""), "exit");
        cell(row, duration(proc.durationMs), "duration");
        cell(row, proc.sandboxType + (proc.tty ? ", tty" : ""), "sandbox");
        cell(row, proc.outputBytes + " B", "output-bytes");
        const actions = row.insertCell();
        const view = document.createElement("button");
        view.type = "button";
        view.className = "watch";
        view.textContent = "Watch";
        view.setAttribute("aria-label", "Watch " + proc.processId);
        view.addEventListener("click", () => watch(session.id, proc));
        actions.append(view);
        if (proc.state === "running" && canTerminate) {
          const stop = document.createElement("button");
          stop.type = "button";
          stop.className = "terminate";
          stop.textContent = "Terminate";
          stop.setAttribute("aria-label", "Terminate " + proc.processId);
          stop.addEventListener("click", () => send({ type: "terminate", session: session.id, processId: proc.processId }));
          actions.append(stop);
        }
      }
    }
    empty.hidden = count > 0;
  }

  function connect() {
    let opened = false;
    socket = new WebSocket(
      (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/console/feed",
      key ? ["${CONSOLE_SUBPROTOCOL}", "${CONSOLE_SUBPROTOCOL}.key." + key] : [],
    );
    socket.addEventListener("open", () => {
      opened = true;
      status.textContent = "live";
      if (watched) send({ type: "watch", session: watched.session, processId: watched.processId });
    });
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "access") {
        canTerminate = message.terminate === true;
        render();
      } else if (message.type === "sessions") {
        sessions = message.sessions;
        render();
      } else if (message.type === "output") {
        onOutput(message);
      } else if (message.type === "ended" && watched && message.processId === watched.processId) {
        outputTitle.textContent += " (ended)";
      } else if (message.type === "refused") {
        status.textContent = "live; " + message.reason;
      }
    });
    socket.addEventListener("close", () => {
      // Refused before it opened: the login ended (expired, logged out, server restarted).
      if (!opened && needsKey) return toLogin();
      status.textContent = "disconnected; retrying…";
      if (watched) { pipeOutput.textContent = ""; if (watched.terminal) watched.terminal.reset(); }
      setTimeout(connect, 2000);
    });
  }
  connect();
})();
`;
