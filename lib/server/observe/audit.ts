/**
 * The audit trail: every event an operator may ask about ("what did the
 * agent run here, what did it write, which tokens were refused"), each with
 * its level and its fields. {@linkcode audit} writes the event to the log
 * (see `--log-format`) and hands it to the listeners (the metrics and the
 * web console's feed). Secrets are never fields: no token, and of a
 * process's environment only the variable names.
 *
 * @module
 */

import { logEvent, type LogLevel } from "../host/log.ts";

/** The fields of every audit event, by event name. */
export interface AuditFields {
  /** A WebSocket connection was upgraded. */
  "connection.open": { connection: number; remoteAddress: string };
  /** A connection ended; `session` is the session it had attached, if any. */
  "connection.close": {
    connection: number;
    remoteAddress: string;
    session: string | null;
    durationMs: number;
  };
  /**
   * `initialize` created a session or resumed one (`resumed`); `clientName`
   * is the client's, cut to `MAX_CLIENT_NAME_CHARS` (`session/registry.ts`).
   */
  "session.open": { session: string; clientName: string; resumed: boolean };
  /** A request's credential was refused (upgrade, `/metrics` or console login). */
  "auth.refused": { remoteAddress: string; path: string; reason: string };
  /** `process/start` succeeded; `envNames` lists the variables set by the client, without values. */
  "process.start": {
    session: string;
    processId: string;
    argv: readonly string[];
    cwd: string;
    tty: boolean;
    sandboxType: string;
    sandboxLayer: string | null;
    envNames: readonly string[];
  };
  /** A process exited. `signal` names the signal that ended it, if one did. */
  "process.exit": {
    session: string;
    processId: string;
    exitCode: number;
    signal: string | null;
    durationMs: number;
    outputBytes: number;
  };
  /** An fs request that writes succeeded (`fs/writeFile`, `fs/createDirectory`, `fs/open` to replace). */
  "fs.write": { session: string; method: string; path: string };
  /** `fs/remove` succeeded. */
  "fs.remove": { session: string; path: string; recursive: boolean };
  /** `fs/copy` succeeded. */
  "fs.copy": { session: string; sourcePath: string; destinationPath: string };
  /** `http/request` got an answer (`status`) or failed (`status` null). */
  "http.request": { session: string; method: string; origin: string; status: number | null };
  /** A request was refused by the server's permissions or sandbox. */
  "permission.denied": {
    session: string | null;
    method: string;
    permission: string;
    resource: string;
  };
  /** The web console's terminate control killed a process. */
  "console.terminate": { remoteAddress: string; session: string; processId: string };
  /** The web console's terminate control was refused to a watch-only login. */
  "console.refused": { remoteAddress: string; session: string; processId: string; reason: string };
}

/** An audit event's name. */
export type AuditEventName = keyof AuditFields;

/** One audit event: its name and fields. */
export type AuditEvent = {
  [E in AuditEventName]: { event: E; fields: AuditFields[E] };
}[AuditEventName];

/** The level every event is logged at (a new event without a level does not compile). */
export const AUDIT_LEVELS: { readonly [E in AuditEventName]: LogLevel } = {
  "connection.open": "info",
  "connection.close": "info",
  "session.open": "info",
  "auth.refused": "warn",
  "process.start": "info",
  "process.exit": "info",
  "fs.write": "info",
  "fs.remove": "info",
  "fs.copy": "info",
  "http.request": "info",
  "permission.denied": "warn",
  "console.terminate": "warn",
  "console.refused": "warn",
};

const listeners = new Set<(event: AuditEvent) => void>();

/**
 * Records an event: logs it at its level and hands it to every listener.
 *
 * @example
 * ```ts
 * import { audit, onAudit } from "./audit.ts";
 * const stop = onAudit((e) => console.log(e.event, e.fields));
 * audit("fs.remove", { session: "s", path: "/tmp/x", recursive: false });
 * stop();
 * ```
 *
 * @param event The event's name.
 * @param fields Its fields.
 */
export function audit<E extends AuditEventName>(event: E, fields: AuditFields[E]): void {
  logEvent(AUDIT_LEVELS[event], event, fields);
  const recorded = { event, fields } as AuditEvent;
  for (const listener of listeners) listener(recorded);
}

/**
 * Calls `listener` with every event from now on.
 *
 * @param listener Receives each event.
 * @returns A function that stops the calls.
 */
export function onAudit(listener: (event: AuditEvent) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
