// environmentConfig/read: each expectation below is the reference's answer (codex-cli 0.171.0)
// for the same files, recorded by sending it the same requests.
import assert from "node:assert/strict";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import type { ResultOf } from "../lib/protocol/methods.ts";
import {
  type ConfigPlaces,
  loadTomlParser,
  MAX_CONFIG_FILE_BYTES,
  PROJECT_LOCAL_CONFIG_DENYLIST,
  readEnvironmentConfig,
} from "../lib/server/codex_config/environment_config.ts";
import { tomlText } from "../lib/server/codex_config/toml_text.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { runFsOperation } from "../lib/server/fs/operations.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { uriFromPath } from "../lib/server/host/path_uri.ts";
import { type Json, MAIN_TS, startStdio } from "./helpers/server_harness.ts";

type Result = ResultOf<"environmentConfig/read">;

const FIXTURES = new URL("./fixtures/environment_config/", import.meta.url);

/** A scratch tree: `system/` (for /etc/codex), `home/` (CODEX_HOME) and whatever a test adds. */
async function scratch(files: Record<string, string>) {
  const base = await Deno.realPath(await Deno.makeTempDir({ prefix: "es-envcfg-" }));
  for (const [name, contents] of Object.entries(files)) {
    const path = `${base}/${name}`;
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    if (name.endsWith("/")) continue;
    await Deno.writeTextFile(path, contents);
  }
  const places: ConfigPlaces = {
    systemDir: `${base}/system`,
    codexHome: `${base}/home`,
    userHome: "/root",
    hostname: "box",
  };
  return { base, places, [Symbol.asyncDispose]: () => Deno.remove(base, { recursive: true }) };
}

function read(
  places: ConfigPlaces,
  cwd: string,
  configPaths: string[][],
  requirementsPaths: string[][] = [],
): Promise<Result> {
  const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
  return readEnvironmentConfig(
    { cwd: uriFromPath(cwd), configPaths, requirementsPaths },
    (method, params) => runFsOperation(method, params, context),
    places,
  );
}

/** Each layer as `[source, toml]`, the base directory's path after `base` cut to `…`. */
function layers(stack: Result["config"], base: string): [string, string][] {
  return stack.layers.map((layer) => [layer.source.replaceAll(base, "…"), layer.toml]);
}

for (const name of ["value_forms", "more_value_forms", "string_forms"]) {
  Deno.test(`every TOML value form of ${name}.toml is written back as the reference writes it`, async () => {
    const parse = await loadTomlParser();
    const source = await Deno.readTextFile(new URL(`${name}.toml`, FIXTURES));
    const expected = await Deno.readTextFile(new URL(`${name}.reference.toml`, FIXTURES));
    assert.equal(tomlText(parse(source)), expected);
  });
}

