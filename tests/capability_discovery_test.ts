// capabilityRoots/discoverV1: the answers below are the reference's (codex-cli 0.171.0) for the
// same trees, recorded by sending it the same requests.
import assert from "node:assert/strict";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import type { ResultOf } from "../lib/protocol/methods.ts";
import {
  discoverCapabilityRoots,
  MAX_BUNDLE_BYTES_PER_REQUEST,
  MAX_BUNDLE_BYTES_PER_ROOT,
  MAX_FILE_BYTES,
  MAX_ROOTS_PER_REQUEST,
} from "../lib/server/capabilities/discover.ts";
import { utf8Error } from "../lib/server/capabilities/utf8_error.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { runFsOperation } from "../lib/server/fs/operations.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { uriFromPath } from "../lib/server/host/path_uri.ts";
import { sandboxValue } from "./helpers/attack.ts";
import { inProcessSession } from "./helpers/in_process_server.ts";
import { handshake, type Json, MAIN_TS, startStdio } from "./helpers/server_harness.ts";

type Discovery = ResultOf<"capabilityRoots/discoverV1">["roots"][number];
type Root = { id: string; path: string; sandbox?: unknown };

function discover(roots: Root[]): Promise<{ roots: Discovery[] }> {
  const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
  return discoverCapabilityRoots(
    { roots },
    (method, params) => runFsOperation(method, params, context),
  );
}

/** Writes `files` (path below `dir` → contents) and returns `dir`. */
async function tree(dir: string, files: Record<string, string | Uint8Array>): Promise<string> {
  for (const [name, contents] of Object.entries(files)) {
    const path = `${dir}/${name}`;
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    if (typeof contents === "string") await Deno.writeTextFile(path, contents);
    else await Deno.writeFile(path, contents);
  }
  return dir;
}

async function scratch(): Promise<{ base: string } & AsyncDisposable> {
  const base = await Deno.realPath(await Deno.makeTempDir({ prefix: "capability-" }));
  return { base, [Symbol.asyncDispose]: () => Deno.remove(base, { recursive: true }) };
}

const MANIFEST = '{"name":"demo","mcpServers":"./m.json","apps":"../x.json"}\n';
const SKILL = "---\nname: a\ndescription: A\n---\nbody\n";

function text(path: string, contents: string) {
  return { path: uriFromPath(path), contents };
}

Deno.test("capabilityRoots/discoverV1 returns a plugin's manifest, declared MCP config, skills and nested manifests as the reference", async () => {
  await using dir = await scratch();
  const root = await tree(`${dir.base}/root`, {
    ".codex-plugin/plugin.json": MANIFEST,
    "m.json": '{"mcpServers":{}}\n',
    "skills/a/SKILL.md": SKILL,
    "skills/a/agents/openai.yaml": "interface: {}\n",
    "sub/.claude-plugin/plugin.json": '{"name":"sub"}\n',
    "sub/skills/b/SKILL.md": "x\n",
  });
  const { roots } = await discover([{ id: "r1", path: uriFromPath(root) }, {
    id: "r4",
    path: uriFromPath(`${root}/sub`),
  }]);
  const manifest = text(`${root}/.codex-plugin/plugin.json`, MANIFEST);
  const sub = text(`${root}/sub/.claude-plugin/plugin.json`, '{"name":"sub"}\n');
  const subSkill = { instructions: text(`${root}/sub/skills/b/SKILL.md`, "x\n"), metadata: null };
  assert.deepEqual(roots, [{
    id: "r1",
    path: uriFromPath(root),
    plugin: {
      manifest,
      mcpConfig: text(`${root}/m.json`, '{"mcpServers":{}}\n'),
      appsConfig: null,
    },
    skills: [{
      instructions: text(`${root}/skills/a/SKILL.md`, SKILL),
      metadata: text(`${root}/skills/a/agents/openai.yaml`, "interface: {}\n"),
    }, subSkill],
    namespaceManifests: [manifest, sub],
    warnings: [
      `ignoring apps in ${manifest.path}: path must start with \`./\``,
    ],
    error: null,
  }, {
    id: "r4",
    path: uriFromPath(`${root}/sub`),
    plugin: { manifest: sub, mcpConfig: null, appsConfig: null },
    skills: [subSkill],
    namespaceManifests: [sub],
    warnings: [],
    error: null,
  }]);
});

