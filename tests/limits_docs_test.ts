/**
 * docs/guide/limits.md states each limit with the number the code has: every
 * row that names a constant or a flag says that constant's value, or that
 * flag's default, in its bound.
 *
 * @module
 */

import assert from "node:assert/strict";
import { SERVER_FLAGS } from "../lib/cli/server_flags.ts";
import {
  MAX_BUNDLE_BYTES_PER_REQUEST,
  MAX_BUNDLE_BYTES_PER_ROOT,
  MAX_DIRECTORIES_PER_ROOT,
  MAX_ENTRIES_PER_ROOT,
  MAX_FILE_BYTES,
  MAX_ROOTS_PER_REQUEST,
  MAX_SCAN_DEPTH,
} from "../lib/server/capabilities/discover.ts";
import {
  MAX_CAPABILITIES,
  MAX_LOCATIONS,
  MAX_REMOTE_METADATA_BYTES,
  MAX_RESPONSE_BYTES,
  MAX_WARNINGS,
} from "../lib/server/capabilities/discover_v2.ts";
import { MAX_SKILL_NAME_CHARS } from "../lib/server/capabilities/skill_metadata.ts";
import { MAX_CONFIG_FILE_BYTES } from "../lib/server/codex_config/environment_config.ts";
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../lib/protocol/json_decode.ts";
import { INBOUND_QUEUE_LIMIT } from "../lib/rpc/connection.ts";
import {
  BULK_MESSAGE_BYTES,
  BULK_QUEUED_BYTES,
  OUTBOUND_HIGH_WATER_BYTES,
} from "../lib/rpc/transport.ts";
import { WALK_REPLY_CHARS } from "../lib/server/fs/walk.ts";
import { MAX_WATCH_PATHS, MAX_WATCHES } from "../lib/server/fs/watch.ts";
import { READ_CHUNK_BYTES, READ_FILE_LIMIT } from "../lib/server/fs/read_file.ts";
import {
  MAX_PENDING_CHARS,
  WATCHDOG_SCAN_MS,
  WATCHDOG_SOON_MS,
} from "../lib/server/host/watchdog.ts";
import { MAX_BUFFERED_BODY_BYTES } from "../lib/server/http/decoding.ts";
import { POOL_MAX_IDLE, POOL_MAX_IDLE_PER_ORIGIN } from "../lib/server/http/pool.ts";
import { MAX_REDIRECTS } from "../lib/server/http/redirects.ts";
import { MAX_ACTIVE_STREAMS } from "../lib/server/http/request.ts";
import {
  MAX_RESPONSE_FIELDS,
  MAX_RESPONSE_HEAD_BYTES,
  MAX_TRAILER_BYTES,
} from "../lib/server/http/wire.ts";
import { MAX_HEAD_BYTES } from "../lib/server/listen/http_head.ts";
import { HANDSHAKE_TIMEOUT_MS, MAX_PENDING_CONNECTIONS } from "../lib/server/listen/listen.ts";
import { REMEMBERED_WRITE_IDS } from "../lib/server/process/managed_process.ts";
import { RETAINED_OUTPUT_BYTES } from "../lib/server/process/output_ring.ts";
import { BULK_TURN_MS } from "../lib/server/process/bulk_gate.ts";
import { BULK_PIPE_BYTES, MAX_BULK_PIPES } from "../lib/server/process/pipe.ts";
import { MAX_PTY_PROCESSES } from "../lib/server/process/pty.ts";
import { MAX_QUEUED_STDIN_BYTES } from "../lib/server/process/table.ts";
import { MAX_CLIENT_NAME_CHARS } from "../lib/server/session/registry.ts";

const GUIDE = await Deno.readTextFile(new URL("../docs/guide/limits.md", import.meta.url));

