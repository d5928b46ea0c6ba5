/**
 * The launcher of the `landlock` layer: a short-lived process that applies
 * the sandbox to itself and then becomes the command.
 *
 * Deno has no hook between `fork` and `exec`, so the server starts this
 * launcher instead of the command. It runs {@linkcode landlockExecMain},
 * which through FFI (libc's `syscall`, `prctl`, `execve`): opens each rule's
 * path (`openat2` with `RESOLVE_NO_SYMLINKS`: a path swapped for a link
 * since the plan was made gets no rule, so less access), builds the
 * Landlock ruleset, sets `PR_SET_NO_NEW_PRIVS`, restricts itself, loads the
 * seccomp filter (`seccomp.ts`'s program) and `execve`s the command, looked
 * up on the command's `PATH` like `execvp`. Landlock, the filter and
 * `no_new_privs` belong to the calling thread and pass through `execve`,
 * which ends the other threads. Any failure before `execve` exits with
 * code 126 or 127 and a line on stderr: never does the command run
 * unrestricted.
 *
 * Under `deno run` the launcher is `deno run --allow-ffi` of a `data:` URL
 * holding {@linkcode landlockExecMain}'s source (nothing is read from disk,
 * so a sandbox that can write the repository cannot change the launcher);
 * in a compiled binary it is the binary itself with
 * {@linkcode LAUNCHER_SUBCOMMAND}. The launcher's environment is the
 * server's choice ({@linkcode launcherEnv}); the command's own environment
 * travels in its arguments, so none of the client's variables reaches the
 * launcher's Deno before the sandbox is in place.
 *
 * Arguments: the spec (JSON: rules, ABI, filter), the environment entries
 * (`NAME=value`), `--`, the program (a path, or a name looked up on the
 * command's `PATH`), `argv[0]` as the command sees it, the other arguments.
 *
 * @module
 */

/** The hidden subcommand of a compiled binary that runs {@linkcode landlockExecMain}. */
export const LAUNCHER_SUBCOMMAND = "__sandbox-exec";

/**
 * The launcher's own environment: the server's own Deno cache directory (the
 * launcher trusts what the server trusts for its own code: keep it outside
 * every writable root), no prompt, no colour, no update check.
 */
export function launcherEnv(): Record<string, string> {
  launcherEnvironment ??= {
    DENO_DIR: denoDir(),
    DENO_NO_PROMPT: "1",
    DENO_NO_UPDATE_CHECK: "1",
    NO_COLOR: "1",
  };
  return { ...launcherEnvironment };
}

let launcherEnvironment: Record<string, string> | undefined;