Deno.test("capabilityRoots/discoverV1 gives a root back with its dot segments resolved, as the reference", async () => {
  await using dir = await scratch();
  await tree(dir.base, { "sub/skills/b/SKILL.md": "x\n" });
  const dotted = `${uriFromPath(dir.base)}/skills/../sub`;
  const { roots: [found] } = await discover([{ id: "d", path: dotted }]);
  assert.equal(found!.path, uriFromPath(`${dir.base}/sub`));
  assert.deepEqual(found!.skills.map((skill) => skill.instructions.path), [
    uriFromPath(`${dir.base}/sub/skills/b/SKILL.md`),
  ]);
});

Deno.test("capabilityRoots/discoverV1 reports a missing root and a file root as that root's error", async () => {
  await using dir = await scratch();
  await Deno.writeTextFile(`${dir.base}/file`, "");
  const missing = uriFromPath(`${dir.base}/missing`);
  const file = uriFromPath(`${dir.base}/file`);
  const { roots } = await discover([{ id: "m", path: missing }, { id: "f", path: file }]);
  assert.deepEqual(roots.map((root) => [root.id, root.error]), [
    ["m", `failed to inspect capability root ${missing}: No such file or directory (os error 2)`],
    ["f", `capability root ${file} is not a directory`],
  ]);
  for (const root of roots) assert.deepEqual([root.skills, root.warnings], [[], []]);
});

Deno.test("capabilityRoots/discoverV1 reads the MCP config a manifest declares, inline or by default, as the reference", async () => {
  await using dir = await scratch();
  const inline = await tree(`${dir.base}/inline`, {
    ".codex-plugin/plugin.json": '{"mcpServers":{"a":1},"apps":"./apps.json"}\n',
    ".cursor-plugin/plugin.json": '{"name":"cursor"}\n',
    "apps.json": "{}\n",
    ".mcp.json": '{"m":1}\n',
  });
  const notJson = await tree(`${dir.base}/not-json`, {
    ".codex-plugin/plugin.json": "not json\n",
    ".mcp.json": '{"m":2}\n',
  });
  const escaping = await tree(`${dir.base}/escaping`, {
    ".codex-plugin/plugin.json": '{"mcpServers":"./../x","apps":"./a/../b"}\n',
    ".mcp.json": '{"m":3}\n',
  });
  const empty = await tree(`${dir.base}/empty`, {
    ".codex-plugin/plugin.json": '{"mcpServers":"./","apps":"./missing.json"}\n',
  });
  await Deno.symlink(inline, `${dir.base}/link`);
  const { roots } = await discover(
    [inline, notJson, escaping, empty, `${dir.base}/link`].map((path, i) => ({
      id: `${i}`,
      path: uriFromPath(path),
    })),
  );
  const files = (root: Discovery) => ({
    mcp: root.plugin?.mcpConfig?.path ?? null,
    apps: root.plugin?.appsConfig?.path ?? null,
    namespaces: root.namespaceManifests.map((manifest) => manifest.path),
    warnings: root.warnings,
  });
  const manifestOf = (root: string) => uriFromPath(`${root}/.codex-plugin/plugin.json`);
  const below = (root: string, field: string) =>
    `ignoring ${field} in ${manifestOf(root)}: path must remain below the capability root`;
  assert.deepEqual(roots.map(files), [
    {
      mcp: null,
      apps: uriFromPath(`${inline}/apps.json`),
      namespaces: [manifestOf(inline)],
      warnings: [],
    },
    {
      mcp: uriFromPath(`${notJson}/.mcp.json`),
      apps: null,
      namespaces: [manifestOf(notJson)],
      warnings: [],
    },
    {
      mcp: uriFromPath(`${escaping}/.mcp.json`),
      apps: null,
      namespaces: [manifestOf(escaping)],
      warnings: [below(escaping, "mcpServers"), below(escaping, "apps")],
    },
    {
      mcp: null,
      apps: null,
      namespaces: [manifestOf(empty)],
      warnings: [below(empty, "mcpServers")],
    },
    {
      mcp: null,
      apps: uriFromPath(`${dir.base}/link/apps.json`),
      namespaces: [uriFromPath(`${dir.base}/link/.codex-plugin/plugin.json`)],
      warnings: [],
    },
  ]);
});

