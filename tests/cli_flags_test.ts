/**
 * The table-driven flag parser (`lib/cli/flags.ts`) and the server's flag
 * table: values, defaults, refusals and `--help` all come from one table.
 */

import assert from "node:assert/strict";
import { defineFlags, FlagError, parseFlags, renderFlagHelp } from "../lib/cli/flags.ts";
import { parseServerFlags, SERVER_FLAGS, serverHelp } from "../lib/cli/server_flags.ts";

const TABLE = defineFlags({
  name: { kind: "string", value: "NAME", help: "a name" },
  count: { kind: "integer", value: "N", default: 3, max: 10, help: "how many" },
  mode: { kind: "enum", value: "MODE", choices: ["a", "b", "c"], default: "a", help: "a mode" },
  origin: { kind: "list", value: "ORIGIN", help: "an origin" },
  quiet: { kind: "boolean", short: "q", help: "say less" },
});

function refusal(args: string[], options?: { rest?: boolean }): string {
  try {
    parseFlags(TABLE, args, options);
  } catch (err) {
    assert.ok(err instanceof FlagError);
    return err.message;
  }
  assert.fail(`${args.join(" ")} was accepted`);
}

Deno.test("flags absent from the command line take their declared defaults", () => {
  const { flags, rest } = parseFlags(TABLE, []);
  assert.deepEqual(flags, {
    name: undefined,
    count: 3,
    mode: "a",
    origin: [],
    quiet: false,
  });
  assert.deepEqual(rest, []);
});

Deno.test("flags accept --name value, --name=value and one-letter aliases", () => {
  const { flags } = parseFlags(TABLE, ["--name", "x", "--count=10", "--mode=c", "-q"]);
  assert.deepEqual(flags, { name: "x", count: 10, mode: "c", origin: [], quiet: true });
  assert.equal(parseFlags(TABLE, ["--name=a=b"]).flags.name, "a=b");
  assert.equal(parseFlags(TABLE, ["--name", "x", "--name", "y"]).flags.name, "y");
});

Deno.test("a repeatable flag collects every value in order", () => {
  const { flags } = parseFlags(TABLE, ["--origin", "A", "--origin=B", "--origin", "A"]);
  assert.deepEqual(flags.origin, ["A", "B", "A"]);
});

Deno.test("bad flags are refused with one line naming the flag", () => {
  assert.equal(refusal(["--bogus"]), "unknown option '--bogus'");
  assert.equal(refusal(["-x"]), "unknown option '-x'");
  assert.equal(refusal(["stray"]), "unknown option 'stray'");
  assert.equal(refusal(["--quiet=yes"]), "option '--quiet' does not take a value");
  assert.equal(refusal(["--name"]), "option '--name <value>' argument missing");
  assert.equal(refusal(["--origin"]), "option '--origin <value>' argument missing");
  assert.equal(refusal(["--count", "0"]), '--count must be a positive integer up to 10, got "0"');
  assert.equal(refusal(["--count", "11"]), '--count must be a positive integer up to 10, got "11"');
  assert.equal(
    refusal(["--count", "1.5"]),
    '--count must be a positive integer up to 10, got "1.5"',
  );
  assert.equal(refusal(["--mode", "d"]), '--mode must be a, b or c, got "d"');
});

Deno.test("with rest, the first non-flag argument or -- ends the flags", () => {
  assert.deepEqual(parseFlags(TABLE, ["-q", "ls", "-l", "--name"], { rest: true }).rest, [
    "ls",
    "-l",
    "--name",
  ]);
  const dashed = parseFlags(TABLE, ["--name", "x", "--", "--quiet"], { rest: true });
  assert.equal(dashed.flags.name, "x");
  assert.equal(dashed.flags.quiet, false);
  assert.deepEqual(dashed.rest, ["--quiet"]);
  assert.equal(refusal(["--bogus", "ls"], { rest: true }), "unknown option '--bogus'");
});

Deno.test("the help lists every flag with its value name, choices, default and repeatability", () => {
  assert.equal(
    renderFlagHelp(TABLE),
    [
      "  --name NAME      a name",
      "  --count N        how many (default 3)",
      "  --mode MODE      a mode (a, b or c; default a)",
      "  --origin ORIGIN  an origin (repeatable)",
      "  -q, --quiet      say less",
    ].join("\n"),
  );
});

Deno.test("exec-server --help names every flag of the server's table", () => {
  const help = serverHelp();
  for (const name of Object.keys(SERVER_FLAGS)) assert.match(help, new RegExp(`--${name}\\b`));
});

Deno.test("no server flag's help restates what the table renders: default, choices, repeatable", () => {
  for (const [name, spec] of Object.entries(SERVER_FLAGS)) {
    if (spec.kind === "list") assert.doesNotMatch(spec.help, /repeatable/, name);
    if (spec.kind === "enum") assert.doesNotMatch(spec.help, /\(.*\bor\b.*\)$/, name);
    if ("default" in spec && spec.default !== undefined) {
      assert.doesNotMatch(spec.help, /\bdefault\b/, name);
    }
  }
});

Deno.test("the server's flags default to the documented values", () => {
  const flags = parseServerFlags([]);
  assert.deepEqual(flags.listen, { kind: "ws", host: "127.0.0.1", port: 0 });
  assert.equal(flags["concurrent-requests"], 1);
  assert.equal(flags["session-ttl"], 80);
  assert.equal(flags["process-retention"], 80);
  assert.equal(flags["max-message-bytes"], 64 * 1024 * 1024);
  assert.equal(flags["max-connections"], 1024);
  assert.equal(flags["log-level"], "warn");
  assert.deepEqual(parseServerFlags(["--listen", "ws://[::1]:9"]).listen, {
    kind: "ws",
    host: "::1",
    port: 9,
  });
  assert.deepEqual(parseServerFlags(["--listen=stdio://"]).listen, { kind: "stdio" });
});

Deno.test("flags accept several one-letter boolean aliases at once (-it), and only those", () => {
  const table = defineFlags({
    stdin: { kind: "boolean", short: "i", help: "forward stdin" },
    tty: { kind: "boolean", short: "t", help: "a terminal" },
    env: { kind: "list", short: "e", value: "K=V", help: "a variable" },
  });
  const { flags, rest } = parseFlags(table, ["-it", "--", "bash"], { rest: true });
  assert.deepEqual(flags, { stdin: true, tty: true, env: [] });
  assert.deepEqual(rest, ["bash"]);
  assert.throws(
    () => parseFlags(table, ["-ie", "A=1"]),
    FlagError,
    "a value flag cannot be bundled",
  );
  assert.throws(() => parseFlags(table, ["-ix"]), FlagError);
});
