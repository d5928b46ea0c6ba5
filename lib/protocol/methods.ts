/**
 * The method table: every request and notification of the exec-server
 * protocol, declared once. The router, the typed client, params validation
 * and the exported JSON Schema are all derived from {@linkcode METHODS}.
 *
 * @module
 */

import {
  any,
  array,
  base64,
  boolean,
  bytes,
  defaulted,
  described,
  type Infer,
  literal,
  nullable,
  object,
  optional,
  record,
  type Schema,
  SchemaError,
  signed,
  string,
  unit,
  unsigned,
  withJsonSchema,
} from "./schema.ts";
import type { StreamedString } from "./streamed_json.ts";

/** Who sends a message. */
export type Direction = "clientToServer" | "serverToClient";

/** The gating family named in `client must call initialize before using <family> methods`. */
export type Family =
  | "exec"
  | "filesystem"
  | "http"
  | "environment info"
  | "environment status"
  | "capability discovery"
  | "environment config";

/** A request: the receiver answers with `result` or an error. */
export interface RequestSpec<P, R> {
  /** Discriminator. */
  readonly kind: "request";
  /** Who sends it. */
  readonly direction: Direction;
  /** Gating family; `undefined` only for `initialize`. */
  readonly family?: Family;
  /** Concurrency lane with `--concurrent-requests > 1` (docs/protocol.md section 12). */
  readonly lane: "control" | "ordinary";
  /** One-line description. */
  readonly doc: string;
  /** Params schema. */
  readonly params: Schema<P>;
  /** Result schema. */
  readonly result: Schema<R>;
  /**
   * The result's member a handler may produce as a {@linkcode StreamedString} (a file's
   * content): the reply is then sent in parts as it is made (see {@linkcode ReplyOf}).
   */
  readonly streamed?: string;
}

/** A notification: no answer. */
export interface NotificationSpec<P> {
  /** Discriminator. */
  readonly kind: "notification";
  /** Who sends it. */
  readonly direction: Direction;
  /** One-line description. */
  readonly doc: string;
  /** Params schema. */
  readonly params: Schema<P>;
}

function request<P, R>(
  family: Family | undefined,
  doc: string,
  params: Schema<P>,
  result: Schema<R>,
  lane: "control" | "ordinary" = "ordinary",
): RequestSpec<P, R> {
  return { kind: "request", direction: "clientToServer", family, lane, doc, params, result };
}

/** A request whose result member `field` may be streamed ({@linkcode RequestSpec.streamed}). */
function streamedRequest<P, R, const F extends keyof R & string>(
  family: Family,
  doc: string,
  params: Schema<P>,
  result: Schema<R>,
  field: F,
): RequestSpec<P, R> & { readonly streamed: F } {
  return { ...request(family, doc, params, result), streamed: field };
}

function notification<P, D extends Direction>(
  direction: D,
  doc: string,
  params: Schema<P>,
): NotificationSpec<P> & { readonly direction: D } {
  return { kind: "notification", direction, doc, params };
}

// ---------------------------------------------------------------------------
// Shared shapes

const UUID_CHARS = /^[0-9a-fA-F-]$/;

/** A UUID string (`urn:uuid:` prefix allowed), validated with the reference's wording. */
function uuid(): Schema<string> {
  const base = string();
  return {
    ...base,
    parse(value) {
      const text = base.parse(value);
      const body = text.startsWith("urn:uuid:") ? text.slice(9) : text;
      const offset = text.length - body.length;
      for (let i = 0; i < body.length; i++) {
        if (!UUID_CHARS.test(body[i]!)) {
          throw new SchemaError(
            `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${
              body[i]
            }\` at ${offset + i + 1}`,
          );
        }
      }
      const hex = body.replaceAll("-", "");
      if (hex.length !== 32) {
        throw new SchemaError(`invalid length: expected 32 hex digits, found ${hex.length}`);
      }
      return text;
    },
    jsonSchema: () => ({
      type: "string",
      pattern: "^(urn:uuid:)?[0-9a-fA-F-]*$",
      description: "A UUID (32 hex digits, dashes anywhere), optionally prefixed by urn:uuid:.",
    }),
  };
}

/** An absolute `file:` URI naming a path on the server (docs/protocol.md section 10.1). */
export const PathUri: Schema<string> = withJsonSchema(string(), {
  type: "string",
  title: "PathUri",
  pattern: "^file:",
  description:
    "A path on the server as an absolute file: URI (file:///dir/name, percent-encoded; no query or fragment; host empty or localhost).",
});

