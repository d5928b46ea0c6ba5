/**
 * Security: attempts to get around the server's gates.
 *
 * - WebSocket auth (`--ws-auth capability-token`): missing, wrong and
 *   length/prefix-varied tokens, other schemes, tokens in the query string
 *   (always refused), the browser subprotocol form, other paths and methods.
 * - `--allow-read` / `--allow-write` scopes: path traversal (dot segments,
 *   percent-encoded slashes and dots) and symlink escapes (a link to a file,
 *   a link to a directory, relative and dangling links) through every fs
 *   method that takes a path.
 * - `--allow-run` scope: escapes through `PATH` in `env`, `arg0`, dot
 *   segments in `argv[0]`, `LD_*` variables, and the PTY spawner.
 *
 * Every refusal must leave the outside world unchanged and return no byte of
 * a secret.
 *
 * @module
 */

import assert from "node:assert/strict";
import { snapshot } from "./helpers/attack.ts";
import {
  handshake,
  type Json,
  type ProtocolClient,
  ServerProcess,
  startStdio,
  type StdioServer,
} from "./helpers/server_harness.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { nextRequestId } from "./helpers/rpc.ts";

// ---------------------------------------------------------------------------
// WebSocket authentication

async function upgradeStatus(
  server: ServerProcess,
  options: { path?: string; headers?: Record<string, string>; noUpgrade?: boolean },
): Promise<{ status: number; body: string; protocol?: string; ms: number }> {
  const started = performance.now();
  await using raw = await RawWebSocket.connect(server.port, options);
  const ms = performance.now() - started;
  return {
    status: raw.answer.status,
    body: raw.answer.body,
    protocol: raw.answer.headers.get("sec-websocket-protocol"),
    ms,
  };
}

