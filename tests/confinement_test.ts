/**
 * Operator confinement (`--sandbox`, `--writable-root`, `--deny-read`,
 * `--network-access`): the server's owner sets a ceiling that every process
 * and every `fs/*` call of every client runs under; a client's own `sandbox`
 * can only narrow it.
 */

import assert from "node:assert/strict";
import { TEST_LAYERS } from "./helpers/sandbox_layers.ts";
import { bwrapArgs } from "../lib/server/sandbox/bubblewrap.ts";
import { accessAt, intersectPlans, type SandboxPlan } from "../lib/server/sandbox/policy.ts";
import { PRIVATE_TMP_BYTES } from "../lib/server/sandbox/server_policy.ts";
import { pathFromUri, uriFromPath } from "../lib/server/host/path_uri.ts";
import { parseServerFlags, secretFiles } from "../lib/cli/server_flags.ts";
import {
  eventually,
  handshake,
  type Json,
  MAIN_TS,
  pidsMatching,
  SERVER_PERMISSIONS,
  startStdio,
} from "./helpers/server_harness.ts";

/**
 * A writable root W (with a subdirectory `sub`, where the probes write: on
 * Landlock a writable root's own entries are fixed, `layer.ts`), an outside
 * directory O and a secret directory S, under /var/tmp.
 */
function makeLayout():
  & { base: string; w: string; o: string; s: string; secret: string }
  & Disposable {
  const base = Deno.realPathSync(
    Deno.makeTempDirSync({ dir: "/var/tmp", prefix: "confine-test-" }),
  );
  const w = `${base}/w`;
  const o = `${base}/o`;
  const s = `${base}/s`;
  for (const dir of [w, o, s, `${w}/sub`]) Deno.mkdirSync(dir);
  const secret = `secret-${crypto.randomUUID()}`;
  Deno.writeTextFileSync(`${s}/secret.txt`, `${secret}\n`);
  return {
    base,
    w,
    o,
    s,
    secret,
    [Symbol.dispose]() {
      Deno.removeSync(base, { recursive: true });
    },
  };
}

/** Starts a stdio server with these options and completes the handshake. */
async function startInitialized(
  options: Parameters<typeof startStdio>[0] = {},
): Promise<Awaited<ReturnType<typeof startStdio>>> {
  const server = await startStdio(options);
  try {
    await handshake(server.stdio);
  } catch (err) {
    await server.stop();
    throw new Error(`${(err as Error).message}; stderr: ${await server.stderr}`);
  }
  return server;
}

