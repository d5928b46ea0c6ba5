/**
 * Helpers of the operator tests (audit log, metrics, console): a capability
 * token authenticator for an in-process server, and a read that waits for a
 * process to close.
 *
 * @module
 */

import type { AuthResult } from "../../lib/server/listen/auth.ts";
import { capabilityTokenAuth } from "../../lib/server/listen/auth.ts";
import { call } from "./rpc.ts";
import type { Json, ProtocolClient } from "./server_harness.ts";

/** The `authorize` of a server whose capability token is `token`. */
export async function tokenAuth(token: string): Promise<(request: Request) => Promise<AuthResult>> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return capabilityTokenAuth(new Uint8Array(digest).toHex());
}

/** Reads a process from seq 0 until it has closed; returns that last `process/read` result. */
export async function readUntilClosed(client: ProtocolClient, processId: string): Promise<Json> {
  while (true) {
    const read = await call(client, "process/read", { processId, afterSeq: 0, waitMs: 5000 });
    if (read.closed === true) return read;
  }
}
