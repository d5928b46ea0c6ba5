import assert from "node:assert/strict";
import { RpcError } from "../lib/protocol/errors.ts";
import { METHODS, type ParamsOf } from "../lib/protocol/methods.ts";
import { FileHandleTable } from "../lib/server/fs/handles.ts";
import { FS_OPERATIONS, type FsMethod, runFsOperation } from "../lib/server/fs/operations.ts";
import { MissingWatchTable } from "../lib/server/fs/watch.ts";
import { uriFromPath } from "../lib/server/host/path_uri.ts";
import { HANDLERS } from "../lib/server/session/handlers.ts";

/** The fs methods whose params take a `sandbox`. */
type SandboxedFsMethod = {
  [M in FsMethod]: "sandbox" extends keyof ParamsOf<M> ? M : never;
}[FsMethod];

function methodsWithSandbox(): string[] {
  return Object.entries(METHODS).filter(([name, spec]) => {
    if (!name.startsWith("fs/")) return false;
    const properties = (spec.params.jsonSchema() as { properties?: Record<string, unknown> })
      .properties;
    return properties !== undefined && "sandbox" in properties;
  }).map(([name]) => name);
}

Deno.test("every filesystem request of the method table has an fs operations entry and its handler", () => {
  const filesystem = Object.entries(METHODS)
    .filter(([, spec]) => spec.kind === "request" && spec.family === "filesystem")
    .map(([name]) => name);
  assert.deepEqual(filesystem.filter((name) => !name.startsWith("fs/")), []);
  assert.deepEqual(Object.keys(FS_OPERATIONS).sort(), filesystem.sort());
  for (const name of filesystem) {
    assert.equal(typeof HANDLERS[name as FsMethod], "function", name);
  }
});

Deno.test("a sandboxed fs request of every method is checked against its sandbox", async () => {
  const base = await Deno.realPath(await Deno.makeTempDir({ dir: "/var/tmp", prefix: "fs-ops-" }));
  try {
    const secret = `${base}/secret`;
    await Deno.mkdir(secret);
    await Deno.writeTextFile(`${secret}/file`, "s");
    await Deno.mkdir(`${secret}/sub`);
    const at = (name: string) => uriFromPath(`${secret}/${name}`);
    const sandbox = {
      permissions: {
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            { path: { type: "special", value: { kind: "root" } }, access: "write" },
            { path: { type: "path", path: uriFromPath(secret) }, access: "deny" },
          ],
        },
        network: "enabled",
      },
      cwd: uriFromPath(base),
      workspaceRoots: [uriFromPath(base)],
      windowsSandboxLevel: "disabled",
    };
    // One request per sandboxed method, each touching a path inside the denied directory.
    const requests: { [M in SandboxedFsMethod]: Omit<ParamsOf<M>, "sandbox"> } = {
      "fs/readFile": { path: at("file") },
      "fs/writeFile": { path: at("file"), dataBase64: "aGk=" },
      "fs/createDirectory": { path: at("new") },
      "fs/getMetadata": { path: at("file") },
      "fs/canonicalize": { path: at("file") },
      "fs/readDirectory": { path: uriFromPath(secret) },
      // The denied directory itself walks to its one error (tests/sandbox_test.ts); below it, no.
      "fs/walk": {
        path: at("sub"),
        options: { maxDepth: 1, maxDirectories: 1, maxEntries: 1, followDirectorySymlinks: false },
      },
      "fs/remove": { path: at("file") },
      "fs/copy": {
        sourcePath: at("file"),
        destinationPath: `${uriFromPath(base)}/copy`,
        recursive: false,
      },
      "fs/open": { handleId: "h", path: at("file"), mode: "read" },
    };
    assert.deepEqual(Object.keys(requests).sort(), methodsWithSandbox().sort());
    const context = { files: new FileHandleTable(), watches: new MissingWatchTable(), notify() {} };
    for (const [method, params] of Object.entries(requests)) {
      const outcome = await Promise.resolve()
        .then(() => runFsOperation(method as FsMethod, { ...params, sandbox } as never, context))
        .then(() => "ok", (err) => err instanceof RpcError ? `${err.code} ${err.message}` : err);
      assert.equal(outcome, "-32600 Permission denied (os error 13)", method);
    }
    context.files.closeAll();
    assert.equal(await Deno.readTextFile(`${secret}/file`), "s", "nothing was written");
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});