const SANDBOX_NETWORK = {
  type: "string",
  enum: ["restricted", "enabled"],
  description: "Whether the sandboxed process may use the network.",
};

/** The `kind`s of a sandbox entry's special path (`{"type": "special", "value": {kind}}`). */
export const SANDBOX_SPECIAL_PATH_KINDS = [
  "root",
  "minimal",
  "current_working_directory",
  "project_roots",
  "tmpdir",
  "slash_tmp",
  "unknown",
] as const;

const SANDBOX_FILE_SYSTEM_PATH = {
  title: "FileSystemPath",
  description: "A path of a sandbox entry: a literal path, a glob, or a special location.",
  oneOf: [
    {
      type: "object",
      properties: { type: { const: "path" }, path: PathUri.jsonSchema() },
      required: ["type", "path"],
    },
    {
      type: "object",
      properties: {
        type: { const: "glob_pattern" },
        pattern: { type: "string", description: "A glob (refused by this server: -32602)." },
      },
      required: ["type", "pattern"],
    },
    {
      type: "object",
      properties: {
        type: { const: "special" },
        value: {
          type: "object",
          properties: {
            kind: { type: "string", enum: SANDBOX_SPECIAL_PATH_KINDS },
            subpath: { anyOf: [{ type: "string" }, { type: "null" }] },
            path: { type: "string", description: "Only with kind unknown." },
          },
          required: ["kind"],
        },
      },
      required: ["type", "value"],
    },
  ],
};

/**
 * `sandbox` of `process/start` and the `fs/*` methods: Codex's
 * `FileSystemSandboxContext`. The handlers validate and enforce it (with the
 * reference's errors), so it parses as any value; its JSON Schema shows the
 * shape.
 */
// deno-lint-ignore no-slow-types
const sandbox = optional(withJsonSchema(any(), {
  type: "object",
  title: "FileSystemSandboxContext",
  description:
    "Codex's sandbox for this request: the file-system and network permissions it runs under, enforced by the server (bubblewrap and seccomp for processes, in-process checks for fs methods). Absent or null: no sandbox.",
  properties: {
    permissions: {
      title: "SandboxPermissions",
      oneOf: [
        {
          type: "object",
          properties: { type: { const: "disabled" } },
          required: ["type"],
          description: "No sandbox.",
        },
        {
          type: "object",
          properties: { type: { const: "external" }, network: SANDBOX_NETWORK },
          required: ["type", "network"],
          description: "Sandboxed by the caller's own means; only the network policy applies.",
        },
        {
          type: "object",
          properties: {
            type: { const: "managed" },
            network: SANDBOX_NETWORK,
            file_system: {
              oneOf: [
                {
                  type: "object",
                  properties: { type: { const: "unrestricted" } },
                  required: ["type"],
                },
                {
                  type: "object",
                  properties: {
                    type: { const: "restricted" },
                    entries: {
                      type: "array",
                      items: {
                        type: "object",
                        title: "FileSystemSandboxEntry",
                        properties: {
                          path: SANDBOX_FILE_SYSTEM_PATH,
                          access: { type: "string", enum: ["read", "write", "deny", "none"] },
                          missing_path_behavior: {
                            anyOf: [{ const: "skip" }, { type: "null" }],
                          },
                        },
                        required: ["path", "access"],
                      },
                    },
                  },
                  required: ["type"],
                },
              ],
            },
          },
          required: ["type", "network", "file_system"],
          description: "The server enforces the file-system entries and the network policy.",
        },
      ],
    },
    workspaceRoots: { type: "array", items: PathUri.jsonSchema() },
    cwd: { anyOf: [PathUri.jsonSchema(), { type: "null" }] },
    temporaryDirectories: {
      anyOf: [{ type: "array", items: PathUri.jsonSchema() }, { type: "null" }],
    },
    windowsSandboxLevel: {
      type: "string",
      enum: ["disabled", "restricted-token", "elevated", "mxc"],
    },
    windowsSandboxPrivateDesktop: { anyOf: [{ type: "boolean" }, { type: "null" }] },
    useLegacyLandlock: {
      anyOf: [{ type: "boolean" }, { type: "null" }],
      description: "Refused by this server (-32602) when true.",
    },
  },
  required: ["permissions", "windowsSandboxLevel"],
}));