Deno.test("capabilityRoots/discoverV1 reads files up to 1 MiB of UTF-8 and warns about the rest, as the reference", async () => {
  await using dir = await scratch();
  const root = await tree(dir.base, {
    "skills/at-limit/SKILL.md": "a".repeat(MAX_FILE_BYTES),
    "skills/big/SKILL.md": "a".repeat(MAX_FILE_BYTES + 1),
    "skills/bad/SKILL.md": new Uint8Array([0x61, 0x62, 0xff, 0x63, 0x64]),
    "skills/cut/SKILL.md": new Uint8Array([0x6f, 0x6b, 0xe2, 0x82]),
    "real/SKILL.md": "real\n",
  });
  await Deno.mkdir(`${root}/skills/link`);
  await Deno.symlink("../../real/SKILL.md", `${root}/skills/link/SKILL.md`);
  const { roots: [found] } = await discover([{ id: "r", path: uriFromPath(root) }]);
  const skill = (name: string) => uriFromPath(`${root}/skills/${name}/SKILL.md`);
  // A symlinked SKILL.md is not a file of the walk, so not a skill.
  assert.deepEqual(
    found!.skills.map((s) => [s.instructions.path, s.instructions.contents.length]),
    [
      [uriFromPath(`${root}/real/SKILL.md`), 5],
      [skill("at-limit"), MAX_FILE_BYTES],
    ],
  );
  assert.deepEqual(found!.warnings, [
    `capability file ${skill("bad")} is not UTF-8: invalid utf-8 sequence of 1 bytes from index 2`,
    `capability file ${skill("big")} exceeds the 1048576-byte limit`,
    `capability file ${skill("cut")} is not UTF-8: incomplete utf-8 byte sequence from index 2`,
  ]);
});

Deno.test("capabilityRoots/discoverV1 reads at most 16 MiB per root and 64 MiB per request", async () => {
  await using dir = await scratch();
  const perRoot = MAX_BUNDLE_BYTES_PER_ROOT / MAX_FILE_BYTES;
  const files: Record<string, string> = {};
  const body = "s".repeat(MAX_FILE_BYTES);
  for (let i = 0; i <= perRoot; i++) files[`skills/${String(i).padStart(2, "0")}/SKILL.md`] = body;
  const root = await tree(dir.base, files);
  const fullRoots = MAX_BUNDLE_BYTES_PER_REQUEST / MAX_BUNDLE_BYTES_PER_ROOT;
  const requested = Array.from({ length: fullRoots + 1 }, (_, i) => ({
    id: `${i}`,
    path: uriFromPath(root),
  }));
  const { roots } = await discover(requested);
  const last = uriFromPath(`${root}/skills/${perRoot}/SKILL.md`);
  for (const found of roots.slice(0, fullRoots)) {
    assert.equal(found.skills.length, perRoot, "16 MiB of skills fit a root");
    assert.deepEqual(found.warnings, [
      `capability root bundle exceeds the 16777216-byte limit`,
    ], `${last} is one byte too many`);
  }
  const over = roots[fullRoots]!;
  assert.equal(over.skills.length, 0, "the request's 64 MiB are spent");
  assert.equal(over.warnings.length, perRoot + 1);
  assert.ok(
    over.warnings.every((w) => w === "capability discovery reply exceeds the 67108864-byte limit"),
  );
});