Deno.test("the layers come system, user, trusted project root down to cwd, managed; a layer without a requested key is left out", async () => {
  await using dir = await scratch({
    "system/config.toml": 'model = "sys"\n[features]\nsys = true\n',
    "system/managed_config.toml": 'model = "managed"\n',
    "home/config.toml":
      'model = "user"\n[projects."REPO"]\ntrust_level = "trusted"\n[projects."REPO/a/untrusted"]\ntrust_level = "untrusted"\n',
    "repo/.git/HEAD": "ref: refs/heads/main\n",
    "repo/.codex/config.toml": 'model = "repo"\n',
    "repo/a/.codex/config.toml": 'model = "a"\n[features]\na = 1\n',
    "repo/a/untrusted/.codex/config.toml": 'model = "untrusted"\n',
    "repo/a/empty/.codex/": "",
  });
  const home = `${dir.places.codexHome}/config.toml`;
  await Deno.writeTextFile(
    home,
    (await Deno.readTextFile(home)).replaceAll("REPO", `${dir.base}/repo`),
  );
  const a = await read(dir.places, `${dir.base}/repo/a`, [["model"]]);
  assert.deepEqual(layers(a.config, dir.base), [
    ["system (…/system/config.toml)", 'model = "sys"\n'],
    ["user (…/home/config.toml)", 'model = "user"\n'],
    ["project (…/repo/.codex/config.toml)", 'model = "repo"\n'],
    ["project (…/repo/a/.codex/config.toml)", 'model = "a"\n'],
    ["legacy managed_config.toml (…/system/managed_config.toml)", 'model = "managed"\n'],
  ]);
  assert.equal(a.config.cloudInsertionIndex, 1);
  assert.equal(a.config.layers[2]!.baseDir, uriFromPath(`${dir.base}/repo/.codex`));
  assert.deepEqual(
    [a.userHomeDir, a.codexHomeDir, a.hostname],
    ["file:///root", uriFromPath(`${dir.base}/home`), "box"],
  );
  // Only the layers holding `features`; the system layer is still below the cloud's place.
  const features = await read(dir.places, `${dir.base}/repo/a`, [["features"]]);
  assert.deepEqual(layers(features.config, dir.base), [
    ["system (…/system/config.toml)", "[features]\nsys = true\n"],
    ["project (…/repo/a/.codex/config.toml)", "[features]\na = 1\n"],
  ]);
  assert.equal(features.config.cloudInsertionIndex, 1);
  // A directory marked untrusted is skipped though its repository is trusted.
  const untrusted = await read(dir.places, `${dir.base}/repo/a/untrusted`, [["model"]]);
  assert.deepEqual(
    layers(untrusted.config, dir.base).map(([source]) => source).filter((source) =>
      source.includes("untrusted/")
    ),
    [],
  );
});

Deno.test("a project that is not trusted contributes nothing, even an invalid config; a trusted one that is not TOML is configInvalid naming the file", async () => {
  await using dir = await scratch({
    "home/config.toml": "",
    "repo/.git": "gitdir: /nowhere\n",
    "repo/.codex/config.toml": "model = \n",
  });
  const untrusted = await read(dir.places, `${dir.base}/repo`, [["model"]]);
  assert.deepEqual(untrusted.config.layers, []);
  await Deno.writeTextFile(
    `${dir.places.codexHome}/config.toml`,
    `[projects."${dir.base}/repo"]\ntrust_level = "trusted"\n`,
  );
  const err = await read(dir.places, `${dir.base}/repo`, [["model"]]).catch((e) => e);
  assert.ok(err instanceof RpcError);
  assert.equal(err.code, ErrorCode.InternalError);
  assert.deepEqual(err.data, { kind: "configInvalid" });
  assert.match(
    err.message,
    new RegExp(
      `^failed to load executor-local config: Error parsing project config file ${dir.base}/repo/\\.codex/config\\.toml: `,
    ),
  );
});

Deno.test("an empty .git directory is no project root marker (a .git with HEAD or a .git file is), and project_root_markers replaces the default", async () => {
  await using dir = await scratch({
    "home/config.toml": "",
    "repo/.git/": "",
    "repo/.codex/config.toml": 'model = "root"\n',
    "repo/sub/.codex/config.toml": 'model = "sub"\n',
  });
  await Deno.writeTextFile(
    `${dir.places.codexHome}/config.toml`,
    `[projects."${dir.base}/repo"]\ntrust_level = "trusted"\n`,
  );
  const models = async () =>
    (await read(dir.places, `${dir.base}/repo/sub`, [["model"]])).config.layers.map((l) => l.toml);
  // No root found: the root is cwd itself, which nothing trusts.
  assert.deepEqual(await models(), []);
  await Deno.writeTextFile(`${dir.base}/repo/.git/HEAD`, "ref: x\n");
  assert.deepEqual(await models(), ['model = "root"\n', 'model = "sub"\n']);
  await Deno.remove(`${dir.base}/repo/.git`, { recursive: true });
  await Deno.writeTextFile(`${dir.base}/repo/.git`, "");
  assert.deepEqual(await models(), ['model = "root"\n', 'model = "sub"\n']);
  await Deno.writeTextFile(
    `${dir.places.codexHome}/config.toml`,
    `project_root_markers = []\n[projects."${dir.base}/repo/sub"]\ntrust_level = "trusted"\n`,
  );
  assert.deepEqual(await models(), ['model = "sub"\n']);
});