/** The `environmentInfo` object (docs/protocol.md section 9). */
export interface EnvironmentInfo {
  /** The user's login shell. */
  shell: { name: string; path: string };
  /** This server's version. */
  executorVersion: string;
  /** Opaque build identity (the reference's; omitted here). */
  providerId?: string;
  /** The server process's working directory. */
  cwd?: string;
  /** `$HOME` as a file URI. */
  userHomeDir: string;
  /** `linux`, `macos`, `windows`. */
  platformOs: string;
  /** Directories a client should put first on PATH. */
  prependPathDirs: string[];
  /** `[$TMPDIR]` when set. */
  temporaryDirectories: string[];
  /** `$TMPDIR` or `/tmp`. */
  tempDir: string;
  /** What the server really implements. */
  capabilities: Record<string, boolean>;
}

/** Schema of {@linkcode EnvironmentInfo}. */
export const EnvironmentInfo: Schema<EnvironmentInfo> = object({
  shell: object({ name: string(), path: string() }, { name: "ShellInfo" }),
  executorVersion: string(),
  providerId: optional(string()),
  cwd: optional(PathUri),
  userHomeDir: PathUri,
  platformOs: string(),
  prependPathDirs: array(PathUri),
  temporaryDirectories: array(PathUri),
  tempDir: PathUri,
  capabilities: record(boolean()),
}, { name: "EnvironmentInfo", description: "What the executor is and which capabilities it has" });

// deno-lint-ignore no-slow-types
const EnvPolicy = object({
  inherit: literal("core", "all", "none"),
  ignoreDefaultExcludes: boolean(),
  exclude: array(string()),
  set: record(string()),
  includeOnly: array(string()),
}, { name: "EnvPolicy" });

// deno-lint-ignore no-slow-types
const OutputStream = literal("stdout", "stderr", "pty");

// deno-lint-ignore no-slow-types
const ProcessChunk = object({
  seq: unsigned(),
  stream: OutputStream,
  chunk: base64(),
}, { name: "ProcessOutputChunk" });

// deno-lint-ignore no-slow-types
const WalkOptions = object({
  maxDepth: described(unsigned(), "Levels below the root to descend."),
  maxDirectories: described(unsigned(), "Directories to read at most; beyond it truncated."),
  maxEntries: described(unsigned(), "Entries to return at most; beyond it truncated."),
  followDirectorySymlinks: described(boolean(), "Descend into symlinked directories."),
  pruneHiddenDirectories: described(
    defaulted(boolean()),
    "Skip directories whose name starts with a dot.",
  ),
}, { name: "WalkOptions" });

// deno-lint-ignore no-slow-types
const HttpHeader = object({
  name: string(),
  value: string(),
  valueEnvVar: described(
    optional(string()),
    "Take the value from this environment variable of the server instead.",
  ),
}, { name: "HttpHeader" });

// deno-lint-ignore no-slow-types
const ResponseHeader = object({ name: string(), value: string() }, { name: "HttpResponseHeader" });

// deno-lint-ignore no-slow-types
const Empty = object({}, { name: "Empty" });

// ---------------------------------------------------------------------------
// Extensions beyond the reference

/**
 * The protocol extensions of this server beyond the reference, by name, with
 * what each adds. Each name is also a flag of `environmentInfo.capabilities`.
 * A client opts in with `initialize {extensions: [...]}`; without that the
 * server answers every reference request exactly as the reference does (new
 * params are ignored, as the reference ignores unknown members, and no new
 * result members appear). The new methods `process/resize` and
 * `protocol/describe` need no opt-in: a reference client never calls them.
 */
export const EXTENSIONS = {
  processResize: "`process/resize` for tty processes; `process/start` accepts an initial `size`",
  processSignals:
    "`process/signal` accepts every name of `PROCESS_SIGNALS`; `process/terminate` accepts `graceMs` (SIGTERM, then SIGKILL); `process/exited` and `process/read` carry `signal`",
  processStdinClose: "`process/write` with `closeStdin: true` sends EOF to the process's stdin",
  processLosslessOutput:
    '`process/start` accepts `output: "block"` (nothing is evicted before it was read); `process/read` reports `evictedBytes`',
  protocolDescribe: "`protocol/describe` returns the version, the extensions and the JSON Schema",
} as const;

/** The name of one of the {@linkcode EXTENSIONS}. */
export type ExtensionName = keyof typeof EXTENSIONS;

/**
 * The signal names of `process/signal`, with the POSIX signal each sends.
 * The reference knows only `interrupt`; the others need the
 * `processSignals` extension.
 */