Deno.test("capabilityRoots/discoverV1 scans 6 levels below a root and warns at 2,000 directories, as the reference", async () => {
  await using dir = await scratch();
  const levels = ["", "1", "1/2", "1/2/3", "1/2/3/4", "1/2/3/4/5", "1/2/3/4/5/6", "1/2/3/4/5/6/7"];
  const deep = await tree(
    `${dir.base}/deep`,
    Object.fromEntries(levels.map((level) => [`${level}/SKILL.md`.replace(/^\//, ""), "x\n"])),
  );
  const many = `${dir.base}/many`;
  for (let i = 0; i <= 2_000; i++) await Deno.mkdir(`${many}/${i}`, { recursive: true });
  const { roots: [d, m] } = await discover([{ id: "d", path: uriFromPath(deep) }, {
    id: "m",
    path: uriFromPath(many),
  }]);
  assert.deepEqual(
    d!.skills.map((skill) => skill.instructions.path).sort(),
    levels.slice(0, 7).map((level) => uriFromPath(`${deep}/${level}/SKILL.md`.replace("//", "/")))
      .sort(),
  );
  assert.deepEqual(d!.warnings, []);
  assert.deepEqual(m!.warnings, [
    `capability scan reached its traversal limit (root: ${uriFromPath(many)})`,
  ]);
});

Deno.test("capabilityRoots/discoverV1 takes at most 128 roots and refuses a request with an invalid root whole", async () => {
  await using dir = await scratch();
  const path = uriFromPath(dir.base);
  const roots = Array.from({ length: MAX_ROOTS_PER_REQUEST }, (_, i) => ({ id: `${i}`, path }));
  assert.equal((await discover(roots)).roots.length, 128);
  const refusal = async (requested: Root[]) => {
    try {
      await discover(requested);
    } catch (err) {
      assert.ok(err instanceof RpcError);
      return [err.code, err.message];
    }
    assert.fail("the request was answered");
  };
  assert.deepEqual(await refusal([...roots, { id: "129", path }]), [
    ErrorCode.InvalidRequest,
    "capability root discovery accepts at most 128 roots",
  ]);
  assert.deepEqual(await refusal([{ id: "ok", path }, { id: "x", path: "relative/p" }]), [
    ErrorCode.InvalidParams,
    "invalid URI: relative URL without a base",
  ]);
  assert.deepEqual(await refusal([{ id: "ok", path }, { id: "x", path, sandbox: { bogus: 1 } }]), [
    ErrorCode.InvalidParams,
    "missing field `permissions`",
  ]);
});

Deno.test("capabilityRoots/discoverV1 reads through each root's sandbox: a denied directory is a warning, as the reference", async () => {
  await using dir = await scratch();
  const root = await tree(dir.base, {
    "skills/open/SKILL.md": "open\n",
    "skills/denied/SKILL.md": "secret\n",
  });
  const denied = `${root}/skills/denied`;
  const sandbox = sandboxValue([], "restricted");
  const permissions = sandbox.permissions as { file_system: { entries: unknown[] } };
  permissions.file_system.entries.push(
    { path: { type: "path", path: uriFromPath(denied) }, access: "none" },
  );
  const { roots: [whole, inside, free] } = await discover([
    { id: "g", path: uriFromPath(root), sandbox },
    { id: "h", path: uriFromPath(denied), sandbox },
    { id: "free", path: uriFromPath(root) },
  ]);
  const refused = `${uriFromPath(denied)}: Permission denied (os error 13)`;
  assert.deepEqual(whole!.skills.map((skill) => skill.instructions.contents), ["open\n"]);
  assert.deepEqual(whole!.warnings, [`failed to scan capability path ${refused}`]);
  assert.deepEqual(inside!.skills, []);
  assert.equal(inside!.error, null);
  assert.deepEqual(inside!.warnings, [
    `failed to scan capability path ${refused}`,
    ...[".codex-plugin", ".claude-plugin", ".cursor-plugin"].map((dir) =>
      `failed to inspect capability file ${
        uriFromPath(`${denied}/${dir}/plugin.json`)
      }: Permission denied (os error 13)`
    ),
  ]);
  assert.deepEqual(free!.skills.map((skill) => skill.instructions.contents), [
    "secret\n",
    "open\n",
  ]);
});

Deno.test("the server answers capabilityRoots/discoverV1 and advertises capabilityDiscoverySandbox", async () => {
  await using dir = await scratch();
  const root = await tree(dir.base, { "skills/a/SKILL.md": SKILL });
  await using server = await inProcessSession();
  const info = await server.stdio.request(1, "environment/info");
  assert.equal(((info.result as Json).capabilities as Json).capabilityDiscoverySandbox, true);
  const reply = await server.stdio.request(2, "capabilityRoots/discoverV1", {
    roots: [{ id: "repo", path: uriFromPath(root), sandbox: null }],
  });
  const [found] = (reply.result as { roots: Discovery[] }).roots;
  assert.deepEqual(found!.skills, [{
    instructions: text(`${root}/skills/a/SKILL.md`, SKILL),
    metadata: null,
  }]);
});

Deno.test("utf8Error names the first bad sequence as Rust's Utf8Error does", () => {
  const cases: [number[], string | undefined][] = [
    [[0xe2, 0x28, 0xa1], "invalid utf-8 sequence of 1 bytes from index 0"],
    [[0x61, 0xe2, 0x82, 0x28], "invalid utf-8 sequence of 2 bytes from index 1"],
    [[0xf0, 0x9f, 0x98, 0x28], "invalid utf-8 sequence of 3 bytes from index 0"],
    [[0xf0, 0x9f, 0x98], "incomplete utf-8 byte sequence from index 0"],
    [[0xed, 0xa0, 0x80], "invalid utf-8 sequence of 1 bytes from index 0"],
    [[0xc0, 0x80], "invalid utf-8 sequence of 1 bytes from index 0"],
    [[0xf4, 0x90, 0x80, 0x80], "invalid utf-8 sequence of 1 bytes from index 0"],
    [[0xef, 0xbb, 0xbf, 0xf0, 0x9f, 0x98, 0x80], undefined],
  ];
  for (const [bytes, expected] of cases) {
    assert.equal(utf8Error(new Uint8Array(bytes)), expected, bytes.join(","));
  }
});

Deno.test("under a scoped --allow-read, discovery sees only the scope: a root outside it is missing, ancestors outside are skipped", async () => {
  await using dir = await scratch();
  const inside = await tree(`${dir.base}/in`, {
    "sub/.claude-plugin/plugin.json": '{"name":"sub"}\n',
    "sub/skills/b/SKILL.md": "x\n",
  });
  // A manifest above the scope would namespace the root's skills if the server could read it.
  const outside = await tree(dir.base, { ".codex-plugin/plugin.json": "{}\n", "out/SKILL.md": "" });
  const main = MAIN_TS.slice(0, MAIN_TS.lastIndexOf("/"));
  await using server = await startStdio({
    permissions: [`--allow-read=${inside},${main}`, "--allow-env", "--allow-sys", "--allow-ffi"],
  });
  await handshake(server.stdio);
  const reply = await server.stdio.request(2, "capabilityRoots/discoverV1", {
    roots: [{ id: "in", path: uriFromPath(inside) }, {
      id: "out",
      path: uriFromPath(`${outside}/out`),
    }],
  });
  const [found, missing] = (reply.result as { roots: Discovery[] }).roots;
  assert.deepEqual(found!.skills.map((skill) => skill.instructions.path), [
    uriFromPath(`${inside}/sub/skills/b/SKILL.md`),
  ]);
  assert.deepEqual(found!.namespaceManifests.map((manifest) => manifest.path), [
    uriFromPath(`${inside}/sub/.claude-plugin/plugin.json`),
  ]);
  assert.deepEqual(found!.warnings, []);
  assert.equal(
    missing!.error,
    `failed to inspect capability root ${
      uriFromPath(`${outside}/out`)
    }: No such file or directory (os error 2)`,
  );
});
