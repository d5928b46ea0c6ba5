import { deepStrictEqual as assertEquals } from "node:assert";
import {
  type CpuTimes,
  hostShare,
  parseCpuTimes,
  parseProcessTicks,
  treeTicks,
} from "./host_load.ts";

const PROC_STAT_BEFORE = "cpu  4273138 8580 1652333 6163259 11381 0 59508 68687 0 0\n" +
  "cpu0 2136569 4290 826166 3081629 5690 0 29754 34343 0 0\n" +
  "intr 123 0 0\nctxt 456\n";

Deno.test("parseCpuTimes() reads the aggregate cpu line, not a core's", () => {
  assertEquals(parseCpuTimes(PROC_STAT_BEFORE), {
    user: 4273138,
    nice: 8580,
    system: 1652333,
    idle: 6163259,
    iowait: 11381,
    irq: 0,
    softirq: 59508,
    steal: 68687,
  });
  assertEquals(parseCpuTimes("cpu0 1 2 3 4 5 6 7 8\n"), null);
  assertEquals(parseCpuTimes("cpu  1 2 3\n"), null);
  assertEquals(parseCpuTimes(""), null);
});

Deno.test("hostShare() gives steal and other busy time as shares of the window's ticks", () => {
  const before = parseCpuTimes(PROC_STAT_BEFORE)!;
  // 200 ticks on two cores over one second: 100 user, 10 system, 20 softirq, 40 idle, 30 steal.
  const after: CpuTimes = {
    ...before,
    user: before.user + 100,
    system: before.system + 10,
    softirq: before.softirq + 20,
    idle: before.idle + 40,
    steal: before.steal + 30,
  };
  const share = hostShare(
    { cpu: before, treeTicks: 500, loadAvg1: 1.25 },
    { cpu: after, treeTicks: 590, loadAvg1: 1.5 },
  );
  // Busy 130 ticks, of which the bench's tree spent 90: 40 for others.
  assertEquals(share, { stealPct: 15, otherBusyPct: 20, loadAvg1Start: 1.25, loadAvg1End: 1.5 });
});

Deno.test("hostShare() leaves out what it could not measure", () => {
  const cpu = parseCpuTimes(PROC_STAT_BEFORE)!;
  const later = { ...cpu, idle: cpu.idle + 100 };
  assertEquals(
    hostShare({ cpu, treeTicks: null, loadAvg1: null }, { cpu: later, treeTicks: 7, loadAvg1: 2 }),
    { stealPct: 0, loadAvg1End: 2 },
  );
  // No tick passed: no share at all rather than 0 %.
  assertEquals(
    hostShare({ cpu, treeTicks: 0, loadAvg1: 1 }, { cpu, treeTicks: 0, loadAvg1: 1 }),
    null,
  );
});

Deno.test("hostShare() keeps a slightly negative other busy share as measured", () => {
  const cpu = parseCpuTimes(PROC_STAT_BEFORE)!;
  const later = { ...cpu, user: cpu.user + 50, idle: cpu.idle + 50 };
  // The per-process counters are kept apart from /proc/stat: the tree may show a tick or two more.
  const share = hostShare(
    { cpu, treeTicks: 0, loadAvg1: null },
    { cpu: later, treeTicks: 52, loadAvg1: null },
  );
  assertEquals(share, { stealPct: 0, otherBusyPct: -2 });
});

Deno.test("parseProcessTicks() sums own and reaped children's ticks, comm with spaces", () => {
  const stat = "4242 (deno task (x) y) S 4000 4242 4000 0 -1 4194560 9 0 0 0 " +
    "120 30 7 3 20 0 8 0 100 1000000 5000 18446744073709551615";
  assertEquals(parseProcessTicks(stat), { pid: 4242, ppid: 4000, ticks: 160 });
  assertEquals(parseProcessTicks("garbage"), null);
  assertEquals(parseProcessTicks("1 (init) S 0 1"), null);
});

Deno.test("treeTicks() counts the root and all its descendants, nothing else", () => {
  const processes = [
    { pid: 1, ppid: 0, ticks: 1000 },
    { pid: 10, ppid: 1, ticks: 50 }, // the harness
    { pid: 11, ppid: 10, ticks: 20 }, // a server
    { pid: 12, ppid: 11, ticks: 3 }, // a process it started
    { pid: 13, ppid: 10, ticks: 5 }, // another server
    { pid: 20, ppid: 1, ticks: 400 }, // someone else
    { pid: 21, ppid: 20, ticks: 40 },
  ];
  assertEquals(treeTicks(processes, 10), 78);
  assertEquals(treeTicks(processes, 99), 0);
});
