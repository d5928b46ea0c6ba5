import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import { JsonFloat } from "../lib/protocol/json_decode.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { type FsMethod, runFsOperation } from "../lib/server/fs/operations.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { pathFromUri, uriFromPath } from "../lib/server/host/path_uri.ts";
import { spawnPty } from "../lib/server/process/pty.ts";
import { ptySupported } from "../lib/server/process/pty_support.ts";
import { probeSandbox } from "../lib/server/sandbox/availability.ts";
import { refusedWrite, TEST_LAYERS, type TestLayer, withLayer } from "./helpers/sandbox_layers.ts";
import { makeNonUtf8File, NON_UTF8_NAME_TEXT } from "./helpers/non_utf8_name.ts";
import { bwrapArgs } from "../lib/server/sandbox/bubblewrap.ts";
import { pathExists } from "./helpers/attack.ts";
import { looksSandboxDenied, OutputTail } from "../lib/server/sandbox/denial.ts";
import { launchSandboxed } from "../lib/server/sandbox/launch.ts";
import { FS, landlockRules } from "../lib/server/sandbox/landlock.ts";
import {
  pathIsUnder,
  planFromPaths,
  planSandbox,
  type SandboxPlan,
} from "../lib/server/sandbox/policy.ts";
import { seccompProgram } from "../lib/server/sandbox/seccomp.ts";
import { filterFile } from "../lib/server/sandbox/seccomp_files.ts";
import { capabilities } from "../lib/server/session/environment.ts";
import { eventually, pidsMatching, type StdioClient } from "./helpers/server_harness.ts";
import { call, nextRequestId } from "./helpers/rpc.ts";
import { inProcessSession } from "./helpers/in_process_server.ts";

const TRANSCRIPTS = new URL("./fixtures/transcripts/", import.meta.url);
const decoder = new TextDecoder();

type Json = Record<string, unknown>;

/** The `process/start` params the real Codex client sent (transcripts 25 and 26). */
function codexRequest(name: "workspace_write" | "read_only", workspace: string): Json {
  const file = name === "workspace_write"
    ? "25_codex_client_process_start_workspace_write.json"
    : "26_codex_client_process_start_read_only.json";
  const text = Deno.readTextFileSync(new URL(file, TRANSCRIPTS));
  const request = JSON.parse(text.replaceAll("file:///<WORKSPACE>", uriFromPath(workspace)));
  return request.params as Json;
}

/** A workspace (with a `.git`) and a sibling directory outside it, under /var/tmp (not a writable root). */
function makeLayout(): { base: string; ws: string; outside: string } & Disposable {
  const base = Deno.makeTempDirSync({ dir: "/var/tmp", prefix: "sandbox-test-" });
  const ws = `${base}/ws`;
  const outside = `${base}/outside`;
  Deno.mkdirSync(`${ws}/.git`, { recursive: true });
  Deno.writeTextFileSync(`${ws}/.git/HEAD`, "ref: refs/heads/main\n");
  Deno.mkdirSync(outside);
  Deno.writeTextFileSync(`${outside}/existing.txt`, "old\n");
  return {
    base,
    ws,
    outside,
    [Symbol.dispose]() {
      Deno.removeSync(base, { recursive: true });
    },
  };
}

function planFor(name: "workspace_write" | "read_only", ws: string): SandboxPlan {
  const plan = planSandbox(codexRequest(name, ws).sandbox, { cwd: ws, env: {} });
  assert.ok(plan);
  return plan;
}

function rpcErrorOf(fn: () => unknown): RpcError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof RpcError, `expected an RpcError, got ${err}`);
    return err;
  }
  assert.fail("expected an error");
}

async function rejection(promise: Promise<unknown>): Promise<RpcError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof RpcError, `expected an RpcError, got ${err}`);
    return err;
  }
  assert.fail("expected a rejection");
}

const ENV = { PATH: "/usr/bin:/bin" };

/** Runs a command in the sandbox the way `process/start` does (pipes) and collects its output. */
async function runSandboxed(
  plan: SandboxPlan,
  argv: string[],
  options: { cwd: string; env?: Record<string, string>; layer: TestLayer },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = options.env ?? ENV;
  const launch = launchSandboxed(plan, argv, {
    cwd: options.cwd,
    env,
    availability: options.layer.availability,
  });
  try {
    const output = await new Deno.Command(launch.argv[0]!, {
      args: launch.argv.slice(1),
      cwd: options.cwd,
      env: launch.env ?? env,
      clearEnv: true,
      stdin: "null",
    }).output();
    return {
      code: output.code,
      stdout: decoder.decode(output.stdout),
      stderr: decoder.decode(output.stderr),
    };
  } finally {
    launch.release();
  }
}

// ---------------------------------------------------------------------------
// The seccomp filter, run by a small classic-BPF interpreter.

const AUDIT_ARCH_X86_64 = 0xc000003e;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_EPERM = 0x00050001;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;

function runFilter(program: Uint8Array, nr: number, arg0 = 0, arch = AUDIT_ARCH_X86_64): number {
  const data = new DataView(new ArrayBuffer(64));
  data.setInt32(0, nr, true);
  data.setUint32(4, arch, true);
  data.setUint32(16, arg0, true);
  const code = new DataView(program.buffer, program.byteOffset, program.byteLength);
  let acc = 0;
  for (let pc = 0; pc * 8 < program.length; pc++) {
    const op = code.getUint16(pc * 8, true);
    const jt = code.getUint8(pc * 8 + 2);
    const jf = code.getUint8(pc * 8 + 3);
    const k = code.getUint32(pc * 8 + 4, true);
    if (op === 0x20) acc = data.getUint32(k, true);
    else if (op === 0x15) pc += acc === k ? jt : jf;
    else if (op === 0x35) pc += acc >= k ? jt : jf;
    else if (op === 0x06) return k;
    else throw new Error(`unexpected BPF opcode ${op}`);
  }
  throw new Error("the program fell off its end");
}

Deno.test("seccompProgram() restricted mode denies network sockets and allows AF_UNIX", () => {
  const program = seccompProgram("restricted", "x86_64");
  assert.equal(program.length % 8, 0);
  const [SOCKET, CONNECT, SOCKETPAIR, PTRACE, READ, SENDMSG] = [41, 42, 53, 101, 0, 46];
  assert.equal(runFilter(program, SOCKET, 2 /* AF_INET */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, SOCKET, 10 /* AF_INET6 */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, SOCKET, 16 /* AF_NETLINK */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, SOCKET, 1 /* AF_UNIX */), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, SOCKETPAIR, 1), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, CONNECT), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, PTRACE), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, READ), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, SENDMSG), SECCOMP_RET_EPERM, "sendmsg can name a destination");
  assert.equal(runFilter(program, 438 /* pidfd_getfd */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, 0x40000000 | SOCKET, 2), SECCOMP_RET_EPERM, "x32 ABI");
  assert.equal(runFilter(program, SOCKET, 2, 0x40000003 /* i386 */), SECCOMP_RET_KILL_PROCESS);
});

Deno.test("seccompProgram() vsock mode only denies AF_VSOCK and io_uring", () => {
  const program = seccompProgram("vsock", "x86_64");
  assert.equal(runFilter(program, 41, 40 /* AF_VSOCK */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, 41, 2), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, 42), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, 425 /* io_uring_setup */), SECCOMP_RET_EPERM);
  const arm = seccompProgram("restricted", "aarch64");
  assert.equal(runFilter(arm, 198, /* socket */ 2, 0xc00000b7), SECCOMP_RET_EPERM);
  assert.equal(runFilter(arm, 198, 1, 0xc00000b7), SECCOMP_RET_ALLOW);
});

Deno.test("seccompProgram() nounix mode also denies socket(AF_UNIX), not socketpair", () => {
  const program = seccompProgram("nounix", "x86_64");
  const [SOCKET, CONNECT, SOCKETPAIR] = [41, 42, 53];
  assert.equal(runFilter(program, SOCKET, 1 /* AF_UNIX */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, SOCKET, 40 /* AF_VSOCK */), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, SOCKET, 2 /* AF_INET */), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, SOCKETPAIR, 1), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, SOCKETPAIR, 40), SECCOMP_RET_EPERM);
  assert.equal(runFilter(program, CONNECT), SECCOMP_RET_ALLOW);
  assert.equal(runFilter(program, 425 /* io_uring_setup */), SECCOMP_RET_EPERM);
});

