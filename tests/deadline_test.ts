import assert from "node:assert/strict";
import { deadline } from "../lib/server/host/deadline.ts";

Deno.test("deadline runs its callback once the delay passed, and never once cancelled", async () => {
  const calls: string[] = [];
  const later = Promise.withResolvers<void>();
  const cancel = deadline(1, () => calls.push("cancelled"));
  cancel();
  deadline(1, () => calls.push("kept"));
  deadline(30, () => later.resolve());
  await later.promise;
  assert.deepEqual(calls, ["kept"]);
});
