/**
 * Helpers of the operator tests (audit log, metrics, console): a capability
 * token authenticator for an in-process server, a read that waits for a
 * process to close, and a read of the console feed's messages.
 *
 * @module
 */

import type { AuthResult } from "../../lib/server/listen/auth.ts";
import { capabilityTokenAuth } from "../../lib/server/listen/auth.ts";
import type { RawWebSocket } from "./reliability_server.ts";
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

/** Reads a console feed's messages until one satisfies `match` (throws when the feed closes). */
export async function nextFeedMessage(
  feed: RawWebSocket,
  match: (message: Json) => boolean,
): Promise<Json> {
  while (true) {
    const text = await feed.readMessage();
    if (text === null) throw new Error("the feed closed");
    const message = JSON.parse(text);
    if (match(message)) return message;
  }
}