Deno.test("the seccomp filter file a sandbox loads is sealed: it cannot be written, truncated or grown", () => {
  const path = filterFile("restricted");
  const before = Deno.readFileSync(path);
  assert.ok(before.length > 0);
  // Root may open it for writing despite its 0444 mode; the seals refuse the change itself.
  let file: Deno.FsFile | undefined;
  try {
    file = Deno.openSync(path, { write: true });
  } catch (err) {
    assert.ok(err instanceof Deno.errors.PermissionDenied, String(err));
  }
  if (file !== undefined) {
    using opened = file;
    assert.throws(() => opened.writeSync(new Uint8Array([0])), Deno.errors.PermissionDenied);
    assert.throws(() => opened.truncateSync(0), Deno.errors.PermissionDenied);
    assert.throws(() => opened.truncateSync(before.length + 1), Deno.errors.PermissionDenied);
  }
  assert.deepEqual(Deno.readFileSync(path), before);
});

// ---------------------------------------------------------------------------
// Planning.

Deno.test("planSandbox() resolves the real client's workspace-write policy into mounts", () => {
  using layout = makeLayout();
  const plan = planFor("workspace_write", layout.ws);
  assert.equal(plan.type, "linuxSeccomp");
  assert.equal(plan.isolation, "filesystem");
  assert.equal(plan.network, "restricted");
  assert.equal(plan.rootAccess, "read");
  const ws = Deno.realPathSync(layout.ws);
  const at = (path: string) => plan.mounts.find((mount) => mount.path === path);
  assert.deepEqual(at(ws), { path: ws, access: "write", node: "directory" });
  assert.deepEqual(at(`${ws}/.git`), { path: `${ws}/.git`, access: "read", node: "directory" });
  for (const name of [".agents", ".codex", ".aws"]) {
    assert.deepEqual(at(`${ws}/${name}`), {
      path: `${ws}/${name}`,
      access: "read",
      node: "missing",
    });
  }
  assert.equal(at("/tmp")?.access, "write", "slash_tmp");
  assert.equal(at(Deno.realPathSync(layout.outside)), undefined);
  // Parents come before children, so bubblewrap layers them right.
  assert.ok(
    plan.mounts.findIndex((m) => m.path === ws) <
      plan.mounts.findIndex((m) => m.path === `${ws}/.git`),
  );
});

Deno.test("planSandbox() resolves the real client's read-only policy to a read-only file system", () => {
  using layout = makeLayout();
  const plan = planFor("read_only", layout.ws);
  assert.equal(plan.isolation, "filesystem");
  assert.equal(plan.rootAccess, "read");
  assert.deepEqual(plan.mounts, []);
});

Deno.test("planSandbox() takes tmpdir from the environment and protects every writable root", () => {
  using layout = makeLayout();
  const sandbox = codexRequest("workspace_write", layout.ws).sandbox as Json;
  const plan = planSandbox(sandbox, { cwd: layout.ws, env: { TMPDIR: `${layout.outside}/` } })!;
  const outside = Deno.realPathSync(layout.outside);
  assert.equal(plan.mounts.find((m) => m.path === outside)?.access, "write");
  assert.equal(plan.mounts.find((m) => m.path === `${outside}/.git`)?.node, "missing");
});

Deno.test("planSandbox() returns undefined without a sandbox and plans profiles that restrict nothing", () => {
  assert.equal(planSandbox(undefined, { cwd: "/" }), undefined);
  assert.equal(planSandbox(null, { cwd: "/" }), undefined);
  const base = { windowsSandboxLevel: "disabled", cwd: "file:///tmp" };
  const plan = (permissions: Json) => planSandbox({ ...base, permissions }, { cwd: "/" })!;
  assert.equal(plan({ type: "disabled" }).isolation, "none");
  assert.equal(plan({ type: "external", network: "restricted" }).isolation, "network");
  assert.equal(plan({ type: "external", network: "enabled" }).isolation, "none");
  const unrestricted = { type: "unrestricted" };
  assert.equal(
    plan({ type: "managed", file_system: unrestricted, network: "enabled" }).isolation,
    "none",
  );
  const rootWrite = [{ path: { type: "special", value: { kind: "root" } }, access: "write" }];
  const managed = (entries: Json[], network = "restricted") =>
    plan({ type: "managed", file_system: { type: "restricted", entries }, network });
  assert.equal(managed(rootWrite).isolation, "network");
  assert.equal(managed(rootWrite, "enabled").isolation, "none");
  const carveOut = { path: { type: "path", path: "file:///etc" }, access: "read" };
  const withCarveOut = managed([...rootWrite, carveOut]);
  assert.equal(withCarveOut.isolation, "filesystem");
  assert.deepEqual(withCarveOut.mounts, [{ path: "/etc", access: "read", node: "directory" }]);
});

/** The Codex client's workspace-write sandbox for `ws`, its parts, and it with more entries. */
function workspaceWriteParts(ws: string) {
  const valid = codexRequest("workspace_write", ws).sandbox as Json;
  const permissions = valid.permissions as Json;
  const fileSystem = permissions.file_system as Json;
  const entries = fileSystem.entries as Json[];
  const withEntries = (extra: Json[]) => ({
    ...valid,
    permissions: {
      ...permissions,
      file_system: { ...fileSystem, entries: [...entries, ...extra] },
    },
  });
  return { valid, permissions, fileSystem, withEntries };
}