export const PROCESS_SIGNALS = {
  interrupt: "SIGINT",
  terminate: "SIGTERM",
  kill: "SIGKILL",
  hangup: "SIGHUP",
  quit: "SIGQUIT",
  user1: "SIGUSR1",
  user2: "SIGUSR2",
  alarm: "SIGALRM",
  continue: "SIGCONT",
  stop: "SIGSTOP",
  terminalStop: "SIGTSTP",
  windowChange: "SIGWINCH",
} as const;

/** A signal name of `process/signal`. */
export type SignalName = keyof typeof PROCESS_SIGNALS;

/**
 * `process/signal`'s `signal`: the reference's `interrupt`-only enum, whose
 * errors it keeps (`unknown variant `x`, expected `interrupt``), that also
 * lets the other names of {@linkcode PROCESS_SIGNALS} through. The handler
 * refuses those, with the same error, for a client without `processSignals`.
 */
function signalName(): Schema<SignalName> {
  const reference = literal("interrupt");
  const all = literal(...(Object.keys(PROCESS_SIGNALS) as SignalName[]));
  return {
    ...reference,
    parse(value) {
      try {
        return reference.parse(value);
      } catch (err) {
        try {
          return all.parse(value);
        } catch {
          throw err;
        }
      }
    },
    jsonSchema: () => all.jsonSchema(),
  };
}

// deno-lint-ignore no-slow-types
const U16 = unsigned("u16", { max: 65535n });

// deno-lint-ignore no-slow-types
const TerminalSize = object({ rows: U16, cols: U16 }, { name: "TerminalSize" });

/** A UTF-8 text file that capability discovery read. */
const CapabilityTextFile = object({ path: PathUri, contents: string() }, {
  name: "CapabilityTextFile",
});

/** Config or requirements layers of `environmentConfig/read`, lowest precedence first. */
const EnvironmentConfigLayerStack = object({
  layers: array(
    object({
      source: described(
        string(),
        "Where the layer comes from, such as `user (/root/.codex/config.toml)`.",
      ),
      baseDir: described(PathUri, "The directory the layer's relative paths are read against."),
      toml: described(string(), "The layer cut down to the requested key paths, as TOML."),
    }, { name: "EnvironmentConfigLayer" }),
  ),
  cloudInsertionIndex: described(unsigned(), "How many layers come below the cloud's layers."),
}, { name: "EnvironmentConfigLayerStack" });

/** What `capabilityRoots/discoverV1` found below one root. */
/** A plugin's manifest and the MCP and app configs it names, as text. */
const DiscoveredPluginFiles = object({
  manifest: CapabilityTextFile,
  mcpConfig: nullable(CapabilityTextFile),
  appsConfig: nullable(CapabilityTextFile),
}, { name: "DiscoveredPluginFiles" });

const CapabilityRootDiscovery = object({
  id: string(),
  path: PathUri,
  plugin: nullable(DiscoveredPluginFiles),
  skills: array(object({
    instructions: CapabilityTextFile,
    metadata: nullable(CapabilityTextFile),
  }, { name: "DiscoveredSkillFiles" })),
  namespaceManifests: array(CapabilityTextFile),
  warnings: array(string()),
  error: nullable(string()),
}, { name: "CapabilityRootDiscovery" });

const SkillToolDependency = object({
  type: string(),
  value: string(),
  description: nullable(string()),
  transport: nullable(string()),
  command: nullable(string()),
  url: nullable(string()),
  oauthCallbackPort: nullable(U16),
}, { name: "SkillToolDependency" });

/** The fields of a skill that `capabilities/discoverV2` reports, wherever it was found. */
const executorSkillFields = {
  name: described(string(), "Qualified by its plugin's namespace: `namespace:name`."),
  description: string(),
  shortDescription: nullable(string()),
  path: described(PathUri, "The skill's SKILL.md."),
} as const;
const skillPolicyFields = {
  dependencies: nullable(object({ tools: array(SkillToolDependency) }, {
    name: "SkillDependencies",
  })),
  policy: nullable(object({
    allowImplicitInvocation: nullable(boolean()),
    products: array(literal("codex", "chatgpt", "atlas")),
  }, { name: "SkillPolicy" })),
} as const;

const ExecutorPluginSkill = object({ ...executorSkillFields, ...skillPolicyFields }, {
  name: "ExecutorPluginSkill",
});

const ExecutorSkill = object({
  ...executorSkillFields,
  discoveryRoot: object({ id: string(), path: PathUri }, { name: "SkillDiscoveryRoot" }),
  ...skillPolicyFields,
}, { name: "ExecutorSkill" });

