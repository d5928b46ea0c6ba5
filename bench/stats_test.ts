import { deepStrictEqual as assertEquals } from "node:assert";
import { formatNumber, markdownTable, percentile, summarize } from "./stats.ts";

Deno.test("percentile() uses the nearest rank", () => {
  const values = Array.from({ length: 100 }, (_, i) => 100 - i);
  assertEquals(percentile(values, 50), 50);
  assertEquals(percentile(values, 99), 99);
  assertEquals(percentile(values, 100), 100);
  assertEquals(percentile([7], 99), 7);
  assertEquals(percentile([], 50), NaN);
});

Deno.test("summarize() ignores failed repetitions", () => {
  assertEquals(summarize([3, NaN, 1, 2]), { min: 1, median: 2, max: 3, count: 3 });
  assertEquals(summarize([4, 1]), { min: 1, median: 2.5, max: 4, count: 2 });
  assertEquals(summarize([NaN]).count, 0);
});

Deno.test("formatNumber() keeps about three significant digits", () => {
  assertEquals(formatNumber(12345.6), "12346");
  assertEquals(formatNumber(123.4), "123");
  assertEquals(formatNumber(12.34), "12.3");
  assertEquals(formatNumber(1.234), "1.23");
  assertEquals(formatNumber(0.01234), "0.012");
  assertEquals(formatNumber(Infinity), "—");
});

Deno.test("markdownTable() escapes pipes in cells", () => {
  assertEquals(markdownTable(["a"], [["x|y"]]), "| a |\n| --- |\n| x\\|y |");
});
