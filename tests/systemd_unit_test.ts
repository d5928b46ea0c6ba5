/**
 * deploy/systemd/exec-server.service: `systemd-analyze verify` accepts it without a warning; its
 * ExecStart flags are the CLI's; and docs/guide/systemd.md's install, "run a command" and Codex
 * blocks run as written in a throwaway root, where the unit's ExecStart line runs as the user the
 * install made, under what the unit sets up (made by hand: systemd does not run here).
 *
 * @module
 */

import assert from "node:assert/strict";
import { SERVER_FLAGS } from "../lib/cli/server_flags.ts";
import { parseFlags } from "../lib/cli/flags.ts";
// The npm packages the server loads on first use, fetched into the runner's cache.
import "../lib/server/session/lazy_packages.ts";
import { docBlock } from "./helpers/doc_blocks.ts";
import { runnerDenoDir } from "./helpers/server_harness.ts";
import { findCodexBin } from "./interop/harness.ts";
import type { CodexTurnReport } from "./interop/codex_turn_main.ts";

/** What the Codex turn runs through the service. */
const CODEX_COMMAND = "echo CODEX_UID=$(id -u); echo codex > by-codex.txt";
const REPO_ROOT = decodeURIComponent(new URL("../", import.meta.url).pathname).replace(/\/$/, "");
const UNIT_PATH = `${REPO_ROOT}/deploy/systemd/exec-server.service`;
/** Where systemd puts the unit's credentials (`%d`). */
const CREDENTIALS_DIRECTORY = "/run/credentials/exec-server.service";
const RUNNER_DENO_DIR = runnerDenoDir();

