import assert from "node:assert/strict";
import { normaliseReceived } from "./fixtures/record_transcripts.ts";

Deno.test("fixtures:record replaces every machine- and run-specific value by its placeholder", () => {
  const values = {
    sessions: new Map([["3f1c6f0e-0000-4000-8000-000000000001", "<SESSION_ID>"]]),
    packageDir: "/srv/ci/codex/vendor/x86_64-unknown-linux-musl",
    codexHome: "/srv/ci/exec-server-record-abc",
    httpPort: 40123,
  };
  const received = {
    id: 1,
    result: {
      sessionId: "3f1c6f0e-0000-4000-8000-000000000001",
      providerId: "sha256:0123",
      hostname: "build-box-7",
      codexHomeDir: "file:///srv/ci/exec-server-record-abc",
      prependPathDirs: ["file:///srv/ci/codex/vendor/x86_64-unknown-linux-musl/codex-path"],
      modifiedAtMs: 1796117562964,
      createdAtMs: 0,
      message: "error sending request for url (http://127.0.0.1:40123/abort)",
      parse: "failed to parse websocket JSON-RPC message from exec-server websocket " +
        "127.0.0.1:51234: EOF while parsing a value at line 1 column 0",
    },
  };
  assert.deepEqual(normaliseReceived(received, values), {
    id: 1,
    result: {
      sessionId: "<SESSION_ID>",
      providerId: "<PROVIDER_ID>",
      hostname: "<HOSTNAME>",
      codexHomeDir: "file://<CODEX_HOME>",
      prependPathDirs: ["file://<CODEX_PKG_DIR>/codex-path"],
      modifiedAtMs: "<MTIME_MS>",
      createdAtMs: 0,
      message: "error sending request for url (http://127.0.0.1:<HTTP_PORT>/abort)",
      parse: "failed to parse websocket JSON-RPC message from exec-server websocket " +
        "<PEER_ADDR>: EOF while parsing a value at line 1 column 0",
    },
  });
});