Deno.test("planSandbox() rejects invalid values with the reference's messages", () => {
  using layout = makeLayout();
  const { valid, permissions, fileSystem, withEntries } = workspaceWriteParts(layout.ws);
  const cases: [unknown, string][] = [
    [{ bogus: 1 }, "missing field `permissions`"],
    [{ ...valid, windowsSandboxLevel: undefined }, "missing field `windowsSandboxLevel`"],
    [
      { ...valid, windowsSandboxLevel: "bogus" },
      "unknown variant `bogus`, expected one of `disabled`, `restricted-token`, `elevated`, `mxc`",
    ],
    [{ ...valid, workspaceRoots: null }, "invalid type: null, expected a sequence"],
    [
      { ...valid, permissions: { type: "weird" } },
      "unknown variant `weird`, expected one of `managed`, `disabled`, `external`",
    ],
    [
      { ...valid, permissions: { ...permissions, network: "off" } },
      "unknown variant `off`, expected `restricted` or `enabled`",
    ],
    [
      withEntries([{ path: { type: "special", value: { kind: "foo_bar" } }, access: "write" }]),
      "unknown variant `foo_bar`, expected one of `root`, `minimal`, `current_working_directory`, " +
      "`project_roots`, `tmpdir`, `slash_tmp`, `unknown`",
    ],
    [
      withEntries([{ path: { type: "special", value: { kind: "tmpdir" } }, access: "rw" }]),
      "unknown variant `rw`, expected one of `read`, `write`, `deny`, `none`",
    ],
    [
      withEntries([{
        path: { type: "path", path: "file:///tmp" },
        access: "read",
        missing_path_behavior: "error",
      }]),
      "unknown variant `error`, expected `skip`",
    ],
    [
      withEntries([{ path: { type: "path", path: "rel/dir" }, access: "write" }]),
      "invalid URI: relative URL without a base",
    ],
    // The type names are the reference's. Its own members are read from the message text, where
    // a number is `number`; what lies inside `permissions` from a buffered copy, where it is
    // `integer` or `floating point`, and a tag may be a variant's index.
    ["x", 'invalid type: string "x", expected struct WireFileSystemSandboxContext'],
    // The reference decodes an array positionally (docs/protocol.md §14).
    [[], "invalid type: sequence, expected struct WireFileSystemSandboxContext"],
    [-1, "invalid type: number, expected struct WireFileSystemSandboxContext"],
    [new JsonFloat(5.5), "invalid type: number, expected struct WireFileSystemSandboxContext"],
    [{ ...valid, cwd: 5 }, "invalid type: number, expected a string"],
    [{ ...valid, workspaceRoots: [5] }, "invalid type: number, expected a string"],
    [{ ...valid, useLegacyLandlock: 5 }, "invalid type: number, expected a boolean"],
    [
      { ...valid, windowsSandboxLevel: true },
      "invalid type: boolean `true`, expected string or map",
    ],
    [{ ...valid, windowsSandboxLevel: null }, "invalid type: null, expected string or map"],
    [
      { ...valid, windowsSandboxProxySettingsMode: "x" },
      "unknown variant `x`, expected `reconcile` or `preserve`",
    ],
    [
      { ...valid, permissions: 5 },
      "invalid type: integer `5`, expected internally tagged enum ExecPermissionProfile",
    ],
    [{ ...valid, permissions: { type: 1 } }, "invalid type: number, expected variant identifier"],
    [{ ...valid, permissions: { type: null } }, "invalid type: null, expected variant identifier"],
    [
      { ...valid, permissions: { ...permissions, network: new JsonFloat(1.5) } },
      "invalid type: floating point `1.5`, expected string or map",
    ],
    [
      { ...valid, permissions: { ...permissions, file_system: "x" } },
      'invalid type: string "x", expected internally tagged enum ExecManagedFileSystemPermissions',
    ],
    [
      { ...valid, permissions: { ...permissions, file_system: { ...fileSystem, type: 5 } } },
      "invalid value: integer `5`, expected variant index 0 <= i < 2",
    ],
    [
      { ...valid, permissions: { ...permissions, file_system: { type: "restricted" } } },
      "missing field `entries`",
    ],
    [
      {
        ...valid,
        permissions: { ...permissions, file_system: { type: "restricted", entries: null } },
      },
      "invalid type: null, expected a sequence",
    ],
    [
      withEntries([5 as unknown as Json]),
      "invalid type: integer `5`, expected struct ExecFileSystemSandboxEntry",
    ],
    [
      withEntries([{ path: "x", access: "read" }]),
      'invalid type: string "x", expected internally tagged enum ExecFileSystemPath',
    ],
    [
      withEntries([{ path: { type: 3, path: "file:///tmp" }, access: "read" }]),
      "invalid value: integer `3`, expected variant index 0 <= i < 3",
    ],
    [
      withEntries([{ path: { type: "special", value: { kind: 5 } }, access: "read" }]),
      "missing field `path`",
    ],
    [
      withEntries([{ path: { type: "special", value: { kind: null } }, access: "read" }]),
      "invalid type: null, expected variant identifier",
    ],
    [
      withEntries([{ path: { type: "special", value: { kind: "tmpdir" } }, access: null }]),
      "invalid type: null, expected string or map",
    ],
  ];
  for (const [sandbox, message] of cases) {
    const err = rpcErrorOf(() => planSandbox(sandbox, { cwd: layout.ws }));
    assert.equal(err.code, ErrorCode.InvalidParams, message);
    assert.equal(err.message, message);
  }
});

Deno.test("planSandbox() takes the forms the reference's decoder takes", () => {
  using layout = makeLayout();
  const { valid, permissions, withEntries } = workspaceWriteParts(layout.ws);
  const accepted: unknown[] = [
    // A unit variant as a map, and a tag inside permissions as its variant's index.
    { ...valid, permissions: { ...permissions, network: { restricted: null } } },
    { ...valid, permissions: { ...permissions, file_system: { type: 1 } } },
    withEntries([{
      // Index 5 is `unknown` (current_working_directory is an alias of project_roots).
      path: { type: "special", value: { kind: 5, path: "file:///tmp" } },
      access: { write: null },
    }]),
    // Members it does not read (windowsSandboxPrivateDesktop) and a null proxy mode.
    { ...valid, windowsSandboxPrivateDesktop: 5, windowsSandboxProxySettingsMode: null },
    { ...valid, windowsSandboxProxySettingsMode: "preserve" },
  ];
  for (const sandbox of accepted) {
    assert.doesNotThrow(() => planSandbox(sandbox, { cwd: layout.ws }), JSON.stringify(sandbox));
  }
});

Deno.test("planSandbox() refuses policies it cannot enforce instead of granting more", () => {
  using layout = makeLayout();
  const valid = codexRequest("workspace_write", layout.ws).sandbox as Json;
  const permissions = valid.permissions as Json;
  const withEntries = (entries: Json[], extra: Json = {}) => ({
    ...valid,
    ...extra,
    permissions: { ...permissions, file_system: { type: "restricted", entries } },
  });
  const root = { path: { type: "special", value: { kind: "root" } }, access: "read" };
  const project = { path: { type: "special", value: { kind: "project_roots" } }, access: "write" };
  const cases: [unknown, RegExp][] = [
    [withEntries([project]), /Restricted read access/],
    [withEntries([]), /Restricted read access/],
    [
      withEntries([
        { path: { type: "special", value: { kind: "minimal" } }, access: "read" },
        project,
      ]),
      /minimal/,
    ],
    [
      withEntries([root, { path: { type: "glob_pattern", pattern: "**/*.env" }, access: "deny" }]),
      /glob_pattern/,
    ],
    [
      withEntries([root, {
        path: { type: "special", value: { kind: "unknown", path: ":x" } },
        access: "deny",
      }]),
      /unknown/,
    ],
    [withEntries([root, project], { useLegacyLandlock: true }), /useLegacyLandlock/],
    [
      withEntries([root, {
        path: { type: "special", value: { kind: "project_roots", subpath: "../.." } },
        access: "write",
      }]),
      /subpath must stay inside the root/,
    ],
  ];
  for (const [sandbox, pattern] of cases) {
    const err = rpcErrorOf(() => planSandbox(sandbox, { cwd: layout.ws }));
    assert.equal(err.code, ErrorCode.InvalidParams);
    assert.match(err.message, pattern);
  }
});

Deno.test("planSandbox() refuses a read-only path reached through a writable symlink", () => {
  using layout = makeLayout();
  Deno.mkdirSync(`${layout.ws}/real`);
  Deno.symlinkSync(`${layout.ws}/real`, `${layout.ws}/.agents`);
  const err = rpcErrorOf(() => planFor("workspace_write", layout.ws));
  assert.equal(err.code, ErrorCode.InternalError);
  assert.equal(
    err.message,
    `cannot enforce sandbox read-only path ${Deno.realPathSync(layout.ws)}/.agents because it ` +
      `crosses writable symlink ${Deno.realPathSync(layout.ws)}/.agents`,
  );
});

Deno.test("bwrapArgs() layers mounts in order and restores the environment the shim shell changes", () => {
  using layout = makeLayout();
  const plan = planFor("workspace_write", layout.ws);
  const ws = Deno.realPathSync(layout.ws);
  const args = bwrapArgs(plan, ["ls", "-l"], {
    cwd: ws,
    env: { PATH: "/usr/bin", "BASH_FUNC_f%%": "() { :; }" },
    filterDirectory: "/tmp/filters",
  });
  const indexOf = (...seq: string[]) =>
    args.findIndex((_, i) => seq.every((value, j) => args[i + j] === value));
  for (const flag of ["--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-net"]) {
    assert.ok(args.includes(flag), flag);
  }
  assert.ok(indexOf("--cap-drop", "ALL") >= 0);
  assert.ok(indexOf("--ro-bind", "/", "/") < indexOf("--bind", ws, ws));
  assert.ok(indexOf("--bind", ws, ws) < indexOf("--ro-bind", `${ws}/.git`, `${ws}/.git`));
  assert.ok(indexOf("--perms", "0555", "--tmpfs", `${ws}/.codex`) > indexOf("--bind", ws, ws));
  assert.ok(
    indexOf("--ro-bind", "/tmp/filters", "/tmp/filters") > indexOf("--bind", "/tmp", "/tmp"),
  );
  assert.ok(indexOf("--ro-bind", "/proc/sys", "/proc/sys") > indexOf("--proc", "/proc"));
  assert.ok(indexOf("--remount-ro", `${ws}/.codex`) > indexOf("--proc", "/proc"));
  assert.ok(indexOf("--seccomp", "3") >= 0);
  assert.ok(indexOf("--chdir", ws) >= 0);
  assert.ok(indexOf("--setenv", "BASH_FUNC_f%%", "() { :; }") >= 0);
  assert.deepEqual(args.slice(-3), ["--", "ls", "-l"]);
});

