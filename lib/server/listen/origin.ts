/**
 * Cross-origin refusal. A browser sends an `Origin` header with every
 * WebSocket upgrade, so a page the user opens could otherwise drive a
 * loopback exec-server. As the reference does, any request that carries an
 * `Origin` header (whatever its value, even empty or the server's own
 * address) is answered `403` with an empty body, unless its value is one of
 * the origins allowed with `--allow-origin`, compared exactly. Clients that
 * are not browsers send no `Origin` and are unaffected.
 *
 * @module
 */

import type { HeaderFields } from "./http_head.ts";

/**
 * Builds the origin check for a listener.
 *
 * @example Only a listed origin passes
 * ```ts
 * import { originGate } from "./origin.ts";
 * const gate = originGate(["https://app.example"]);
 * console.log(gate(new Headers()) === undefined); // true: no Origin header
 * console.log(gate(new Headers({ origin: "https://app.example" })) === undefined); // true
 * console.log(gate(new Headers({ origin: "https://evil.example" }))?.status); // 403
 * ```
 *
 * @param allowed Origins admitted verbatim (e.g. `https://app.example`).
 * @returns A function that returns the refusal for a request's headers, or
 *   `undefined` when the request may proceed.
 */
export function originGate(
  allowed: readonly string[] = [],
): (headers: HeaderFields) => Response | undefined {
  const admitted = new Set(allowed);
  return (headers) => {
    const origin = headers.get("origin");
    if (origin === null || origin === undefined || admitted.has(origin)) return undefined;
    return new Response(null, { status: 403, headers: { "content-length": "0" } });
  };
}