/** A TCP listener on the host's loopback that counts the connections it accepts. */
function loopbackListener(): { port: number; accepted: () => number } & AsyncDisposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const loop = (async () => {
    try {
      for await (const conn of listener) {
        accepted++;
        conn.close();
      }
    } catch {
      // Closed.
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    accepted: () => accepted,
    async [Symbol.asyncDispose]() {
      listener.close();
      await loop;
    },
  };
}

/** The probe: tries each forbidden thing and prints one `NAME=ok|no` line per attempt. */
const PROBE = [
  "W=$1; O=$2; S=$3; PORT=$4; T=$5",
  'try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ok"; else echo "$name=no"; fi; }',
  'try WRITE_IN sh -c \'echo inside > "$0/sub/inside.txt"\' "$W"',
  'try WRITE_OUT sh -c \'echo outside > "$0/outside.txt"\' "$O"',
  'try WRITE_TMP sh -c \'echo tmp > "${TMPDIR:-/tmp}/$0"\' "$T"',
  'echo "SECRET=$(cat "$S/secret.txt" 2>/dev/null)"',
  'try NET bash -c \'exec 3<>"/dev/tcp/127.0.0.1/$0"\' "$PORT"',
  "echo DONE",
].join("\n");

interface ProbeResult {
  lines: Record<string, string>;
  output: string;
  sandboxType: unknown;
  sandboxDenied: unknown;
}

let processCounter = 0;

/** Runs the probe through `process/start` (pipe or tty) and collects what it printed. */
async function runProbe(
  client: Awaited<ReturnType<typeof startStdio>>["stdio"],
  layout: ReturnType<typeof makeLayout>,
  port: number,
  options: { tty: boolean; sandbox?: Json },
): Promise<ProbeResult & { tmpName: string }> {
  const processId = `probe-${++processCounter}`;
  const tmpName = `confine-probe-${crypto.randomUUID()}`;
  const response = await client.request(processCounter + 100, "process/start", {
    processId,
    argv: ["/bin/bash", "-c", PROBE, "probe", layout.w, layout.o, layout.s, String(port), tmpName],
    cwd: uriFromPath(layout.w),
    env: { PATH: "/usr/bin:/bin" },
    tty: options.tty,
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
  });
  assert.ok(response.result, `process/start failed: ${JSON.stringify(response)}`);
  const events = await client.log.processClosed(processId, 30_000);
  const output = client.log.outputText(processId, options.tty ? "pty" : "stdout");
  assert.match(output, /DONE/, `the probe did not finish: ${output}`);
  const lines: Record<string, string> = {};
  for (const match of output.matchAll(/^([A-Z_]+)=(.*?)\r?$/gm)) lines[match[1]!] = match[2]!;
  const exited = events.find((m) => m.method === "process/exited")?.params as Json;
  return {
    lines,
    output,
    sandboxType: (response.result as Json).sandboxType,
    sandboxDenied: exited.sandboxDenied,
    tmpName,
  };
}

/** Runs `/bin/sh -c script` in `cwd` (pipe) and returns its output once it has closed. */
async function runShell(
  client: Awaited<ReturnType<typeof startStdio>>["stdio"],
  processId: string,
  script: string,
  cwd: string,
  sandbox?: Json,
): Promise<string> {
  const start = await client.request(`start-${processId}`, "process/start", {
    processId,
    argv: ["/bin/sh", "-c", script],
    cwd: uriFromPath(cwd),
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    ...(sandbox ? { sandbox } : {}),
  });
  assert.equal(
    (start.result as Json | undefined)?.sandboxType,
    "linuxSeccomp",
    JSON.stringify(start),
  );
  await client.log.processClosed(processId);
  return client.log.outputText(processId);
}

const CEILING_ARGS = (layout: ReturnType<typeof makeLayout>) => [
  "--sandbox",
  "workspace-write",
  "--writable-root",
  layout.w,
  "--deny-read",
  layout.s,
];

const ROOT = { type: "special", value: { kind: "root" } };

/** A `managed` client sandbox with these file system entries. */
function managed(network: "restricted" | "enabled", entries: Json[]): Json {
  return {
    permissions: {
      type: "managed",
      network,
      file_system: { type: "restricted", entries },
    },
    windowsSandboxLevel: "disabled",
  };
}

/** Client sandboxes wider than the ceiling. */
const WIDER: Record<string, Json> = {
  "no sandbox of its own": {},
  "a disabled sandbox": {
    sandbox: { permissions: { type: "disabled" }, windowsSandboxLevel: "disabled" },
  },
  "a full-write, network-enabled sandbox": {
    sandbox: managed("enabled", [{ path: ROOT, access: "write" }]),
  },
};

function assertConfined(
  result: ProbeResult & { tmpName: string },
  layout: ReturnType<typeof makeLayout>,
  accepted: number,
) {
  const context = `output:\n${result.output}`;
  assert.equal(result.lines.WRITE_IN, "ok", `a write inside the writable root failed; ${context}`);
  assert.equal(Deno.readTextFileSync(`${layout.w}/sub/inside.txt`), "inside\n");
  assert.equal(
    result.lines.WRITE_OUT,
    "no",
    `a write outside the writable root worked; ${context}`,
  );
  assert.throws(() => Deno.lstatSync(`${layout.o}/outside.txt`), Deno.errors.NotFound);
  assert.throws(() => Deno.lstatSync(`/tmp/${result.tmpName}`), Deno.errors.NotFound);
  assert.equal(result.lines.SECRET, "", `the denied file was read; ${context}`);
  assert.ok(!result.output.includes(layout.secret), context);
  assert.equal(result.lines.NET, "no", `the host's loopback was reachable; ${context}`);
  assert.equal(accepted, 0, "the loopback listener accepted a connection");
  assert.equal(result.sandboxType, "linuxSeccomp");
}

/** Sends one request and returns its response. */
async function call(
  client: Awaited<ReturnType<typeof startStdio>>["stdio"],
  method: string,
  params: Json,
): Promise<Json> {
  return await client.request(`${method}-${++processCounter}`, method, params);
}

function assertPermissionDenied(response: Json, permission: "read" | "write", what: string): void {
  const error = response.error as { code: number; data?: Json } | undefined;
  assert.ok(error, `${what} succeeded: ${JSON.stringify(response)}`);
  assert.equal(error.code, -32600, `${what}: ${JSON.stringify(error)}`);
  assert.equal(error.data?.kind, "permissionDenied", `${what}: ${JSON.stringify(error)}`);
  assert.equal(error.data?.permission, permission, `${what}: ${JSON.stringify(error)}`);
}

const DATA = btoa("data\n");

Deno.test("without --sandbox, environmentInfo.capabilities.serverSandbox is false and protocol/describe says danger-full-access", async () => {
  await using server = await startInitialized();
  const client = server.stdio;
  const info = await client.request(1, "environment/info", {});
  assert.equal(((info.result as Json).capabilities as Json).serverSandbox, false);
  const described = await client.request(2, "protocol/describe", {});
  assert.equal(((described.result as Json).sandbox as Json).mode, "danger-full-access");
});

/** Starts the server with custom permissions and env, and returns its exit code and stderr. */
async function startFailing(
  args: string[],
  options: { permissions?: string[]; path?: string } = {},
) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...(options.permissions ?? SERVER_PERMISSIONS),
      MAIN_TS,
      "--listen",
      "stdio",
      ...args,
    ],
    env: {
      PATH: options.path ?? Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
    },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: output.code,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

