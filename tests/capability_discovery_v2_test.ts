// capabilities/discoverV2: each fixture of tests/fixtures/capability_discovery_v2/ is the
// reference's answer (codex-cli 0.171.0) for the same tree, recorded by record.ts there.
import assert from "node:assert/strict";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import { discoverCapabilities } from "../lib/server/capabilities/discover_v2.ts";
import type { CodexPlaces } from "../lib/server/host/codex_places.ts";
import { readJson, writeJson } from "../lib/server/capabilities/json_text.ts";
import {
  activePluginVersion,
  comparePluginVersions,
  isPluginSegment,
} from "../lib/server/capabilities/plugin_version.ts";
import {
  frontmatterOf,
  loadYaml,
  parseSkillFrontmatter,
  repairFrontmatter,
} from "../lib/server/capabilities/skill_metadata.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { type FsRunner, runFsOperation } from "../lib/server/fs/operations.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { askAll } from "./fixtures/capability_discovery_v2/ask.ts";
import { TREES } from "./fixtures/capability_discovery_v2/trees.ts";
import { type Json, runnerDenoDir, startStdio } from "./helpers/server_harness.ts";

const FIXTURES = new URL("./fixtures/capability_discovery_v2/", import.meta.url);
// Puts the YAML parser in the runner's Deno cache, where the servers below find it.
await loadYaml();

for (const [name, tree] of Object.entries(TREES)) {
  Deno.test(`capabilities/discoverV2 answers the ${name} fixture as the reference does`, async () => {
    const expected = JSON.parse(await Deno.readTextFile(new URL(`${name}.json`, FIXTURES)));
    assert.deepEqual(await askAll(tree), expected);
  });
}

function runner(): FsRunner {
  const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
  return (method, params) => runFsOperation(method, params, context);
}

async function scratch() {
  const base = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-v2-" }));
  const places: CodexPlaces = {
    codexHome: `${base}/codex`,
    userHome: `${base}/home`,
    systemDir: `${base}/etc`,
  };
  return { base, places, [Symbol.asyncDispose]: () => Deno.remove(base, { recursive: true }) };
}

Deno.test("the server advertises capabilityDiscoveryV2 and answers with its own CODEX_HOME's skills", async () => {
  await using dir = await scratch();
  await Deno.mkdir(`${dir.places.codexHome}/skills/tidy`, { recursive: true });
  await Deno.writeTextFile(
    `${dir.places.codexHome}/skills/tidy/SKILL.md`,
    "---\nname: tidy\ndescription: Tidy the tree\n---\n",
  );
  await using server = await startStdio({
    env: {
      PATH: "/usr/bin:/bin",
      HOME: dir.places.userHome!,
      CODEX_HOME: dir.places.codexHome,
      DENO_DIR: runnerDenoDir(),
    },
  });
  const init = await server.stdio.request(1, "initialize", { clientName: "c" });
  const info = (init.result as Json).environmentInfo as Json;
  assert.equal((info.capabilities as Json).capabilityDiscoveryV2, true);
  await server.stdio.send({ method: "initialized", params: {} });
  const reply = await server.stdio.request(2, "capabilities/discoverV2", { cwd: "file:///tmp" });
  assert.equal(reply.error, undefined, JSON.stringify(reply.error));
  const result = reply.result as { skills: Json[] };
  assert.deepEqual(result.skills.map((skill) => [skill.name, skill.description]), [
    ["tidy", "Tidy the tree"],
  ]);
  const refused = await server.stdio.request(3, "capabilities/discoverV2", {
    cwd: "file:///tmp",
    sandbox: { bogus: 1 },
  });
  assert.equal((refused.error as Json).code, ErrorCode.InvalidParams);
});

Deno.test("a plugin cache that cannot be listed answers one prewarm warning, as the reference does", async () => {
  await using dir = await scratch();
  await Deno.mkdir(`${dir.places.codexHome}/plugins/cache`, { recursive: true });
  const run = runner();
  const failing: FsRunner = (method, params) => {
    if (method === "fs/walk") {
      throw new RpcError(ErrorCode.InvalidRequest, "denied", { data: { errno: "EACCES" } });
    }
    return run(method, params);
  };
  assert.deepEqual(await discoverCapabilities({ cwd: "file:///tmp" }, failing, dir.places), {
    plugins: [],
    skills: [],
    warnings: ["could not prewarm capability discovery: PermissionDenied"],
  });
});

Deno.test("a skill root that is the same directory twice is discovered once, under its first id", async () => {
  await using dir = await scratch();
  // $CODEX_HOME is ~/.agents: $CODEX_HOME/skills and ~/.agents/skills are one directory.
  const places = { ...dir.places, codexHome: `${dir.places.userHome}/.agents` };
  await Deno.mkdir(`${places.codexHome}/skills/t`, { recursive: true });
  await Deno.writeTextFile(`${places.codexHome}/skills/t/SKILL.md`, "---\ndescription: d\n---\n");
  const result = await discoverCapabilities({ cwd: "file:///tmp" }, runner(), places);
  assert.deepEqual(result.skills.map((skill) => [skill.name, skill.discoveryRoot.id]), [
    ["t", "codex-home-skills"],
  ]);
});