Deno.test("WebSocket auth refuses every upgrade without the exact bearer token", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "es-auth-" });
  const token = crypto.getRandomValues(new Uint8Array(32)).toHex();
  await Deno.writeTextFile(`${dir}/token`, `${token}\n`);
  await using server = await ServerProcess.start({
    listen: "ws",
    args: ["--ws-auth", "capability-token", "--ws-token-file", `${dir}/token`],
  });
  const bearer = (value: string) => ({ Authorization: `Bearer ${value}` });
  const refused = async (
    what: string,
    options: { path?: string; headers?: Record<string, string> },
    status = 401,
  ) => {
    const answer = await upgradeStatus(server, options);
    assert.equal(answer.status, status, `${what}: got ${answer.status} ${answer.body}`);
    assert.ok(!answer.body.includes(token), `${what}: the refusal leaks the token`);
    return answer;
  };
  let attempts = 0;
  try {
    await t.step("missing or malformed Authorization", async () => {
      const missing = await refused("no header", {});
      assert.equal(missing.body, "missing websocket bearer token");
      // As the reference: the scheme in any case, then the token with surrounding spaces trimmed.
      for (const value of [`bearer ${token}`, `Bearer  ${token}`, `BEARER ${token}  `]) {
        const accepted = await upgradeStatus(server, { headers: { Authorization: value } });
        assert.equal(accepted.status, 101, JSON.stringify(value));
      }
      for (
        const value of [
          "",
          "Bearer",
          "Bearer ",
          `Basic ${btoa(`user:${token}`)}`,
          `Token ${token}`,
          `${token}`,
          `Bearer\t${token}`,
          `Bearer ${token} ${token}`,
          `Bearer "${token}"`,
          `Bearer ${token.toUpperCase()}`,
        ]
      ) {
        await refused(`Authorization: ${JSON.stringify(value)}`, {
          headers: { Authorization: value },
        });
        attempts++;
      }
    });

    await t.step(
      "wrong tokens of every length and prefix (timings are only reported)",
      async () => {
        const timings: Record<string, number[]> = { prefix: [], flipped: [], random: [] };
        for (let n = 0; n < token.length; n += 4) {
          timings.prefix!.push(
            (await refused(`prefix ${n}`, { headers: bearer(token.slice(0, n)) })).ms,
          );
          attempts++;
        }
        for (const at of [0, 1, token.length / 2, token.length - 2, token.length - 1]) {
          const flipped = token.slice(0, at) + (token[at] === "a" ? "b" : "a") +
            token.slice(at + 1);
          timings.flipped!.push(
            (await refused(`flipped at ${at}`, { headers: bearer(flipped) })).ms,
          );
          attempts++;
        }
        for (const length of [1, 16, 63, 64, 65, 128, 1024, 4096]) {
          const random = crypto.getRandomValues(new Uint8Array(Math.ceil(length / 2))).toHex()
            .slice(0, length);
          timings.random!.push((await refused(`random ${length}`, { headers: bearer(random) })).ms);
          attempts++;
        }
        await refused("token plus one character", { headers: bearer(`${token}0`) });
        await refused("token with a NUL", { headers: bearer(`${token}%00`) });
        attempts += 2;
        const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
        console.log(`security ${
          JSON.stringify({
            refusalMedianMs: Object.fromEntries(
              Object.entries(timings).map(([k, v]) => [k, Number(median(v)!.toFixed(2))]),
            ),
          })
        }`);
      },
    );

    await t.step("tokens in the query string are refused, even the right one", async () => {
      for (const query of [`token=${token}`, `access_token=${token}`, `x=1&token=${token}`]) {
        await refused(`?${query}`, { path: `/?${query}` });
        await refused(`?${query} with the header`, { path: `/?${query}`, headers: bearer(token) });
        attempts += 2;
      }
      for (const query of [`bearer=${token}`, `auth=${token}`, `Token=${token}`]) {
        await refused(`?${query}`, { path: `/?${query}` });
        attempts++;
      }
    });

    await t.step("the browser subprotocol form needs the right token too", async () => {
      const protocol = (value: string) => ({ "Sec-WebSocket-Protocol": value });
      await refused("wrong subprotocol token", { headers: protocol("exec-server.bearer.nope") });
      await refused("empty subprotocol token", { headers: protocol("exec-server.bearer.") });
      await refused("bare subprotocol", { headers: protocol("exec-server.bearer") });
      await refused("header wins over subprotocol", {
        headers: { ...bearer("wrong"), ...protocol(`exec-server.bearer.${token}`) },
      });
      attempts += 4;
      // A browser offers the plain `exec-server` subprotocol next to its token; the server
      // selects that one, so the token is not echoed.
      const ok = await upgradeStatus(server, {
        headers: protocol(`exec-server, exec-server.bearer.${token}`),
      });
      assert.equal(ok.status, 101);
      assert.equal(ok.protocol, "exec-server", "the token is not echoed");
    });

    await t.step("other paths and methods never upgrade", async () => {
      await refused("/readyz upgrade", { path: "/readyz", headers: bearer("wrong") }, 200);
      for (const path of ["/x", "//", "/%2F", "/readyz/", "/x/../readyz/"]) {
        await refused(`${path} upgrade`, { path, headers: bearer("wrong") }, 404);
        attempts++;
      }
      // Dot segments are resolved before routing: "/.." is "/", which needs the token.
      await refused("/.. upgrade", { path: "/..", headers: bearer("wrong") });
      await refused("/./ upgrade", { path: "/./", headers: bearer("wrong") });
      await refused("/readyz/.. upgrade", { path: "/readyz/..", headers: bearer("wrong") });
      attempts += 3;
      const plain = await upgradeStatus(server, { noUpgrade: true, headers: bearer("wrong") });
      assert.notEqual(plain.status, 101);
      const post = await fetch(`http://127.0.0.1:${server.port}/`, {
        method: "POST",
        headers: { Upgrade: "websocket", Connection: "Upgrade" },
      });
      await post.body?.cancel();
      assert.ok(post.status >= 400, `POST / answered ${post.status}`);
    });

    await t.step("after all that, the right token still works end to end", async () => {
      const raw = await RawWebSocket.connect(server.port, { headers: bearer(token) });
      assert.equal(raw.answer.status, 101);
      await raw.sendText(`{"id":1,"method":"initialize","params":{"clientName":"auth"}}`);
      assert.ok(JSON.parse((await raw.readMessage())!).result.sessionId);
      raw.close();
    });
    console.log(`security ${JSON.stringify({ authBypassAttemptsRefused: attempts })}`);
  } finally {
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// Filesystem scopes

interface Layout {
  root: string;
  scope: string;
  outside: string;
  secret: string;
}

const SECRET = "top secret: do not leak\n";

/** root/scope (granted) and root/outside (not), with links from the scope out. */
async function layout(): Promise<Layout> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-scope-" }));
  const scope = `${root}/scope`;
  const outside = `${root}/outside`;
  await Deno.mkdir(scope);
  await Deno.mkdir(`${outside}/sub`, { recursive: true });
  await Deno.writeTextFile(`${outside}/secret.txt`, SECRET);
  await Deno.writeTextFile(`${outside}/sub/inner.txt`, SECRET);
  await Deno.writeTextFile(`${scope}/own.txt`, "mine\n");
  await Deno.symlink(`${outside}/secret.txt`, `${scope}/file-link`);
  await Deno.symlink("../outside/secret.txt", `${scope}/rel-link`);
  await Deno.symlink(outside, `${scope}/dir-link`);
  await Deno.symlink("..", `${scope}/parent-link`);
  await Deno.symlink(`${outside}/planted.txt`, `${scope}/dangling`);
  return { root, scope, outside, secret: `${outside}/secret.txt` };
}