// ---------------------------------------------------------------------------
// sandboxDenied.

Deno.test("looksSandboxDenied() follows the reference's heuristic", () => {
  assert.equal(looksSandboxDenied(1, "bash: /x: Read-only file system\n"), true);
  assert.equal(looksSandboxDenied(1, "Permission denied\n"), true);
  assert.equal(looksSandboxDenied(5, "SECCOMP thing\n"), true);
  assert.equal(looksSandboxDenied(2, "sandbox\n"), true, "a keyword wins over exit code 2");
  assert.equal(looksSandboxDenied(126, "permission denied"), true);
  assert.equal(looksSandboxDenied(1, "failed to write file x"), true);
  assert.equal(looksSandboxDenied(0, "Operation not permitted"), false, "success is never denied");
  assert.equal(looksSandboxDenied(3, "hello\n"), false);
  assert.equal(looksSandboxDenied(127, "command not found"), false);
  assert.equal(looksSandboxDenied(159, ""), true, "killed by SIGSYS");
  assert.equal(looksSandboxDenied(137, ""), false);
});

Deno.test("OutputTail keeps only the last window of output", () => {
  const tail = new OutputTail(10);
  tail.push(new TextEncoder().encode("read-only file system"));
  assert.equal(looksSandboxDenied(1, tail.text()), false, "the keyword scrolled out");
  tail.push(new TextEncoder().encode("xxx"));
  assert.equal(tail.text(), " systemxxx");
  const big = new OutputTail();
  big.push(new TextEncoder().encode("read-only file system\n"));
  big.push(new Uint8Array(1_048_000).fill(97));
  assert.equal(looksSandboxDenied(1, big.text()), true, "still inside the 1 MiB window");
  big.push(new Uint8Array(1_000).fill(97));
  assert.equal(looksSandboxDenied(1, big.text()), false, "out of the window");
});

// ---------------------------------------------------------------------------
// Availability.

Deno.test("probeSandbox() names a missing bubblewrap, and auto falls back to another layer", () => {
  const result = probeSandbox({ bwrap: "/nonexistent/bwrap", layer: "bubblewrap" });
  assert.equal(result.ok, false);
  assert.match(!result.ok ? result.reason : "", /bubblewrap \(bwrap\) is not installed/);
  const auto = probeSandbox({ bwrap: "/nonexistent/bwrap", layer: "auto" });
  const landlock = TEST_LAYERS.find((t) => t.layer === "landlock")!;
  if (landlock.availability.ok) {
    assert.equal(auto.ok && auto.layer, "landlock");
  } else {
    assert.match(
      !auto.ok ? auto.reason : "",
      /no sandbox layer works here: .*not installed.*landlock: /,
    );
  }
});

Deno.test("launchSandboxed() fails with the cause when sandboxing is unavailable, never unsandboxed", () => {
  using layout = makeLayout();
  const plan = planFor("read_only", layout.ws);
  const err = rpcErrorOf(() =>
    launchSandboxed(plan, ["true"], {
      cwd: layout.ws,
      env: ENV,
      availability: { ok: false, reason: "bubblewrap (bwrap) is not installed" },
    })
  );
  assert.equal(err.code, ErrorCode.InternalError);
  assert.equal(
    err.message,
    "cannot start a sandboxed process: bubblewrap (bwrap) is not installed",
  );
  assert.deepEqual(err.data, { kind: "sandboxUnavailable" });
  const none = planSandbox({ permissions: { type: "disabled" }, windowsSandboxLevel: "disabled" }, {
    cwd: "/",
  })!;
  const direct = launchSandboxed(none, ["true"], {
    cwd: "/",
    env: ENV,
    availability: { ok: false, reason: "x" },
  });
  assert.deepEqual([direct.wrapped, direct.argv], [false, ["true"]]);
});

Deno.test("landlockRules() grants a writable root's entries, never its protected names or new entries, and nothing above a denied path", () => {
  using layout = makeLayout();
  const ws = Deno.realPathSync(layout.ws);
  Deno.mkdirSync(`${ws}/sub`);
  Deno.writeTextFileSync(`${ws}/file.txt`, "x");
  const rules = landlockRules(planFor("workspace_write", layout.ws));
  const at = (path: string) => rules.find((rule) => rule.path === path)?.rights;
  const read = FS.READ_FILE | FS.READ_DIR | FS.EXECUTE;
  assert.equal(at(ws), read, "no MAKE_* or REMOVE_* on the root itself: .codex cannot appear");
  assert.equal(at(`${ws}/.git`), read);
  assert.ok((at(`${ws}/sub`)! & FS.MAKE_REG) !== 0 && (at(`${ws}/sub`)! & FS.REMOVE_DIR) !== 0);
  assert.equal(at(`${ws}/file.txt`), FS.EXECUTE | FS.WRITE_FILE | FS.READ_FILE | FS.TRUNCATE);
  assert.equal(at("/"), read);
  for (const rule of rules) {
    if (pathIsUnder(rule.path, `${ws}/.git`)) assert.equal(rule.rights & ~read, 0, rule.path);
  }
  // A denied file: its directory keeps listing rights, loses reading and removal.
  const secret = `${layout.outside}/existing.txt`;
  const denied = planFromPaths("read", [{ path: secret, access: "deny" }], "restricted");
  const deniedRules = landlockRules(denied);
  const outside = Deno.realPathSync(layout.outside);
  assert.equal(deniedRules.find((rule) => rule.path === Deno.realPathSync(secret)), undefined);
  const around = deniedRules.find((rule) => rule.path === outside)!.rights;
  assert.equal(around & (FS.READ_FILE | FS.REMOVE_FILE), 0);
  assert.ok((around & FS.READ_DIR) !== 0);
});

/** What `/proc` says of a process's signals and terminal, for a failure message. */
async function readProcessState(pid: number): Promise<string> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    return status.split("\n").filter((line) => /^(State|Sig|Shd)/.test(line)).join("; ") +
      `; stat ${stat.slice(stat.lastIndexOf(")") + 2)}`;
  } catch (err) {
    return String(err);
  }
}

