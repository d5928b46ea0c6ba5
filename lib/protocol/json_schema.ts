/**
 * The JSON Schema document of the whole protocol (draft 2020-12), derived
 * from the method table, for client authors in any language.
 *
 * Layout: the document itself validates any message of the protocol (a
 * client request, a notification, a response or an error response).
 * `$defs` holds one entry per method — `request:<method>`,
 * `result:<method>`, `notification:<method>` — plus the envelope
 * (`RequestId`, `Response`, `ErrorResponse`, `Error`, `ErrorData`,
 * `ErrorKind`) and every named type, shared by `$ref` (e.g. `PathUri`, a
 * `file:` URI, and `Base64`, the one byte encoding).
 *
 * @module
 */

import { ERROR_KINDS, ErrorCode } from "./errors.ts";
import { METHODS, type MethodSpec } from "./methods.ts";
import { exactInteger, type JsonSchema, MEMBER_DESCRIPTION } from "./schema.ts";

const REF = (name: string): JsonSchema => ({ $ref: `#/$defs/${name.replaceAll("/", "~1")}` });

const CODE_DESCRIPTIONS: Record<keyof typeof ErrorCode, string> = {
  InvalidRequest:
    "Malformed message (id -1), handshake gating, unknown session or process, fs preconditions.",
  MethodNotFound: "Unknown method.",
  InvalidParams: "Params that do not decode (data.field names the member), or bad values.",
  InternalError: "OS errors, spawn failures, HTTP transport failures.",
  NotFound: "A path or a file handle that does not exist.",
  SessionAlreadyAttached: "initialize tried to resume a session another connection holds.",
};

/** Collects named fragments (those with a `title`) into `$defs`, replacing them by `$ref`s. */
function hoister(defs: Record<string, JsonSchema>): (schema: unknown) => unknown {
  const hoist = (schema: unknown): unknown => {
    if (Array.isArray(schema)) return schema.map(hoist);
    if (schema === null || typeof schema !== "object") return schema;
    if (Object.hasOwn(schema, "rawJSON")) return schema; // An exact integer.
    const fragment = schema as JsonSchema & { [MEMBER_DESCRIPTION]?: string };
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(fragment)) out[key] = hoist(value);
    const member = fragment[MEMBER_DESCRIPTION];
    if (typeof out.title !== "string") {
      if (member !== undefined) out.description = member;
      return out;
    }
    const name = out.title;
    const known = defs[name];
    if (known !== undefined && JSON.stringify(known) !== JSON.stringify(out)) {
      throw new Error(`Two different schemas are named ${name}`);
    }
    defs[name] = out;
    return member === undefined ? REF(name) : { ...REF(name), description: member };
  };
  return hoist;
}

function envelope(): Record<string, JsonSchema> {
  const kinds = Object.entries(ERROR_KINDS).map(([kind, { codes, description }]) => ({
    const: kind,
    description: `${description} (codes ${codes.join(", ")})`,
  }));
  return {
    RequestId: {
      description:
        "A request id: an integer in the signed 64-bit range or a string; the answer carries the same id (-1 for messages that could not be parsed).",
      anyOf: [
        {
          type: "integer",
          minimum: exactInteger(-(2n ** 63n)),
          maximum: exactInteger(2n ** 63n - 1n),
        },
        { type: "string" },
      ],
    },
    Response: {
      type: "object",
      description:
        "A successful answer; its result is described by result:<method> of the request with this id.",
      properties: { id: REF("RequestId"), result: {} },
      required: ["id", "result"],
    },
    ErrorResponse: {
      type: "object",
      description: "A failed answer.",
      properties: { id: REF("RequestId"), error: REF("Error") },
      required: ["id", "error"],
    },
    Error: {
      type: "object",
      description:
        "Tell conditions apart by code and data.kind, never by the message (its text follows the reference server and may change).",
      properties: {
        code: {
          type: "integer",
          oneOf: Object.entries(ErrorCode).map(([name, code]) => ({
            const: code,
            description: `${name}: ${CODE_DESCRIPTIONS[name as keyof typeof ErrorCode]}`,
          })),
        },
        message: { type: "string" },
        data: REF("ErrorData"),
      },
      required: ["code", "message"],
    },
    ErrorData: {
      description: "Structured detail of an error, present only where listed here.",
      oneOf: [
        {
          type: "object",
          properties: {
            kind: REF("ErrorKind"),
            errno: { type: "string", description: "kind osError: the POSIX name, e.g. EEXIST." },
            permission: {
              type: "string",
              enum: ["read", "write", "net", "run", "env"],
              description: "kind permissionDenied: the Deno permission the server lacks.",
            },
            resource: { type: "string", description: "kind permissionDenied: what was refused." },
            flag: {
              type: "string",
              description: "kind permissionDenied: the flag that grants it.",
            },
          },
          required: ["kind"],
        },
        {
          type: "object",
          description: "code -32602: the member whose value did not decode.",
          properties: {
            field: { type: "string", description: "Dotted path, e.g. options.maxDepth." },
          },
          required: ["field"],
        },
      ],
    },
    ErrorKind: { type: "string", oneOf: kinds },
  };
}