/** `262144` as the guide writes it: `262 144`. */
const count = (n: number) => String(n).replace(/\B(?=(\d{3})+$)/g, " ");
/** Bytes in KiB or MiB, as the guide writes them. */
const bytes = (n: number) => n % (1 << 20) === 0 ? `${n >> 20} MiB` : `${n / 1024} KiB`;
/** Milliseconds in s or ms, as the guide writes them. */
const ms = (n: number) => n % 1000 === 0 ? `${n / 1000} s` : `${n} ms`;
const seconds = (n: number) => `${n} s`;

/** [the name in the row's last column, the text its bound must hold]. */
const EXPECTED: [string, string][] = [
  ["MAX_HEAD_BYTES", bytes(MAX_HEAD_BYTES)],
  ["HANDSHAKE_TIMEOUT_MS", ms(HANDSHAKE_TIMEOUT_MS)],
  ["MAX_PENDING_CONNECTIONS", count(MAX_PENDING_CONNECTIONS)],
  ["--max-connections", count(SERVER_FLAGS["max-connections"].default)],
  ["`--max-message-bytes N`", bytes(SERVER_FLAGS["max-message-bytes"].default)],
  ["MAX_JSON_VALUES", `${count(MAX_JSON_VALUES)} values`],
  ["MAX_JSON_DEPTH", `${MAX_JSON_DEPTH} levels`],
  ["INBOUND_QUEUE_LIMIT", `${INBOUND_QUEUE_LIMIT} messages`],
  ["--concurrent-requests", String(SERVER_FLAGS["concurrent-requests"].default)],
  ["OUTBOUND_HIGH_WATER_BYTES", bytes(OUTBOUND_HIGH_WATER_BYTES)],
  ["BULK_MESSAGE_BYTES", `a message of ${bytes(BULK_MESSAGE_BYTES)} or more`],
  [
    "BULK_QUEUED_BYTES",
    `${bytes(BULK_QUEUED_BYTES)} queued, for a message of ${bytes(BULK_MESSAGE_BYTES)}`,
  ],
  ["READ_FILE_LIMIT", bytes(READ_FILE_LIMIT)],
  ["READ_CHUNK_BYTES", `${READ_CHUNK_BYTES / 1024} KiB`],
  ["MAX_BUFFERED_BODY_BYTES", bytes(MAX_BUFFERED_BODY_BYTES)],
  ["MAX_RESPONSE_HEAD_BYTES", bytes(MAX_RESPONSE_HEAD_BYTES)],
  ["MAX_RESPONSE_FIELDS", `${MAX_RESPONSE_FIELDS} in the head, ${MAX_RESPONSE_FIELDS} in`],
  ["MAX_TRAILER_BYTES", `${count(MAX_TRAILER_BYTES)} bytes`],
  ["MAX_REDIRECTS", `${MAX_REDIRECTS}, else`],
  ["POOL_MAX_IDLE_PER_ORIGIN", `${POOL_MAX_IDLE_PER_ORIGIN} per origin`],
  ["POOL_MAX_IDLE`", `${POOL_MAX_IDLE} in all`],
  ["MAX_WATCH_PATHS", `${MAX_WATCH_PATHS} distinct paths per watch`],
  ["MAX_WATCHES", `${count(MAX_WATCHES)} watches`],
  ["WALK_REPLY_CHARS", `${WALK_REPLY_CHARS >> 20} Mi characters`],
  ["MAX_ROOTS_PER_REQUEST", `${MAX_ROOTS_PER_REQUEST} (the reference's)`],
  ["MAX_SCAN_DEPTH", `depth ${MAX_SCAN_DEPTH}`],
  ["MAX_DIRECTORIES_PER_ROOT", `${count(MAX_DIRECTORIES_PER_ROOT)} directories`],
  ["MAX_ENTRIES_PER_ROOT", `${count(MAX_ENTRIES_PER_ROOT)} entries`],
  ["MAX_FILE_BYTES", `${bytes(MAX_FILE_BYTES)} per file`],
  ["MAX_BUNDLE_BYTES_PER_ROOT", `${bytes(MAX_BUNDLE_BYTES_PER_ROOT)} per root`],
  ["MAX_BUNDLE_BYTES_PER_REQUEST", `${bytes(MAX_BUNDLE_BYTES_PER_REQUEST)} per request`],
  ["MAX_CONFIG_FILE_BYTES", `${bytes(MAX_CONFIG_FILE_BYTES)} per config or requirements file`],
  ["MAX_CAPABILITIES", `${count(MAX_CAPABILITIES)} plugins and skills`],
  ["MAX_RESPONSE_BYTES", `${bytes(MAX_RESPONSE_BYTES)} of JSON`],
  ["MAX_WARNINGS", `${MAX_WARNINGS} warnings`],
  ["MAX_LOCATIONS", `${MAX_LOCATIONS} installed plugins and skill roots`],
  ["MAX_REMOTE_METADATA_BYTES", `${bytes(MAX_REMOTE_METADATA_BYTES)} per`],
  ["MAX_SKILL_NAME_CHARS", `${MAX_SKILL_NAME_CHARS} characters`],
  ["RETAINED_OUTPUT_BYTES", bytes(RETAINED_OUTPUT_BYTES)],
  ["BULK_PIPE_BYTES", bytes(BULK_PIPE_BYTES)],
  ["MAX_BULK_PIPES", `at most ${MAX_BULK_PIPES} pipes`],
  ["BULK_TURN_MS", `${BULK_TURN_MS} ms per stream`],
  ["MAX_QUEUED_STDIN_BYTES", bytes(MAX_QUEUED_STDIN_BYTES)],
  ["REMEMBERED_WRITE_IDS", count(REMEMBERED_WRITE_IDS)],
  ["MAX_CLIENT_NAME_CHARS", `${MAX_CLIENT_NAME_CHARS} characters`],
  ["--session-ttl", seconds(SERVER_FLAGS["session-ttl"].default)],
  ["--process-retention", seconds(SERVER_FLAGS["process-retention"].default)],
  ["--max-processes N", count(SERVER_FLAGS["max-processes"].default)],
  ["MAX_PTY_PROCESSES", count(MAX_PTY_PROCESSES)],
  ["MAX_ACTIVE_STREAMS", count(MAX_ACTIVE_STREAMS)],
  ["WATCHDOG_SOON_MS", ms(WATCHDOG_SOON_MS)],
  ["WATCHDOG_SCAN_MS", `within ${ms(WATCHDOG_SCAN_MS)}`],
  ["MAX_PENDING_CHARS", bytes(MAX_PENDING_CHARS)],
];