/** SIGKILLs a process group that may already be gone. */
function killGroup(pid: number): void {
  try {
    Deno.kill(-pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

// ---------------------------------------------------------------------------
// Sandboxed processes, on each layer (a layer that does not work here is ignored, saying why).

for (const t of TEST_LAYERS) {
  const ignore = !t.availability.ok;
  const on = ` [${t.layer}]${t.skip}`;
  for (const policy of ["workspace_write", "read_only"] as const) {
    Deno.test({
      name: `sandboxed ${policy} process writes only where the policy allows${on}`,
      ignore,
      async fn() {
        using layout = makeLayout();
        Deno.mkdirSync(`${layout.ws}/sub`);
        const plan = planFor(policy, layout.ws);
        const script = [
          `echo new > ${layout.ws}/inside.txt && echo INSIDE_OK`,
          `echo new > ${layout.ws}/sub/inside.txt && echo SUB_OK`,
          `echo new > ${layout.outside}/existing.txt && echo OUTSIDE_OK`,
          `echo new > ${layout.outside}/created.txt && echo CREATED_OK`,
          `echo new > ${layout.ws}/.git/config && echo GIT_OK`,
          `mkdir ${layout.ws}/.codex && echo CODEX_DIR_OK`,
          `mkdir ${layout.ws}/.codex/x && echo CODEX_OK`,
          "exit 0",
        ].join("; ");
        const { stdout, stderr } = await runSandboxed(plan, ["/bin/sh", "-c", script], {
          cwd: layout.ws,
          layer: t,
        });
        const writable = policy === "workspace_write";
        assert.equal(stdout.includes("SUB_OK"), writable, stderr);
        // Landlock cannot add entries to a root that holds read-only names (layer.ts).
        assert.equal(
          stdout.includes("INSIDE_OK"),
          writable && t.traits.rootEntriesWritable,
          stderr,
        );
        assert.equal(Deno.readTextFileSync(`${layout.outside}/existing.txt`), "old\n");
        assert.ok(!stdout.includes("OUTSIDE_OK") && !stdout.includes("CREATED_OK"), stdout);
        assert.ok(!stdout.includes("GIT_OK") && !stdout.includes("CODEX_OK"), stdout);
        assert.ok(!stdout.includes("CODEX_DIR_OK"), stdout);
        assert.match(stderr, refusedWrite(t.layer));
        assert.equal(Deno.statSync(`${layout.ws}`).isDirectory, true);
        // The empty directories covering missing carve-outs are gone once released.
        for (const name of [".codex", ".agents", ".aws"]) {
          assert.equal(pathExists(`${layout.ws}/${name}`), false, name);
        }
        assert.equal(
          pathExists(`${layout.ws}/inside.txt`),
          writable && t.traits.rootEntriesWritable,
        );
        assert.equal(pathExists(`${layout.ws}/sub/inside.txt`), writable);
      },
    });

    Deno.test({
      name: `sandboxed ${policy} process has no network${on}`,
      ignore,
      async fn() {
        using layout = makeLayout();
        const plan = planFor(policy, layout.ws);
        using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const port = (listener.addr as Deno.NetAddr).port;
        const { stdout, stderr } = await runSandboxed(
          plan,
          [
            "/bin/bash",
            "-c",
            `exec 3<>/dev/tcp/127.0.0.1/${port} && echo CONNECTED; cat /proc/net/dev`,
          ],
          { cwd: layout.ws, layer: t },
        );
        assert.ok(!stdout.includes("CONNECTED"), stdout);
        assert.match(stderr, /socket: Operation not permitted/);
        if (t.traits.networkNamespace) {
          // Its own network namespace: loopback only.
          assert.deepEqual(
            stdout.split("\n").slice(2).filter((l) => l.trim()).map((l) => l.trim().split(":")[0]),
            ["lo"],
          );
        }
      },
    });

    Deno.test({
      name: `sandboxed ${policy} process runs without capabilities${
        t.traits.pidNamespace ? ", in its own PID namespace" : ", unable to signal the server"
      }${on}`,
      ignore,
      async fn() {
        using layout = makeLayout();
        const plan = planFor(policy, layout.ws);
        const hostPidNs = Deno.readLinkSync("/proc/self/ns/pid");
        const script = [
          "echo pid=$$",
          "echo ns=$(readlink /proc/self/ns/pid)",
          "grep CapEff /proc/self/status",
          "mount -o remount,rw,bind / 2>/dev/null && echo REMOUNTED",
          'h=$(cat /proc/sys/kernel/hostname); echo "$h" > /proc/sys/kernel/hostname && echo SYSCTL_WRITTEN',
          `kill -0 ${Deno.pid} 2>/dev/null && echo SIGNALLED`,
          "exit 0",
        ].join("; ");
        const { stdout, stderr } = await runSandboxed(plan, ["/bin/bash", "-c", script], {
          cwd: layout.ws,
          layer: t,
        });
        if (t.traits.pidNamespace) {
          assert.match(stdout, /^pid=2$/m, stderr);
          assert.ok(!stdout.includes(`ns=${hostPidNs}`), stdout);
        }
        assert.match(stdout, /CapEff:\s+0+$/m, stderr);
        assert.ok(!stdout.includes("REMOUNTED"), "root must not remount the file system writable");
        assert.ok(!stdout.includes("SYSCTL_WRITTEN"), "/proc/sys must stay read-only");
        assert.ok(!stdout.includes("SIGNALLED"), "the sandbox reached the server with a signal");
      },
    });
  }

  Deno.test({
    name: `a network-only sandbox keeps full file access but no network${on}`,
    ignore,
    async fn() {
      using layout = makeLayout();
      const plan = planSandbox(
        {
          permissions: { type: "external", network: "restricted" },
          windowsSandboxLevel: "disabled",
        },
        { cwd: layout.ws },
      )!;
      assert.equal(plan.isolation, "network");
      const script = `echo new > ${layout.outside}/existing.txt && echo OUTSIDE_OK; ` +
        "exec 3<>/dev/tcp/127.0.0.1/9 && echo CONNECTED; exit 0";
      const { stdout, stderr } = await runSandboxed(plan, ["/bin/bash", "-c", script], {
        cwd: layout.ws,
        layer: t,
      });
      assert.match(stdout, /OUTSIDE_OK/, stderr);
      assert.ok(!stdout.includes("CONNECTED"));
      assert.match(stderr, /Operation not permitted/);
    },
  });

  Deno.test({
    name: `sandboxed process gets its environment unchanged${on}`,
    ignore,
    async fn() {
      using layout = makeLayout();
      const plan = planFor("workspace_write", layout.ws);
      const env = {
        PATH: "/usr/bin:/bin",
        "A-B": "dash",
        SPACED: "x y",
        "BASH_FUNC_f%%": "() { :; }",
      };
      const { stdout } = await runSandboxed(plan, ["env"], { cwd: layout.ws, env, layer: t });
      // PWD is the working directory, as bubblewrap (and the reference) set it.
      const expected = { ...env, PWD: Deno.realPathSync(layout.ws) };
      assert.deepEqual(
        stdout.trim().split("\n").sort(),
        Object.entries(expected).map(([k, v]) => `${k}=${v}`).sort(),
      );
    },
  });

  for (const policy of ["workspace_write", "read_only"] as const) {
    Deno.test({
      name: `the real Codex ${policy} request runs sandboxed${on}`,
      ignore,
      async fn() {
        using layout = makeLayout();
        const params = codexRequest(policy, layout.ws);
        const cwd = pathFromUri(params.cwd as string);
        const plan = planSandbox(params.sandbox, { cwd, env: {} })!;
        assert.equal(plan.type, "linuxSeccomp");
        const env = { ...(params.env as Record<string, string>), ...ENV, HOME: layout.base };
        const { code, stdout, stderr } = await runSandboxed(plan, params.argv as string[], {
          cwd,
          env,
          layer: t,
        });
        const x = policy === "workspace_write" ? 82414 * 34746 : 51874 * 21096;
        assert.match(stdout, new RegExp(`CODEX_E2E_RESULT_${x}`));
        // bash is PID 2 of the sandbox's namespace (bubblewrap's init is PID 1).
        if (t.traits.pidNamespace) assert.match(stdout, /^CODEX_E2E_PIDCHAIN: 2$/m);
        const marker = `${layout.ws}/codex-e2e-marker.txt`;
        // The marker is a new entry of the workspace root (refused on Landlock, layer.ts).
        if (policy === "workspace_write" && t.traits.rootEntriesWritable) {
          assert.equal(code, 0, stderr);
          assert.match(Deno.readTextFileSync(marker), new RegExp(`^CODEX_E2E_RESULT_${x}$`, "m"));
          assert.equal(looksSandboxDenied(code, stdout + stderr), false);
        } else {
          assert.equal(code, 1);
          assert.match(stderr, /codex-e2e-marker\.txt: /);
          assert.match(stderr, refusedWrite(t.layer));
          assert.equal(pathExists(marker), false);
          assert.equal(looksSandboxDenied(code, stdout + stderr), true, "sandboxDenied");
        }
      },
    });
  }

  Deno.test({
    name: `sandboxed process: terminate kills the whole namespace, no orphans${
      t.skip ||
      (t.traits.pidNamespace
        ? ""
        : " (ignored: this layer has no PID namespace, so a descendant that leaves the process group outlives a kill of the group; docs/guide/sandbox.md)")
    } [${t.layer}]`,
    ignore: ignore || !t.traits.pidNamespace,
    async fn() {
      using layout = makeLayout();
      const plan = planFor("workspace_write", layout.ws);
      const marker = `987654.${Date.now() % 100000}`;
      const script = `setsid sleep ${marker} & sleep ${marker} & echo started; wait`;
      const launch = launchSandboxed(plan, ["/bin/sh", "-c", script], {
        cwd: layout.ws,
        env: ENV,
        availability: t.availability,
      });
      // As processes.ts: a new session and process group, pipes for output.
      const child = spawn(launch.argv[0]!, launch.argv.slice(1), {
        cwd: layout.ws,
        env: launch.env ?? ENV,
        detached: true,
        stdio: ["ignore", "pipe", "ignore"],
      });
      const exited = new Promise<string | null>((resolve) =>
        child.on("exit", (_c, s) => resolve(s))
      );
      try {
        const started = new Promise<void>((resolve) =>
          child.stdout!.on("data", (data) => String(data).includes("started") && resolve())
        );
        await started;
        // The sleeps themselves, not the command lines that mention them.
        const sleeps = new RegExp(`\\bsleep ${marker.replace(".", "\\.")}$`);
        assert.ok(await eventually(() => pidsMatching(sleeps).length === 2));
        Deno.kill(-child.pid!, "SIGKILL");
        assert.equal(await exited, "SIGKILL");
        assert.ok(
          await eventually(() => pidsMatching(sleeps).length === 0),
          "sleep processes survived",
        );
      } finally {
        killGroup(child.pid!);
        await exited;
        child.stdout!.destroy();
        launch.release();
      }
    },
  });

  Deno.test({
    name: `sandboxed process: stdin and interrupt work through the sandbox${on}`,
    ignore,
    async fn() {
      using layout = makeLayout();
      const plan = planFor("read_only", layout.ws);
      // `exec`: with the shell still starting `sleep` when the SIGINT came, both ran on (seen once
      // in a full run, whose test then waited for an exit that never came).
      const launch = launchSandboxed(plan, [
        "/bin/sh",
        "-c",
        'read l; echo "got:$l"; exec sleep 600',
      ], {
        cwd: layout.ws,
        env: ENV,
        availability: t.availability,
      });
      const child = spawn(launch.argv[0]!, launch.argv.slice(1), {
        cwd: layout.ws,
        env: launch.env ?? ENV,
        detached: true,
        stdio: ["pipe", "pipe", "ignore"],
      });
      const exited = new Promise<string | null>((resolve) =>
        child.on("exit", (_c, s) => resolve(s))
      );
      try {
        const got = new Promise<void>((resolve) =>
          child.stdout!.on("data", (data) => String(data).includes("got:hello") && resolve())
        );
        child.stdin!.write("hello\n");
        await got;
        Deno.kill(-child.pid!, "SIGINT");
        assert.equal(await exited, "SIGINT");
      } finally {
        killGroup(child.pid!);
        await exited;
        child.stdin!.destroy();
        child.stdout!.destroy();
        launch.release();
      }
    },
  });

  Deno.test({
    name: `sandboxed tty process keeps its terminal and ends on Ctrl-C${
      t.skip || (ptySupported() ? "" : " (ignored: no pseudo-terminals here)")
    } [${t.layer}]`,
    ignore: ignore || !ptySupported(),
    async fn() {
      using layout = makeLayout();
      const plan = planFor("workspace_write", layout.ws);
      // `exec`, as in the pipe test above: a Ctrl-C that came while the shell was starting `sleep`
      // left both running (seen once in a full run on the landlock layer).
      const script =
        '[ -t 0 ] && echo IS_TTY; stty size; read l; echo "got:$l"; echo ready; exec sleep 600';
      const launch = launchSandboxed(plan, ["/bin/sh", "-c", script], {
        cwd: layout.ws,
        env: ENV,
        availability: t.availability,
      });
      const child = spawnPty(launch.argv, { cwd: layout.ws, env: launch.env ?? ENV });
      try {
        let out = "";
        const until = async (marker: string) => {
          while (!out.includes(marker)) {
            const chunk = await child.read();
            if (chunk === null) throw new Error(`EOF before ${marker}: ${out}`);
            out += decoder.decode(chunk);
          }
        };
        await until("24 80");
        assert.match(out, /IS_TTY/);
        await child.write(new TextEncoder().encode("hello\n"));
        await until("ready");
        assert.match(out, /got:hello/);
        await child.write(new Uint8Array([3]));
        // Bounded: a Ctrl-C that did not end it fails here instead of waiting for the sleep.
        let timer: ReturnType<typeof setTimeout> | undefined;
        const ended = await Promise.race([
          (async () => {
            while ((await child.read()) !== null) { /* drain */ }
            return true;
          })(),
          new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 20_000))),
        ]);
        clearTimeout(timer);
        if (!ended) {
          const state = await readProcessState(child.pid);
          killGroup(child.pid);
          assert.fail(`Ctrl-C did not end the sandboxed shell: ${state}`);
        }
        const status = await child.status;
        assert.ok(status.code !== 0, "a signal death");
      } finally {
        child.close();
        launch.release();
      }
    },
  });

  const argv0 = t.availability.ok && t.availability.argv0;
  Deno.test({
    name: `launchSandboxed() ${argv0 ? "applies" : "refuses"} arg0${on}`,
    ignore,
    async fn() {
      using layout = makeLayout();
      const plan = planFor("read_only", layout.ws);
      const options = { cwd: layout.ws, env: ENV, arg0: "custom", availability: t.availability };
      if (!argv0) {
        const err = rpcErrorOf(() => launchSandboxed(plan, ["/bin/sh"], options));
        assert.equal(err.code, ErrorCode.InvalidParams);
        assert.match(err.message, /arg0 is not supported in a sandbox with bubblewrap/);
        return;
      }
      const launch = launchSandboxed(plan, ["/bin/sh", "-c", "echo $0"], options);
      try {
        const output = await new Deno.Command(launch.argv[0]!, {
          args: launch.argv.slice(1),
          cwd: layout.ws,
          env: launch.env ?? ENV,
          clearEnv: true,
        }).output();
        assert.equal(decoder.decode(output.stdout), "custom\n");
      } finally {
        launch.release();
      }
    },
  });
}

