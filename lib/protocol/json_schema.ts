/**
 * The JSON Schema document of the whole protocol, derived from the method
 * table.
 *
 * @module
 */

import { METHODS } from "./methods.ts";
import type { JsonSchema } from "./schema.ts";

/**
 * Builds the protocol's JSON Schema (draft 2020-12): one definition per
 * method with its direction, params and (for requests) result.
 *
 * @example Print the schema
 * ```ts
 * import { protocolJsonSchema } from "./json_schema.ts";
 * console.log(Object.keys(protocolJsonSchema().methods as object).length > 0);
 * ```
 */
export function protocolJsonSchema(): JsonSchema {
  const methods: Record<string, JsonSchema> = {};
  for (const [name, spec] of Object.entries(METHODS)) {
    methods[name] = {
      kind: spec.kind,
      direction: spec.direction,
      description: spec.doc,
      ...("family" in spec && spec.family ? { family: spec.family } : {}),
      params: spec.params.jsonSchema(),
      ...(spec.kind === "request" ? { result: spec.result.jsonSchema() } : {}),
    };
  }
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "Codex exec-server protocol",
    description:
      "JSON-RPC 2.0 without the jsonrpc member; one entry per method, generated from lib/protocol/methods.ts",
    methods,
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