/** A directory holding a `bwrap` that fails the way bubblewrap does without user namespaces. */
async function bwrapWithoutUserNamespaces(base: string): Promise<string> {
  const bin = `${base}/bin`;
  await Deno.mkdir(bin);
  await Deno.writeTextFile(
    `${bin}/bwrap`,
    '#!/bin/sh\nif [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n' +
      'echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
    { mode: 0o755 },
  );
  return bin;
}

Deno.test("a confining --sandbox refuses to start when bubblewrap cannot create user namespaces, and says why", async () => {
  using layout = makeLayout();
  const bin = await bwrapWithoutUserNamespaces(layout.base);
  const result = await startFailing([...CEILING_ARGS(layout), "--sandbox-layer", "bubblewrap"], {
    path: `${bin}:/usr/bin:/bin`,
  });
  assert.equal(result.code, 1, result.stderr);
  assert.equal(result.stdout, "");
  assert.match(result.stderr, /--sandbox workspace-write/);
  assert.match(result.stderr, /user namespaces/);
});

const LANDLOCK = TEST_LAYERS.find((t) => t.layer === "landlock")!;

Deno.test({
  name:
    `where bubblewrap cannot create user namespaces, --sandbox-layer auto confines with Landlock, and the audit log names the layer${LANDLOCK.skip}`,
  ignore: !LANDLOCK.availability.ok,
  async fn() {
    using layout = makeLayout();
    const bin = await bwrapWithoutUserNamespaces(layout.base);
    const env = { PATH: `${bin}:/usr/bin:/bin`, HOME: Deno.env.get("HOME") ?? "/root" };
    await using server = await startInitialized({
      args: [...CEILING_ARGS(layout), "--log-level", "info", "--log-format", "json"],
      env,
    });
    const output = await runShell(
      server.stdio,
      "ll",
      `echo in > '${layout.w}/sub/f' && echo IN=ok; echo out > '${layout.o}/f' || echo OUT=no`,
      layout.w,
    );
    assert.match(output, /IN=ok/, output);
    assert.match(output, /OUT=no/, output);
    assert.equal(Deno.readTextFileSync(`${layout.w}/sub/f`), "in\n");
    assert.throws(() => Deno.lstatSync(`${layout.o}/f`), Deno.errors.NotFound);
    await server.stop();
    const start = (await server.stderr).split("\n").filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line)).find((event) => event.event === "process.start");
    assert.equal(start?.sandboxLayer, "landlock", await server.stderr);
  },
});

Deno.test("a confining --sandbox refuses to start when the server may not run bubblewrap, and says why", async () => {
  const permissions = SERVER_PERMISSIONS.map((flag) =>
    flag === "--allow-run" ? "--allow-run=/bin/sh,/bin/bash" : flag
  );
  const result = await startFailing(["--sandbox", "read-only"], { permissions });
  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr, /--sandbox read-only/);
  assert.match(result.stderr, /bwrap/);
});

Deno.test("--sandbox danger-full-access starts without bubblewrap", async () => {
  const permissions = SERVER_PERMISSIONS.map((flag) =>
    flag === "--allow-run" ? "--allow-run=/bin/sh" : flag
  );
  // stdin stays open until initialize is answered: at EOF unanswered requests are dropped (§1.1).
  const server = await startInitialized({ permissions, args: ["--sandbox", "danger-full-access"] });
  const status = await server.stop();
  assert.equal(status.code, 0, await server.stderr);
});

Deno.test("--sandbox rejects an unknown mode and --writable-root without workspace-write", async () => {
  const unknown = await startFailing(["--sandbox", "everything"]);
  assert.equal(unknown.code, 2);
  assert.match(
    unknown.stderr,
    /--sandbox must be read-only, workspace-write or danger-full-access/,
  );
  const stray = await startFailing(["--writable-root", "/var/tmp"]);
  assert.equal(stray.code, 2);
  assert.match(stray.stderr, /--writable-root needs --sandbox workspace-write/);
  const relative = await startFailing(["--sandbox", "workspace-write", "--writable-root", "rel"]);
  assert.equal(relative.code, 2);
  assert.match(relative.stderr, /absolute/);
});

function plan(partial: Partial<SandboxPlan>): SandboxPlan {
  return {
    type: "linuxSeccomp",
    isolation: "filesystem",
    network: "enabled",
    rootAccess: "write",
    mounts: [],
    ...partial,
  };
}

Deno.test("intersectPlans gives every path the lesser access of the two plans", () => {
  const ceiling = plan({
    rootAccess: "read",
    network: "restricted",
    privateTmp: true,
    mounts: [
      { path: "/w", access: "write", node: "directory" },
      { path: "/w/secret", access: "deny", node: "directory" },
    ],
  });
  const client = plan({
    rootAccess: "write",
    mounts: [
      { path: "/o", access: "write", node: "directory" },
      { path: "/w/ro", access: "read", node: "directory" },
    ],
  });
  const both = intersectPlans(ceiling, client);
  assert.equal(both.rootAccess, "read");
  assert.equal(both.network, "restricted");
  assert.equal(both.privateTmp, true);
  assert.equal(accessAt(both, "/o/file"), "read");
  assert.equal(accessAt(both, "/w/file"), "write");
  assert.equal(accessAt(both, "/w/ro/file"), "read");
  assert.equal(accessAt(both, "/w/secret/file"), "deny");
  assert.deepEqual(both.mounts.map((m) => m.path), ["/w", "/w/ro", "/w/secret"]);
  // A client that may not write /tmp gets no private /tmp either.
  const readOnlyTmp = intersectPlans(ceiling, plan({ rootAccess: "read" }));
  assert.equal(readOnlyTmp.privateTmp, undefined);
  assert.equal(accessAt(readOnlyTmp, "/w/file"), "read");
});

