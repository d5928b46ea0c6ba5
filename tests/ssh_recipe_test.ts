/**
 * The SSH recipe (docs/guide/ssh.md and the README's "Over SSH"): Codex starts exec-server on a
 * "remote" host through `ssh` and speaks the protocol over the SSH channel, no port opened.
 *
 * The test runs an `sshd` of its own on 127.0.0.1 (its own host key, `authorized_keys` and free
 * port) in a mount namespace whose `/usr/local` and `/run` are empty, and runs the guide's install
 * block there before `sshd` starts. Then the guide's check block, and a real `codex exec` turn
 * (mock model) whose `environments.toml` is the guide's, with the user and host replaced by the
 * test's. The command must run under that `sshd`, see a variable only the remote side has, and
 * come back with its output and exit code; after Codex exits, every SSH session has ended.
 *
 * The same turn against a local stdio server (`program` = Deno, no ssh) gives the latency SSH adds,
 * printed, never asserted. `SSH_RECIPE_REPS=N` runs N interleaved pairs (default 1).
 *
 * @module
 */

import assert from "node:assert/strict";
import { docBlock } from "./helpers/doc_blocks.ts";
import { CODEX_CONFIG_TOML, findCodexBin, REPO_ROOT, runCodexExec } from "./interop/harness.ts";
import { startMockModel } from "./interop/mock_model.ts";

const TEST_NAME = "codex runs a command on a remote host through the SSH recipe";
/** The user and host the guide's blocks name, which the test replaces with its own sshd's. */
const GUIDE_DESTINATION = "agent@build-box.example.com";

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Why the test cannot run here, or `undefined`. */
function refusal(): string | undefined {
  if (!isFile("/usr/sbin/sshd")) return "no /usr/sbin/sshd (apt-get install openssh-server)";
  for (const tool of ["/usr/bin/ssh", "/usr/bin/ssh-keygen"]) {
    if (!isFile(tool)) return `no ${tool} (apt-get install openssh-client)`;
  }
  if (!isFile("/usr/bin/bwrap")) return "no /usr/bin/bwrap (the remote side's mount namespace)";
  if (Deno.uid() !== 0) return "needs root (sshd, and the remote side's mount namespace)";
  if (findCodexBin() === undefined) return "Codex CLI not installed; set CODEX_BIN";
  return undefined;
}

