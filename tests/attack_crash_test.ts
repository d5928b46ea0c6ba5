/**
 * What a SIGKILLed server leaves behind: no half-written temp file of an
 * `fs/writeFile` it was in the middle of, and no seccomp directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { defaultServerEnv, handshake, ServerProcess } from "./helpers/server_harness.ts";
import { attackLayout, listNames, SANDBOX, sandboxValue, uri } from "./helpers/attack.ts";

Deno.test("a server SIGKILLed during fs/writeFile leaves no temp file", async () => {
  await using l = await attackLayout("es-attack-crash-");
  await using server = await ServerProcess.start({ listen: "stdio" });
  const client = server.stdio!;
  await handshake(client);
  const data = new Uint8Array(40 * 1024 * 1024).fill(0x61).toBase64();
  await client.send({
    id: 1,
    method: "fs/writeFile",
    params: { path: uri(`${l.ws}/big.bin`), dataBase64: data },
  });
  // Kill it as soon as anything shows up in the directory (or the write is done).
  let seen: string[] = [];
  while (
    seen.length === 0 && !client.log.eof && !client.log.received.some((r) => r.msg.id === 1)
  ) {
    seen = listNames(l.ws);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  server.kill("SIGKILL");
  await server.child.status;
  const left = listNames(l.ws).filter((name) => name !== "big.bin");
  assert.deepEqual(left, [], `the killed server left ${left.join(", ")}`);
});

Deno.test({
  name: `a SIGKILLed server leaves no seccomp directory${
    SANDBOX.ok ? "" : ` (skipped: ${SANDBOX.ok || SANDBOX.reason})`
  }`,
  ignore: !SANDBOX.ok,
  async fn() {
    await using l = await attackLayout("es-attack-crash-");
    const tmp = `${l.base}/tmp`;
    await Deno.mkdir(tmp);
    await using server = await ServerProcess.start({
      listen: "stdio",
      env: { ...defaultServerEnv(), TMPDIR: tmp },
    });
    const client = server.stdio!;
    await handshake(client);
    const start = await client.request(2, "process/start", {
      processId: "sandboxed",
      argv: ["/bin/sh", "-c", "echo ran"],
      cwd: uri(l.ws),
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: sandboxValue([l.ws], "restricted"),
    });
    assert.ok(start.result, JSON.stringify(start));
    await client.log.processClosed("sandboxed");
    assert.equal(client.log.outputText("sandboxed"), "ran\n");
    server.kill("SIGKILL");
    await server.child.status;
    assert.deepEqual(listNames(tmp), [], "the killed server left files in its TMPDIR");
  },
});