Deno.test("intersectPlans re-exposes below a denied directory only what both plans allow, and covers only creatable missing paths", () => {
  // The ceiling denies /d but re-exposes its writable root /d/w (the directory becomes traversable).
  const ceiling = plan({
    rootAccess: "read",
    mounts: [
      { path: "/d", access: "deny", node: "directory", traversable: true },
      { path: "/d/w", access: "write", node: "directory" },
      { path: "/w", access: "write", node: "directory" },
    ],
  });
  const client = plan({
    mounts: [
      { path: "/d/other", access: "write", node: "directory" },
      { path: "/w/.git", access: "read", node: "missing" },
      { path: "/elsewhere/.git", access: "read", node: "missing" },
    ],
  });
  const both = intersectPlans(ceiling, client);
  assert.deepEqual(
    both.mounts.map((m) => [m.path, m.access, m.node, m.traversable ?? false]),
    [
      ["/d", "deny", "directory", true],
      ["/w", "write", "directory", false],
      ["/d/w", "write", "directory", false],
      ["/w/.git", "read", "missing", false],
    ],
  );
  assert.equal(accessAt(both, "/d/other/x"), "deny");
  // A client that denies /d keeps all of it denied.
  const denying = intersectPlans(
    ceiling,
    plan({ mounts: [{ path: "/d", access: "deny", node: "directory" }] }),
  );
  assert.equal(accessAt(denying, "/d/w/x"), "deny");
  assert.deepEqual(denying.mounts.map((m) => m.path), ["/d", "/w"]);
});

Deno.test("bwrapArgs mounts a private /tmp of PRIVATE_TMP_BYTES before the mounts below it", () => {
  const args = bwrapArgs(
    plan({
      rootAccess: "read",
      privateTmp: true,
      mounts: [{ path: "/tmp/w", access: "write", node: "directory" }],
    }),
    ["true"],
    { cwd: "/", env: {} },
  );
  const tmpfs = args.findIndex((arg, i) => arg === "--tmpfs" && args[i + 1] === "/tmp");
  assert.ok(tmpfs > 0, args.join(" "));
  assert.deepEqual(args.slice(tmpfs - 2, tmpfs), ["--size", String(PRIVATE_TMP_BYTES)]);
  const bind = args.findIndex((arg, i) => arg === "--bind" && args[i + 1] === "/tmp/w");
  assert.ok(bind > tmpfs, args.join(" "));
});

Deno.test("--deny-read of a path outside the server's --allow-read refuses to start instead of leaving it readable", async () => {
  using layout = makeLayout();
  const permissions = SERVER_PERMISSIONS.map((flag) =>
    flag === "--allow-read" ? `--allow-read=${layout.w},/usr/bin/bwrap,/bin/sh,/tmp` : flag
  );
  const result = await startFailing(CEILING_ARGS(layout), { permissions });
  assert.equal(result.code, 2, result.stderr);
  assert.match(
    result.stderr,
    new RegExp(`--deny-read ${layout.s} must be inside the server's --allow-read`),
  );
});

Deno.test("the token, shared-secret and TLS key files are the server's secret files", () => {
  const flags = parseServerFlags([
    "--ws-token-file",
    "/a/token",
    "--ws-shared-secret-file",
    "/a/secret",
    "--tls-cert",
    "/a/cert.pem",
    "--tls-key",
    "/a/key.pem",
  ]);
  assert.deepEqual(secretFiles(flags), ["/a/token", "/a/secret", "/a/key.pem"]);
});

