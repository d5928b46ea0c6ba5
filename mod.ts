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

export { ErrorCode, type ErrorCodeValue, RpcError, type RpcErrorOptions, type WireError } from "./lib/protocol/errors.ts";
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
  type Family,
  METHODS,
  type MethodName,
  type Methods,
  type MethodSpec,
  type NotificationSpec,
  type ParamsOf,
  type RequestSpec,
  type ResultOf,
  type ServerNotificationName,
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
  TimedOutError,
} from "./lib/rpc/connection.ts";
export type { Inbound, Transport, TransportFault } from "./lib/rpc/transport.ts";
export { stdioTransport, type StdioTransportOptions } from "./lib/rpc/stdio_transport.ts";
export {
  websocketTransport,
  type WebSocketTransportOptions,
} from "./lib/rpc/websocket_transport.ts";