Deno.test("a linked worktree is trusted through its main repository", async () => {
  await using dir = await scratch({
    "home/config.toml": "",
    "repo/.git/HEAD": "ref: x\n",
    "repo/.git/worktrees/wt/HEAD": "ref: x\n",
    "wt/.codex/config.toml": 'model = "wt"\n',
  });
  await Deno.writeTextFile(`${dir.base}/wt/.git`, `gitdir: ${dir.base}/repo/.git/worktrees/wt\n`);
  await Deno.writeTextFile(
    `${dir.places.codexHome}/config.toml`,
    `[projects."${dir.base}/repo"]\ntrust_level = "trusted"\n`,
  );
  const result = await read(dir.places, `${dir.base}/wt`, [["model"]]);
  assert.deepEqual(layers(result.config, dir.base), [
    ["project (…/wt/.codex/config.toml)", 'model = "wt"\n'],
  ]);
});

Deno.test("a project layer drops the keys a project may not set (credentials' destination, commands), and CODEX_HOME is never a project layer", async () => {
  const denied = PROJECT_LOCAL_CONFIG_DENYLIST.map((key) => `${key} = "x"\n`).join("");
  await using dir = await scratch({
    "repo/.git/HEAD": "ref: x\n",
    "repo/.codex/config.toml":
      `${denied}model = "repo"\n[features]\nrespect_system_proxy = true\nkept = true\n`,
  });
  await Deno.mkdir(dir.places.codexHome);
  await Deno.writeTextFile(
    `${dir.places.codexHome}/config.toml`,
    `[projects."${dir.base}/repo"]\ntrust_level = "trusted"\n`,
  );
  const paths = [...PROJECT_LOCAL_CONFIG_DENYLIST.map((key) => [key]), ["model"], ["features"]];
  const result = await read(dir.places, `${dir.base}/repo`, paths);
  assert.deepEqual(layers(result.config, dir.base), [
    ["project (…/repo/.codex/config.toml)", 'model = "repo"\n\n[features]\nkept = true\n'],
  ]);
  // The project's .codex is Codex's home: it is the user layer, not a project layer too.
  const asHome = await read(
    { ...dir.places, codexHome: `${dir.base}/repo/.codex` },
    `${dir.base}/repo`,
    [["model"]],
  );
  assert.deepEqual(layers(asHome.config, dir.base), [
    ["user (…/repo/.codex/config.toml)", 'model = "repo"\n'],
  ]);
});

Deno.test("requirements come from requirements.toml and managed_config.toml's policies, as the reference maps them", async () => {
  await using dir = await scratch({
    "system/requirements.toml":
      'allowed_sandbox_modes = ["read-only"]\n[mcp_servers.docs.identity]\nurl = "https://x"\n',
    "system/managed_config.toml":
      'approval_policy = "on-request"\nsandbox_mode = "workspace-write"\napprovals_reviewer = "auto_review"\n',
  });
  const result = await read(dir.places, dir.base, [["model"]], [
    ["allowed_sandbox_modes"],
    ["mcp_servers"],
    ["allowed_approval_policies"],
    ["allowed_approvals_reviewers"],
  ]);
  assert.deepEqual(layers(result.requirements, dir.base), [
    [
      "…/system/requirements.toml",
      'allowed_sandbox_modes = ["read-only"]\n\n[mcp_servers.docs.identity]\nurl = "https://x"\n',
    ],
    [
      "…/system/managed_config.toml",
      'allowed_approval_policies = ["on-request"]\nallowed_approvals_reviewers = ["auto_review", "user"]\nallowed_sandbox_modes = ["read-only", "workspace-write"]\n',
    ],
  ]);
  assert.equal(result.requirements.cloudInsertionIndex, 1);
  await Deno.writeTextFile(
    `${dir.places.systemDir}/managed_config.toml`,
    'approval_policy = "x"\n',
  );
  const err = await read(dir.places, dir.base, [["model"]]).catch((e) => e);
  assert.deepEqual([err.code, err.data], [ErrorCode.InternalError, { kind: "configInvalid" }]);
});

