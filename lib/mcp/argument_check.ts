/**
 * Checks tool arguments against the tool's input schema, with a JSON Schema
 * validator in strict mode (the same check `schema/protocol.json` passes):
 * a schema that is not valid JSON Schema fails when it is compiled, and
 * arguments that do not match get one line naming each mismatch.
 *
 * @module
 */

// A full specifier (the version the import map pins for tests), so main.ts works by URL.
// deno-lint-ignore no-import-prefix
import { Ajv2020 } from "npm:ajv@8.20.0/dist/2020.js";
import type { JsonSchema } from "../protocol/schema.ts";
import { ToolError } from "./tool_errors.ts";

const ajv = new Ajv2020({ strict: true, allErrors: true });
const compiled = new Map<JsonSchema, (value: unknown) => string | undefined>();

/**
 * Compiles a schema (once) into a check that returns what is wrong, or `undefined`.
 *
 * @example
 * ```ts
 * import { argumentCheck } from "./argument_check.ts";
 * const check = argumentCheck({
 *   type: "object",
 *   properties: { path: { type: "string" } },
 *   required: ["path"],
 *   additionalProperties: false,
 * });
 * console.log(check({ path: "/tmp" })); // undefined
 * console.log(check({})); // "arguments must have required property 'path'"
 * ```
 *
 * @param schema A tool's input schema.
 * @throws {Error} When the schema is not valid under the strict check.
 */
export function argumentCheck(schema: JsonSchema): (value: unknown) => string | undefined {
  let check = compiled.get(schema);
  if (check === undefined) {
    const validate = ajv.compile(schema);
    check = (value) => {
      if (validate(value)) return undefined;
      return (validate.errors ?? []).map((error) => {
        const where = error.instancePath === ""
          ? "arguments"
          : error.instancePath.slice(1).replaceAll("/", ".");
        const extra = error.keyword === "additionalProperties"
          ? ` (${(error.params as { additionalProperty: string }).additionalProperty})`
          : error.keyword === "enum"
          ? ` (${(error.params as { allowedValues: unknown[] }).allowedValues.join(", ")})`
          : "";
        return `${where} ${error.message}${extra}`;
      }).join("; ");
    };
    compiled.set(schema, check);
  }
  return check;
}

/**
 * Checks arguments, throwing what is wrong.
 *
 * @param schema The tool's input schema.
 * @param args The arguments.
 * @throws {ToolError} `invalidArguments` when they do not match.
 */
export function checkArguments(schema: JsonSchema, args: unknown): void {
  const problem = argumentCheck(schema)(args);
  if (problem !== undefined) throw new ToolError("invalidArguments", problem);
}