Deno.test("plugin versions: local wins, semantic versions by number and build, other names as text", () => {
  assert.equal(activePluginVersion(["1.9.0", "1.10.0", "1.10.0-beta"]), "1.10.0");
  assert.equal(activePluginVersion(["9.9.9", "local"]), "local");
  assert.equal(activePluginVersion(["1.0.0+build2", "1.0.0+build10"]), "1.0.0+build2");
  assert.equal(activePluginVersion(["1.0.0+2", "1.0.0+10"]), "1.0.0+10");
  assert.equal(activePluginVersion(["1.0.0-rc.2", "1.0.0-rc.10", "1.0.0-alpha"]), "1.0.0-rc.10");
  assert.equal(activePluginVersion(["..", ".", "a b"]), undefined);
  assert.equal(activePluginVersion(["..bad", "ok.1"]), "ok.1");
  assert.ok(comparePluginVersions("1.0.0", "v2") < 0);
  assert.ok(comparePluginVersions("01.0.0", "1.0.0") < 0, "not semantic: compared as text");
  for (const name of ["a", "A_b-C", "-lead", "k.dot", "a.b.c", "0"]) {
    assert.ok(isPluginSegment(name));
  }
  for (const name of ["", "a+b", "a b", "a..b", "x.", ".hid", "a@b"]) {
    assert.ok(!isPluginSegment(name), name);
  }
});

Deno.test("an inline mcpServers table is written back as serde_json writes it", () => {
  const text =
    '{"z": {"b": 1, "a": 2.0, "e": [-0, -0.0, 1E2, 1e-2, 123456789012345678901234567890]}, "a": "\\u00e9\\/", "z": 3}';
  assert.equal(
    writeJson(readJson(text)),
    '{"z":3,"a":"é/"}',
    "a repeated key keeps its first place and its last value",
  );
  assert.equal(
    writeJson(readJson('{"z":{"b":1,"a":2.0,"e":[-0,-0.0,1E2,1e-2,12345678901234567890123]}}')),
    '{"z":{"b":1,"a":2.0,"e":[0,-0.0,1e+2,1e-2,12345678901234567890123]}}',
  );
  for (const bad of ['"\\ud800"', "[1,]", '{"a":1} x', "01", "[".repeat(129) + "]".repeat(129)]) {
    assert.throws(() => readJson(bad), SyntaxError, bad.slice(0, 12));
  }
  assert.equal(writeJson(readJson("[".repeat(128) + "]".repeat(128))).length, 256);
});

Deno.test("the frontmatter is the lines between two --- lines, as Rust's str::lines splits them", () => {
  assert.equal(frontmatterOf("---\na: 1\n---\nbody"), "a: 1");
  assert.equal(frontmatterOf("---\r\na: 1\r\n---\r\n"), "a: 1");
  assert.equal(frontmatterOf(" --- \na: 1\n\t---\n"), "a: 1");
  assert.equal(frontmatterOf("---\n---\n"), undefined, "no line between");
  assert.equal(frontmatterOf("---\na: 1\n"), undefined, "no closing line");
  assert.equal(frontmatterOf("\ufeff---\na: 1\n---\n"), undefined, "a BOM is not whitespace");
  assert.equal(frontmatterOf("\u0085---\na: 1\n---\n"), "a: 1", "U+0085 is whitespace");
  assert.equal(frontmatterOf("---\na: 1\r\n---\r"), "a: 1", "a last line keeps its \\r");
  assert.equal(frontmatterOf("---\na: 1\r\r\n---"), "a: 1\r", "one \\r of a \\r\\n is cut");
});

Deno.test("prose values are quoted for a second parse; block scalars, quoted values and comments are kept", async () => {
  const yaml = await loadYaml();
  const parses = (text: string) =>
    yaml.parseDocument(text, { uniqueKeys: true }).errors.length === 0;
  assert.equal(
    repairFrontmatter("description: Build for AWS: ECS # note\nname: x", parses),
    "description: 'Build for AWS: ECS' # note\nname: x",
  );
  assert.equal(repairFrontmatter("hint: it's: here", parses), "hint: 'it''s: here'");
  assert.equal(repairFrontmatter("a: [ok, list]\nb: `tick`", parses), "a: [ok, list]\nb: '`tick`'");
  assert.equal(repairFrontmatter('a: "x: y"\nb: |\n  c: d\n  e: f', parses), undefined);
  assert.equal(repairFrontmatter("url:http://x: y", parses), undefined, "no space after the key");
  const skill = parseSkillFrontmatter(yaml, "---\nname: n\ndescription: a: b\n---\n", "dir");
  assert.deepEqual(skill, { name: "n", description: "a: b", shortDescription: null });
});

Deno.test("a YAML parser that cannot be loaded answers internal error and logs request.failed with the cause", async () => {
  await using dir = await scratch();
  await Deno.mkdir(`${dir.places.codexHome}/skills/s`, { recursive: true });
  await Deno.writeTextFile(
    `${dir.places.codexHome}/skills/s/SKILL.md`,
    "---\ndescription: d\n---\n",
  );
  // An empty Deno cache and an npm registry nobody listens on: the package cannot be fetched.
  const server = await startStdio({
    env: {
      PATH: "/usr/bin:/bin",
      HOME: dir.places.userHome!,
      CODEX_HOME: dir.places.codexHome,
      DENO_DIR: `${dir.base}/deno-cache`,
      NPM_CONFIG_REGISTRY: "http://127.0.0.1:9/",
    },
  });
  try {
    await server.stdio.request(1, "initialize", { clientName: "c" });
    await server.stdio.send({ method: "initialized", params: {} });
    const reply = await server.stdio.request(2, "capabilities/discoverV2", { cwd: "file:///tmp" });
    assert.deepEqual(reply.error, { code: ErrorCode.InternalError, message: "internal error" });
  } finally {
    await server[Symbol.asyncDispose]();
  }
  const log = await server.stderr;
  assert.match(log, /ERROR request\.failed method=capabilities\/discoverV2 error=".*yaml/);
});