function methodDescription(name: string, spec: MethodSpec): string {
  if (spec.kind === "notification") {
    const who = spec.direction === "serverToClient" ? "server → client" : "client → server";
    return `${spec.doc} (${who} notification)`;
  }
  const gate = spec.family ? `gating family "${spec.family}", ` : "";
  return `${spec.doc} (client → server request; ${gate}lane ${spec.lane}; result: result:${name})`;
}

/**
 * Builds the protocol's JSON Schema (draft 2020-12).
 *
 * @example Look up the params of a method
 * ```ts
 * import { protocolJsonSchema } from "@exec-server/exec-server";
 * const defs = protocolJsonSchema().$defs as Record<string, { properties?: object }>;
 * console.log(Object.keys(defs["request:process/start"]!.properties!)); // ["id", "method", "params"]
 * ```
 */
export function protocolJsonSchema(): JsonSchema {
  const defs: Record<string, JsonSchema> = envelope();
  const hoist = hoister(defs);
  const groups = { ClientRequest: [], ClientNotification: [], ServerNotification: [] } as Record<
    string,
    JsonSchema[]
  >;
  for (const [name, spec] of Object.entries(METHODS) as [string, MethodSpec][]) {
    const params = hoist(spec.params.jsonSchema()) as JsonSchema;
    const needsParams = !spec.params.optional && params.type === "object";
    const description = methodDescription(name, spec);
    if (spec.kind === "request") {
      defs[`request:${name}`] = {
        type: "object",
        description,
        properties: { id: REF("RequestId"), method: { const: name }, params },
        required: needsParams ? ["id", "method", "params"] : ["id", "method"],
      };
      defs[`result:${name}`] = {
        description: `The result of ${name}.`,
        allOf: [hoist(spec.result.jsonSchema())],
      };
      groups.ClientRequest!.push(REF(`request:${name}`));
    } else {
      defs[`notification:${name}`] = {
        type: "object",
        description,
        properties: { method: { const: name }, params },
        required: needsParams ? ["method", "params"] : ["method"],
      };
      const group = spec.direction === "serverToClient"
        ? "ServerNotification"
        : "ClientNotification";
      groups[group]!.push(REF(`notification:${name}`));
    }
  }
  defs.ClientRequest = { description: "Any client → server request.", oneOf: groups.ClientRequest };
  defs.ClientNotification = {
    description: "Any client → server notification.",
    oneOf: groups.ClientNotification,
  };
  defs.ServerNotification = {
    description: "Any server → client notification.",
    oneOf: groups.ServerNotification,
  };
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "Codex exec-server protocol",
    description:
      "One JSON-RPC 2.0 message without the jsonrpc member (one line over stdio, one text frame over WebSocket). Per method: $defs/request:<method> with $defs/result:<method>, or $defs/notification:<method>. Generated from lib/protocol/methods.ts.",
    oneOf: [
      REF("ClientRequest"),
      REF("ClientNotification"),
      REF("ServerNotification"),
      REF("Response"),
      REF("ErrorResponse"),
    ],
    $defs: defs,
  };
}

/** The schema as committed in `schema/protocol.json` (stable formatting). */
export function protocolJsonSchemaText(): string {
  return JSON.stringify(protocolJsonSchema(), null, 2) + "\n";
}

if (import.meta.main) {
  const path = new URL("../../schema/protocol.json", import.meta.url);
  await Deno.mkdir(new URL(".", path), { recursive: true });
  await Deno.writeTextFile(path, protocolJsonSchemaText());
  console.log(`wrote ${path.pathname}`);
}
