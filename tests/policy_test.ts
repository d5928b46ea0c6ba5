import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { RpcError } from "../lib/protocol/errors.ts";
import { fsError } from "../lib/server/host/os_errors.ts";
import {
  permissionDenied,
  permissionDeniedFromDeno,
} from "../lib/server/host/permission_errors.ts";

const LIB = new URL("../lib/server/", import.meta.url).href;

/**
 * Runs `body` in a child Deno with the given permission flags. The body
 * calls `report(promiseOrFn)`, which prints the wire error (or "ok") as JSON.
 */
async function runWithFlags(flags: string[], body: string): Promise<unknown[]> {
  const dir = await Deno.makeTempDir({ prefix: "policy_test_" });
  try {
    const script = `${dir}/child.ts`;
    await Deno.writeTextFile(
      script,
      `import { runFsOperation } from "${LIB}fs/operations.ts";
import { FileHandleTable } from "${LIB}fs/handles.ts";
import { MissingWatchTable } from "${LIB}fs/watch.ts";
import * as policy from "${LIB}host/permissions.ts";
const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
const fs = (method: string, params: unknown) => runFsOperation(method as never, params as never, context);
const results: unknown[] = [];
async function report(run: () => unknown): Promise<void> {
  try {
    await run();
    results.push("ok");
  } catch (err) {
    const e = err as { code?: unknown; message: string; data?: unknown; name: string };
    results.push({ name: e.name, code: e.code, message: e.message, data: e.data });
  }
}
${body}
console.log(JSON.stringify(results));
`,
    );
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--no-config", ...flags, script],
      stdin: "null",
      env: { NO_COLOR: "1" },
    }).output();
    const stderr = new TextDecoder().decode(child.stderr);
    assert(child.success, `child failed: ${stderr}`);
    return JSON.parse(new TextDecoder().decode(child.stdout));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function denied(permission: string, resource: string) {
  return {
    name: "RpcError",
    code: -32600,
    message: `${permission} access to "${resource}" is denied by the server's permissions; ` +
      `start it with --allow-${permission}=${resource}`,
    data: { kind: "permissionDenied", permission, resource, flag: `--allow-${permission}` },
  };
}

Deno.test("policy refuses reads outside --allow-read with a typed error", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "policy_scope_" }));
  try {
    await Deno.writeTextFile(`${dir}/inside.txt`, "hi");
    const results = await runWithFlags(
      [`--allow-read=${dir}`],
      `
await report(() => policy.requireRead("/etc/passwd"));
await report(() => fs("fs/readFile", { path: "file:///etc/passwd" }));
await report(() => fs("fs/readFile", { path: "file://${dir}/inside.txt" }));
await report(() => fs("fs/walk", { path: "file:///etc", options: { maxDepth: 1, maxDirectories: 1, maxEntries: 1, followDirectorySymlinks: false } }));
await report(() => fs("fs/open", { handleId: "h", path: "file:///etc/passwd" }));
await report(() => fs("fs/writeFile", { path: "file://${dir}/new.txt", dataBase64: "aGk=" }));
await report(() => fs("fs/copy", { sourcePath: "file://${dir}/inside.txt", destinationPath: "file://${dir}/c.txt", recursive: false }));
`,
    );
    assertEquals(results, [
      denied("read", "/etc/passwd"),
      denied("read", "/etc/passwd"),
      "ok",
      denied("read", "/etc"),
      denied("read", "/etc/passwd"),
      denied("write", `${dir}/new.txt`),
      denied("write", `${dir}/c.txt`),
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("policy scopes writes, net and run by their flags", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "policy_scope_" }));
  try {
    const results = await runWithFlags(
      [`--allow-read=${dir}`, `--allow-write=${dir}/ok.txt`, "--allow-net=127.0.0.1:8080"],
      `
await report(() => fs("fs/writeFile", { path: "file://${dir}/ok.txt", dataBase64: "aGk=" }));
await report(() => fs("fs/remove", { path: "file://${dir}/other" }));
await report(() => fs("fs/createDirectory", { path: "file://${dir}/sub" }));
await report(() => policy.requireNet("127.0.0.1", 8080));
await report(() => policy.requireNet("127.0.0.1", 8081));
await report(() => policy.requireNet("::1", 80));
await report(() => policy.requireRun("ls"));
`,
    );
    assertEquals(results, [
      "ok",
      denied("write", `${dir}/other`),
      denied("write", `${dir}/sub`),
      "ok",
      denied("net", "127.0.0.1:8081"),
      denied("net", "[::1]:80"),
      denied("run", "ls"),
    ]);
    // Only the file was writable, so it was written in place.
    assertEquals(await Deno.readTextFile(`${dir}/ok.txt`), "hi");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("permissionDeniedFromDeno converts Deno's NotCapable error", () => {
  const raw = new Deno.errors.NotCapable(
    'Requires read access to "/etc/shadow", run again with the --allow-read flag',
  );
  const converted = permissionDeniedFromDeno(raw);
  assert(converted instanceof RpcError);
  assertEquals(converted.toWire(), permissionDenied("read", "/etc/shadow").toWire());
  assertEquals(fsError(raw).toWire(), permissionDenied("read", "/etc/shadow").toWire());
  assertEquals(permissionDeniedFromDeno(new Error("other")), undefined);
});
