/**
 * Wrong errors: a failed pipe spawn used to be reported as "No such file or
 * directory" whatever the OS said (a 3 MB argv, E2BIG, looked like a missing
 * program). The errno the OS reported now reaches the client.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";

Deno.test("process/start with a 3 MB argument gets spawnFailed with E2BIG's message, not spawnNotFound", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  await using client = await server.connect();
  await handshake(client);
  const reply = await client.request(1, "process/start", {
    processId: "big",
    argv: ["/bin/echo", "x".repeat(3_000_000)],
    cwd: "file:///tmp",
    env: {},
    tty: false,
  });
  const error = reply.error as { code: number; message: string; data?: unknown };
  assert.deepEqual([error.code, error.message, error.data], [
    -32603,
    "Argument list too long (os error 7)",
    { kind: "spawnFailed" },
  ]);
  const ok = await client.request(2, "process/start", {
    processId: "small",
    argv: ["/bin/echo", "x"],
    cwd: "file:///tmp",
    env: {},
    tty: false,
  });
  assert.ok(ok.result, JSON.stringify(ok));
});
