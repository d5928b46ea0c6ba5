/**
 * Leveled logging to stderr (never stdout: in stdio mode stdout carries the
 * protocol). Every line is one event: a name and its fields, written as text
 * (`2026-01-01T00:00:00.000Z INFO process.start processId="p1" ...`, the
 * default) or as one JSON object per line (`--log-format json`:
 * `{"ts":"...","level":"info","event":"process.start","processId":"p1",...}`).
 * In both, a value that is not a plain word is a JSON string with every
 * control character (C0, DEL, C1), the line and paragraph separators and the
 * bidirectional formatting characters escaped: a value can neither break a
 * line nor change how a terminal shows it.
 *
 * @module
 */

/** Log levels, most severe first. */
export type LogLevel = "error" | "warn" | "info" | "debug";

/** How a line is written: `text` for people, `json` for log collectors. */
export type LogFormat = "text" | "json";

/** The formats of `--log-format`. */
export const LOG_FORMATS: readonly LogFormat[] = ["text", "json"];

const RANK: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };
let threshold = RANK.warn;
let format: LogFormat = "text";
let write: (line: string) => void = writeStderr;
const encoder = new TextEncoder();

function writeStderr(line: string): void {
  try {
    Deno.stderr.writeSync(encoder.encode(line));
  } catch {
    // stderr is gone; nothing else to do.
  }
}

/**
 * Sets the most verbose level that is written.
 *
 * @param level The level.
 */
export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

/**
 * Sets how lines are written.
 *
 * @param value The format.
 */
export function setLogFormat(value: LogFormat): void {
  format = value;
}

/**
 * Sends log lines to `sink` instead of stderr (for tests); `undefined`
 * restores stderr.
 *
 * @param sink Receives each line, newline included.
 */
export function setLogSink(sink: ((line: string) => void) | undefined): void {
  write = sink ?? writeStderr;
}

/**
 * Whether `level` is written.
 *
 * @param level The level.
 */
export function logEnabled(level: LogLevel): boolean {
  return RANK[level] <= threshold;
}

/**
 * What `JSON.stringify` leaves raw but a log line must not hold: DEL and the C1 controls (a
 * terminal reads ESC `[` as `\x9b`), the line and paragraph separators (a line break to many
 * readers), and the bidirectional formatting characters (they reorder what a terminal shows).
 * C0 controls `JSON.stringify` escapes itself.
 */
const UNSAFE = /[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** JSON text with {@linkcode UNSAFE} characters escaped (they only occur in its strings). */
function safeJson(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(
    UNSAFE,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** A text field value: bare when it is a plain word, JSON otherwise. */
function textValue(value: unknown): string {
  if (typeof value === "string" && /^[\w.:/@+-]+$/.test(value)) return value;
  return safeJson(value);
}

/**
 * Formats one event as a line of the given format.
 *
 * @example
 * ```ts
 * import { formatEvent } from "./log.ts";
 * const ts = new Date(0);
 * console.log(formatEvent("json", ts, "info", "fs.write", { path: "/tmp/a" }));
 * // {"ts":"1970-01-01T00:00:00.000Z","level":"info","event":"fs.write","path":"/tmp/a"}
 * console.log(formatEvent("text", ts, "info", "fs.write", { path: "/tmp/a b" }));
 * // 1970-01-01T00:00:00.000Z INFO fs.write path="/tmp/a b"
 * ```
 *
 * @param as The format.
 * @param ts When the event happened.
 * @param level Its level.
 * @param event Its name.
 * @param fields Its fields (`ts`, `level` and `event` are reserved).
 * @returns The line, without its newline.
 */
export function formatEvent(
  as: LogFormat,
  ts: Date,
  level: LogLevel,
  event: string,
  fields: Readonly<Record<string, unknown>>,
): string {
  if (as === "json") {
    const line: Record<string, unknown> = { ts: ts.toISOString(), level, event };
    for (const [key, value] of Object.entries(fields)) {
      if (!Object.hasOwn(line, key)) line[key] = value;
    }
    return safeJson(line);
  }
  const parts = Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${/^[\w.-]+$/.test(key) ? key : safeJson(key)}=${textValue(value)}`);
  return [ts.toISOString(), level.toUpperCase(), event, ...parts].join(" ");
}

/**
 * Writes one event when `level` is enabled.
 *
 * @param level The event's level.
 * @param event Its name, e.g. `process.start`.
 * @param fields Its fields.
 */
export function logEvent(
  level: LogLevel,
  event: string,
  fields: Readonly<Record<string, unknown>> = {},
): void {
  if (!logEnabled(level)) return;
  write(`${formatEvent(format, new Date(), level, event, fields)}\n`);
}

/**
 * Writes a free-form message when `level` is enabled (event `log`, field `message`).
 *
 * @param level The message's level.
 * @param message The text.
 */
export function log(level: LogLevel, message: string): void {
  logEvent(level, "log", { message });
}