async function run(command: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(command, { args, stdin: "null", stdout: "piped" }).output();
  assert.ok(out.success, `${command} ${args.join(" ")} failed`);
  return new TextDecoder().decode(out.stdout);
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** Pids of the live children of `pid` (sshd's session processes). */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) found.push(Number(entry.name));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** A running sshd of the test's own, with a client configuration that reaches it. */
interface Sshd extends AsyncDisposable {
  /** The sshd listener's pid. */
  pid: number;
  /** ssh arguments that stand for the guide's destination: `-F CONFIG root@127.0.0.1`. */
  destination: string[];
  /** The variable only the remote side's environment has (sshd's `SetEnv`). */
  secret: string;
  stderr(): string;
}

async function startSshd(dir: string): Promise<Sshd> {
  for (const name of ["host_key", "client_key"]) {
    await run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", `${dir}/${name}`]);
  }
  await Deno.copyFile(`${dir}/client_key.pub`, `${dir}/authorized_keys`);
  await Deno.chmod(`${dir}/authorized_keys`, 0o600);
  const port = freePort();
  const secret = `ssh-secret-${crypto.randomUUID()}`;
  await Deno.writeTextFile(
    `${dir}/sshd_config`,
    [
      `ListenAddress 127.0.0.1`,
      `Port ${port}`,
      `HostKey ${dir}/host_key`,
      `PidFile ${dir}/sshd.pid`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      `PubkeyAuthentication yes`,
      `PasswordAuthentication no`,
      `KbdInteractiveAuthentication no`,
      `PermitRootLogin prohibit-password`,
      `UsePAM no`,
      `SetEnv INTEROP_SECRET=${secret}`,
      `LogLevel VERBOSE`,
      "",
    ].join("\n"),
  );
  const hostKey = (await Deno.readTextFile(`${dir}/host_key.pub`)).trim().split(" ");
  await Deno.writeTextFile(
    `${dir}/known_hosts`,
    `[127.0.0.1]:${port} ${hostKey[0]} ${hostKey[1]}\n`,
  );
  await Deno.writeTextFile(
    `${dir}/ssh_config`,
    [
      `Host *`,
      `  Port ${port}`,
      `  IdentityFile ${dir}/client_key`,
      `  IdentitiesOnly yes`,
      `  UserKnownHostsFile ${dir}/known_hosts`,
      `  GlobalKnownHostsFile /dev/null`,
      `  StrictHostKeyChecking yes`,
      `  LogLevel ERROR`,
      "",
    ].join("\n"),
  );

  // The "remote host": the machine's own file system, read-only, but an empty /usr/local (where
  // the guide's install block puts exec-server), /run (sshd's /run/sshd) and /tmp, so nothing of
  // them is touched.
  const denoDir = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`;
  await Deno.mkdir(denoDir, { recursive: true });
  const remoteSetUp = [
    "set -euo pipefail",
    docBlock("ssh-install-remote"),
    "mkdir -p /run/sshd",
    `exec /usr/sbin/sshd -D -e -f ${dir}/sshd_config`,
  ].join("\n");
  const child = new Deno.Command("/usr/bin/bwrap", {
    args: [
      ...["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc"],
      ...["--tmpfs", "/usr/local", "--tmpfs", "/run", "--tmpfs", "/tmp"],
      ...["--bind", dir, dir, "--bind", denoDir, denoDir],
      ...["--setenv", "DENO_DIR", denoDir, "--chdir", REPO_ROOT, "--die-with-parent"],
      ...["--", "/bin/bash", "-c", remoteSetUp],
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let stderrText = "";
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      write(chunk) {
        stderrText = (stderrText + chunk).slice(-65536);
      },
    }),
  ).catch(() => {});

  async function close(): Promise<void> {
    let pid: number | undefined;
    try {
      pid = Number((await Deno.readTextFile(`${dir}/sshd.pid`)).trim());
    } catch {
      // sshd never got as far as its pid file.
    }
    if (pid !== undefined) {
      try {
        Deno.kill(pid, "SIGTERM");
      } catch {
        // Already gone.
      }
    }
    const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await child.status;
    clearTimeout(killer);
    await stderrDone;
  }

  // Up once the pid file is there and the port answers (at most 60 s: the install runs first).
  const deadline = Date.now() + 60_000;
  let pid: number | undefined;
  while (Date.now() < deadline) {
    try {
      pid = Number((await Deno.readTextFile(`${dir}/sshd.pid`)).trim());
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      conn.close();
      break;
    } catch {
      pid = undefined;
      const exited = await Promise.race([child.status, new Promise((r) => setTimeout(r, 100))]);
      if (exited) {
        await stderrDone;
        throw new Error(`sshd did not start:\n${stderrText}`);
      }
    }
  }
  if (pid === undefined) {
    await close();
    throw new Error(`sshd did not listen within 60 s:\n${stderrText}`);
  }
  return {
    pid,
    destination: ["-F", `${dir}/ssh_config`, "root@127.0.0.1"],
    secret,
    stderr: () => stderrText,
    [Symbol.asyncDispose]: close,
  };
}

/**
 * The README's `environments.toml` (the guide's, word for word) with its destination replaced by
 * `destination`.
 */
function sshEnvironmentsToml(destination: string[]): string {
  const toml = docBlock("readme-ssh");
  assert.equal(
    toml,
    docBlock("ssh-environments"),
    "the README shows the guide's environments.toml",
  );
  const quoted = JSON.stringify(GUIDE_DESTINATION);
  assert.ok(toml.includes(quoted), `the guide's environments.toml names ${GUIDE_DESTINATION}`);
  return toml.replace(quoted, destination.map((arg) => JSON.stringify(arg)).join(", "));
}

/** An `environments.toml` whose one environment is a local stdio server (no ssh). */
function localEnvironmentsToml(secret: string): string {
  const args = ["run", "--allow-all", `${REPO_ROOT}/main.ts`, "--listen", "stdio"];
  return [
    `default = "local-stdio"`,
    `include_local = false`,
    ``,
    `[[environments]]`,
    `id = "local-stdio"`,
    `program = ${JSON.stringify(Deno.execPath())}`,
    `args = [${[...args, "--exit-on-stdin-close"].map((a) => JSON.stringify(a)).join(", ")}]`,
    `env = { INTEROP_SECRET = ${JSON.stringify(secret)}, DENO_NO_UPDATE_CHECK = "1" }`,
    "",
  ].join("\n");
}

/** What one Codex turn saw. */
interface Turn {
  workspace: string;
  outside: string;
  product: number;
  toolOutput: string;
  exitCode: unknown;
  code: number;
  stderr: string;
  millis: number;
}

/**
 * One `codex exec` turn with `environmentsToml`, whose command reports where it ran; with
 * `sandbox: "workspace-write"` it also writes in its workspace and tries to write outside it.
 */
async function codexTurn(
  workRoot: string,
  environmentsToml: string,
  sandbox: "danger-full-access" | "workspace-write" = "danger-full-access",
): Promise<Turn> {
  const a = 10_000 + Math.floor(Math.random() * 90_000);
  const b = 10_000 + Math.floor(Math.random() * 90_000);
  const caseDir = await Deno.makeTempDir({ dir: workRoot, prefix: "case-" });
  const codexHome = `${caseDir}/codex-home`;
  const workspace = `${caseDir}/workspace`;
  const outside = `${caseDir}/outside`;
  for (const dir of [codexHome, workspace, outside]) await Deno.mkdir(dir);
  await Deno.writeTextFile(`${codexHome}/config.toml`, CODEX_CONFIG_TOML);
  await Deno.writeTextFile(`${codexHome}/environments.toml`, environmentsToml);
  const command = [
    `x=$(( ${a} * ${b} ))`,
    `echo "INTEROP_RESULT_$x"`,
    `echo "INTEROP_SECRET=\${INTEROP_SECRET:-unset}"`,
    `chain=""; p=$$`,
    `while [ "$p" -gt 1 ] && [ -r /proc/$p/comm ]; do chain="$chain $(cat /proc/$p/comm)"; ` +
    `p=$(sed 's/^.*) //' /proc/$p/stat | cut -d' ' -f2); done`,
    `echo "INTEROP_CHAIN:$chain "`,
    ...(sandbox === "workspace-write"
      ? [
        `echo "$x" > ssh_marker.txt`,
        `if echo escaped > '${outside}/escape.txt' 2>/dev/null; ` +
        `then echo INTEROP_OUTSIDE=written; else echo INTEROP_OUTSIDE=denied; fi`,
      ]
      : []),
    `exit 7`,
  ].join("\n");
  await using model = startMockModel({
    toolCalls: [{ arguments: { cmd: command, "yield_time_ms": 10_000 } }],
  });
  const started = performance.now();
  const result = await runCodexExec("Run the SSH recipe command.", {
    codexBin: findCodexBin()!,
    codexHome,
    workspace,
    modelBaseUrl: model.baseUrl,
    sandbox,
  });
  const millis = performance.now() - started;
  const item = result.events
    .filter((event) => event.type === "item.completed")
    .map((event) => event.item as Record<string, unknown>)
    .findLast((it) => it?.type === "command_execution");
  return {
    workspace,
    outside,
    product: a * b,
    toolOutput: model.toolOutputs().join("\n"),
    exitCode: item?.exit_code,
    code: result.code,
    stderr: result.stderr,
    millis,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const why = refusal();

Deno.test({
  name: TEST_NAME + (why === undefined ? "" : ` (skipped: ${why})`),
  ignore: why !== undefined,
  async fn() {
    const home = Deno.env.get("HOME") ?? "/root";
    const workBase = Deno.env.get("INTEROP_WORK_DIR") ?? `${home}/.cache/exec-server-interop`;
    await Deno.mkdir(workBase, { recursive: true });
    const workRoot = await Deno.makeTempDir({ dir: workBase, prefix: "ssh-" });
    try {
      await using sshd = await startSshd(workRoot);

      // The guide's check block, as written but for the destination.
      const check = docBlock("ssh-check").trim();
      assert.ok(check.includes(GUIDE_DESTINATION));
      const checked = await new Deno.Command("/bin/bash", {
        args: ["-c", check.replace(GUIDE_DESTINATION, sshd.destination.join(" "))],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const checkOut = new TextDecoder().decode(checked.stdout).trim();
      assert.equal(
        checked.code,
        0,
        `${new TextDecoder().decode(checked.stderr)}\nsshd:\n${sshd.stderr()}`,
      );
      assert.match(checkOut, /^exec-server \d+\.\d+\.\d+$/, "the guide says what it prints");

      const viaSsh = sshEnvironmentsToml(sshd.destination);
      const local = localEnvironmentsToml(sshd.secret);
      const reps = Number(Deno.env.get("SSH_RECIPE_REPS") ?? "1");
      const times = { ssh: [] as number[], local: [] as number[] };
      for (let i = 0; i < reps; i++) {
        const turn = await codexTurn(workRoot, viaSsh);
        const diagnostics = `codex exit ${turn.code}\ncodex stderr:\n${turn.stderr}\n` +
          `sshd:\n${sshd.stderr()}\ntool output:\n${turn.toolOutput}`;
        assert.equal(turn.code, 0, diagnostics);
        assert.ok(turn.toolOutput.includes(`INTEROP_RESULT_${turn.product}`), diagnostics);
        assert.ok(
          turn.toolOutput.includes(`INTEROP_SECRET=${sshd.secret}`),
          `the command saw the remote side's environment\n${diagnostics}`,
        );
        const chain = turn.toolOutput.match(/INTEROP_CHAIN:(.*)/)?.[1]?.trim().split(/\s+/) ?? [];
        assert.ok(chain.includes("sshd"), `the command ran under sshd: ${chain.join(" ")}`);
        assert.equal(turn.exitCode, 7, "Codex saw the command's exit code");
        // Codex has exited: every session of the test's sshd ends (the server with its stdin).
        const deadline = Date.now() + 15_000;
        while (childrenOf(sshd.pid).length > 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.deepEqual(childrenOf(sshd.pid), [], "no SSH session outlives Codex");
        times.ssh.push(turn.millis);

        const localTurn = await codexTurn(workRoot, local);
        assert.equal(localTurn.code, 0, localTurn.stderr);
        assert.ok(localTurn.toolOutput.includes(`INTEROP_RESULT_${localTurn.product}`));
        times.local.push(localTurn.millis);
      }

      // Codex's own workspace-write sandbox, enforced by the remote server (bubblewrap there).
      const confined = await codexTurn(workRoot, viaSsh, "workspace-write");
      const confinedOutput =
        `codex stderr:\n${confined.stderr}\ntool output:\n${confined.toolOutput}`;
      assert.equal(confined.code, 0, confinedOutput);
      assert.ok(confined.toolOutput.includes(`INTEROP_SECRET=${sshd.secret}`), confinedOutput);
      assert.equal(
        (await Deno.readTextFile(`${confined.workspace}/ssh_marker.txt`)).trim(),
        String(confined.product),
        "the sandboxed command wrote in its workspace",
      );
      assert.match(confined.toolOutput, /INTEROP_OUTSIDE=denied/, confinedOutput);
      await assert.rejects(Deno.lstat(`${confined.outside}/escape.txt`), Deno.errors.NotFound);

      const ssh = median(times.ssh);
      const local0 = median(times.local);
      console.log(
        `codex exec turn, median of ${reps}: over ssh ${ssh.toFixed(0)} ms, local stdio ` +
          `${local0.toFixed(0)} ms, ssh adds ${(ssh - local0).toFixed(0)} ms`,
      );
    } finally {
      await Deno.remove(workRoot, { recursive: true });
    }
  },
});
