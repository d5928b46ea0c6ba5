/**
 * The server reads `/proc` files (through FFI) for every process it ends:
 * its subreaper bookkeeping lists its children and reads their `stat`, so
 * terminating 200 processes at once makes tens of thousands of reads. Those
 * reads must not grow the server's resident memory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readSmallFile } from "../lib/server/host/fs_syscalls.ts";
import { rssKib } from "./helpers/reliability_proc.ts";

/** Reads measured: about what ending 200 processes at once costs. */
const READS = 40_000;
/**
 * Growth allowed over the reads, in KiB. Measured: about 6 MiB with one
 * reused read buffer; 80 to 145 MiB with a fresh 64 KiB buffer per read
 * (garbage outside the JavaScript heap whose pages the allocator kept).
 */
const MAX_GROWTH_KIB = 32 * 1024;

Deno.test("reading /proc files many times (ending many processes) does not grow resident memory", () => {
  // Warm-up: the library, the decoder and the first pages are allocated once.
  for (let i = 0; i < 500; i++) readSmallFile("/proc/self/stat");
  const before = rssKib(Deno.pid);
  let last = "";
  for (let i = 0; i < READS; i++) last = readSmallFile("/proc/self/stat");
  const growth = rssKib(Deno.pid) - before;
  assert.match(last, new RegExp(`^${Deno.pid} \\(`));
  assert.ok(
    growth <= MAX_GROWTH_KIB,
    `RSS grew ${growth} KiB over ${READS} reads (bound ${MAX_GROWTH_KIB} KiB)`,
  );
});
