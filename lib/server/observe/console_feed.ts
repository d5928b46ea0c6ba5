/**
 * The web console's WebSocket feed. The server sends JSON messages:
 *
 * - `{"type":"sessions","sessions":[...]}`: every session (id, clientName,
 *   attached) and its processes (processId, argv, cwd, tty, sandboxType,
 *   state, exitCode, signal, durationMs, outputBytes), on every audit event
 *   and every second;
 * - `{"type":"output","session","processId","seq","stream","data"}`: output
 *   of a watched process (`data` is base64), from the oldest retained chunk
 *   on, then live;
 * - `{"type":"ended","session","processId"}`: a watched process closed and
 *   all its output was sent;
 * - `{"type":"unwatched","session","processId"}`: a watch ended because a
 *   newer one went over {@linkcode MAX_WATCHES_PER_FEED}.
 * - `{"type":"access","terminate":true|false}`, first: whether this login
 *   may terminate processes;
 * - `{"type":"refused","session","processId","reason"}`: a `terminate` this
 *   login may not send (audited as `console.refused`).
 *
 * The console sends `{"type":"watch"|"unwatch"|"terminate","session","processId"}`.
 * Watching reads the process's output ring without moving the owner's
 * read cursor, so it never takes output from the client that owns the
 * process, and any number of feeds may watch one process. At most
 * {@linkcode MAX_WATCHES_PER_FEED} watches run per feed.
 *
 * @module
 */

import type { Transport } from "../../rpc/transport.ts";
import type { ManagedProcess } from "../process/managed_process.ts";
import type { Session, SessionRegistry } from "../session/registry.ts";
import { audit, onAudit } from "./audit.ts";
import { watchOf } from "./process_watch.ts";

/** Most processes one console feed watches at once (older watches end first). */
export const MAX_WATCHES_PER_FEED = 16;
/** Most processes listed in one `sessions` message. */
export const MAX_LISTED_PROCESSES = 1000;
/** Largest output page sent in one `output` message, in bytes. */
export const OUTPUT_PAGE_BYTES = 64 * 1024;
/** Largest message the console may send, in bytes. */
export const CONSOLE_MAX_MESSAGE_BYTES = 4096;
/** How often the process list is re-sent (durations advance), in ms. */
const LIST_INTERVAL_MS = 1000;

/** A running feed. */
export interface ConsoleFeed {
  /** Resolves when the feed's WebSocket has closed. */
  readonly finished: Promise<void>;
  /** Closes the feed. */
  close(): void;
}

function describe(proc: ManagedProcess) {
  const watch = watchOf(proc);
  return {
    processId: proc.id,
    argv: watch?.description.argv ?? [],
    cwd: watch?.description.cwd ?? "",
    tty: watch?.description.tty ?? false,
    sandboxType: watch?.description.sandboxType ?? "none",
    state: proc.state,
    exitCode: proc.exitCode,
    signal: proc.exitSignal,
    startedAt: watch?.startedAt ?? null,
    durationMs: watch?.durationMs ?? 0,
    outputBytes: watch?.outputBytes ?? 0,
  };
}

/**
 * The `sessions` message: every session and its processes, oldest first.
 *
 * @param sessions The server's sessions.
 * @returns The message's text.
 */
export function sessionsMessage(sessions: Pick<SessionRegistry, "list">): string {
  let budget = MAX_LISTED_PROCESSES;
  const listed = sessions.list().map((session) => {
    const processes = session.processes.list().slice(0, Math.max(0, budget));
    budget -= processes.length;
    return {
      id: session.id,
      clientName: session.clientName,
      attached: session.attached,
      processes: processes.map(describe),
    };
  });
  return JSON.stringify({ type: "sessions", sessions: listed });
}

function findProcess(
  sessions: SessionRegistry,
  sessionId: unknown,
  processId: unknown,
): { session: Session; proc: ManagedProcess } | undefined {
  const session = sessions.list().find((s) => s.id === sessionId);
  const proc = session?.processes.list().find((p) => p.id === processId);
  return session && proc ? { session, proc } : undefined;
}