/** The npm packages lazy_packages.ts names, through the modules it imports. */
async function lazyNpmPackages(): Promise<string[]> {
  const lazy = new URL("../lib/server/session/lazy_packages.ts", import.meta.url);
  const names: string[] = [];
  for (const [, module] of (await Deno.readTextFile(lazy)).matchAll(/^import "(.+)";$/gm)) {
    const text = await Deno.readTextFile(new URL(module!, lazy));
    for (const [, name] of text.matchAll(/"npm:((?:@[^/"]+\/)?[^@"]+)@/g)) names.push(name!);
  }
  return names;
}
const LAZY_NPM_PACKAGES = await lazyNpmPackages();

/**
 * The guide's install block, after what stands in for the network its `deno cache` needs (the
 * machine has none): the npm packages it fetches, copied from the test runner's Deno cache.
 */
function installLines(): string[] {
  return [
    `mkdir -p /var/cache/exec-server/npm/registry.npmjs.org`,
    ...LAZY_NPM_PACKAGES.map((name) =>
      `cp -r ${q(`${RUNNER_DENO_DIR}/npm/registry.npmjs.org/${name}`)} ` +
      `/var/cache/exec-server/npm/registry.npmjs.org/`
    ),
    docBlock("systemd-install"),
  ];
}

/** A unit file's settings: `section → key → values`, in order (a key may repeat). */
type Unit = Map<string, Map<string, string[]>>;

/** Parses a unit file: comments, `[Section]`, `Key=value`, backslash continuation lines. */
function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  const lines = text.replace(/\\\n/g, " ").split("\n");
  for (const raw of lines) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = new Map();
      unit.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf("=");
    assert.ok(section && eq > 0, `unit line outside a section or without '=': ${line}`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

/** The one value of `section.key`. */
function setting(unit: Unit, section: string, key: string): string {
  const values = unit.get(section)?.get(key) ?? [];
  assert.equal(values.length, 1, `${section}.${key} is set once`);
  return values[0]!;
}

const unit = parseUnit(Deno.readTextFileSync(UNIT_PATH));

/** ExecStart split into words, `%d` replaced by the credentials directory. */
function execStart(): string[] {
  const line = setting(unit, "Service", "ExecStart");
  assert.doesNotMatch(line, /["'$]/, "ExecStart has no quoting or variables (split on blanks)");
  const specifiers = [...line.matchAll(/%./g)].map((m) => m[0]);
  assert.deepEqual([...new Set(specifiers)], ["%d"], "the only specifier is %d");
  return line.replaceAll("%d", CREDENTIALS_DIRECTORY).split(/\s+/);
}

/** The Deno flags before the main module and the server's arguments after it. */
function splitExecStart(): { deno: string; denoFlags: string[]; main: string; server: string[] } {
  const argv = execStart();
  assert.equal(argv[1], "run", "ExecStart is `deno run`");
  const mainIndex = argv.findIndex((word) => word.endsWith("/main.ts"));
  assert.ok(mainIndex > 1, "ExecStart runs main.ts");
  return {
    deno: argv[0]!,
    denoFlags: argv.slice(2, mainIndex),
    main: argv[mainIndex]!,
    server: argv.slice(mainIndex + 1),
  };
}

function commandExists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

const systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find(commandExists);

Deno.test({
  name: "systemd-analyze verify accepts the unit without a warning" +
    (systemdAnalyze ? "" : " (skipped: systemd-analyze is not installed; apt-get install systemd)"),
  ignore: systemdAnalyze === undefined,
  async fn() {
    // verify checks that ExecStart's program exists: where Deno is not /usr/bin/deno, a copy of
    // the unit names the Deno running this test instead.
    let path = UNIT_PATH;
    const deno = splitExecStart().deno;
    const dir = await Deno.makeTempDir({ prefix: "es-deploy-host-unit-" });
    try {
      if (!commandExists(deno)) {
        path = `${dir}/exec-server.service`;
        const text = await Deno.readTextFile(UNIT_PATH);
        await Deno.writeTextFile(
          path,
          text.replace(`ExecStart=${deno} `, `ExecStart=${Deno.execPath()} `),
        );
      }
      const out = await new Deno.Command(systemdAnalyze!, {
        args: ["verify", path],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assert.equal(text.trim(), "", "systemd-analyze verify printed a warning");
      assert.equal(out.code, 0);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "systemd-analyze security rates the unit as docs/guide/systemd.md says" +
    (systemdAnalyze ? "" : " (skipped: systemd-analyze is not installed; apt-get install systemd)"),
  ignore: systemdAnalyze === undefined,
  async fn() {
    const out = await new Deno.Command(systemdAnalyze!, {
      args: ["security", "--offline=true", "--no-pager", UNIT_PATH],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const level = /Overall exposure level for exec-server\.service: ([\d.]+)/.exec(text)?.[1];
    const guide = await Deno.readTextFile(`${REPO_ROOT}/docs/guide/systemd.md`);
    const claimed = /rates the unit's exposure ([\d.]+)/.exec(guide)?.[1];
    assert.ok(level !== undefined, text);
    assert.equal(level, claimed);
  },
});

Deno.test("the unit's ExecStart server flags are the CLI's flag table", () => {
  const { server } = splitExecStart();
  // Throws on a flag the table does not have (a renamed or removed flag).
  const { flags } = parseFlags(SERVER_FLAGS, server);
  assert.deepEqual(flags.listen, { kind: "ws", host: "127.0.0.1", port: 8080 });
  assert.equal(flags["ws-auth"], "capability-token");
  assert.equal(flags["ws-token-file"], `${CREDENTIALS_DIRECTORY}/token`);
  assert.equal(flags.sandbox, "workspace-write");
  const state = setting(unit, "Service", "StateDirectory").split(/\s+/);
  assert.deepEqual(
    flags["writable-root"],
    [`/var/lib/${state.at(-1)}`],
    "the writable root is a state directory",
  );
  assert.equal(setting(unit, "Service", "WorkingDirectory"), flags["writable-root"][0]);
  assert.equal(
    setting(unit, "Service", "LoadCredential"),
    "token:/etc/exec-server/token",
    "the token comes through LoadCredential",
  );
});

Deno.test("the unit's Deno permissions are scoped, never -A", () => {
  const { denoFlags } = splitExecStart();
  for (const flag of denoFlags) {
    assert.ok(!["-A", "--allow-all"].includes(flag), `ExecStart grants everything: ${flag}`);
    for (const scoped of ["--allow-run", "--allow-read", "--allow-write", "--allow-net"]) {
      assert.notEqual(flag, scoped, `${scoped} without a list`);
    }
  }
  const value = (name: string) =>
    denoFlags.find((flag) => flag.startsWith(`${name}=`))?.slice(name.length + 1).split(",");
  assert.deepEqual(value("--allow-net"), ["127.0.0.1"]);
  assert.ok(value("--allow-read")?.includes(CREDENTIALS_DIRECTORY), "the token is readable");
  assert.ok(value("--allow-run")?.includes("/usr/bin/bwrap"), "the sandbox can start bwrap");
  assert.ok(denoFlags.includes("--cached-only"), "the service never downloads code");
  for (const key of ["NoNewPrivileges", "PrivateTmp", "ProtectHome"]) {
    assert.equal(setting(unit, "Service", key), "yes", key);
  }
  assert.equal(setting(unit, "Service", "ProtectSystem"), "strict");
  assert.equal(setting(unit, "Service", "Restart"), "on-failure");
  assert.notEqual(setting(unit, "Service", "User"), "root");
});

/** Why the throwaway-root run cannot happen here, or `undefined` when it can. */
async function emulationRefusal(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "needs root (to make the service user and mount its file system)";
  for (const tool of ["/usr/bin/bwrap", "/usr/bin/setpriv", "/usr/sbin/useradd"]) {
    if (!commandExists(tool)) return `${tool} is not installed`;
  }
  const probe = await new Deno.Command("/usr/bin/bwrap", {
    args: ["--ro-bind", "/", "/", "--dev", "/dev", "--bind", "/proc", "/proc", "--unshare-net"]
      .concat(["--", "/usr/bin/bwrap", "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/"])
      .concat(["--proc", "/proc", "true"]),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!probe.success) {
    return `bubblewrap cannot nest a sandbox here: ${
      new TextDecoder().decode(probe.stderr).trim()
    }`;
  }
  return undefined;
}

/** What one run of the driver script printed. */
interface MachineRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Files the driver left in the machine's scratch directory, by name. */
  files: Map<string, string>;
}

/**
 * Runs `script` as root in a throwaway machine: the host's root read-only, a copy of `/etc`,
 * empty `/opt`, `/var/lib`, `/var/cache`, `/var/log`, `/run`, `/tmp`, and a network namespace
 * of its own (so the unit's port 8080 is its own). `$SCRATCH` (`/tmp/scratch`) is a directory
 * the test reads back.
 */
async function runMachine(script: string): Promise<MachineRun> {
  const dir = await Deno.makeTempDir({ prefix: "es-deploy-host-machine-" });
  try {
    await Deno.mkdir(`${dir}/scratch`);
    const copy = await new Deno.Command("cp", { args: ["-a", "/etc", `${dir}/etc`] }).output();
    assert.ok(copy.success, "copy /etc");
    await Deno.writeTextFile(`${dir}/driver.sh`, script);
    const args = [
      ...["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc"],
      ...["--unshare-net", "--bind", `${dir}/etc`, "/etc"],
      ...["--tmpfs", "/opt", "--tmpfs", "/var/lib", "--tmpfs", "/var/cache", "--tmpfs", "/var/log"],
      ...["--tmpfs", "/run", "--tmpfs", "/tmp", "--bind", `${dir}/scratch`, "/tmp/scratch"],
      ...["--ro-bind", `${dir}/driver.sh`, "/tmp/driver.sh", "--chdir", REPO_ROOT],
      ...["--setenv", "SCRATCH", "/tmp/scratch", "--setenv", "DENO_DIR", "/tmp/deno-root"],
      ...["--setenv", "DENO_NO_UPDATE_CHECK", "1", "--setenv", "NO_COLOR", "1"],
      ...["--die-with-parent", "--", "/bin/bash", "/tmp/driver.sh"],
    ];
    const out = await new Deno.Command("/usr/bin/bwrap", {
      args,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const files = new Map<string, string>();
    for await (const entry of Deno.readDir(`${dir}/scratch`)) {
      if (entry.isFile) {
        files.set(entry.name, await Deno.readTextFile(`${dir}/scratch/${entry.name}`));
      }
    }
    return {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
      files,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Quotes `value` for bash. */
function q(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * The shell lines that start the unit's ExecStart line the way systemd would, in the background,
 * writing its pid to `$SCRATCH/server.pid`, its stdout and stderr to `$SCRATCH/server.out|err`.
 * `extraMounts` adds bwrap mounts (to show what a left-out setting would do).
 */
function startServiceLines(extraMounts: string[] = []): string {
  const user = setting(unit, "Service", "User");
  const group = setting(unit, "Service", "Group");
  const states = setting(unit, "Service", "StateDirectory").split(/\s+/).map((d) =>
    `/var/lib/${d}`
  );
  const caches = setting(unit, "Service", "CacheDirectory").split(/\s+/).map((d) =>
    `/var/cache/${d}`
  );
  const mode = setting(unit, "Service", "StateDirectoryMode");
  const [credential, source] = setting(unit, "Service", "LoadCredential").split(/:(.*)/) as [
    string,
    string,
  ];
  const env = setting(unit, "Service", "Environment").split(/\s+/);
  const umask = setting(unit, "Service", "UMask");
  const workdir = setting(unit, "Service", "WorkingDirectory");
  const mounts = [
    // ProtectSystem=strict: everything read-only but the API file systems and the unit's
    // state and cache directories; ProtectHome, PrivateTmp, PrivateDevices.
    ...["--ro-bind", "/", "/", "--bind", "/proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"],
    ...["--tmpfs", "/home", "--tmpfs", "/root"],
    ...states.flatMap((d) => ["--bind", d, d]),
    ...caches.flatMap((d) => ["--bind", d, d]),
    ...extraMounts,
    ...["--chdir", workdir],
  ];
  const lines = [
    // StateDirectory=, CacheDirectory=: created and owned by the user (what they hold already
    // too: systemd changes the owner of the whole tree when the directory's is not the user).
    `mkdir -p ${[...states, ...caches].map(q).join(" ")}`,
    `chown -R ${q(`${user}:${group}`)} ${[...states, ...caches].map(q).join(" ")}`,
    `chmod ${mode} ${states.map(q).join(" ")}`,
    // LoadCredential=: a copy of the file, readable by the service's user only.
    `install -d -m 0500 -o ${q(user)} ${q(CREDENTIALS_DIRECTORY)}`,
    `install -m 0400 -o ${q(user)} ${q(source)} ${q(`${CREDENTIALS_DIRECTORY}/${credential}`)}`,
    `(umask ${umask} && exec /usr/bin/bwrap ${mounts.map(q).join(" ")} --info-fd 3 -- ` +
    // User=, Group=, NoNewPrivileges=yes, CapabilityBoundingSet= (empty), Environment=.
    `/usr/bin/setpriv --reuid ${q(user)} --regid ${q(group)} --clear-groups --no-new-privs ` +
    `--bounding-set -all -- /usr/bin/env -i PATH=/usr/bin:/bin ${env.map(q).join(" ")} ` +
    `${execStart().map(q).join(" ")}) 3>"$SCRATCH/bwrap.info" >"$SCRATCH/server.out" ` +
    `2>"$SCRATCH/server.err" &`,
    `bwrap_pid=$!`,
    // Type=exec: wait for the URL line, at most 30 s.
    `for _ in $(seq 300); do grep -q '^ws://' "$SCRATCH/server.out" && break; ` +
    `kill -0 $bwrap_pid 2>/dev/null || break; sleep 0.1; done`,
    `server_pid=$(grep -o '"child-pid": *[0-9]*' "$SCRATCH/bwrap.info" | grep -o '[0-9]*$')`,
  ];
  return lines.join("\n");
}

const refusal = await emulationRefusal();

Deno.test({
  name: "the guide's install, run and Codex blocks work against the unit's ExecStart line" +
    (refusal === undefined ? "" : ` (skipped: ${refusal})`),
  ignore: refusal !== undefined,
  async fn() {
    const user = setting(unit, "Service", "User");
    const client = (args: string) =>
      `deno run --allow-net=127.0.0.1 --allow-read=/etc/exec-server/token /opt/exec-server/main.ts ` +
      `run --url ws://127.0.0.1:8080 ${args}`;
    const script = [
      "set -euo pipefail",
      "# The guide's install block, as written, as root.",
      ...installLines(),
      `id -u ${q(user)} > "$SCRATCH/uid"`,
      `cmp deploy/systemd/exec-server.service /etc/systemd/system/exec-server.service`,
      `stat -c %a /etc/exec-server/token > "$SCRATCH/token.mode"`,
      startServiceLines(),
      `test -n "$server_pid" || { cat "$SCRATCH/server.err" >&2; exit 90; }`,
      "# The guide's run block, as written.",
      `( ${
        docBlock("systemd-run").trim()
      } ) > "$SCRATCH/run.out" 2> "$SCRATCH/run.err" || echo "$?" > "$SCRATCH/run.code"`,
      "# What stays out of reach of a command.",
      `${client("--token-file /etc/exec-server/token -- sh -c 'touch /var/lib/exec-server/x'")} ` +
      `> "$SCRATCH/outside.out" 2>&1 || echo "$?" > "$SCRATCH/outside.code"`,
      `${
        client(`--token-file /etc/exec-server/token -- sh -c "cat ${CREDENTIALS_DIRECTORY}/token"`)
      } ` +
      `> "$SCRATCH/token.out" 2>&1 || echo "$?" > "$SCRATCH/token.code"`,
      `echo wrong > "$SCRATCH/wrong.token"`,
      `${client('--token-file "$SCRATCH/wrong.token" -- true')} > "$SCRATCH/refused.out" 2>&1 ` +
      `|| echo "$?" > "$SCRATCH/refused.code"`,
      `stat -c '%U' /var/lib/exec-server/workspace/hello.txt > "$SCRATCH/hello.owner" || true`,
      "# Codex, with the guide's environments.toml and the token filled in.",
      `cat > "$SCRATCH/environments.template" <<'EXEC_SERVER_TOML'\n${
        docBlock("systemd-environments")
      }EXEC_SERVER_TOML`,
      `sed "s|<the token>|$(cat /etc/exec-server/token)|" "$SCRATCH/environments.template" ` +
      `> "$SCRATCH/environments.toml"`,
      `deno run --allow-all ${q(`${REPO_ROOT}/tests/interop/codex_turn_main.ts`)} ` +
      `"$SCRATCH/environments.toml" /var/lib/codex-client/home /var/lib/exec-server/workspace ` +
      `${q(CODEX_COMMAND)} > "$SCRATCH/codex.json" 2> "$SCRATCH/codex.err" || true`,
      `stat -c '%U' /var/lib/exec-server/workspace/by-codex.txt > "$SCRATCH/codex.owner" || true`,
      "# systemctl stop: SIGTERM to the server alone (KillMode=mixed).",
      `kill -TERM "$server_pid"`,
      `set +e; wait $bwrap_pid; echo "$?" > "$SCRATCH/server.code"`,
    ].join("\n");
    // The client reads main.ts from the checkout: deno needs `--allow-read` only for the token.
    const run = await runMachine(script);
    const file = (name: string) => run.files.get(name)?.trim();
    const diagnostics = `driver exit ${run.code}\nstderr:\n${run.stderr}\nserver stderr:\n` +
      `${file("server.err")}\nrun block:\n${file("run.out")}\n${file("run.err")}`;
    assert.equal(run.code, 0, diagnostics);
    assert.equal(file("token.mode"), "600", "the token file is the owner's only");
    assert.equal(file("run.code"), undefined, `the run block failed\n${diagnostics}`);
    assert.equal(file("run.out"), `${file("uid")}\nhello`, "the command ran as the service user");
    assert.equal(file("hello.owner"), user, "the command wrote in the workspace");
    assert.notEqual(file("outside.code"), undefined, "a write outside the workspace failed");
    assert.match(file("outside.out") ?? "", /Read-only file system/);
    assert.notEqual(file("token.code"), undefined, "a command cannot read the token");
    assert.match(file("token.out") ?? "", /Permission denied/);
    assert.notEqual(file("refused.code"), undefined, "a wrong token is refused");
    if (findCodexBin() !== undefined) {
      const codex = JSON.parse(file("codex.json") || "null") as CodexTurnReport | null;
      const codexDiagnostics = `codex: ${file("codex.json")}\n${file("codex.err")}\n${diagnostics}`;
      assert.equal(codex?.code, 0, codexDiagnostics);
      assert.match(codex.toolOutput, new RegExp(`CODEX_UID=${file("uid")}\\b`), codexDiagnostics);
      assert.equal(codex.exitCode, 0, codexDiagnostics);
      assert.equal(file("codex.owner"), user, "Codex's command wrote in the workspace");
    }
    assert.equal(file("server.code"), "0", `SIGTERM ends the server with 0\n${diagnostics}`);
    assert.doesNotMatch(file("server.err") ?? "", /"level":"error"/);
    assert.doesNotMatch(
      file("server.err") ?? "",
      /bubblewrap-no-proc/,
      "the sandbox has its /proc",
    );
  },
});

Deno.test({
  name:
    "a mount over /proc (ProtectKernelTunables, ProtectKernelLogs) costs the sandbox its own /proc" +
    (refusal === undefined ? "" : ` (skipped: ${refusal})`),
  ignore: refusal !== undefined,
  async fn() {
    for (
      const [setting, mounts] of [
        ["ProtectKernelTunables", ["--ro-bind", "/proc/sys", "/proc/sys"]],
        ["ProtectKernelLogs", ["--ro-bind", "/dev/null", "/proc/kmsg"]],
      ] as const
    ) {
      const script = [
        "set -euo pipefail",
        ...installLines(),
        startServiceLines([...mounts]),
        `test -n "$server_pid" && kill -TERM "$server_pid"`,
        `set +e; wait $bwrap_pid; echo "$?" > "$SCRATCH/server.code"`,
      ].join("\n");
      const run = await runMachine(script);
      const err = run.files.get("server.err") ?? "";
      assert.equal(run.code, 0, `${run.stderr}\n${err}`);
      assert.equal(run.files.get("server.code")?.trim(), "0", `${setting}: ${err}`);
      // The server falls back to binding the host's /proc read-only into every sandbox.
      assert.match(err, /cannot mount a fresh \/proc here.*layer bubblewrap-no-proc/, setting);
    }
  },
});
