/**
 * A client for exec-server, the Codex exec-server protocol for Deno: run
 * processes and use files on a machine that runs `exec-server`, over
 * WebSocket (`ws://`, `wss://`) or the stdio pipes of a server it spawns.
 *
 * Start with {@linkcode connect}. Every request of the protocol's method
 * table is then typed on `client.methods`; server notifications are typed
 * subscriptions (`client.on`). The method table ({@linkcode METHODS}), its
 * JSON Schema and the error codes and kinds are exported for programs that
 * talk the protocol themselves.
 *
 * @example Run a command on a server
 * ```ts
 * import { connect } from "@exec-server/exec-server";
 * import { serveWebSocket } from "@exec-server/exec-server/server";
 *
 * // A server in this process, on 127.0.0.1 and a free port (normally it runs elsewhere).
 * const server = await serveWebSocket();
 * try {
 *   await using client = await connect(server.url);
 *   const proc = await client.startProcess({ argv: ["/bin/echo", "hello"] });
 *   let text = "";
 *   for await (const chunk of proc.text()) text += chunk;
 *   console.log(text, await proc.exited); // "hello\n" 0
 * } finally {
 *   await server.shutdown();
 * }
 * ```
 *
 * @module
 */

export {
  type AttachProcessOptions,
  connect,
  type ConnectOptions,
  createClient,
  ExecClient,
  type NotificationListener,
  type NotificationName,
} from "./lib/client/client.ts";
export type {
  ByteInput,
  RequestArgs,
  RequestMethods,
  RequestOptions,
  RequestParams,
  SessionRequestName,
  StartProcessParams,
} from "./lib/client/request_types.ts";
export type {
  DialCredentials,
  ServerTarget,
  StdioCommand,
  StreamTarget,
  TokenSource,
} from "./lib/client/dial.ts";
export type { SessionLinkOptions } from "./lib/client/session_link.ts";
export {
  DEFAULT_MAX_OUTPUT_BYTES,
  type ExecOptions,
  ExecOutputLimitError,
  ExecOutputLostError,
  type ExecResult,
  ExecTimeoutError,
} from "./lib/client/exec.ts";
export {
  type EnvironmentOptions,
  type EnvPolicy,
  INHERIT_SERVER_ENVIRONMENT,
} from "./lib/client/environment.ts";
export { fromPathUri, type RemotePath, toPathUri } from "./lib/client/paths.ts";
export {
  type DirEntry,
  type FileInfo,
  type FsHost,
  type OpenOptions,
  type RemoteFile,
  RemoteFs,
} from "./lib/client/fs.ts";
export {
  AlreadyExistsError,
  DirectoryNotEmptyError,
  FsError,
  fsErrorOf,
  IsADirectoryError,
  NotADirectoryError,
  NotFoundError,
  PermissionDeniedError,
} from "./lib/client/fs_errors.ts";
export { tokenFromEnv, tokenFromFile } from "./lib/client/token_source.ts";
export type {
  OutputChunk,
  OutputGap,
  OutputStreamName,
  ProcessEvent,
  ProcessHandle,
} from "./lib/client/process_handle.ts";
export { ConnectError, SessionLostError } from "./lib/client/errors.ts";
export {
  AtCapacityError,
  ClosedError,
  MessageTooLargeError,
  RemoteError,
  TimedOutError,
} from "./lib/rpc/connection.ts";
export {
  ERROR_KINDS,
  ErrorCode,
  type ErrorCodeValue,
  type ErrorKind,
  errorKind,
  type WireError,
} from "./lib/protocol/errors.ts";
export {
  type ClientRequestName,
  type Direction,
  type EnvironmentInfo,
  type ExtensionName,
  EXTENSIONS,
  type Family,
  type MethodName,
  METHODS,
  type Methods,
  type MethodSpec,
  type NotificationSpec,
  type ParamsOf,
  PROCESS_SIGNALS,
  type RequestSpec,
  type ResultOf,
  type ServerNotificationName,
  type SignalName,
} from "./lib/protocol/methods.ts";
export { type Infer, type JsonSchema, type Schema, SchemaError } from "./lib/protocol/schema.ts";
export { protocolJsonSchema } from "./lib/protocol/json_schema.ts";
