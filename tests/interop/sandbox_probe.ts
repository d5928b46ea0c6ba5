/**
 * Asks an exec-server directly whether it runs a sandboxed `process/start`, the way Codex sends
 * it in `workspace-write` mode. Used to decide whether the interop test's sandbox case applies.
 *
 * @module
 */

/**
 * The `sandbox` member Codex CLI 0.171.0 sends with `process/start` in `workspace-write` mode
 * (recorded with the logging proxy), for a workspace at `workspaceUri`.
 *
 * @param workspaceUri The workspace as a `file:` URI.
 * @returns The `FileSystemSandboxContext` object.
 */
export function workspaceWriteSandbox(workspaceUri: string): Record<string, unknown> {
  const special = (kind: string, subpath?: string) => ({
    type: "special",
    value: subpath === undefined ? { kind } : { kind, subpath },
  });
  const readOnlyIfPresent = (subpath: string) => ({
    path: special("project_roots", subpath),
    access: "read",
    missing_path_behavior: "skip",
  });
  return {
    permissions: {
      type: "managed",
      file_system: {
        type: "restricted",
        entries: [
          { path: special("root"), access: "read" },
          { path: special("project_roots"), access: "write" },
          { path: special("slash_tmp"), access: "write" },
          { path: special("tmpdir"), access: "write" },
          readOnlyIfPresent(".git"),
          readOnlyIfPresent(".agents"),
          readOnlyIfPresent(".codex"),
          readOnlyIfPresent(".aws"),
        ],
      },
      network: "restricted",
    },
    cwd: workspaceUri,
    workspaceRoots: [workspaceUri],
    windowsSandboxLevel: "disabled",
    windowsSandboxProxySettingsMode: "reconcile",
    useLegacyLandlock: false,
  };
}

/**
 * Starts `/bin/true` with a `workspace-write` sandbox on a fresh session of the server.
 *
 * @param url The exec-server's `ws://` URL.
 * @param workspace A directory to use as the workspace root.
 * @returns `undefined` when the server accepted the sandboxed start, else its error message.
 */
export async function probeSandboxedStart(
  url: string,
  workspace: string,
): Promise<string | undefined> {
  const workspaceUri = new URL(`file://${workspace}`).href;
  const socket = new WebSocket(url);
  const replies = new Map<number, PromiseWithResolvers<Record<string, unknown>>>();
  const closed = Promise.withResolvers<void>();
  socket.onmessage = (event: MessageEvent<string>) => {
    const message = JSON.parse(event.data) as Record<string, unknown>;
    if (typeof message.id === "number") replies.get(message.id)?.resolve(message);
  };
  socket.onclose = () => {
    closed.resolve();
    for (const reply of replies.values()) reply.reject(new Error("Connection closed"));
  };
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });

  function request(id: number, method: string, params: unknown): Promise<Record<string, unknown>> {
    const reply = Promise.withResolvers<Record<string, unknown>>();
    replies.set(id, reply);
    socket.send(JSON.stringify({ id, method, params }));
    return reply.promise;
  }

  try {
    await request(1, "initialize", { clientName: "interop-sandbox-probe" });
    socket.send(JSON.stringify({ method: "initialized", params: {} }));
    const reply = await request(2, "process/start", {
      processId: "interop-sandbox-probe",
      argv: ["/bin/true"],
      cwd: workspaceUri,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWriteSandbox(workspaceUri),
    });
    const error = reply.error as { message?: string } | undefined;
    return error === undefined ? undefined : error.message ?? JSON.stringify(error);
  } finally {
    socket.close();
    await closed.promise;
  }
}
