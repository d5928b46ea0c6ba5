/**
 * Sessions (docs/protocol.md section 5): a session owns processes and outlives its connection
 * for a TTL, so a new connection can resume it.
 *
 * @module
 */

import { LiveProcesses } from "../process/live_processes.ts";
import { killOrphans } from "../host/proc.ts";
import { closeWatchdog } from "../host/watchdog.ts";
import { ErrorCode, kindError, RpcError } from "../../protocol/errors.ts";
import type { NotificationSink } from "../process/managed_process.ts";
import { ProcessTable } from "../process/table.ts";

/** Default time a detached session waits for a resume, in ms (the reference's about 80 s). */
export const DEFAULT_SESSION_TTL_MS = 80_000;

/** Longest client name a session keeps, in UTF-16 code units: a longer `clientName` is cut to it. */
export const MAX_CLIENT_NAME_CHARS = 256;

/**
 * An `initialize`'s `clientName` as the server keeps it (the audit log, the
 * console): its first {@linkcode MAX_CLIENT_NAME_CHARS} code units, without
 * a half of a surrogate pair at the cut, and an ellipsis (U+2026) when it was cut.
 *
 * @example
 * ```ts
 * import { keptClientName, MAX_CLIENT_NAME_CHARS } from "./registry.ts";
 * console.log(keptClientName("codex")); // "codex"
 * console.log(keptClientName("x".repeat(1000)).length === MAX_CLIENT_NAME_CHARS + 1); // true
 * ```
 *
 * @param clientName The name the client sent.
 */
export function keptClientName(clientName: string): string {
  if (clientName.length <= MAX_CLIENT_NAME_CHARS) return clientName;
  const cut = clientName.slice(0, MAX_CLIENT_NAME_CHARS);
  return `${/[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut}\u2026`;
}

/** Options for {@linkcode SessionRegistry}. */
export interface SessionRegistryOptions {
  /**
   * How long a detached session is kept, in ms.
   *
   * @default {80000}
   */
  ttlMs?: number;
  /**
   * How long a closed process stays readable, in ms.
   *
   * @default {80000}
   */
  processRetentionMs?: number;
  /**
   * The most processes alive at once across all sessions (`--max-processes`).
   *
   * @default {DEFAULT_MAX_PROCESSES}
   */
  maxProcesses?: number;
}

/** One session: its id, its processes, and the connection it is attached to (if any). */
export class Session {
  /** The UUID v4 session id. */
  readonly id: string;
  /** The session's processes. */
  readonly processes: ProcessTable;
  /** The `clientName` of the connection that created or last resumed it (see {@linkcode keptClientName}). */
  clientName = "";
  #owner: object | undefined;
  #expiry: ReturnType<typeof setTimeout> | undefined;

  /**
   * Creates a session.
   *
   * @param id The session id.
   * @param processes Its process table.
   */
  constructor(id: string, processes: ProcessTable) {
    this.id = id;
    this.processes = processes;
  }

  /** True while a connection is attached. */
  get attached(): boolean {
    return this.#owner !== undefined;
  }

  /** True when `owner` is the attached connection. */
  isAttachedTo(owner: object): boolean {
    return this.#owner === owner;
  }

  /** Attaches a connection (of the client `clientName`): notifications go to `sink` from now on. */
  attach(owner: object, sink: NotificationSink, clientName: string): void {
    // Only when set: Deno loads its Node timers module on the first timer call (~9 ms at start-up).
    if (this.#expiry !== undefined) clearTimeout(this.#expiry);
    this.#expiry = undefined;
    this.#owner = owner;
    this.clientName = keptClientName(clientName);
    this.processes.sink = sink;
  }

  /** Detaches: notifications are dropped until a resume; `onExpire` runs after the TTL. */
  detach(ttlMs: number, onExpire: () => void): void {
    this.#owner = undefined;
    this.processes.sink = undefined;
    const timer = setTimeout(onExpire, ttlMs);
    Deno.unrefTimer(timer);
    this.#expiry = timer;
  }

  /** Ends the session: kills every process group. */
  end(): void {
    clearTimeout(this.#expiry);
    this.#owner = undefined;
    this.processes.sink = undefined;
    this.processes.killAll();
  }
}

/** All sessions of a server process (shared by its connections, so any can resume one). */
export class SessionRegistry {
  #sessions = new Map<string, Session>();
  #ttlMs: number;
  #retentionMs: number;
  #live: LiveProcesses;

  /**
   * Creates a registry.
   *
   * @param options TTL, retention and the bound on live processes.
   */
  constructor(options: SessionRegistryOptions = {}) {
    this.#ttlMs = options.ttlMs ?? DEFAULT_SESSION_TTL_MS;
    this.#retentionMs = options.processRetentionMs ?? 80_000;
    this.#live = new LiveProcesses(options.maxProcesses);
  }

  /** Number of live sessions. */
  get size(): number {
    return this.#sessions.size;
  }

  /** The live sessions, oldest first. */
  list(): Session[] {
    return [...this.#sessions.values()];
  }

  /** Creates a new session, attached to the connection of the client `clientName`. */
  create(owner: object, sink: NotificationSink, clientName: string): Session {
    const id = crypto.randomUUID();
    const session = new Session(
      id,
      new ProcessTable({ retentionMs: this.#retentionMs, sessionId: id, live: this.#live }),
    );
    session.attach(owner, sink, clientName);
    this.#sessions.set(session.id, session);
    return session;
  }

  /** Re-attaches a detached session; errors as the reference (unknown id -32600, attached -32010). */
  resume(id: string, owner: object, sink: NotificationSink, clientName: string): Session {
    const session = this.#sessions.get(id);
    if (!session) throw kindError("unknownSession", `unknown session id ${id}`);
    if (session.attached) {
      throw new RpcError(
        ErrorCode.SessionAlreadyAttached,
        `session ${id} is already attached to another connection`,
      );
    }
    session.attach(owner, sink, clientName);
    return session;
  }

  /** Detaches a session from its connection; it expires after the TTL. */
  detach(session: Session): void {
    session.detach(this.#ttlMs, () => this.end(session));
  }

  /** Ends a session now and kills its processes. */
  end(session: Session): void {
    session.end();
    this.#sessions.delete(session.id);
  }

  /** Ends every session (server shutdown). */
  endAll(): void {
    for (const session of [...this.#sessions.values()]) this.end(session);
    // Orphans no process group claims any more (a `setsid` daemon of a double fork).
    killOrphans();
    // Nothing is left to end: the watchdog exits without signalling.
    closeWatchdog();
  }
}
