/**
 * The log line formats (`lib/server/host/log.ts`): whatever a field holds, a
 * line stays one line that says what it holds. Control characters (C0, DEL,
 * C1), the line and paragraph separators and the bidirectional formatting
 * characters are escaped in both formats, so a value cannot end a line, start
 * a forged one, move a terminal's cursor or reorder what is shown.
 *
 * @module
 */

import assert from "node:assert/strict";
import { formatEvent, LOG_FORMATS } from "../lib/server/host/log.ts";

/** One of each character that must never reach a log line raw. */
const HOSTILE = [
  "\n",
  "\r",
  "\x1b[2J",
  "\x7f",
  "\x85",
  "\x9b31m",
  "\u2028",
  "\u2029",
  "\u202e",
  "\u2066",
  "\u200f",
].join("|");

/** What a line may hold: printable ASCII and characters outside the escaped ranges. */
// deno-lint-ignore no-control-regex -- the control characters are what is looked for.
const RAW_FORBIDDEN = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

Deno.test("log lines: control, C1, line-separator and bidi characters are escaped in both formats, and the value reads back", () => {
  for (const format of LOG_FORMATS) {
    const line = formatEvent(format, new Date(0), "info", "fs.write", {
      path: `/tmp/${HOSTILE}`,
      [`key${HOSTILE}`]: 1,
    });
    assert.doesNotMatch(line, RAW_FORBIDDEN, `${format}: ${JSON.stringify(line)}`);
    const value = format === "json"
      ? JSON.parse(line).path
      : JSON.parse(/ path=("(?:[^"\\]|\\.)*")/.exec(line)![1]!);
    assert.equal(value, `/tmp/${HOSTILE}`, format);
  }
});

Deno.test("log lines: text keeps plain words bare and other printable text as it is", () => {
  const line = formatEvent("text", new Date(0), "info", "process.start", {
    processId: "p1",
    cwd: "/home/é ü/日本",
  });
  assert.equal(
    line,
    `1970-01-01T00:00:00.000Z INFO process.start processId=p1 cwd="/home/é ü/日本"`,
  );
});