Deno.test("launchSandboxed() removes a synthetic mount point only when its last sandbox is released and no other server's sandbox holds its directory", () => {
  using layout = makeLayout();
  const plan = planFor("workspace_write", layout.ws);
  const ok = {
    ok: true as const,
    layer: "bubblewrap" as const,
    bwrap: "/usr/bin/bwrap",
    version: "0.8.0",
    argv0: false,
  };
  const first = launchSandboxed(plan, ["true"], { cwd: layout.ws, env: ENV, availability: ok });
  const codex = `${Deno.realPathSync(layout.ws)}/.codex`;
  Deno.mkdirSync(codex); // What bubblewrap does for the first sandbox.
  // A second sandbox planned meanwhile still sees .codex as missing (synthetic).
  const again = planFor("workspace_write", layout.ws);
  assert.equal(again.mounts.find((m) => m.path === codex)?.node, "missing");
  const second = launchSandboxed(again, ["true"], { cwd: layout.ws, env: ENV, availability: ok });
  first.release();
  first.release();
  assert.equal(pathExists(codex), true, "still used by the second sandbox");
  second.release();
  assert.equal(pathExists(codex), false);
  // Another server's sandbox holds a shared lock on the directory (mount_locks.ts): it stays.
  const third = launchSandboxed(planFor("workspace_write", layout.ws), ["true"], {
    cwd: layout.ws,
    env: ENV,
    availability: ok,
  });
  Deno.mkdirSync(codex);
  using other = Deno.openSync(Deno.realPathSync(layout.ws));
  other.lockSync(false);
  third.release();
  assert.equal(pathExists(codex), true, "removed under another server's running sandbox");
});

// ---------------------------------------------------------------------------
// fs/* with a sandbox (in-process, no bubblewrap needed).

type FsCall = [FsMethod, Json];

/** Runs an fs request as the server does: through the fs operations table. */
async function runFs(method: FsMethod, params: Json): Promise<unknown> {
  const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
  try {
    return await runFsOperation(method, params as never, context);
  } finally {
    context.files.closeAll();
  }
}

async function fsCall(call: FsCall, sandbox: unknown): Promise<string> {
  const [method, params] = call;
  try {
    await runFs(method, { ...params, sandbox });
    return "ok";
  } catch (err) {
    assert.ok(err instanceof RpcError, String(err));
    return `${err.code} ${err.message}`;
  }
}

