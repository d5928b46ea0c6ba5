/**
 * Tool arguments derived from the method table. A tool that maps to one
 * method declares, for every member of that method's params, whether it
 * takes it (with the method's JSON Schema and description), takes it under
 * another name or shape, or leaves it out; a member added to the method
 * table and not declared here fails to compile. From that declaration come
 * the tool's JSON Schema members and the conversion of the tool's arguments
 * to the method's params.
 *
 * Members the method table types as `PathUri` become a plain path argument
 * (an absolute path, a `file:` URI, or a path relative to the server's
 * working directory) and are converted to the URI on the way.
 *
 * @module
 */

import { type ClientRequestName, METHODS, type ParamsOf } from "../protocol/methods.ts";
import { type JsonSchema, MEMBER_DESCRIPTION } from "../protocol/schema.ts";

/** What a tool does with one member of its method's params. */
export type MemberUse<A> =
  | "omit"
  | "take"
  | {
    /** The argument's name, when it differs from the member's. */
    readonly as?: string;
    /** The argument's JSON Schema, replacing the method's. */
    readonly schema?: JsonSchema;
    /** The argument's description, replacing the method's. */
    readonly description?: string;
    /** The argument is optional even where the member is required (the tool fills it in). */
    readonly optional?: true;
    /** Converts the argument to the member's wire value (default: as given). */
    readonly to?: (value: unknown, args: A, context: ArgumentContext) => unknown;
  };

/** Every member of a method's params, each with its use: none may be left undeclared. */
export type MemberPlan<M extends ClientRequestName, A> = {
  readonly [K in keyof NonNullable<ParamsOf<M>>]-?: MemberUse<A>;
};

/** What converting arguments needs from the connection. */
export interface ArgumentContext {
  /** A path argument as the protocol's `file:` URI. */
  resolvePath(path: string): string;
}

/** The members of a tool's input schema that come from its method. */
export interface DerivedArguments<A, M extends ClientRequestName = ClientRequestName> {
  /** The method. */
  readonly method: M;
  /** The arguments' JSON Schemas, by argument name. */
  readonly properties: Readonly<Record<string, JsonSchema>>;
  /** The required arguments. */
  readonly required: readonly string[];
  /** Builds the method's params from the arguments (members left out are absent). */
  params(args: A, context: ArgumentContext): Record<string, unknown>;
}

/** The JSON Schema of a path argument. */
export const PATH_ARGUMENT: JsonSchema = {
  type: "string",
  minLength: 1,
  description:
    "A path on the server: absolute (/srv/app/main.ts), a file: URI, or relative to the server's working directory.",
};

/**
 * A JSON Schema fragment of the method table as plain JSON: member
 * descriptions as `description`, exact integers as numbers, no symbols.
 *
 * @param fragment A fragment from `Schema.jsonSchema()`.
 */
function plain(fragment: JsonSchema): JsonSchema {
  const copy = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(copy);
    if (value === null || typeof value !== "object") return value;
    if (Object.hasOwn(value, "rawJSON")) return JSON.parse(JSON.stringify(value));
    const source = value as JsonSchema & { [MEMBER_DESCRIPTION]?: string };
    const out: JsonSchema = {};
    for (const [key, member] of Object.entries(source)) out[key] = copy(member);
    const description = source[MEMBER_DESCRIPTION];
    if (description !== undefined) out.description = description;
    return out;
  };
  return copy(fragment) as JsonSchema;
}

/** A member's schema without the `null` a params member may be (an argument is just absent). */
function withoutNull(schema: JsonSchema): JsonSchema {
  const alternatives = schema.anyOf;
  if (!Array.isArray(alternatives) || alternatives.length !== 2) return schema;
  const rest = (alternatives as JsonSchema[]).filter((s) => s.type !== "null");
  if (rest.length !== 1) return schema;
  const { anyOf: _, ...outer } = schema;
  return { ...rest[0], ...outer };
}

/**
 * Derives a tool's arguments from one method of the method table.
 *
 * @example The arguments of a tool on `fs/getMetadata`
 * ```ts
 * import { deriveArguments } from "./tool_schema.ts";
 * const derived = deriveArguments("fs/getMetadata", { path: "take", sandbox: "omit" });
 * console.log(derived.required); // ["path"]
 * console.log(derived.params({ path: "/etc" }, { resolvePath: (p) => `file://${p}` }));
 * // { path: "file:///etc" }
 * ```
 *
 * @param method The method's wire name.
 * @param plan What the tool does with each member.
 * @returns The JSON Schema members and the conversion to params.
 */
export function deriveArguments<M extends ClientRequestName, A = Record<string, unknown>>(
  method: M,
  plan: MemberPlan<M, A>,
): DerivedArguments<A, M> {
  const params = plain(METHODS[method].params.jsonSchema());
  const members = (params.properties ?? {}) as Record<string, JsonSchema>;
  const memberRequired = new Set((params.required ?? []) as string[]);
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  type Convert = (value: unknown, args: A, context: ArgumentContext) => unknown;
  const conversions: [wire: string, argument: string, to: Convert | undefined][] = [];
  for (const [member, use] of Object.entries(plan) as [string, MemberUse<A>][]) {
    const declared = members[member];
    if (declared === undefined) throw new Error(`${method} has no member ${member}`);
    if (use === "omit") continue;
    const custom = use === "take" ? undefined : use;
    const name = custom?.as ?? member;
    const isPath = declared.title === "PathUri" && custom?.schema === undefined;
    const base = custom?.schema ?? (isPath ? PATH_ARGUMENT : withoutNull(declared));
    const description = custom?.description ?? (isPath ? undefined : declared.description);
    properties[name] = description === undefined ? base : { ...base, description };
    if (memberRequired.has(member) && custom?.optional !== true) required.push(name);
    conversions.push([member, name, custom?.to ?? (isPath ? pathTo : undefined)]);
  }
  return {
    method,
    properties,
    required,
    params(args, context) {
      const out: Record<string, unknown> = {};
      for (const [wire, argument, to] of conversions) {
        const value = (args as Record<string, unknown>)[argument];
        if (value === undefined) continue;
        out[wire] = to ? to(value, args, context) : value;
      }
      return out;
    },
  };
}

function pathTo(value: unknown, _args: unknown, context: ArgumentContext): string {
  return context.resolvePath(value as string);
}

/** Options of {@linkcode inputSchema}. */
export interface InputSchemaParts<A> {
  /** The arguments that come from the tool's method. */
  readonly derived?: DerivedArguments<A>;
  /** The tool's own arguments. */
  readonly extra?: Readonly<Record<string, JsonSchema>>;
  /** Which of the tool's own arguments are required. */
  readonly extraRequired?: readonly string[];
}

/**
 * A tool's `inputSchema`: an object of the derived and the tool's own
 * arguments, no others (JSON Schema 2020-12).
 *
 * @example
 * ```ts
 * import { inputSchema } from "./tool_schema.ts";
 * const schema = inputSchema({ extra: { id: { type: "string" } }, extraRequired: ["id"] });
 * console.log(schema.required, schema.additionalProperties); // ["id"] false
 * ```
 *
 * @param parts The derived arguments and the tool's own.
 */
export function inputSchema<A>(parts: InputSchemaParts<A>): JsonSchema & { type: "object" } {
  const properties = { ...parts.derived?.properties, ...parts.extra };
  const required = [...(parts.derived?.required ?? []), ...(parts.extraRequired ?? [])];
  return {
    type: "object",
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}