/** Sends a process's output from the oldest retained chunk on, until it closes or `stop` aborts. */
async function follow(
  transport: Transport,
  session: Session,
  proc: ManagedProcess,
  stop: AbortSignal,
): Promise<void> {
  const ids = { session: session.id, processId: proc.id };
  let after = 0;
  while (!stop.aborted) {
    const page = proc.ring.page(after, OUTPUT_PAGE_BYTES);
    for (const chunk of page.chunks) {
      await transport.send(JSON.stringify({
        type: "output",
        ...ids,
        seq: chunk.seq,
        stream: chunk.stream,
        data: chunk.chunk,
      }));
      after = chunk.seq;
      if (stop.aborted) return;
    }
    if (page.chunks.length > 0) continue;
    if (proc.closed) {
      await transport.send(JSON.stringify({ type: "ended", ...ids }));
      return;
    }
    const change = proc.changed();
    const aborted = Promise.withResolvers<void>();
    const onAbort = () => aborted.resolve();
    stop.addEventListener("abort", onAbort, { once: true });
    await Promise.race([change.promise, aborted.promise]);
    stop.removeEventListener("abort", onAbort);
    change.cancel();
  }
}

/** Why a watch-only login's `terminate` is refused. */
export const WATCH_ONLY_REASON = "this console login may watch, not terminate";

/**
 * Serves one console feed on an upgraded WebSocket.
 *
 * @param transport The console's WebSocket.
 * @param sessions The server's sessions.
 * @param remoteAddress The console's address (for `console.terminate`).
 * @param canTerminate Whether the feed's login may terminate processes.
 * @returns The running feed.
 */
export function serveConsoleFeed(
  transport: Transport,
  sessions: SessionRegistry,
  remoteAddress: string,
  canTerminate: boolean,
): ConsoleFeed {
  const watches = new Map<string, AbortController>();
  // One list at a time: while the console reads slowly, newer lists replace the waiting one.
  let sending = false;
  let stale = false;
  const sendList = () => {
    if (sending) {
      stale = true;
      return;
    }
    sending = true;
    transport.send(sessionsMessage(sessions)).then(() => {
      sending = false;
      if (stale) {
        stale = false;
        sendList();
      }
    }, () => transport.close());
  };
  let listQueued = false;
  const queueList = () => {
    if (listQueued) return;
    listQueued = true;
    queueMicrotask(() => {
      listQueued = false;
      sendList();
    });
  };
  const stopAudit = onAudit(queueList);
  const ticker = setInterval(queueList, LIST_INTERVAL_MS);
  transport.send(JSON.stringify({ type: "access", terminate: canTerminate })).catch(() => {});
  sendList();

  function unwatch(key: string): void {
    watches.get(key)?.abort();
    watches.delete(key);
  }

  function handle(message: { type?: unknown; session?: unknown; processId?: unknown }): void {
    const key = JSON.stringify([message.session, message.processId]);
    if (message.type === "unwatch") return unwatch(key);
    const found = findProcess(sessions, message.session, message.processId);
    if (!found) return;
    if (message.type === "watch") {
      unwatch(key);
      if (watches.size >= MAX_WATCHES_PER_FEED) {
        const oldest = watches.keys().next().value!;
        unwatch(oldest);
        const [session, processId] = JSON.parse(oldest);
        transport.send(JSON.stringify({ type: "unwatched", session, processId })).catch(() => {});
      }
      const stop = new AbortController();
      watches.set(key, stop);
      follow(transport, found.session, found.proc, stop.signal).catch(() => transport.close());
    } else if (message.type === "terminate" && !canTerminate) {
      const ids = { session: found.session.id, processId: found.proc.id };
      audit("console.refused", { remoteAddress, ...ids, reason: WATCH_ONLY_REASON });
      transport.send(JSON.stringify({ type: "refused", ...ids, reason: WATCH_ONLY_REASON }))
        .catch(() => {});
    } else if (message.type === "terminate") {
      audit("console.terminate", {
        remoteAddress,
        session: found.session.id,
        processId: found.proc.id,
      });
      found.session.processes.terminate({ processId: found.proc.id });
    }
  }

  const finished = (async () => {
    try {
      for await (const inbound of transport.readable) {
        if (typeof inbound !== "string") continue;
        try {
          handle(JSON.parse(inbound));
        } catch {
          // Not a console message: ignored.
        }
      }
    } finally {
      stopAudit();
      clearInterval(ticker);
      for (const key of [...watches.keys()]) unwatch(key);
      transport.close();
    }
  })();
  return { finished, close: () => transport.close() };
}