/** The table's rows as [bound, flag / constant]. */
const ROWS = GUIDE.split("\n").filter((line) => line.startsWith("| ")).map((line) => {
  const cells = line.split("|").map((cell) => cell.trim());
  return [cells[2]!, cells[3]!] as const;
});

Deno.test("limits guide: every named limit's bound is the code's number", () => {
  for (const [name, text] of EXPECTED) {
    const row = ROWS.find(([, where]) => where.includes(name));
    assert.ok(row, `no row names ${name}`);
    assert.ok(row[0].includes(text), `${name}: the bound "${row[0]}" should say "${text}"`);
  }
});

Deno.test("limits guide: every constant it names is checked above", () => {
  const named = new Set(ROWS.flatMap(([, where]) => [...where.matchAll(/`([A-Z][A-Z_]{3,})`/g)]))
    .values().map((m) => m[1]!).filter((name) => !["F_SETPIPE_SZ", "RLIMIT_NOFILE"].includes(name));
  const checked = EXPECTED.map(([name]) => name).join(" ");
  // MAX_HANDLES is private to fs/handles.ts; fs_test.ts checks the refusal past 128 handles.
  assert.deepEqual(
    [...named].filter((name) => name !== "MAX_HANDLES" && !checked.includes(name)),
    [],
  );
});