Deno.test("empty path lists and empty key paths are -32602 with the reference's messages", async () => {
  await using dir = await scratch({});
  for (
    const [config, message] of [
      [[], "at least one config or requirements path is required"],
      [[[]], "TOML paths must contain at least one key segment"],
    ] as const
  ) {
    const err = await read(dir.places, dir.base, config as unknown as string[][]).catch((e) => e);
    assert.deepEqual([err.code, err.message], [ErrorCode.InvalidParams, message]);
  }
});

Deno.test(`a config file over ${MAX_CONFIG_FILE_BYTES} bytes is configInvalid; one at the bound is read`, async () => {
  await using dir = await scratch({});
  await Deno.mkdir(dir.places.codexHome);
  const file = `${dir.places.codexHome}/config.toml`;
  const head = 'model = "m"\n#';
  await Deno.writeTextFile(file, head + "x".repeat(MAX_CONFIG_FILE_BYTES - head.length - 1) + "\n");
  assert.equal((await Deno.stat(file)).size, MAX_CONFIG_FILE_BYTES);
  const atBound = await read(dir.places, dir.base, [["model"]]);
  assert.deepEqual(atBound.config.layers.map((l) => l.toml), ['model = "m"\n']);
  await Deno.writeTextFile(file, "x\n", { append: true });
  const err = await read(dir.places, dir.base, [["model"]]).catch((e) => e);
  assert.deepEqual(err.data, { kind: "configInvalid" });
  assert.match(err.message, new RegExp(`exceeds the ${MAX_CONFIG_FILE_BYTES}-byte limit`));
});

Deno.test("over the wire the server advertises environmentConfigRead and reads CODEX_HOME; under a scoped --allow-read a config outside the scope is missing", async () => {
  await using dir = await scratch({
    "home/config.toml": '[mcp_servers.docs]\nurl = "https://d"\n',
  });
  const main = MAIN_TS.slice(0, MAIN_TS.lastIndexOf("/"));
  const request = {
    cwd: uriFromPath(dir.base),
    configPaths: [["mcp_servers"]],
    requirementsPaths: [],
  };
  const runs = [
    { permissions: undefined, layers: 1 },
    {
      permissions: [`--allow-read=${main}`, "--allow-env", "--allow-sys", "--allow-ffi"],
      layers: 0,
    },
  ];
  for (const run of runs) {
    await using server = await startStdio({
      permissions: run.permissions,
      env: { PATH: "/usr/bin:/bin", HOME: "/root", CODEX_HOME: dir.places.codexHome },
    });
    const init = await server.stdio.request(1, "initialize", { clientName: "c" });
    const info = (init.result as Json).environmentInfo as Json;
    assert.equal((info.capabilities as Json).environmentConfigRead, true);
    await server.stdio.send({ method: "initialized", params: {} });
    const reply = await server.stdio.request(2, "environmentConfig/read", request);
    const result = reply.result as Result;
    assert.equal(result.codexHomeDir, uriFromPath(dir.places.codexHome));
    assert.deepEqual(
      result.config.layers.map((layer) => layer.toml),
      run.layers === 1 ? ['[mcp_servers.docs]\nurl = "https://d"\n'] : [],
    );
  }
});
