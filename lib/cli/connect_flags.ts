/**
 * The flags of a command that connects to a remote exec-server (`exec-server
 * run`, `exec-server mcp --url`): where the server is, the bearer token and
 * the CA to trust. Declared once here; each command puts them in its table.
 *
 * @module
 */

import { defineFlags, FlagError, type FlagValues } from "./flags.ts";
import type { TokenSource } from "../client/dial.ts";
import { tokenFromEnv, tokenFromFile } from "../client/token_source.ts";

/** Default of `--reconnect-timeout`: seconds a lost connection is retried before giving up. */
export const DEFAULT_RECONNECT_TIMEOUT_S = 10;

/** The connection flags. */
export const CONNECT_FLAGS = defineFlags({
  url: {
    kind: "string",
    value: "URL",
    help: "the server, ws://HOST:PORT or wss://HOST:PORT\n(default: $EXEC_SERVER_URL)",
  },
  "token-file": {
    kind: "string",
    value: "FILE",
    help: 'send the file\'s content (trimmed) as "Authorization: Bearer <token>",\n' +
      "read again before every reconnect (a capability token or a JWT)\n" +
      "(default: $EXEC_SERVER_TOKEN_FILE)",
  },
  "token-env": {
    kind: "string",
    value: "NAME",
    help: "send the value of environment variable NAME instead (trimmed)",
  },
  cacert: {
    kind: "string",
    value: "FILE",
    help: "trust the CA certificate(s) in FILE (PEM) for a wss:// server",
  },
  "reconnect-timeout": {
    kind: "integer",
    value: "SECONDS",
    default: DEFAULT_RECONNECT_TIMEOUT_S,
    max: 3600,
    help: "how long a lost connection is retried before giving up",
  },
});

/** The parsed values of {@linkcode CONNECT_FLAGS}. */
export type ConnectFlags = FlagValues<typeof CONNECT_FLAGS>;

/** A remote server and how to reach it, from the connection flags. */
export interface RemoteServer {
  /** The `ws://` or `wss://` URL. */
  url: string;
  /** The bearer token's source, if one is given. */
  token?: TokenSource;
  /** Extra CA certificates (PEM) to trust. */
  caCerts?: string[];
  /** How long a lost connection is retried, in ms. */
  reconnectTimeoutMs: number;
}

/**
 * The remote server the connection flags name (`--url`, else
 * `$EXEC_SERVER_URL`), or `undefined` when neither is set. The token file
 * and the CA file are read here, so a missing one is a usage error.
 *
 * @example
 * ```ts
 * import { remoteServerFromFlags } from "./connect_flags.ts";
 * const remote = await remoteServerFromFlags({
 *   url: "ws://127.0.0.1:8765",
 *   "token-file": undefined,
 *   "token-env": undefined,
 *   cacert: undefined,
 *   "reconnect-timeout": 10,
 * });
 * console.log(remote?.url, remote?.reconnectTimeoutMs); // "ws://127.0.0.1:8765" 10000
 * ```
 *
 * @param values The parsed connection flags.
 * @throws {FlagError} For a URL that is not `ws:`/`wss:`, both token flags, an unreadable file.
 */
export async function remoteServerFromFlags(
  values: ConnectFlags,
): Promise<RemoteServer | undefined> {
  const url = values.url ?? Deno.env.get("EXEC_SERVER_URL");
  if (!url) return undefined;
  if (!/^wss?:\/\//i.test(url)) {
    throw new FlagError(`--url must be a ws:// or wss:// URL, got "${url}"`);
  }
  if (values["token-file"] !== undefined && values["token-env"] !== undefined) {
    throw new FlagError("--token-file and --token-env cannot be used together");
  }
  let token: TokenSource | undefined;
  try {
    const tokenFile = values["token-file"] ??
      (values["token-env"] === undefined ? Deno.env.get("EXEC_SERVER_TOKEN_FILE") : undefined);
    if (tokenFile) token = await tokenFromFile(tokenFile);
    if (values["token-env"] !== undefined) token = tokenFromEnv(values["token-env"]);
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
  let caCerts: string[] | undefined;
  if (values.cacert !== undefined) {
    try {
      caCerts = [await Deno.readTextFile(values.cacert)];
    } catch (err) {
      throw new FlagError(`cannot read --cacert "${values.cacert}": ${(err as Error).message}`);
    }
  }
  return { url, token, caCerts, reconnectTimeoutMs: values["reconnect-timeout"] * 1000 };
}