function variable(name: string): string | undefined {
  try {
    return Deno.env.get(name) || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Deno's cache directory as Deno finds it: `DENO_DIR`, else
 * `$XDG_CACHE_HOME/deno`, else `$HOME/.cache/deno`; without any, a path that
 * cannot be created (Deno then keeps its caches in memory).
 */
function denoDir(): string {
  const explicit = variable("DENO_DIR");
  if (explicit !== undefined) return explicit;
  const cache = variable("XDG_CACHE_HOME") ??
    (variable("HOME") === undefined ? undefined : `${variable("HOME")}/.cache`);
  return cache === undefined ? "/dev/null/exec-server-launcher" : `${cache}/deno`;
}

/** What the launcher applies. */
export interface LauncherSpec {
  /** Rules as `[path, rights]`. */
  rules: [string, number][];
  /** `handled_access_fs`. */
  handled: number;
  /** `scoped` (0 below ABI 6). */
  scoped: number;
  /** The kernel's Landlock ABI. */
  abi: number;
  /** The seccomp program, hex. */
  filter: string;
}

/**
 * The launcher's program. Self-contained (it is run from its own source
 * text): it uses only the `Deno` global.
 *
 * @param args The launcher's arguments (see the module documentation).
 */
export function landlockExecMain(args: string[]): never {
  const die = (code: number, message: string): never => {
    Deno.stderr.writeSync(new TextEncoder().encode(`exec-server sandbox (landlock): ${message}\n`));
    Deno.exit(code);
  };
  const separator = args.indexOf("--");
  if (separator < 1 || args.length < separator + 3 || args[separator + 1] === "") {
    die(126, "bad launcher arguments");
  }
  const spec = JSON.parse(args[0]!) as LauncherSpec;
  const env = args.slice(1, separator);
  const program = args[separator + 1]!;
  const argv = args.slice(separator + 2);
  const lib = Deno.dlopen("libc.so.6", {
    syscall: { parameters: ["i64", "i64", "i64", "i64", "i64", "i64"], result: "i64" },
    prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
    execve: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
    __errno_location: { parameters: [], result: "pointer" },
    strerror: { parameters: ["i32"], result: "pointer" },
    signal: { parameters: ["i32", "pointer"], result: "pointer" },
  }).symbols;
  const errno = () => new Deno.UnsafePointerView(lib.__errno_location()!).getInt32();
  const describe = (code: number) =>
    Deno.UnsafePointerView.getCString(lib.strerror(code)!) + ` (os error ${code})`;
  const encoder = new TextEncoder();
  const cString = (text: string) => {
    const bytes = new Uint8Array(encoder.encode(text).length + 1);
    encoder.encodeInto(text, bytes);
    return bytes;
  };
  const address = (buffer: Uint8Array) =>
    BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buffer as Uint8Array<ArrayBuffer>)));
  const call = (nr: number, ...rest: bigint[]) => {
    const [a = 0n, b = 0n, c = 0n, d = 0n, e = 0n] = rest;
    return Number(lib.syscall(BigInt(nr), a, b, c, d, e));
  };
  const [CREATE_RULESET, ADD_RULE, RESTRICT_SELF, OPENAT2, CLOSE_X86, CLOSE_ARM] = [
    444,
    445,
    446,
    437,
    3,
    57,
  ];
  const close = Deno.build.arch === "aarch64" ? CLOSE_ARM : CLOSE_X86;
  // struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped.
  const attr = new Uint8Array(24);
  const attrView = new DataView(attr.buffer);
  attrView.setBigUint64(0, BigInt(spec.handled), true);
  attrView.setBigUint64(16, BigInt(spec.scoped), true);
  const attrSize = spec.abi >= 6 ? 24 : spec.abi >= 4 ? 16 : 8;
  const ruleset = call(CREATE_RULESET, address(attr), BigInt(attrSize), 0n);
  if (ruleset < 0) die(126, `cannot create a Landlock ruleset: ${describe(errno())}`);
  // struct open_how: flags O_PATH | O_CLOEXEC, mode, resolve RESOLVE_NO_SYMLINKS.
  const how = new Uint8Array(24);
  const howView = new DataView(how.buffer);
  howView.setBigUint64(0, BigInt(0o10000000 | 0o2000000), true);
  howView.setBigUint64(16, 0x04n, true);
  // struct landlock_path_beneath_attr (packed): allowed_access, parent_fd.
  const beneath = new Uint8Array(12);
  const beneathView = new DataView(beneath.buffer);
  const FILE_RIGHTS = 1 | 2 | 4 | (1 << 14);
  for (const [path, rights] of spec.rules) {
    const fd = call(OPENAT2, -100n, address(cString(path)), address(how), 24n);
    // Missing, or swapped for a link since the plan was made: no rule, less access.
    if (fd < 0) continue;
    let result = -1;
    // A file takes only file rights (directory rights on it fail with EINVAL): retry with those.
    for (const allowed of new Set([rights, rights & FILE_RIGHTS])) {
      if ((allowed & spec.handled) === 0) continue;
      beneathView.setBigUint64(0, BigInt(allowed & spec.handled), true);
      beneathView.setInt32(8, fd, true);
      result = call(ADD_RULE, BigInt(ruleset), 1n, address(beneath), 0n);
      if (result >= 0) break;
    }
    const failure = result < 0 ? errno() : 0;
    call(close, BigInt(fd));
    if (result < 0) die(126, `cannot add the Landlock rule of ${path}: ${describe(failure)}`);
  }
  // No capabilities, now or after execve (as bubblewrap's --cap-drop ALL): clear the ambient
  // set, empty what of the bounding set can be emptied (it needs CAP_SETPCAP; without it,
  // no_new_privs below keeps execve from granting more than the empty permitted set), then
  // the effective, permitted and inheritable sets (capset, version 3 header). errno is not
  // read after these calls: Deno's own system calls between two FFI calls may change it.
  const PR_CAP_AMBIENT = 47;
  const PR_CAP_AMBIENT_CLEAR_ALL = 4;
  const PR_CAPBSET_READ = 23;
  const PR_CAPBSET_DROP = 24;
  lib.prctl(PR_CAP_AMBIENT, BigInt(PR_CAP_AMBIENT_CLEAR_ALL), 0n, 0n, 0n);
  for (let cap = 0; cap < 64; cap++) {
    const held = lib.prctl(PR_CAPBSET_READ, BigInt(cap), 0n, 0n, 0n);
    if (held < 0) break; // Past the last capability.
    if (held === 1) lib.prctl(PR_CAPBSET_DROP, BigInt(cap), 0n, 0n, 0n);
  }
  const capHeader = new Uint8Array(8);
  new DataView(capHeader.buffer).setUint32(0, 0x20080522, true);
  const capData = new Uint8Array(24);
  const CAPSET = Deno.build.arch === "aarch64" ? 91 : 126;
  if (call(CAPSET, address(capHeader), address(capData)) < 0) {
    die(126, `cannot drop capabilities: ${describe(errno())}`);
  }
  const PR_SET_NO_NEW_PRIVS = 38;
  const PR_SET_SECCOMP = 22;
  const SECCOMP_MODE_FILTER = 2;
  if (lib.prctl(PR_SET_NO_NEW_PRIVS, 1n, 0n, 0n, 0n) !== 0) {
    die(126, `cannot set no_new_privs: ${describe(errno())}`);
  }
  if (call(RESTRICT_SELF, BigInt(ruleset), 0n) < 0) {
    die(126, `cannot enforce the Landlock ruleset: ${describe(errno())}`);
  }
  call(close, BigInt(ruleset));
  const filter = Uint8Array.from(spec.filter.match(/../g) ?? [], (hex) => parseInt(hex, 16));
  // struct sock_fprog: len (u16, padded), filter pointer.
  const program16 = new Uint8Array(16);
  const programView = new DataView(program16.buffer);
  programView.setUint16(0, filter.length / 8, true);
  programView.setBigUint64(8, address(filter), true);
  if (lib.prctl(PR_SET_SECCOMP, BigInt(SECCOMP_MODE_FILTER), address(program16), 0n, 0n) !== 0) {
    die(126, `cannot load the seccomp filter: ${describe(errno())}`);
  }
  // Deno ignores SIGPIPE (and may block signals in this thread), which execve would pass on:
  // the command starts with every signal at its default and none blocked, as a spawn gives it.
  for (let signal = 1; signal < 32; signal++) {
    if (signal !== 9 && signal !== 19) lib.signal(signal, null);
  }
  const RT_SIGPROCMASK = Deno.build.arch === "aarch64" ? 135 : 14;
  const emptySet = new Uint8Array(8);
  call(RT_SIGPROCMASK, 2n, /* SIG_SETMASK */ address(emptySet), 0n, 8n);
  const pointers = (strings: string[]) => {
    const buffers = strings.map(cString);
    const table = new BigUint64Array(strings.length + 1);
    buffers.forEach((buffer, index) => (table[index] = address(buffer)));
    return { buffers, table: new Uint8Array(table.buffer) };
  };
  const argvTable = pointers(argv);
  const envTable = pointers(env);
  let candidates: string[];
  if (program.includes("/")) {
    candidates = [program];
  } else {
    const path = env.find((entry) => entry.startsWith("PATH="))?.slice(5) ?? "/usr/bin:/bin";
    candidates = path.split(":").map((dir) => `${dir === "" ? "." : dir}/${program}`);
  }
  let failure = 2;
  let denied = false;
  for (const candidate of candidates) {
    lib.execve(cString(candidate), argvTable.table, envTable.table);
    failure = errno();
    if (failure === 13) denied = true;
    // As execvp: go on past missing files, directories that are not and unreadable ones.
    if (failure !== 2 && failure !== 20 && failure !== 13) break;
  }
  if (denied && (failure === 2 || failure === 20)) failure = 13;
  // The strings stay referenced (and alive) until here.
  void [argvTable.buffers, envTable.buffers];
  return die(failure === 2 ? 127 : 126, `cannot run ${program}: ${describe(failure)}`);
}