const ExecutorPlugin = object({
  id: described(string(), "`name@marketplace`."),
  displayName: string(),
  remotePluginId: nullable(string()),
  version: string(),
  root: PathUri,
  files: DiscoveredPluginFiles,
  skills: array(ExecutorPluginSkill),
}, { name: "ExecutorPlugin" });

// ---------------------------------------------------------------------------
// The table

/**
 * Every method and notification of the protocol, keyed by wire name.
 *
 * @example List the client requests
 * ```ts
 * import { METHODS } from "@exec-server/exec-server";
 * const requests = Object.entries(METHODS).filter(([, spec]) => spec.kind === "request");
 * console.log(requests.map(([name]) => name));
 * ```
 */
// The table's type is inferred on purpose: writing it out would be a second
// list of every method. Hence the no-slow-types exceptions here and above.
// deno-lint-ignore no-slow-types
export const METHODS = {
  "initialize": request(
    undefined,
    "Opens (or resumes) a session; must be the first request of a connection.",
    object({
      clientName: string(),
      resumeSessionId: optional(string()),
      extensions: optional(array(string())),
    }, { name: "InitializeParams" }),
    object({
      sessionId: string(),
      environmentInfo: EnvironmentInfo,
      extensions: optional(array(string())),
    }, { name: "InitializeResult" }),
  ),
  "initialized": notification(
    "clientToServer",
    "Sent by the client after a successful initialize response; params are ignored.",
    any(),
  ),
  "environment/info": request(
    "environment info",
    "Describes the executor: shell, paths, platform and capabilities.",
    unit(),
    EnvironmentInfo,
    "control",
  ),
  "environment/status": request(
    "environment status",
    "Cheap liveness check.",
    unit(),
    object({ status: literal("ready") }, { name: "EnvironmentStatus" }),
    "control",
  ),
  "protocol/describe": request(
    "environment info",
    "Extension protocolDescribe: the server's version, its extensions, the protocol's JSON Schema and what the server's own sandbox enforces.",
    unit(),
    object({
      version: string(),
      extensions: array(string()),
      schema: any(),
      sandbox: object({
        mode: literal("read-only", "workspace-write", "danger-full-access"),
        writableRoots: array(PathUri),
        denyRead: array(PathUri),
        networkAccess: boolean(),
        privateTmp: boolean(),
      }, {
        name: "ServerSandbox",
        description:
          "What the server's own --sandbox enforces on every process and fs call of every client",
      }),
    }, {
      name: "ProtocolDescription",
    }),
    "control",
  ),

  "process/start": request(
    "exec",
    "Starts a process in the session under a client-chosen id.",
    object({
      processId: described(string(), "Chosen by the client; unique among the session's processes."),
      argv: described(
        array(string()),
        "The program and its arguments; a program without / is looked up in the PATH of the child's environment.",
      ),
      cwd: described(PathUri, "The working directory."),
      envPolicy: described(
        optional(EnvPolicy),
        "Start from (part of) the server's environment; without it the child gets exactly env.",
      ),
      env: described(record(string()), "Variables set last, over envPolicy."),
      tty: described(boolean(), "Run on a pseudo-terminal (output stream pty)."),
      pipeStdin: described(
        defaulted(boolean()),
        "Give a pipe process a stdin pipe for process/write (default false: /dev/null).",
      ),
      arg0: described(optional(string()), "argv[0] as the program sees it."),
      sandbox,
      enforceManagedNetwork: defaulted(boolean()),
      managedNetwork: optional(any()),
      networkProxy: optional(any()),
      shellSnapshot: optional(any()),
      metadata: optional(object({
        threadId: uuid(),
        toolCallId: optional(string()),
      }, { name: "ExecMetadata" })),
      size: optional(TerminalSize),
      output: optional(literal("drop", "block")),
    }, { name: "WireExecParams" }),
    object({
      processId: string(),
      sandboxType: literal("none", "macosSeatbelt", "linuxSeccomp", "windowsRestrictedToken"),
    }, { name: "ExecResponse" }),
  ),
  "process/read": request(
    "exec",
    "Returns retained output after a seq, optionally long-polling for more.",
    object({
      processId: string(),
      afterSeq: described(optional(unsigned()), "Return events with a larger seq (default 0)."),
      maxBytes: described(
        optional(unsigned("usize")),
        "Stop adding chunks beyond this many bytes.",
      ),
      waitMs: described(
        optional(unsigned()),
        "Wait up to this many ms for something new before answering.",
      ),
    }, { name: "ReadParams" }),
    object({
      chunks: array(ProcessChunk),
      nextSeq: unsigned(),
      exited: boolean(),
      exitCode: nullable(signed("i32")),
      closed: boolean(),
      failure: nullable(string()),
      sandboxDenied: boolean(),
      evictedBytes: optional(unsigned()),
      signal: defaulted(nullable(string())),
    }, { name: "ReadResponse" }),
  ),
  "process/write": request(
    "exec",
    "Queues bytes for the process's stdin; a repeated writeId is written once.",
    object({
      processId: string(),
      chunk: bytes(),
      writeId: described(string(), "Chosen by the client; a repeated writeId is written once."),
      closeStdin: described(
        optional(boolean()),
        "Extension processStdinClose: close stdin after this chunk.",
      ),
    }, { name: "WriteParams" }),
    object({
      status: literal("accepted", "unknownProcess", "stdinClosed", "starting"),
    }, { name: "WriteResponse" }),
  ),
  "process/signal": request(
    "exec",
    "Sends a signal to the process group.",
    object({
      processId: string(),
      signal: signalName(),
    }, { name: "SignalParams" }),
    Empty,
    "control",
  ),
  "process/terminate": request(
    "exec",
    "Kills the process group (SIGKILL; with graceMs, SIGTERM first).",
    object({ processId: string(), graceMs: optional(unsigned()) }, { name: "TerminateParams" }),
    object({ running: boolean() }, { name: "TerminateResponse" }),
    "control",
  ),
  "process/resize": request(
    "exec",
    "Extension processResize: sets a tty process's terminal size (the child gets SIGWINCH).",
    object({ processId: string(), cols: U16, rows: U16 }, { name: "ResizeParams" }),
    Empty,
    "control",
  ),

  "fs/readFile": streamedRequest(
    "filesystem",
    "Reads a whole regular file (at most 512 MiB).",
    object({ path: PathUri, sandbox }, { name: "WireFsReadFileParams" }),
    object({ dataBase64: base64() }, { name: "FsReadFileResponse" }),
    "dataBase64",
  ),
  "fs/writeFile": request(
    "filesystem",
    "Creates or replaces a file with the given bytes (atomically, through a rename).",
    object({ path: PathUri, dataBase64: base64(), sandbox }, { name: "WireFsWriteFileParams" }),
    Empty,
  ),
  "fs/createDirectory": request(
    "filesystem",
    "Creates a directory, with parents unless recursive is false.",
    object({
      path: PathUri,
      recursive: described(optional(boolean()), "Create missing parents too (default true)."),
      sandbox,
    }, { name: "WireFsCreateDirectoryParams" }),
    Empty,
  ),
  "fs/getMetadata": request(
    "filesystem",
    "Returns type, size and times of a path.",
    object({ path: PathUri, sandbox }, { name: "WireFsGetMetadataParams" }),
    object({
      isDirectory: boolean(),
      isFile: boolean(),
      isSymlink: boolean(),
      size: unsigned(),
      createdAtMs: signed(),
      modifiedAtMs: signed(),
    }, { name: "FsGetMetadataResponse" }),
  ),
  "fs/canonicalize": request(
    "filesystem",
    "Resolves symlinks and dot segments of an existing path.",
    object({ path: PathUri, sandbox }, { name: "WireFsCanonicalizeParams" }),
    object({ path: PathUri }, { name: "FsCanonicalizeResponse" }),
  ),
  "fs/readDirectory": request(
    "filesystem",
    "Lists a directory's entries in readdir order.",
    object({ path: PathUri, sandbox }, { name: "WireFsReadDirectoryParams" }),
    object({
      entries: array(object({ fileName: string(), isDirectory: boolean(), isFile: boolean() }, {
        name: "FsDirectoryEntry",
      })),
    }, { name: "FsReadDirectoryResponse" }),
  ),
  "fs/walk": request(
    "filesystem",
    "Lists a directory tree breadth-first within limits.",
    object({ path: PathUri, options: WalkOptions, sandbox }, { name: "WireFsWalkParams" }),
    object({
      entries: array(object({ path: PathUri, kind: literal("file", "directory") }, {
        name: "FsWalkEntry",
      })),
      errors: array(object({ path: PathUri, message: string() }, { name: "FsWalkError" })),
      truncated: boolean(),
    }, { name: "FsWalkResponse" }),
  ),
  "fs/remove": request(
    "filesystem",
    "Removes a file, symlink or directory.",
    object({
      path: PathUri,
      recursive: described(
        optional(boolean()),
        "Remove a directory's contents too (default true).",
      ),
      force: described(optional(boolean()), "A missing path is no error (default true)."),
      sandbox,
    }, { name: "WireFsRemoveParams" }),
    Empty,
  ),
  "fs/copy": request(
    "filesystem",
    "Copies a file, symlink or (recursively) a directory.",
    object({
      sourcePath: PathUri,
      destinationPath: PathUri,
      recursive: boolean(),
      sandbox,
    }, { name: "WireFsCopyParams" }),
    Empty,
  ),
  "fs/open": request(
    "filesystem",
    "Opens a connection-scoped file handle for block reads or writes.",
    object({
      handleId: described(
        string(),
        "Chosen by the client (at most 32 bytes); scoped to the connection.",
      ),
      path: PathUri,
      mode: described(
        defaulted(literal("read", "replace")),
        "read (default), or replace: create or truncate for fs/writeBlock.",
      ),
      sandbox,
    }, { name: "WireFsOpenParams" }),
    object({ handleId: string() }, { name: "FsOpenResponse" }),
  ),
  "fs/readBlock": request(
    "filesystem",
    "Reads up to len bytes at an offset of an open handle.",
    object({
      handleId: string(),
      offset: described(unsigned(), "Byte offset in the file."),
      len: described(unsigned("usize"), "Bytes to read, 1 to 1048576."),
    }, { name: "FsReadBlockParams" }),
    object({ chunk: base64(), eof: boolean() }, { name: "FsReadBlockResponse" }),
  ),
  "fs/writeBlock": request(
    "filesystem",
    "Writes bytes at an offset of a handle opened with mode replace.",
    object({ handleId: string(), offset: unsigned(), chunk: bytes() }, {
      name: "FsWriteBlockParams",
    }),
    Empty,
  ),
  "fs/close": request(
    "filesystem",
    "Closes a file handle; closing an unknown handle succeeds.",
    object({ handleId: string() }, { name: "FsCloseParams" }),
    Empty,
    "control",
  ),
  "fs/watchMissing": request(
    "filesystem",
    "Notifies once when one of the given missing paths (or an ancestor) appears.",
    object({
      watchId: described(
        unsigned("u64", { exact: true }),
        "Chosen by the client; echoed in fs/missingChanged.",
      ),
      missing: described(array(PathUri), "Paths that do not exist yet (at most 64 distinct ones)."),
    }, { name: "FsWatchMissingParams" }),
    object({ watching: boolean() }, { name: "FsWatchMissingResponse" }),
  ),

  "http/request": streamedRequest(
    "http",
    "Performs an HTTP request from the server, buffered or streamed.",
    object({
      method: described(string(), "The HTTP method, sent as given."),
      url: described(string(), "An absolute http: or https: URL."),
      headers: described(defaulted(array(HttpHeader)), "Request headers, in order."),
      bodyBase64: described(optional(bytes()), "The request body."),
      timeoutMs: described(
        optional(unsigned()),
        "Give up after this many ms (default: no timeout).",
      ),
      redirectPolicy: described(
        optional(literal("follow", "stop")),
        "Follow redirects (default) or not.",
      ),
      requestId: described(
        string(),
        "Chosen by the client; names the http/request/bodyDelta stream.",
      ),
      streamResponse: described(
        defaulted(boolean()),
        "Send the body as http/request/bodyDelta notifications instead of in the result.",
      ),
    }, { name: "HttpRequestParams" }),
    object(
      {
        status: U16,
        headers: array(ResponseHeader),
        bodyBase64: base64(),
      },
      {
        name: "HttpRequestResponse",
      },
    ),
    "bodyBase64",
  ),

  "capabilityRoots/discoverV1": request(
    "capability discovery",
    "Codex-specific: finds the plugin manifests, MCP and app configs and skills below each root (with each root's sandbox) and returns their text, root by root in request order; a root's failure is its own `error`.",
    object({
      roots: array(
        object({ id: string(), path: PathUri, sandbox }, { name: "CapabilityRootDiscoverRequest" }),
      ),
    }, { name: "WireCapabilityRootsDiscoverParams" }),
    object({ roots: array(CapabilityRootDiscovery) }, { name: "CapabilityRootsDiscoverResponse" }),
  ),
  "capabilities/discoverV2": request(
    "capability discovery",
    "Codex-specific: the Codex plugins installed on this machine (`$CODEX_HOME/plugins/cache`, each at its active version) with their skills, and the skills of `$CODEX_HOME/skills`, `~/.agents/skills` and `/etc/codex/skills`, read with the request's sandbox; what cannot be read is left out with a warning.",
    object({ cwd: PathUri, sandbox }, { name: "WireCapabilitiesDiscoverParams" }),
    object({
      plugins: array(ExecutorPlugin),
      skills: described(array(ExecutorSkill), "Skills outside installed plugins."),
      warnings: array(string()),
    }, { name: "CapabilitiesDiscoverResponse" }),
  ),
  "environmentConfig/read": request(
    "environment config",
    "Codex-specific: this machine's Codex config and requirements layers for `cwd` (system, user, trusted project, managed), lowest precedence first, each cut down to the requested key paths and written as TOML.",
    object({
      cwd: PathUri,
      configPaths: described(
        array(array(string())),
        'Config key paths to read (each a list of keys, such as ["features"]).',
      ),
      requirementsPaths: described(array(array(string())), "Requirements key paths to read."),
    }, { name: "EnvironmentConfigReadParams" }),
    object({
      userHomeDir: nullable(PathUri),
      codexHomeDir: PathUri,
      hostname: nullable(string()),
      config: EnvironmentConfigLayerStack,
      requirements: EnvironmentConfigLayerStack,
    }, { name: "EnvironmentConfigReadResponse" }),
  ),

  "process/output": notification(
    "serverToClient",
    "A chunk of process output.",
    object({ processId: string(), seq: unsigned(), stream: OutputStream, chunk: base64() }, {
      name: "ProcessOutputNotification",
    }),
  ),
  "process/exited": notification(
    "serverToClient",
    "The process's exit status was collected.",
    object({
      processId: string(),
      seq: unsigned(),
      exitCode: signed("i32"),
      sandboxDenied: boolean(),
      signal: defaulted(nullable(string())),
    }, { name: "ProcessExitedNotification" }),
  ),
  "process/closed": notification(
    "serverToClient",
    "Exit collected and all output streams ended; the last event of a process.",
    object({ processId: string(), seq: unsigned() }, { name: "ProcessClosedNotification" }),
  ),
  "http/request/bodyDelta": notification(
    "serverToClient",
    "A piece of a streamed HTTP response body.",
    object({
      requestId: string(),
      seq: unsigned(),
      deltaBase64: base64(),
      done: boolean(),
      error: nullable(string()),
    }, { name: "HttpRequestBodyDelta" }),
  ),
  "fs/missingChanged": notification(
    "serverToClient",
    "A watched missing path (or an ancestor of it) appeared.",
    object({ watchId: unsigned() }, { name: "FsMissingChangedNotification" }),
  ),
} as const;