const uri = (path: string) => `file://${path}`;
const b64 = (text: string) => new TextEncoder().encode(text).toBase64();

/** The error of a path that does not exist, which metadata lookups outside the scope answer. */
const MISSING = {
  code: -32004,
  data: { kind: "osError", errno: "ENOENT" },
  message: "No such file or directory (os error 2)",
};

/**
 * Sends one request; asserts a refusal that leaks nothing: the typed permission error, or with
 * `as: "missing"` exactly the error of a missing path.
 */
async function assertRefused(
  client: ProtocolClient,
  method: string,
  params: Json,
  what: string,
  as: "permission" | "missing" = "permission",
): Promise<void> {
  const response = await client.request(nextRequestId(), method, params);
  const text = JSON.stringify(response);
  if (as === "missing") return assert.deepEqual(response.error, MISSING, `${what}: ${text}`);
  const secret64 = b64(SECRET).slice(0, 12);
  assert.ok(
    !text.includes("top secret") && !text.includes(secret64),
    `${what} leaked the secret: ${text}`,
  );
  const error = response.error as { code: number; data?: { kind?: string } } | undefined;
  assert.ok(error, `${what} succeeded: ${text}`);
  assert.equal(error.code, -32600, `${what}: ${text}`);
  assert.equal(error.data?.kind, "permissionDenied", `${what}: ${text}`);
}

/** Sends one metadata lookup; asserts it answers exactly like a missing path. */
function assertHidden(client: ProtocolClient, method: string, params: Json, what: string) {
  return assertRefused(client, method, params, what, "missing");
}

/** A stdio server in `l.scope` with these permissions (and env, sys), past the handshake. */
async function scopedFsServer(
  l: Layout,
  permissions: string[],
): Promise<StdioServer> {
  const server = await startStdio({
    permissions: [...permissions, "--allow-env", "--allow-sys"],
    cwd: l.scope,
  });
  await handshake(server.stdio);
  return server;
}

Deno.test("path traversal out of --allow-read/--allow-write scopes is refused", async () => {
  const l = await layout();
  const before = await snapshot(l.outside);
  try {
    await using server = await scopedFsServer(l, [
      `--allow-read=${l.scope}`,
      `--allow-write=${l.scope}`,
    ]);
    const client = server.stdio;
    const escapes = [
      `${l.scope}/../outside/secret.txt`,
      `${l.scope}/%2e%2e/outside/secret.txt`,
      `${l.scope}/.%2E/outside/secret.txt`,
      `${l.scope}/..%2Foutside%2Fsecret.txt`,
      `${l.scope}/%2E%2E%2Foutside%2Fsecret.txt`,
      `${l.scope}/own.txt/../../outside/secret.txt`,
      `${l.scope}/./../../${l.root.split("/").pop()}/outside/secret.txt`,
    ];
    let attempts = 0;
    for (const path of escapes) {
      const target = uri(path);
      await assertRefused(client, "fs/readFile", { path: target }, `readFile ${path}`);
      await assertHidden(client, "fs/getMetadata", { path: target }, `getMetadata ${path}`);
      await assertRefused(
        client,
        "fs/open",
        { handleId: `h${nextRequestId()}`, path: target },
        `open ${path}`,
      );
      await assertRefused(
        client,
        "fs/writeFile",
        { path: target, dataBase64: b64("pwned") },
        `writeFile ${path}`,
      );
      await assertRefused(client, "fs/remove", { path: target }, `remove ${path}`);
      await assertRefused(
        client,
        "fs/copy",
        { sourcePath: target, destinationPath: uri(`${l.scope}/stolen`), recursive: false },
        `copy from ${path}`,
      );
      await assertRefused(
        client,
        "fs/copy",
        { sourcePath: uri(`${l.scope}/own.txt`), destinationPath: target, recursive: false },
        `copy to ${path}`,
      );
      attempts += 7;
    }
    for (const dir of [`${l.scope}/..`, `${l.scope}/%2e%2e`, `${l.scope}/..%2Foutside`]) {
      await assertRefused(client, "fs/readDirectory", { path: uri(dir) }, `readDirectory ${dir}`);
      await assertRefused(
        client,
        "fs/createDirectory",
        { path: uri(`${dir}/made`) },
        `mkdir ${dir}`,
      );
      await assertRefused(client, "fs/walk", {
        path: uri(dir),
        options: {
          maxDepth: 3,
          maxDirectories: 10,
          maxEntries: 100,
          followDirectorySymlinks: true,
        },
      }, `walk ${dir}`);
      attempts += 3;
    }
    console.log(`security ${JSON.stringify({ pathTraversalAttemptsRefused: attempts })}`);
    assert.equal(await snapshot(l.outside), before, "the outside directory is unchanged");
  } finally {
    await Deno.remove(l.root, { recursive: true });
  }
});