const EROFS = "-32603 Read-only file system (os error 30)";
const ENOENT = "-32004 No such file or directory (os error 2)";
const EISDIR = "-32603 Is a directory (os error 21)";
const EACCES = "-32600 Permission denied (os error 13)";
const EBUSY = "-32603 Resource busy (os error 16)";

Deno.test("fs requests under a sandbox get the reference's results under both Codex policies", async () => {
  using layout = makeLayout();
  const { ws, outside } = layout;
  await Deno.mkdir(`${ws}/sub`);
  const data = "aGkK";
  const uri = uriFromPath;
  // [call, read-only result, workspace-write result], checked against the reference binary.
  const table: [FsCall, string, string][] = [
    [
      ["fs/writeFile", { path: uri(`${outside}/new.txt`), dataBase64: data }],
      EROFS,
      EROFS,
    ],
    [
      ["fs/writeFile", { path: uri(`${outside}/existing.txt`), dataBase64: data }],
      EROFS,
      EROFS,
    ],
    [["fs/writeFile", { path: uri(`${ws}/in.txt`), dataBase64: data }], EROFS, "ok"],
    [
      ["fs/writeFile", { path: uri(`${ws}/.git/g.txt`), dataBase64: data }],
      EROFS,
      EROFS,
    ],
    [
      ["fs/writeFile", { path: uri(`${ws}/.codex/g.txt`), dataBase64: data }],
      ENOENT,
      EROFS,
    ],
    [
      ["fs/writeFile", { path: uri(`${ws}/nodir/x.txt`), dataBase64: data }],
      ENOENT,
      ENOENT,
    ],
    [["fs/writeFile", { path: uri(`${ws}/sub`), dataBase64: data }], EISDIR, EISDIR],
    [["fs/writeFile", { path: uri(`${ws}/.aws`), dataBase64: data }], EROFS, EISDIR],
    [
      ["fs/writeFile", { path: uri(`${ws}/.agents/x/y`), dataBase64: data }],
      ENOENT,
      ENOENT,
    ],
    [["fs/readFile", { path: uri(`${outside}/existing.txt`) }], "ok", "ok"],
    [["fs/createDirectory", { path: uri(`${outside}/d`) }], EROFS, EROFS],
    [["fs/createDirectory", { path: uri(`${ws}/.codex`) }], EROFS, "ok"],
    [["fs/createDirectory", { path: uri(`${ws}/sub`) }], "ok", "ok"],
    [
      ["fs/createDirectory", { path: uri(`${ws}/newdir`), recursive: false }],
      EROFS,
      "ok",
    ],
    [["fs/remove", { path: uri(`${outside}/existing.txt`) }], EROFS, EROFS],
    [["fs/remove", { path: uri(`${outside}/missing`) }], "ok", "ok"],
    [["fs/remove", { path: uri(`${outside}/missing`), force: false }], ENOENT, ENOENT],
    [["fs/remove", { path: uri(`${ws}/.git/HEAD`) }], EROFS, EROFS],
    [["fs/remove", { path: uri(`${ws}/.git`) }], EROFS, EROFS],
    [["fs/remove", { path: uri(`${ws}/.codex`) }], "ok", EBUSY],
    [
      ["fs/copy", {
        sourcePath: uri(`${outside}/existing.txt`),
        destinationPath: uri(`${outside}/c.txt`),
        recursive: false,
      }],
      EROFS,
      EROFS,
    ],
    [
      ["fs/copy", {
        sourcePath: uri(`${outside}/existing.txt`),
        destinationPath: uri(`${ws}/c.txt`),
        recursive: false,
      }],
      EROFS,
      "ok",
    ],
  ];
  for (const policy of ["read_only", "workspace_write"] as const) {
    const sandbox = codexRequest(policy, ws).sandbox;
    for (const [call, readOnly, workspaceWrite] of table) {
      const expected = policy === "read_only" ? readOnly : workspaceWrite;
      assert.equal(
        await fsCall(call, sandbox),
        expected,
        `${policy} ${call[0]} ${JSON.stringify(call[1])}`,
      );
    }
  }
  assert.equal(await Deno.readTextFile(`${outside}/existing.txt`), "old\n");
  assert.deepEqual(
    (await Array.fromAsync(Deno.readDir(outside))).map((e) => e.name),
    ["existing.txt"],
    "nothing was written outside the workspace",
  );
  assert.equal(await Deno.readTextFile(`${ws}/in.txt`), "hi\n");
  assert.equal(pathExists(`${ws}/.codex`), false, "mkdir -p of a carve-out touches nothing");
  assert.equal(pathExists(`${ws}/.aws`), false);
});

Deno.test("fs requests under a sandbox are refused at denied paths on reads, writes and walks", async () => {
  using layout = makeLayout();
  const { ws } = layout;
  await Deno.mkdir(`${ws}/secret`);
  await Deno.writeTextFile(`${ws}/secret/s.txt`, "s");
  await Deno.writeTextFile(`${ws}/secretfile`, "sf");
  await Deno.mkdir(`${ws}/pub`);
  await Deno.writeTextFile(`${ws}/pub/p.txt`, "p");
  const sandbox = codexRequest("workspace_write", ws).sandbox as Json;
  const permissions = sandbox.permissions as { file_system: { entries: Json[] } };
  permissions.file_system.entries.push(
    { path: { type: "path", path: uriFromPath(`${ws}/secret`) }, access: "deny" },
    { path: { type: "path", path: uriFromPath(`${ws}/secretfile`) }, access: "none" },
  );
  const uri = uriFromPath;
  const table: [FsCall, string][] = [
    [["fs/readFile", { path: uri(`${ws}/secret/s.txt`) }], EACCES],
    [["fs/readFile", { path: uri(`${ws}/secretfile`) }], EACCES],
    [["fs/getMetadata", { path: uri(`${ws}/secret`) }], "ok"],
    [["fs/getMetadata", { path: uri(`${ws}/secret/s.txt`) }], EACCES],
    [["fs/readDirectory", { path: uri(`${ws}/secret`) }], EACCES],
    [["fs/canonicalize", { path: uri(`${ws}/secret`) }], "ok"],
    [
      ["fs/writeFile", { path: uri(`${ws}/secret/n.txt`), dataBase64: "aGkK" }],
      EACCES,
    ],
    [["fs/writeFile", { path: uri(`${ws}/secretfile`), dataBase64: "aGkK" }], EROFS],
    [
      ["fs/copy", {
        sourcePath: uri(ws),
        destinationPath: uri(`${layout.base}/copy`),
        recursive: true,
      }],
      EACCES,
    ],
  ];
  for (const [call, expected] of table) {
    assert.equal(await fsCall(call, sandbox), expected, `${call[0]} ${JSON.stringify(call[1])}`);
  }
  const walk = await runFs("fs/walk", {
    path: uri(ws),
    options: { maxDepth: 5, maxDirectories: 100, maxEntries: 100, followDirectorySymlinks: false },
    sandbox,
  }) as { entries: { path: string }[]; errors: unknown[] };
  const listed = walk.entries.map((entry) => pathFromUri(entry.path).slice(ws.length));
  assert.ok(listed.includes("/secret") && listed.includes("/pub/p.txt"), listed.join());
  assert.ok(!listed.includes("/secret/s.txt"), "nothing below a denied directory");
  assert.deepEqual(walk.errors, [{
    path: uri(`${ws}/secret`),
    message: "Permission denied (os error 13)",
  }]);
});

Deno.test("fs requests run without a sandbox, or with one that restricts nothing", async () => {
  using layout = makeLayout();
  const path = uriFromPath(`${layout.outside}/free.txt`);
  await runFs("fs/writeFile", { path, dataBase64: "aGkK" });
  const disabled = { permissions: { type: "disabled" }, windowsSandboxLevel: "disabled" };
  const other = uriFromPath(`${layout.outside}/free2.txt`);
  await runFs("fs/writeFile", { path: other, dataBase64: "aGkK", sandbox: disabled });
  assert.equal(await Deno.readTextFile(`${layout.outside}/free2.txt`), "hi\n");
  const err = await rejection(
    runFs("fs/readFile", { path, sandbox: { bogus: 1 } }),
  );
  assert.equal(err.code, ErrorCode.InvalidParams);
  assert.equal(err.message, "missing field `permissions`");
});