for (const t of TEST_LAYERS) {
  /** A server forced onto this layer. */
  const startOn = (options: Parameters<typeof startStdio>[0] = {}) =>
    startInitialized({ ...options, args: [...(options.args ?? []), ...t.serverArgs] });

  for (const [label, extra] of Object.entries(WIDER)) {
    for (const tty of [false, true]) {
      const mode = tty ? "tty" : "pipe";
      Deno.test({
        name:
          `--sandbox workspace-write confines a ${mode} shell of a client with ${label}: no writes outside the writable root, no reads of a denied path, no host loopback${t.skip} [${t.layer}]`,
        ignore: !t.availability.ok,
        async fn() {
          using layout = makeLayout();
          await using listener = loopbackListener();
          await using server = await startOn({ args: CEILING_ARGS(layout) });
          const client = server.stdio;
          const result = await runProbe(client, layout, listener.port, {
            tty,
            sandbox: extra.sandbox as Json | undefined,
          });
          assertConfined(result, layout, listener.accepted());
        },
      });
    }
  }

  Deno.test({
    name:
      `without --sandbox the same probe writes outside, reads the secret and reaches the loopback${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using listener = loopbackListener();
      await using server = await startOn();
      const client = server.stdio;
      const result = await runProbe(client, layout, listener.port, { tty: false });
      try {
        assert.equal(result.lines.WRITE_IN, "ok", result.output);
        assert.equal(result.lines.WRITE_OUT, "ok", result.output);
        assert.equal(result.lines.SECRET, layout.secret, result.output);
        assert.equal(result.lines.NET, "ok", result.output);
        assert.equal(result.sandboxType, "none");
      } finally {
        Deno.removeSync(`/tmp/${result.tmpName}`);
      }
    },
  });

  Deno.test({
    name:
      `a client's read-only sandbox narrows the ceiling: no write even inside the writable root${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using listener = loopbackListener();
      await using server = await startOn({ args: CEILING_ARGS(layout) });
      const client = server.stdio;
      const readOnly = managed("restricted", [{ path: ROOT, access: "read" }]);
      const result = await runProbe(client, layout, listener.port, {
        tty: false,
        sandbox: readOnly,
      });
      assert.equal(result.lines.WRITE_IN, "no", result.output);
      assert.throws(() => Deno.lstatSync(`${layout.w}/sub/inside.txt`), Deno.errors.NotFound);
      assert.equal(result.lines.WRITE_OUT, "no", result.output);
      assert.equal(result.lines.SECRET, "", result.output);
      assert.equal(result.lines.NET, "no", result.output);
      assert.equal(result.sandboxType, "linuxSeccomp");
    },
  });

  Deno.test({
    name:
      `--sandbox workspace-write refuses a process/start in a directory the sandbox hides (the host's /tmp, a denied path) with spawnPermissionDenied, pipe and tty${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      const hostTmp = Deno.makeTempDirSync({ dir: "/tmp", prefix: "confine-cwd-" });
      try {
        await using server = await startOn({ args: CEILING_ARGS(layout) });
        const client = server.stdio;
        for (const cwd of [hostTmp, layout.s]) {
          for (const tty of [false, true]) {
            const what = `cwd ${cwd}, ${tty ? "tty" : "pipe"}`;
            const response = await call(client, "process/start", {
              processId: `hidden-cwd-${++processCounter}`,
              argv: ["/bin/pwd"],
              cwd: uriFromPath(cwd),
              env: { PATH: "/usr/bin:/bin" },
              tty,
            });
            const error = response.error as { code: number; message: string; data?: Json };
            assert.ok(error, `${what} started: ${JSON.stringify(response)}`);
            assert.equal(error.code, -32603, `${what}: ${JSON.stringify(error)}`);
            assert.equal(
              error.data?.kind,
              "spawnPermissionDenied",
              `${what}: ${JSON.stringify(error)}`,
            );
            assert.ok(error.message.includes(cwd), `${what}: ${error.message}`);
          }
        }
        // The writable root itself still works as a working directory.
        assert.match(await runShell(client, "cwd-ok", "pwd", layout.w), new RegExp(layout.w));
      } finally {
        Deno.removeSync(hostTmp, { recursive: true });
      }
    },
  });

  Deno.test({
    name:
      `a client's own sandbox refuses a process/start in a directory it denies with spawnPermissionDenied (the reference runs it in /)${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      Deno.mkdirSync(`${layout.s}/sub`);
      await using server = await startOn();
      const sandbox = managed("restricted", [
        { path: ROOT, access: "read" },
        { path: { type: "path", path: uriFromPath(layout.s) }, access: "none" },
      ]);
      const response = await call(server.stdio, "process/start", {
        processId: `denied-cwd-${++processCounter}`,
        argv: ["/bin/pwd"],
        cwd: uriFromPath(`${layout.s}/sub`),
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox,
      });
      const error = response.error as { code: number; data?: Json } | undefined;
      assert.equal(error?.code, -32603, JSON.stringify(response));
      assert.equal(error?.data?.kind, "spawnPermissionDenied", JSON.stringify(response));
      // A directory it reads is still a working directory.
      const output = await runShell(
        server.stdio,
        `read-cwd-${++processCounter}`,
        "pwd",
        layout.o,
        sandbox,
      );
      assert.equal(output.trim(), layout.o);
    },
  });

  Deno.test({
    name:
      `--network-access gives confined processes the network, still without writes outside the writable root${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using listener = loopbackListener();
      await using server = await startOn({
        args: [...CEILING_ARGS(layout), "--network-access"],
      });
      const client = server.stdio;
      const result = await runProbe(client, layout, listener.port, { tty: false });
      assert.equal(result.lines.NET, "ok", result.output);
      assert.equal(result.lines.WRITE_OUT, "no", result.output);
      assert.equal(result.lines.SECRET, "", result.output);
    },
  });

  Deno.test({
    name:
      `--sandbox workspace-write refuses fs writes outside the writable roots and reads of denied paths with the typed permission error${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      Deno.writeTextFileSync(`${layout.o}/existing.txt`, "old\n");
      await using server = await startOn({ args: CEILING_ARGS(layout) });
      const client = server.stdio;
      const uri = (path: string) => uriFromPath(path);
      const copy = (from: string, to: string) => ({
        sourcePath: uri(from),
        destinationPath: uri(to),
        recursive: false,
      });
      for (const sandbox of [undefined, WIDER["a disabled sandbox"]!.sandbox]) {
        const extra = sandbox ? { sandbox } : {};
        // Inside the writable root: allowed.
        const inside = await call(client, "fs/writeFile", {
          path: uri(`${layout.w}/a.txt`),
          dataBase64: DATA,
          ...extra,
        });
        assert.deepEqual(inside.result, {}, JSON.stringify(inside));
        assert.equal(Deno.readTextFileSync(`${layout.w}/a.txt`), "data\n");
        // Writes outside the writable root, reads of the denied path: [method, params, permission, what].
        const refused: [string, Json, "read" | "write", string][] = [
          [
            "fs/writeFile",
            { path: uri(`${layout.o}/new.txt`), dataBase64: DATA },
            "write",
            "outside",
          ],
          ["fs/createDirectory", { path: uri(`${layout.o}/dir`) }, "write", "outside"],
          ["fs/remove", { path: uri(`${layout.o}/existing.txt`) }, "write", "outside"],
          ["fs/copy", copy(`${layout.w}/a.txt`, `${layout.o}/copy.txt`), "write", "to outside"],
          [
            "fs/open",
            { handleId: "w", path: uri(`${layout.o}/opened.txt`), mode: "replace" },
            "write",
            "replace outside",
          ],
          [
            "fs/writeFile",
            { path: uri(`/tmp/confine-${crypto.randomUUID()}`), dataBase64: DATA },
            "write",
            "to the host's /tmp",
          ],
          ["fs/readFile", { path: uri(`${layout.s}/secret.txt`) }, "read", "of the denied file"],
          ["fs/readDirectory", { path: uri(layout.s) }, "read", "of the denied directory"],
          [
            "fs/copy",
            copy(`${layout.s}/secret.txt`, `${layout.w}/stolen.txt`),
            "read",
            "of secret",
          ],
          [
            "fs/open",
            { handleId: "r", path: uri(`${layout.s}/secret.txt`) },
            "read",
            "of the denied file",
          ],
        ];
        for (const [method, params, permission, what] of refused) {
          const response = await call(client, method, { ...params, ...extra });
          assertPermissionDenied(response, permission, `${method} ${what}`);
        }
        // A walk above the denied directory leaves out what it holds.
        const walked = await call(client, "fs/walk", {
          path: uri(layout.base),
          options: {
            maxDepth: 5,
            maxDirectories: 100,
            maxEntries: 1000,
            followDirectorySymlinks: false,
          },
          ...extra,
        });
        const listed = ((walked.result as Json).entries as { path: string }[]).map((e) => e.path);
        assert.ok(listed.includes(uri(layout.s)), JSON.stringify(walked));
        assert.ok(!listed.includes(uri(`${layout.s}/secret.txt`)), JSON.stringify(walked));
        // Reads elsewhere: allowed.
        const read = await call(client, "fs/readFile", {
          path: uri(`${layout.o}/existing.txt`),
          ...extra,
        });
        assert.equal(read.result && atob((read.result as Json).dataBase64 as string), "old\n");
      }
      assert.deepEqual([...Deno.readDirSync(layout.o)].map((e) => e.name), ["existing.txt"]);
      assert.throws(() => Deno.lstatSync(`${layout.w}/stolen.txt`), Deno.errors.NotFound);
    },
  });

  Deno.test({
    name: `--sandbox denies processes the server's token file automatically${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      const tokenFile = `${layout.base}/token`;
      const token = `token-${crypto.randomUUID()}`;
      Deno.writeTextFileSync(tokenFile, token);
      await using server = await startOn({
        args: [
          ...CEILING_ARGS(layout),
          "--ws-auth",
          "capability-token",
          "--ws-token-file",
          tokenFile,
        ],
      });
      const client = server.stdio;
      const output = await runShell(client, "token", `cat '${tokenFile}'; echo DONE`, layout.w);
      assert.match(output, /DONE/);
      assert.ok(!output.includes(token), `the token file was readable: ${output}`);
      assertPermissionDenied(
        await call(client, "fs/readFile", { path: uriFromPath(tokenFile) }),
        "read",
        "fs/readFile of the token file",
      );
    },
  });

  Deno.test({
    name:
      `environmentInfo.capabilities and protocol/describe say what the server's sandbox enforces${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using server = await startOn({ args: CEILING_ARGS(layout) });
      const client = server.stdio;
      const info = await client.request(1, "environment/info", {});
      const caps = (info.result as Json).capabilities as Json;
      assert.equal(caps.serverSandbox, true);
      const described = await client.request(2, "protocol/describe", {});
      const sandbox = (described.result as Json).sandbox as Json;
      assert.equal(sandbox.mode, "workspace-write");
      assert.deepEqual(sandbox.writableRoots, [uriFromPath(layout.w)]);
      assert.ok((sandbox.denyRead as string[]).includes(uriFromPath(layout.s)));
      assert.equal(sandbox.networkAccess, false);
      assert.equal(sandbox.privateTmp, true);
    },
  });

  for (const mode of ["workspace-write", "read-only"] as const) {
    Deno.test({
      name:
        `under --sandbox ${mode}, environmentInfo.tempDir is the sandbox's own temporary directory: processes and fs calls share it, and it goes with the server${t.skip} [${t.layer}]`,
      ignore: !t.availability.ok,
      async fn() {
        using layout = makeLayout();
        const args = mode === "read-only" ? ["--sandbox", "read-only"] : CEILING_ARGS(layout);
        await using server = await startOn({ args });
        const client = server.stdio;
        const info = (await client.request(1, "environment/info", {})).result as Json;
        const tempDir = pathFromUri(info.tempDir as string);
        assert.notEqual(tempDir, "/tmp", "the host's /tmp is not the sandbox's");
        assert.deepEqual(info.temporaryDirectories, [info.tempDir]);
        assert.ok(Deno.statSync(tempDir).isDirectory);
        const written = await call(client, "fs/writeFile", {
          path: uriFromPath(`${tempDir}/from-fs`),
          dataBase64: DATA,
        });
        assert.deepEqual(written.result, {}, JSON.stringify(written));
        const output = await runShell(
          client,
          "tempdir",
          `cat '${tempDir}/from-fs' && echo READ; echo p > '${tempDir}/from-process' && echo WROTE`,
          mode === "read-only" ? tempDir : layout.w,
        );
        assert.match(output, /READ/, output);
        assert.match(output, /WROTE/, output);
        const back = await call(client, "fs/readFile", {
          path: uriFromPath(`${tempDir}/from-process`),
        });
        assert.ok(back.result, JSON.stringify(back));
        await server.stop();
        assert.throws(() => Deno.lstatSync(tempDir), Deno.errors.NotFound, "left behind");
      },
    });
  }

  for (const tty of [false, true]) {
    Deno.test({
      name: `a confined ${tty ? "tty" : "pipe"} process has no capabilities${
        t.traits.pidNamespace ? ", its own PID namespace," : ""
      } and dies when the server is killed${t.skip} [${t.layer}]`,
      ignore: !t.availability.ok,
      async fn() {
        using layout = makeLayout();
        const marker = `confine-survivor-${crypto.randomUUID()}`;
        await using server = await startOn({ args: CEILING_ARGS(layout) });
        const client = server.stdio;
        const start = await client.request(1, "process/start", {
          processId: "inside",
          argv: [
            "/bin/bash",
            "-c",
            `grep CapEff /proc/self/status; echo "PROCS=$(ls /proc | grep -c '^[0-9]')"; ` +
            `echo READY; exec -a ${marker} sleep 300`,
          ],
          cwd: uriFromPath(layout.w),
          env: { PATH: "/usr/bin:/bin" },
          tty,
        });
        assert.ok(start.result, JSON.stringify(start));
        const stream = tty ? "pty" : "stdout";
        const text = () => client.log.outputText("inside", stream);
        await client.log.waitUntil(() => /READY\r?\n/.test(text()), "READY");
        const output = text();
        assert.match(output, /CapEff:\s+0+\r?\n/, output);
        const procs = Number(/PROCS=(\d+)/.exec(output)?.[1]);
        if (t.traits.freshProc) {
          assert.ok(procs > 0 && procs < 10, `the process sees ${procs} processes: ${output}`);
        }
        // The sleep's own command line is "<marker> 300" (the sandbox's holds "<marker> sleep 300").
        const survivor = `${marker} 300`;
        assert.ok(
          await eventually(() => pidsMatching(survivor).length === 1),
          "no sleep is running",
        );
        server.kill("SIGKILL");
        await server.status;
        assert.ok(
          await eventually(() => pidsMatching(survivor).length === 0),
          "the confined process survived the server",
        );
      },
    });
  }

  Deno.test({
    name:
      `without --sandbox, a client's own sandbox hides the server's token file from processes and fs calls${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      const tokenFile = `${layout.w}/token`;
      const token = `token-${crypto.randomUUID()}`;
      Deno.writeTextFileSync(tokenFile, token);
      await using server = await startOn({
        args: ["--ws-auth", "capability-token", "--ws-token-file", tokenFile],
      });
      const client = server.stdio;
      // A workspace-write sandbox with the network, the token file inside the workspace: no token.
      const sandbox = managed("enabled", [
        { path: ROOT, access: "read" },
        { path: { type: "path", path: uriFromPath(layout.w) }, access: "write" },
      ]);
      const output = await runShell(
        client,
        "token",
        `cat '${tokenFile}'; echo DONE`,
        layout.w,
        sandbox,
      );
      assert.match(output, /DONE/);
      assert.ok(!output.includes(token), `the token file was readable: ${output}`);
      const read = await call(client, "fs/readFile", { path: uriFromPath(tokenFile), sandbox });
      assert.equal((read.error as Json | undefined)?.code, -32600, JSON.stringify(read));
      // Without a sandbox of its own the client is the server's owner: it may read the file.
      const own = await call(client, "fs/readFile", { path: uriFromPath(tokenFile) });
      assert.ok(own.result, JSON.stringify(own));
    },
  });

  // ---------------------------------------------------------------------------
  // The intersection of the ceiling and a client's plan, in-process.

  Deno.test({
    name:
      `a confined process refused a write outside the writable roots reports sandboxDenied${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using server = await startOn({ args: CEILING_ARGS(layout) });
      const client = server.stdio;
      for (const [processId, target] of [["out", layout.o], ["in", `${layout.w}/sub`]] as const) {
        const start = await client.request(`start-${processId}`, "process/start", {
          processId,
          argv: ["/bin/sh", "-c", `echo x > '${target}/file'`],
          cwd: uriFromPath(layout.w),
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
        });
        assert.equal((start.result as Json).sandboxType, "linuxSeccomp");
      }
      const exited = async (processId: string) => {
        const events = await client.log.processClosed(processId);
        return events.find((m) => m.method === "process/exited")!.params as Json;
      };
      const outside = await exited("out");
      assert.notEqual(outside.exitCode, 0);
      assert.equal(outside.sandboxDenied, true);
      const inside = await exited("in");
      assert.equal(inside.exitCode, 0);
      assert.equal(inside.sandboxDenied, false);
    },
  });

  Deno.test({
    name: `a confined process gets an empty private /tmp of PRIVATE_TMP_BYTES${
      t.skip ||
      (t.layer === "landlock"
        ? " (ignored: Landlock cannot mount a /tmp; the host's is denied and TMPDIR names a private directory, tested elsewhere)"
        : "")
    } [${t.layer}]`,
    ignore: !t.availability.ok || t.layer === "landlock",
    async fn() {
      using layout = makeLayout();
      await using server = await startOn({ args: CEILING_ARGS(layout) });
      const client = server.stdio;
      const script =
        'echo "SIZE=$(df -B1 --output=size /tmp | tail -1)"; echo "ENTRIES=$(ls -A /tmp | wc -l)"';
      const output = await runShell(client, "tmp", script, layout.w);
      assert.equal(Number(/SIZE=\s*(\d+)/.exec(output)?.[1]), PRIVATE_TMP_BYTES, output);
      assert.match(output, /ENTRIES=0\n/, output);
    },
  });

  Deno.test({
    name:
      `a --writable-root inside a --deny-read directory stays writable, and the rest of it denied${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      // Deny the whole base (w, o, s live in it), re-expose w.
      const args = [
        "--sandbox",
        "workspace-write",
        "--writable-root",
        layout.w,
        "--deny-read",
        layout.base,
      ];
      await using listener = loopbackListener();
      await using server = await startOn({ args });
      const client = server.stdio;
      const result = await runProbe(client, layout, listener.port, { tty: false });
      assertConfined(result, layout, listener.accepted());
      Deno.writeTextFileSync(`${layout.o}/existing.txt`, "old\n");
      const uri = (path: string) => uriFromPath(path);
      const inside = await call(client, "fs/writeFile", {
        path: uri(`${layout.w}/b.txt`),
        dataBase64: DATA,
      });
      assert.deepEqual(inside.result, {}, JSON.stringify(inside));
      const back = await call(client, "fs/readFile", { path: uri(`${layout.w}/b.txt`) });
      assert.ok(back.result, JSON.stringify(back));
      assertPermissionDenied(
        await call(client, "fs/readFile", { path: uri(`${layout.o}/existing.txt`) }),
        "read",
        "fs/readFile beside the re-exposed root",
      );
      assertPermissionDenied(
        await call(client, "fs/readDirectory", { path: uri(layout.base) }),
        "read",
        "fs/readDirectory of the denied directory",
      );
    },
  });

  Deno.test({
    name:
      `--sandbox read-only refuses every write of processes and fs calls, with a private /tmp still writable${t.skip} [${t.layer}]`,
    ignore: !t.availability.ok,
    async fn() {
      using layout = makeLayout();
      await using server = await startOn({ args: ["--sandbox", "read-only"] });
      const client = server.stdio;
      const output = await runShell(
        client,
        "ro",
        `echo x > '${layout.w}/f' || echo REFUSED; echo y > "\${TMPDIR:-/tmp}/f" && echo TMP=ok; cat '${layout.s}/secret.txt'`,
        layout.w,
      );
      assert.match(output, /REFUSED/, output);
      assert.match(output, /TMP=ok/, output);
      assert.ok(
        output.includes(layout.secret),
        `reads are not restricted without --deny-read: ${output}`,
      );
      assert.throws(() => Deno.lstatSync(`${layout.w}/f`), Deno.errors.NotFound);
      assertPermissionDenied(
        await call(client, "fs/writeFile", {
          path: uriFromPath(`${layout.w}/g`),
          dataBase64: DATA,
        }),
        "write",
        "fs/writeFile under read-only",
      );
    },
  });
}
