/**
 * `--ws-auth signed-bearer-token`: the token matrix of tests/helpers/jwt_matrix.ts
 * against this server (and, when `CODEX_BIN` is set, against the reference
 * too, requiring the same status and body token by token), the clock-skew
 * bounds with an injected clock, the browser subprotocol form, and the
 * start-up errors of the secret and flags.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  buildMatrix,
  MATRIX_AUDIENCE,
  MATRIX_CONFIGS,
  MATRIX_ISSUER,
  MATRIX_SECRET,
  type MatrixCase,
  type MatrixConfig,
  matrixFlags,
  mint,
} from "./helpers/jwt_matrix.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import { LineSplitStream } from "./helpers/line_split_stream.ts";
import { MAIN_TS, SERVER_PERMISSIONS, ServerProcess } from "./helpers/server_harness.ts";
import { verifySignedBearer } from "../lib/server/listen/signed_bearer.ts";
import { connect, tokenFromEnv, tokenFromFile } from "../mod.ts";
import { jwtVerify } from "jose";

const CODEX_BIN = Deno.env.get("CODEX_BIN");

/** The answers of one server to every row: status and (for a refusal) body. */
type Answers = Map<string, { status: number; body: string }>;

/** Runs `fn` with a fresh directory holding `secret` (the matrix secret), removed afterwards. */
async function withSecretDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ dir: Deno.env.get("HOME"), prefix: "es-jwt-" });
  try {
    await Deno.writeTextFile(`${dir}/secret`, `${MATRIX_SECRET}\n`);
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function ask(port: number, rows: MatrixCase[], answers: Answers): Promise<void> {
  for (const row of rows) {
    await using raw = await RawWebSocket.connect(port, { headers: row.headers });
    answers.set(`${row.config}: ${row.name}`, {
      status: raw.answer.status,
      body: raw.answer.status === 101 ? "" : raw.answer.body,
    });
  }
}

/** Runs the matrix against this server (one process per configuration). */
async function askOurs(rows: MatrixCase[], dir: string): Promise<Answers> {
  const answers: Answers = new Map();
  for (const config of Object.keys(MATRIX_CONFIGS) as MatrixConfig[]) {
    await using server = await ServerProcess.start({
      listen: "ws",
      args: matrixFlags(config, `${dir}/secret`),
    });
    await ask(server.port, rows.filter((r) => r.config === config), answers);
  }
  return answers;
}

/** Runs the matrix against the reference (`$CODEX_BIN exec-server`). */
async function askReference(bin: string, rows: MatrixCase[], dir: string): Promise<Answers> {
  const answers: Answers = new Map();
  for (const config of Object.keys(MATRIX_CONFIGS) as MatrixConfig[]) {
    const child = new Deno.Command(bin, {
      args: [
        "exec-server",
        "--listen",
        "ws://127.0.0.1:0",
        ...matrixFlags(config, `${dir}/secret`),
      ],
      env: { CODEX_HOME: dir, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const lines = child.stdout.pipeThrough(new LineSplitStream()).getReader();
    try {
      const first = await lines.read();
      assert.ok(!first.done, "the reference printed no URL");
      await ask(
        Number(new URL(String(first.value).trim()).port),
        rows.filter((r) => r.config === config),
        answers,
      );
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await lines.cancel();
    }
  }
  return answers;
}

function expectedDiff(rows: MatrixCase[], answers: Answers): string[] {
  return rows.flatMap((row) => {
    const got = answers.get(`${row.config}: ${row.name}`)!;
    const want = row.accept ? 101 : 401;
    return got.status === want ? [] : [`${row.config}: ${row.name}: ${got.status}, want ${want}`];
  });
}

Deno.test("signed-bearer-token: every matrix token gets the reference's recorded answer", async () => {
  await withSecretDir(async (dir) => {
    const rows = await buildMatrix();
    const ours = await askOurs(rows, dir);
    assert.deepEqual(expectedDiff(rows, ours), []);
    assert.ok(rows.some((r) => r.accept) && rows.some((r) => !r.accept));
  });
});

Deno.test({
  name: CODEX_BIN
    ? "signed-bearer-token: the reference and this server give each matrix token the same status and body"
    : "signed-bearer-token: the reference and this server agree on the matrix (skipped: CODEX_BIN is not set)",
  ignore: CODEX_BIN === undefined,
  async fn() {
    await withSecretDir(async (dir) => {
      const rows = await buildMatrix();
      const reference = await askReference(CODEX_BIN!, rows, dir);
      assert.deepEqual(expectedDiff(rows, reference), [], "the recorded answers are stale");
      const ours = await askOurs(rows, dir);
      const differ = [...reference].filter(([name, answer]) =>
        JSON.stringify(ours.get(name)) !== JSON.stringify(answer)
      ).map(([name, answer]) =>
        `${name}: reference ${JSON.stringify(answer)}, ours ${JSON.stringify(ours.get(name))}`
      );
      assert.deepEqual(differ, []);
    });
  },
});

/** How many matrix tokens `jose`'s `jwtVerify` answers unlike the reference (docs/guide/configuration.md, Authentication). */
const JOSE_DIFFERENCES = 52;

Deno.test(`signed-bearer-token: jose's jwtVerify answers ${JOSE_DIFFERENCES} matrix tokens unlike the reference (why the verifier is written here)`, async () => {
  const rows = await buildMatrix();
  const key = new TextEncoder().encode(MATRIX_SECRET);
  let differ = 0;
  for (const row of rows) {
    const token = /^Bearer (.*)$/.exec(row.headers.Authorization ?? "")?.[1];
    const config = MATRIX_CONFIGS[row.config];
    const accepted = token !== undefined && await jwtVerify(token, key, {
      algorithms: ["HS256"],
      issuer: config.issuer,
      audience: config.audience,
      clockTolerance: config.skewSeconds ?? 30,
      requiredClaims: ["exp"],
    }).then(() => true, () => false);
    if (accepted !== row.accept) differ++;
  }
  assert.equal(`${differ} of ${rows.length}`, `${JOSE_DIFFERENCES} of ${rows.length}`);
});

Deno.test("signed-bearer-token: exp and nbf are honoured up to exactly the clock skew", async () => {
  const secret = new TextEncoder().encode(MATRIX_SECRET);
  const now = 1_800_000_000;
  const at = { secret, maxClockSkewSeconds: 60n, now: () => now * 1000 + 999 };
  const token = (claims: string) => mint(claims);
  assert.equal(await verifySignedBearer(await token(`{"exp":${now - 60}}`), at), undefined);
  assert.equal(
    await verifySignedBearer(await token(`{"exp":${now - 61}}`), at),
    "expired websocket jwt",
  );
  assert.equal(
    await verifySignedBearer(await token(`{"exp":${now + 1},"nbf":${now + 60}}`), at),
    undefined,
  );
  assert.equal(
    await verifySignedBearer(await token(`{"exp":${now + 1},"nbf":${now + 61}}`), at),
    "websocket jwt is not valid yet",
  );
  const noSkew = { ...at, maxClockSkewSeconds: 0n };
  assert.equal(await verifySignedBearer(await token(`{"exp":${now}}`), noSkew), undefined);
  assert.equal(
    await verifySignedBearer(await token(`{"exp":${now - 1}}`), noSkew),
    "expired websocket jwt",
  );
  // The default skew is 30 s.
  const byDefault = { secret, now: at.now };
  assert.equal(await verifySignedBearer(await token(`{"exp":${now - 30}}`), byDefault), undefined);
  assert.equal(
    await verifySignedBearer(await token(`{"exp":${now - 31}}`), byDefault),
    "expired websocket jwt",
  );
  // The largest skew saturates instead of wrapping around.
  const huge = { ...at, maxClockSkewSeconds: (1n << 63n) - 1n };
  assert.equal(await verifySignedBearer(await token(`{"exp":${now - 1e9}}`), huge), undefined);
  assert.equal(
    await verifySignedBearer(await token(`{"exp":9223372036854775807}`), huge),
    undefined,
  );
});

Deno.test("signed-bearer-token: browsers present the JWT as a subprotocol, never echoed", async () => {
  await withSecretDir(async (dir) => {
    await using server = await ServerProcess.start({
      listen: "ws",
      args: matrixFlags("strict", `${dir}/secret`),
    });
    const later = Math.floor(Date.now() / 1000) + 600;
    const good = await mint(`{"iss":"${MATRIX_ISSUER}","aud":"${MATRIX_AUDIENCE}","exp":${later}}`);
    const expired = await mint(`{"iss":"${MATRIX_ISSUER}","aud":"${MATRIX_AUDIENCE}","exp":1}`);
    const upgrade = async (headers: Record<string, string>) => {
      await using raw = await RawWebSocket.connect(server.port, { headers });
      return { ...raw.answer, protocol: raw.answer.headers.get("sec-websocket-protocol") };
    };
    const accepted = await upgrade({
      "Sec-WebSocket-Protocol": `exec-server, exec-server.bearer.${good}`,
    });
    assert.equal(accepted.status, 101);
    assert.equal(accepted.protocol, "exec-server");
    const refused = await upgrade({
      "Sec-WebSocket-Protocol": `exec-server, exec-server.bearer.${expired}`,
    });
    assert.deepEqual([refused.status, refused.body], [401, "expired websocket jwt"]);
    const headerWins = await upgrade({
      Authorization: `Bearer ${expired}`,
      "Sec-WebSocket-Protocol": `exec-server, exec-server.bearer.${good}`,
    });
    assert.equal(headerWins.status, 401);
    const query = await upgrade({ Authorization: `Bearer ${good}` });
    assert.equal(query.status, 101);
    await using inQuery = await RawWebSocket.connect(server.port, { path: `/?token=${good}` });
    assert.equal(inQuery.answer.status, 401);
  });
});

Deno.test("signed-bearer-token: the secret is read once at start-up and never logged", async () => {
  await withSecretDir(async (dir) => {
    const server = await ServerProcess.start({
      listen: "ws",
      args: [...matrixFlags("open", `${dir}/secret`), "--log-level", "debug"],
    });
    const later = Math.floor(Date.now() / 1000) + 600;
    const replaced = "f".repeat(64);
    await Deno.writeTextFile(`${dir}/secret`, replaced);
    const status = async (secret: string) => {
      const token = await mint(`{"exp":${later}}`, { secret });
      await using raw = await RawWebSocket.connect(server.port, {
        headers: { Authorization: `Bearer ${token}` },
      });
      return raw.answer.status;
    };
    assert.equal(await status(MATRIX_SECRET), 101);
    assert.equal(await status(replaced), 401);
    await server.stop();
    const stderr = await server.stderr;
    assert.ok(!stderr.includes(MATRIX_SECRET.slice(0, 16)), stderr);
  });
});

Deno.test("signed-bearer-token: a bad secret file or flag is one line on stderr and exit code 2", async () => {
  await withSecretDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/empty`, " \n\t\n");
    await Deno.writeTextFile(`${dir}/short`, `${"s".repeat(31)}\n`);
    await Deno.writeTextFile(`${dir}/exact`, "s".repeat(32));
    const start = (args: string[]) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", ...SERVER_PERMISSIONS, MAIN_TS, "--listen", "ws://127.0.0.1:0", ...args],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      });
    const signed = ["--ws-auth", "signed-bearer-token"];
    const cases: [string[], RegExp][] = [
      [signed, /needs --ws-shared-secret-file/],
      [[...signed, "--ws-shared-secret-file", `${dir}/missing`], /Cannot read secret file/],
      [[...signed, "--ws-shared-secret-file", dir], /Cannot read secret file/],
      [[...signed, "--ws-shared-secret-file", `${dir}/empty`], /it is empty/],
      [[...signed, "--ws-shared-secret-file", `${dir}/short`], /31 bytes, at least 32/],
      [
        [
          ...signed,
          "--ws-shared-secret-file",
          `${dir}/secret`,
          "--ws-max-clock-skew-seconds",
          "-1",
        ],
        /--ws-max-clock-skew-seconds must be an integer/,
      ],
      [
        [
          ...signed,
          "--ws-shared-secret-file",
          `${dir}/secret`,
          "--ws-max-clock-skew-seconds",
          "9223372036854775808",
        ],
        /--ws-max-clock-skew-seconds must be an integer/,
      ],
      [
        [...signed, "--ws-shared-secret-file", `${dir}/secret`, "--ws-token-file", `${dir}/secret`],
        /--ws-token-file needs --ws-auth capability-token/,
      ],
      [
        ["--ws-issuer", "x", "--ws-audience", "y"],
        /--ws-issuer, --ws-audience need --ws-auth signed-bearer-token/,
      ],
      [
        [
          "--ws-auth",
          "capability-token",
          "--ws-token-file",
          `${dir}/secret`,
          "--ws-shared-secret-file",
          `${dir}/secret`,
        ],
        /--ws-shared-secret-file needs --ws-auth signed-bearer-token/,
      ],
    ];
    for (const [args, message] of cases) {
      const out = await start(args).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 2, `${args.join(" ")}: ${stderr}`);
      assert.equal(out.stdout.length, 0);
      assert.match(stderr, /^error: [^\n]+\n$/, args.join(" "));
      assert.match(stderr, message);
      assert.ok(!stderr.includes(MATRIX_SECRET) && !stderr.includes("s".repeat(31)));
    }
    // Exactly 32 bytes is enough, and a blank issuer or audience is not checked.
    await using server = await ServerProcess.start({
      listen: "ws",
      args: [
        ...signed,
        "--ws-shared-secret-file",
        `${dir}/exact`,
        "--ws-issuer",
        " ",
        "--ws-audience",
        "",
      ],
    });
    const token = await mint(`{"exp":${Math.floor(Date.now() / 1000) + 600}}`, {
      secret: "s".repeat(32),
    });
    await using raw = await RawWebSocket.connect(server.port, {
      headers: { Authorization: `Bearer ${token}` },
    });
    assert.equal(raw.answer.status, 101);
  });
});

async function runCli(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN_TS, "run", ...args],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("exec-server run takes a signed bearer token from a file or an environment variable", async () => {
  await withSecretDir(async (dir) => {
    await using server = await ServerProcess.start({
      listen: "ws",
      args: matrixFlags("open", `${dir}/secret`),
    });
    const later = Math.floor(Date.now() / 1000) + 600;
    await Deno.writeTextFile(`${dir}/jwt`, `${await mint(`{"exp":${later}}`)}\n`);
    await Deno.writeTextFile(`${dir}/blank`, "\n");
    const command = ["--", "/bin/sh", "-c", "exit 3"];
    const fromFile = await runCli(["--url", server.url, "--token-file", `${dir}/jwt`, ...command]);
    assert.equal(fromFile.code, 3, fromFile.stderr);
    const env = { EXEC_SERVER_JWT: await mint(`{"exp":${later}}`) };
    const fromEnv = await runCli([
      "--url",
      server.url,
      "--token-env",
      "EXEC_SERVER_JWT",
      ...command,
    ], env);
    assert.equal(fromEnv.code, 3, fromEnv.stderr);
    const expired = await runCli(
      ["--url", server.url, "--token-env", "EXEC_SERVER_JWT", ...command],
      { EXEC_SERVER_JWT: await mint(`{"exp":1}`) },
    );
    assert.equal(expired.code, 255);
    assert.match(expired.stderr, /refused the token \(HTTP 401\)/);
    for (
      const [args, message] of [
        [
          ["--token-env", "EXEC_SERVER_UNSET_VARIABLE"],
          /EXEC_SERVER_UNSET_VARIABLE: it is unset or empty/,
        ],
        [["--token-file", `${dir}/blank`], /it is empty/],
        [["--token-file", `${dir}/missing`], /Cannot read token file/],
        [
          ["--token-file", `${dir}/jwt`, "--token-env", "EXEC_SERVER_JWT"],
          /cannot be used together/,
        ],
      ] as const
    ) {
      const bad = await runCli(["--url", server.url, ...args, ...command], env);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, message);
    }
  });
});

Deno.test("client tokenFromFile and tokenFromEnv work for both auth modes, the file re-read each dial", async () => {
  await withSecretDir(async (dir) => {
    const later = Math.floor(Date.now() / 1000) + 600;
    await Deno.writeTextFile(`${dir}/jwt`, await mint(`{"exp":${later}}`));
    await using signed = await ServerProcess.start({
      listen: "ws",
      args: matrixFlags("open", `${dir}/secret`),
    });
    {
      await using client = await connect(signed.url, { token: await tokenFromFile(`${dir}/jwt`) });
      assert.ok(client.sessionId);
    }
    await using capability = await ServerProcess.start({
      listen: "ws",
      args: ["--ws-auth", "capability-token", "--ws-token-file", `${dir}/secret`],
    });
    Deno.env.set("EXEC_SERVER_TEST_TOKEN", MATRIX_SECRET);
    try {
      await using client = await connect(capability.url, {
        token: tokenFromEnv("EXEC_SERVER_TEST_TOKEN"),
      });
      assert.ok(client.sessionId);
    } finally {
      Deno.env.delete("EXEC_SERVER_TEST_TOKEN");
    }
    const source = await tokenFromFile(`${dir}/jwt`);
    await Deno.writeTextFile(`${dir}/jwt`, " rotated \n");
    assert.equal(await source(), "rotated");
    await Deno.writeTextFile(`${dir}/jwt`, "");
    await assert.rejects(async () => await source(), /it is empty/);
    await assert.rejects(() => connect(signed.url, { token: source }));
  });
});