// ---------------------------------------------------------------------------
// Over the wire (once the server wires this module in: `processSandbox` capability).

const WIRED = "processSandbox" in capabilities();
const WIRE_SKIP = !WIRED ? " (skipped: the server does not wire sandboxes yet)" : "";

/** Reads a process to its end; returns its output and the final read. */
async function readToEnd(
  client: StdioClient,
  processId: string,
): Promise<{ out: string; last: Json }> {
  let out = "";
  let afterSeq = 0;
  while (true) {
    const result = await call(client, "process/read", { processId, afterSeq, waitMs: 2000 });
    for (const chunk of result.chunks as { seq: number; chunk: string }[]) {
      out += decoder.decode(Uint8Array.fromBase64(chunk.chunk));
    }
    afterSeq = (result.nextSeq as number) - 1;
    if (result.closed) return { out, last: result };
  }
}

for (const t of TEST_LAYERS) {
  for (const policy of ["workspace_write", "read_only"] as const) {
    Deno.test({
      name: `process/start runs the real Codex ${policy} request sandboxed over stdio${
        WIRE_SKIP || t.skip
      } [${t.layer}]`,
      ignore: !WIRED || !t.availability.ok,
      fn: () =>
        withLayer(t.layer, async () => {
          using layout = makeLayout();
          await using server = await inProcessSession();
          const params = codexRequest(policy, layout.ws);
          const env = { ...(params.env as Record<string, string>), HOME: layout.base };
          const started = await call(server.stdio, "process/start", { ...params, env });
          assert.deepEqual(started, { processId: params.processId, sandboxType: "linuxSeccomp" });
          const { out, last } = await readToEnd(server.stdio, params.processId as string);
          if (t.traits.pidNamespace) assert.match(out, /^CODEX_E2E_PIDCHAIN: 2$/m);
          // Its marker is a new entry of the workspace root: refused on Landlock (layer.ts).
          const denied = policy === "read_only" || !t.traits.rootEntriesWritable;
          assert.equal(last.exitCode, denied ? 1 : 0, out);
          assert.equal(last.sandboxDenied, denied);
          assert.equal(pathExists(`${layout.ws}/codex-e2e-marker.txt`), !denied);
          const exited = server.stdio.log.received.map((r) => r.msg as Json)
            .find((m) => m.method === "process/exited")?.params as Json;
          assert.equal(exited.sandboxDenied, denied);
        }),
    });
  }
}

Deno.test({
  name: `fs/writeFile with the Codex sandbox fails outside the workspace over stdio${WIRE_SKIP}`,
  ignore: !WIRED,
  async fn() {
    using layout = makeLayout();
    await using server = await inProcessSession();
    const sandbox = codexRequest("workspace_write", layout.ws).sandbox;
    const outside = uriFromPath(`${layout.outside}/new.txt`);
    const refused = await server.stdio.request(nextRequestId(), "fs/writeFile", {
      path: outside,
      dataBase64: "aGkK",
      sandbox,
    });
    assert.deepEqual(refused.error, {
      code: -32603,
      data: { kind: "osError", errno: "EROFS" },
      message: "Read-only file system (os error 30)",
    });
    const inside = uriFromPath(`${layout.ws}/new.txt`);
    assert.deepEqual(
      await call(server.stdio, "fs/writeFile", { path: inside, dataBase64: "aGkK", sandbox }),
      {},
    );
    assert.equal(pathExists(`${layout.outside}/new.txt`), false);
  },
});

Deno.test("sandboxed fs reads follow an absolute symlink and answer for its target", async () => {
  using layout = makeLayout();
  const { ws, outside } = layout;
  await Deno.mkdir(`${outside}/dir`);
  await Deno.writeTextFile(`${outside}/dir/t.txt`, "target");
  await Deno.symlink(`${outside}/dir`, `${ws}/abs`);
  const sandbox = codexRequest("workspace_write", ws).sandbox as Json;
  const link = uriFromPath(`${ws}/abs`);
  const file = uriFromPath(`${ws}/abs/t.txt`);
  const read = await runFs("fs/readFile", { path: file, sandbox }) as { dataBase64: string };
  assert.equal(new TextDecoder().decode(Uint8Array.fromBase64(read.dataBase64)), "target");
  const metadata = await runFs("fs/getMetadata", { path: link, sandbox });
  assert.deepEqual(
    { ...metadata as Json, createdAtMs: 0, modifiedAtMs: 0 },
    {
      isDirectory: true,
      isFile: false,
      isSymlink: true,
      size: (await Deno.stat(`${outside}/dir`)).size,
      createdAtMs: 0,
      modifiedAtMs: 0,
    },
  );
  assert.deepEqual(await runFs("fs/canonicalize", { path: file, sandbox }), {
    path: uriFromPath(await Deno.realPath(`${outside}/dir/t.txt`)),
  });
  assert.deepEqual(await runFs("fs/readDirectory", { path: link, sandbox }), {
    entries: [{ fileName: "t.txt", isDirectory: false, isFile: true }],
  });
});

Deno.test("sandboxed fs/readDirectory lists a file whose name is not UTF-8, its byte as U+FFFD", async () => {
  // Listed through the checked descriptor (with --allow-ffi): before, the entry was left out.
  using layout = makeLayout();
  const odd = `${layout.ws}/odd`;
  await Deno.mkdir(odd);
  await makeNonUtf8File(odd);
  const sandbox = codexRequest("workspace_write", layout.ws).sandbox as Json;
  assert.deepEqual(await runFs("fs/readDirectory", { path: uriFromPath(odd), sandbox }), {
    entries: [{ fileName: NON_UTF8_NAME_TEXT, isDirectory: false, isFile: true }],
  });
});

Deno.test("sandboxed fs/walk following links neither lists nor enters a link to a denied directory", async () => {
  using layout = makeLayout();
  const { ws, outside } = layout;
  await Deno.writeTextFile(`${outside}/SECRETMARK`, "");
  await Deno.symlink(outside, `${ws}/l`);
  const sandbox = codexRequest("workspace_write", ws).sandbox as Json;
  const permissions = sandbox.permissions as { file_system: { entries: Json[] } };
  permissions.file_system.entries.push(
    { path: { type: "path", path: uriFromPath(outside) }, access: "none" },
  );
  const walk = await runFs("fs/walk", {
    path: uriFromPath(ws),
    options: { maxDepth: 3, maxDirectories: 10, maxEntries: 100, followDirectorySymlinks: true },
    sandbox,
  }) as { entries: { path: string }[] };
  const listed = walk.entries.map((entry) => pathFromUri(entry.path).slice(ws.length));
  assert.ok(!listed.some((path) => path.startsWith("/l")), listed.join());
});

Deno.test("sandboxed fs/walk of a denied directory answers its denial as the walk's one error, as the reference", async () => {
  using layout = makeLayout();
  const { ws, outside } = layout;
  await Deno.writeTextFile(`${outside}/SECRETMARK`, "");
  const sandbox = codexRequest("workspace_write", ws).sandbox as Json;
  const permissions = sandbox.permissions as { file_system: { entries: Json[] } };
  permissions.file_system.entries.push(
    { path: { type: "path", path: uriFromPath(outside) }, access: "none" },
  );
  const options = {
    maxDepth: 3,
    maxDirectories: 10,
    maxEntries: 100,
    followDirectorySymlinks: true,
  };
  assert.deepEqual(await runFs("fs/walk", { path: uriFromPath(outside), options, sandbox }), {
    entries: [],
    errors: [{ path: uriFromPath(outside), message: "Permission denied (os error 13)" }],
    truncated: false,
  });
  // Below the denied directory the walk is still refused.
  const below = await rejection(
    runFs("fs/walk", { path: uriFromPath(`${outside}/sub`), options, sandbox }),
  );
  assert.equal(below.code, ErrorCode.InvalidRequest);
});
