/**
 * Leveled logging to stderr (never stdout: in stdio mode stdout carries the protocol).
 *
 * @module
 */

/** Log levels, most severe first. */
export type LogLevel = "error" | "warn" | "info" | "debug";

const RANK: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };
let threshold = RANK.warn;
const encoder = new TextEncoder();

/**
 * Sets the most verbose level that is written.
 *
 * @param level The level.
 */
export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

/**
 * Writes one line to stderr when `level` is enabled.
 *
 * @param level The message's level.
 * @param message The text.
 */
export function log(level: LogLevel, message: string): void {
  if (RANK[level] > threshold) return;
  try {
    Deno.stderr.writeSync(
      encoder.encode(`${new Date().toISOString()} ${level.toUpperCase()} ${message}\n`),
    );
  } catch {
    // stderr is gone; nothing else to do.
  }
}