/**
 * The command line that starts the launcher: the compiled binary with
 * {@linkcode LAUNCHER_SUBCOMMAND}, or `deno run --allow-ffi` of a `data:` URL
 * holding {@linkcode landlockExecMain}.
 *
 * @returns The program and its leading arguments; the launcher's own arguments follow.
 */
export function launcherCommand(): string[] {
  if (Deno.build.standalone) return [Deno.execPath(), LAUNCHER_SUBCOMMAND];
  launcherSource ??= "data:application/javascript;base64," +
    new TextEncoder().encode(`(${landlockExecMain.toString()})(Deno.args);\n`).toBase64();
  return [
    Deno.execPath(),
    "run",
    "--no-config",
    "--no-lock",
    "--no-code-cache",
    "--no-prompt",
    "--quiet",
    "--allow-ffi",
    launcherSource,
  ];
}

let launcherSource: string | undefined;

/**
 * The launcher's arguments for one command.
 *
 * @param spec What it applies.
 * @param env The command's complete environment.
 * @param program The executable: a path, or a name looked up on `env.PATH`.
 * @param argv The command as it sees its arguments (`argv[0]` possibly the client's `arg0`).
 */
export function launcherArgs(
  spec: LauncherSpec,
  env: Record<string, string>,
  program: string,
  argv: readonly string[],
): string[] {
  return [
    JSON.stringify(spec),
    ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
    "--",
    program,
    ...argv,
  ];
}
