/**
 * The server's handler for every client request of the method table. The
 * type {@linkcode Handlers} is derived from the table, so a method without a
 * handler (or a handler without a method) does not compile.
 *
 * @module
 */

import {
  type ClientRequestName,
  lookupMethod,
  METHODS,
  type ParamsOf,
  type ReplyOf,
  type ResultOf,
} from "../../protocol/methods.ts";
import type { JsonSchema } from "../../protocol/schema.ts";
import { environmentInfo, grantExtensions, supportedExtensions, VERSION } from "./environment.ts";
import type { FsMethod, FsRunner } from "../fs/operations.ts";
import { uriFromPath } from "../host/path_uri.ts";
import { describeServerSandbox } from "../sandbox/server_policy.ts";
import type { Session } from "./registry.ts";
import type { ConnectionState } from "./connection_state.ts";

/** What a handler can reach: its connection's state and its session. */
export interface HandlerContext {
  /** The attached session (handlers other than `initialize` run only once there is one). */
  readonly session: Session;
  /** Creates or resumes the session for this connection. */
  initialize(params: ParamsOf<"initialize">): ResultOf<"initialize">;
  /** This connection's fs and http state, made with its first fs or http request. */
  readonly state: ConnectionState;
}

/** One handler per client request of the method table (a streamed member may be made while it is sent). */
export type Handlers = {
  [M in ClientRequestName]: (
    params: ParamsOf<M>,
    context: HandlerContext,
  ) => ReplyOf<M> | Promise<ReplyOf<M>>;
};

/**
 * Runs a subsystem above fs that loads on first use (capability discovery, the Codex config):
 * its module and this connection's fs services are loaded together, and it gets the fs
 * operations table as its runner.
 */
async function withFsRunner<M, R>(
  ctx: HandlerContext,
  module: Promise<M>,
  call: (module: M, run: FsRunner) => R | Promise<R>,
): Promise<R> {
  const [fs, loaded] = await Promise.all([ctx.state.fs(), module]);
  return await call(loaded, (method, fsParams) => fs.run(method, fsParams, fs.context));
}

let schema: Promise<JsonSchema> | undefined;

/**
 * The protocol's JSON Schema, built on first use (it is derived from the whole method table);
 * its module loads with the first `protocol/describe`.
 */
function describedSchema(): Promise<JsonSchema> {
  schema ??= import("../../protocol/json_schema.ts").then((m) => m.protocolJsonSchema());
  return schema;
}

/**
 * The `fs/*` handlers, one per `fs/` request of the method table: each runs its entry of the fs
 * operations table (`fs/operations.ts`, loaded with the first fs request).
 */
function fsHandlers(): Pick<Handlers, FsMethod> {
  const handlers: Partial<Record<FsMethod, unknown>> = {};
  for (const method of Object.keys(METHODS) as FsMethod[]) {
    const spec = lookupMethod(method);
    if (!method.startsWith("fs/") || spec?.kind !== "request") continue;
    if (spec.direction !== "clientToServer") continue;
    handlers[method] = (params: ParamsOf<FsMethod>, context: HandlerContext) => {
      const fs = context.state.fs();
      return fs instanceof Promise
        ? fs.then((loaded) => loaded.run(method, params, loaded.context))
        : fs.run(method, params, fs.context);
    };
  }
  return handlers as Pick<Handlers, FsMethod>;
}

/** The handlers, keyed by wire name. */
export const HANDLERS: Handlers = {
  "initialize": (params, ctx) => {
    const result = ctx.initialize(params);
    // A client that does not ask for extensions gets none, and the reference's result shape.
    const granted = params.extensions === undefined ? [] : grantExtensions(params.extensions);
    ctx.session.processes.extensions = new Set(granted);
    return params.extensions === undefined ? result : { ...result, extensions: granted };
  },
  "environment/info": () => environmentInfo(),
  "environment/status": () => ({ status: "ready" }),
  "protocol/describe": async () => {
    const sandbox = describeServerSandbox();
    return {
      version: VERSION,
      extensions: supportedExtensions(),
      schema: await describedSchema(),
      sandbox: {
        ...sandbox,
        writableRoots: sandbox.writableRoots.map(uriFromPath),
        denyRead: sandbox.denyRead.map(uriFromPath),
      },
    };
  },

  "process/start": (params, ctx) => ctx.session.processes.start(params),
  "process/read": (params, ctx) => ctx.session.processes.read(params),
  "process/write": (params, ctx) => ctx.session.processes.write(params),
  "process/signal": (params, ctx) => ctx.session.processes.signal(params),
  "process/terminate": (params, ctx) => ctx.session.processes.terminate(params),
  "process/resize": (params, ctx) => ctx.session.processes.resize(params),

  ...fsHandlers(),

  "http/request": (params, ctx) => {
    const http = ctx.state.http();
    return http instanceof Promise
      ? http.then((loaded) => loaded.request(params))
      : http.request(params);
  },

  "capabilityRoots/discoverV1": (params, ctx) =>
    withFsRunner(
      ctx,
      import("../capabilities/discover.ts"),
      (module, run) => module.discoverCapabilityRoots(params, run),
    ),
  "capabilities/discoverV2": (params, ctx) =>
    withFsRunner(
      ctx,
      import("../capabilities/discover_v2.ts"),
      (module, run) => module.discoverCapabilities(params, run),
    ),
  "environmentConfig/read": (params, ctx) =>
    withFsRunner(
      ctx,
      import("../codex_config/environment_config.ts"),
      (module, run) => module.readEnvironmentConfig(params, run),
    ),
};