/** The method table's type. */
export type Methods = typeof METHODS;
/** Every wire name in the table. */
export type MethodName = keyof Methods;

/** Names of client -> server requests. */
export type ClientRequestName = {
  [K in MethodName]: Methods[K] extends RequestSpec<unknown, unknown> ? K : never;
}[MethodName];

/** Names of server -> client notifications. */
export type ServerNotificationName = {
  [K in MethodName]: Methods[K] extends { kind: "notification"; direction: "serverToClient" } ? K
    : never;
}[MethodName];

/** The params type of a method or notification. */
export type ParamsOf<M extends MethodName> = Infer<Methods[M]["params"]>;

/** The result type of a request. */
export type ResultOf<M extends ClientRequestName> = Methods[M] extends RequestSpec<unknown, infer R>
  ? R
  : never;

/**
 * What a handler of a request returns: its result, where the member the table marks
 * `streamed` may instead be a {@linkcode StreamedString} made while the reply is sent.
 */
export type ReplyOf<M extends ClientRequestName> = Methods[M] extends
  { readonly streamed: infer F extends string }
  ? { [K in keyof ResultOf<M>]: K extends F ? ResultOf<M>[K] | StreamedString : ResultOf<M>[K] }
  : ResultOf<M>;

/** Looks up a method by wire name; `undefined` for unknown names (including `__proto__`). */
export function lookupMethod(
  name: string,
): RequestSpec<unknown, unknown> | NotificationSpec<unknown> | undefined {
  return Object.hasOwn(METHODS, name)
    ? (METHODS as Record<string, RequestSpec<unknown, unknown> | NotificationSpec<unknown>>)[name]
    : undefined;
}

/** Type of one parsed entry of the table. */
export type MethodSpec = RequestSpec<unknown, unknown> | NotificationSpec<unknown>;
