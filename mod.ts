/**
 * exec-server: the Codex exec-server protocol for Deno — its wire types, the
 * method table, a bounded JSON decoder and a symmetric JSON-RPC connection.
 *
 * @example Talk to a server over stdio
 * ```ts ignore
 * import { Connection, stdioTransport } from "./mod.ts";
 * const child = new Deno.Command("exec-server", { args: ["--listen", "stdio"], stdin: "piped", stdout: "piped" }).spawn();
 * const rpc = new Connection(stdioTransport(child.stdout, child.stdin));
 * console.log(await rpc.call("initialize", { clientName: "example" }));
 * ```
 *
 * @module
 */

export {
  ErrorCode,
  type ErrorCodeValue,
  RpcError,
  type RpcErrorOptions,
  type WireError,
} from "./lib/protocol/errors.ts";
export {
  classifyMessage,
  decodeMessage,
  encodeMessage,
  EnvelopeError,
  type ErrorMessage,
  type Message,
  type NotificationMessage,
  type RequestId,
  type RequestMessage,
  type ResponseMessage,
} from "./lib/protocol/envelope.ts";
export {
  decodeJson,
  type DecodeJsonOptions,
  JsonDecodeError,
  JsonFloat,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
} from "./lib/protocol/json_decode.ts";
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
export {
  AtCapacityError,
  type CallOptions,
  ClosedError,
  Connection,
  type ConnectionHandlers,
  type ConnectionOptions,
  RemoteError,
  type Schedule,
  TimedOutError,
} from "./lib/rpc/connection.ts";
export type { Inbound, Transport, TransportFault } from "./lib/rpc/transport.ts";
export {
  type LineSplitOptions,
  LineSplitStream,
  stdioTransport,
  type StdioTransportOptions,
} from "./lib/rpc/stdio_transport.ts";
export { Semaphore } from "./lib/rpc/semaphore.ts";
export {
  websocketTransport,
  type WebSocketTransportOptions,
} from "./lib/rpc/websocket_transport.ts";
export {
  type AttachProcessOptions,
  connect,
  type ConnectOptions,
  createClient,
  ExecClient,
  type NotificationListener,
  type NotificationName,
  type RequestArgs,
  type RequestMethods,
  type RequestOptions,
  type SessionRequestName,
  type StartProcessParams,
  type StdioCommand,
} from "./lib/client/client.ts";
export { ConnectError, SessionLostError } from "./lib/client/errors.ts";
export type {
  OutputChunk,
  OutputGap,
  OutputStreamName,
  ProcessEvent,
  ProcessHandle,
} from "./lib/client/process_handle.ts";