Deno.test({
  name: "symlinks inside --allow-read/--allow-write scopes do not lead out of them",
  fn: async (t) => {
    const l = await layout();
    const before = await snapshot(l.outside);
    try {
      await using server = await scopedFsServer(l, [
        `--allow-read=${l.scope}`,
        `--allow-write=${l.scope}`,
      ]);
      const client = server.stdio;
      const s = l.scope;
      const reads: [string, string, Json][] = [
        ["readFile through a file link", "fs/readFile", { path: uri(`${s}/file-link`) }],
        ["readFile through a relative link", "fs/readFile", { path: uri(`${s}/rel-link`) }],
        ["readFile through a directory link", "fs/readFile", {
          path: uri(`${s}/dir-link/secret.txt`),
        }],
        ["readFile through a parent link", "fs/readFile", {
          path: uri(`${s}/parent-link/outside/secret.txt`),
        }],
        ["readDirectory of a directory link", "fs/readDirectory", { path: uri(`${s}/dir-link`) }],
        ["open through a directory link", "fs/open", {
          handleId: "leak",
          path: uri(`${s}/dir-link/secret.txt`),
        }],
        ["copy out through a directory link", "fs/copy", {
          sourcePath: uri(`${s}/dir-link/secret.txt`),
          destinationPath: uri(`${s}/stolen.txt`),
          recursive: false,
        }],
        ["walk of a directory link", "fs/walk", {
          path: uri(`${s}/dir-link`),
          options: {
            maxDepth: 3,
            maxDirectories: 10,
            maxEntries: 100,
            followDirectorySymlinks: true,
          },
        }],
      ];
      const writes: [string, string, Json][] = [
        ["writeFile through a file link", "fs/writeFile", {
          path: uri(`${s}/file-link`),
          dataBase64: b64("pwned"),
        }],
        ["writeFile through a dangling link", "fs/writeFile", {
          path: uri(`${s}/dangling`),
          dataBase64: b64("pwned"),
        }],
        ["writeFile through a directory link", "fs/writeFile", {
          path: uri(`${s}/dir-link/planted.txt`),
          dataBase64: b64("pwned"),
        }],
        ["createDirectory through a directory link", "fs/createDirectory", {
          path: uri(`${s}/dir-link/made`),
        }],
        ["remove through a directory link", "fs/remove", { path: uri(`${s}/dir-link/secret.txt`) }],
        ["remove of a whole tree through a link", "fs/remove", { path: uri(`${s}/dir-link/sub`) }],
        ["copy in through a directory link", "fs/copy", {
          sourcePath: uri(`${s}/own.txt`),
          destinationPath: uri(`${s}/dir-link/planted.txt`),
          recursive: false,
        }],
        ["open for replace through a directory link", "fs/open", {
          handleId: "plant",
          path: uri(`${s}/dir-link/secret.txt`),
          mode: "replace",
        }],
      ];
      for (const [what, method, params] of [...reads, ...writes]) {
        await t.step(what, async () => {
          await assertRefused(client, method, params, what);
          assert.equal(await snapshot(l.outside), before, `${what} changed the outside directory`);
        });
      }
      for (const method of ["fs/getMetadata", "fs/canonicalize"]) {
        await t.step(`${method} through a directory link answers like a missing path`, async () => {
          await assertHidden(client, method, { path: uri(`${s}/dir-link/secret.txt`) }, method);
        });
      }
      await t.step("walk of the scope does not descend into linked directories", async () => {
        const response = await client.request(nextRequestId(), "fs/walk", {
          path: uri(s),
          options: {
            maxDepth: 3,
            maxDirectories: 10,
            maxEntries: 100,
            followDirectorySymlinks: true,
          },
        });
        const text = JSON.stringify(response);
        assert.ok(!text.includes("inner.txt") && !text.includes("secret.txt"), text);
      });
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  },
});

Deno.test("metadata lookups outside --allow-read answer like a missing path, revealing nothing", async () => {
  const l = await layout();
  try {
    await using server = await scopedFsServer(l, [`--allow-read=${l.scope}`]);
    const client = server.stdio;
    const paths = [
      l.secret, // an existing file
      l.outside, // an existing directory
      `${l.outside}/absent.txt`, // nothing there
      l.root, // a parent of the scope (Codex probes each parent for `.git`)
      `${l.root}/.git`,
      `${l.scope}/file-link`, // a link in the scope to an existing file outside
    ];
    for (const method of ["fs/getMetadata", "fs/canonicalize"]) {
      for (const path of paths) await assertHidden(client, method, { path: uri(path) }, path);
      // Inside the scope nothing changes: a real lookup, and the same error for a missing path.
      const own = await client.request(nextRequestId(), method, {
        path: uri(`${l.scope}/own.txt`),
      });
      assert.ok(own.result, JSON.stringify(own));
      await assertHidden(client, method, { path: uri(`${l.scope}/absent`) }, "absent in scope");
    }
    // Reading is still refused with the permission error that names the flag.
    await assertRefused(client, "fs/readFile", { path: uri(l.secret) }, "readFile outside");
  } finally {
    await Deno.remove(l.root, { recursive: true });
  }
});

Deno.test({
  name: "a write-only scope does not write through a symlink to outside it",
  // Without read access symlinks cannot be resolved; fs/writeFile replaces the path itself.
  fn: async () => {
    const l = await layout();
    const before = await snapshot(l.outside);
    try {
      await using server = await scopedFsServer(l, [`--allow-write=${l.scope}`]);
      const client = server.stdio;
      await assertRefused(client, "fs/writeFile", {
        path: uri(`${l.scope}/file-link`),
        dataBase64: b64("pwned"),
      }, "writeFile through a file link without read permission");
      assert.equal(await snapshot(l.outside), before);
    } finally {
      await Deno.remove(l.root, { recursive: true });
    }
  },
});

// ---------------------------------------------------------------------------
// Program scope

interface RunSetup {
  dir: string;
  evil: string;
  marker: string;
}

/** A directory with an executable `sh` that would leave a marker file if it ever ran. */
async function runSetup(): Promise<RunSetup> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-run-" }));
  const evil = `${dir}/evil`;
  const marker = `${dir}/PWNED`;
  await Deno.mkdir(evil);
  for (const name of ["sh", "id", "env"]) {
    await Deno.writeTextFile(`${evil}/${name}`, `#!/bin/sh\necho pwned > ${marker}\n`, {
      mode: 0o755,
    });
  }
  return { dir, evil, marker };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

interface StartOutcome {
  error?: { code: number; message: string; data?: Json };
  output: string;
}

async function tryStart(client: ProtocolClient, params: Json): Promise<StartOutcome> {
  const processId = `p${nextRequestId()}`;
  const response = await client.request(nextRequestId(), "process/start", {
    processId,
    cwd: "file:///tmp",
    tty: false,
    env: {},
    ...params,
  });
  if (response.error) return { error: response.error as StartOutcome["error"], output: "" };
  await client.log.processClosed(processId);
  return { output: client.log.outputText(processId, params.tty ? "pty" : "stdout") };
}

Deno.test("--allow-run scopes cannot be escaped through argv[0], arg0, PATH or LD_ variables", async (t) => {
  const r = await runSetup();
  try {
    await using server = await ServerProcess.start({
      listen: "stdio",
      permissions: [
        "--allow-run=/bin/sh",
        "--allow-read",
        "--allow-write",
        "--allow-env",
        "--allow-sys",
      ],
    });
    const client = server.stdio!;
    await handshake(client);
    const refusedRun = (outcome: StartOutcome, what: string) => {
      assert.ok(outcome.error, `${what} ran: ${outcome.output}`);
      assert.equal(outcome.error.code, -32600, `${what}: ${JSON.stringify(outcome.error)}`);
      assert.equal(outcome.error.data?.kind, "permissionDenied", JSON.stringify(outcome.error));
    };
    let attempts = 0;
    await t.step(
      "a program outside the scope, by path, by PATH lookup or with dot segments",
      async () => {
        refusedRun(await tryStart(client, { argv: ["/usr/bin/id"] }), "/usr/bin/id");
        refusedRun(
          await tryStart(client, { argv: ["id"], env: { PATH: "/usr/bin" } }),
          "id on PATH",
        );
        refusedRun(await tryStart(client, { argv: ["/bin/../usr/bin/id"] }), "/bin/../usr/bin/id");
        refusedRun(
          await tryStart(client, { argv: ["/bin/./sh/../../usr/bin/id"] }),
          "dot segments",
        );
        refusedRun(await tryStart(client, { argv: [`${r.evil}/sh`] }), "evil/sh by path");
        attempts += 5;
      },
    );
    await t.step("PATH in env cannot swap the allowed program for another one", async () => {
      refusedRun(
        await tryStart(client, { argv: ["sh", "-c", "true"], env: { PATH: r.evil } }),
        "sh via PATH",
      );
      refusedRun(
        await tryStart(client, {
          argv: ["sh", "-c", "true"],
          env: {},
          envPolicy: {
            inherit: "none",
            ignoreDefaultExcludes: false,
            exclude: [],
            set: { PATH: r.evil },
            includeOnly: [],
          },
        }),
        "sh via envPolicy PATH",
      );
      refusedRun(
        await tryStart(client, {
          argv: ["sh", "-c", "true"],
          env: { PATH: `.:${r.evil}` },
          cwd: uri(r.evil),
        }),
        "sh via a relative PATH entry",
      );
      attempts += 3;
    });
    await t.step("arg0 names what the program sees, never what runs", async () => {
      const ok = await tryStart(client, {
        argv: ["/bin/sh", "-c", "echo $0"],
        arg0: `${r.evil}/sh`,
      });
      assert.equal(ok.error, undefined, JSON.stringify(ok.error));
      assert.equal(ok.output, `${r.evil}/sh\n`, "the allowed /bin/sh ran with the given $0");
      refusedRun(
        await tryStart(client, { argv: [`${r.evil}/sh`], arg0: "/bin/sh" }),
        "arg0 /bin/sh",
      );
      refusedRun(await tryStart(client, { argv: ["/usr/bin/id"], arg0: "sh" }), "arg0 sh");
      attempts += 2;
    });
    await t.step("LD_ and DYLD_ variables are refused for a scoped --allow-run", async () => {
      for (const name of ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES"]) {
        const outcome = await tryStart(client, {
          argv: ["/bin/sh", "-c", "echo ran"],
          env: { [name]: `${r.evil}/x.so` },
        });
        assert.ok(outcome.error, `${name}: the program ran (${outcome.output})`);
        attempts++;
      }
    });
    assert.equal(await exists(r.marker), false, "nothing outside the scope ran");
    console.log(`security ${JSON.stringify({ runScopeAttemptsRefused: attempts })}`);
  } finally {
    await Deno.remove(r.dir, { recursive: true });
  }
});

Deno.test({
  name: "--allow-run scopes hold for tty processes too (PATH from env, LD_ variables)",
  fn: async (t) => {
    const r = await runSetup();
    try {
      await using server = await ServerProcess.start({
        listen: "stdio",
        permissions: [
          "--allow-run=sh,/bin/sh",
          "--allow-ffi",
          "--allow-read",
          "--allow-write",
          "--allow-env",
          "--allow-sys",
        ],
      });
      const client = server.stdio!;
      await handshake(client);
      await t.step("PATH in env", async () => {
        const outcome = await tryStart(client, {
          argv: ["sh", "-c", "true"],
          env: { PATH: r.evil },
          tty: true,
        });
        assert.ok(outcome.error, `the tty process ran: ${outcome.output}`);
        assert.equal(await exists(r.marker), false, `${r.evil}/sh ran`);
      });
      await t.step("LD_PRELOAD", async () => {
        const outcome = await tryStart(client, {
          argv: ["/bin/sh", "-c", "echo ran"],
          env: { LD_PRELOAD: `${r.evil}/x.so` },
          tty: true,
        });
        assert.ok(outcome.error, `the tty process ran with LD_PRELOAD: ${outcome.output}`);
      });
    } finally {
      await Deno.remove(r.dir, { recursive: true });
    }
  },
});
