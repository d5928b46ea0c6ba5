/**
 * MCP over this process's stdin and stdout, for the SDK's `Server`: one
 * JSON-RPC message per line, read and written with the repository's own
 * newline-delimited transport (`lib/rpc`), which reads `Deno.stdin`
 * directly, splits lines in linear time and bounds them. Unlike the SDK's
 * Node-stream transport it notices the end of stdin (the MCP client went
 * away), and a line that is too long or not JSON-RPC is answered with a
 * JSON-RPC parse error (`-32700`) and skipped instead of ending the
 * connection.
 *
 * @module
 */

import { type ByteSink, type ByteSource, stdioTransport } from "../rpc/stdio_transport.ts";
import type { Transport as LineTransport } from "../rpc/transport.ts";
import { type JSONRPCMessage, JSONRPCMessageSchema, type Transport } from "./sdk.ts";

/** Largest MCP message read from stdin: 32 MiB (a longer line is answered with -32700 and skipped). */
export const MCP_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

const PARSE_ERROR = -32700;

/** The SDK's `Transport` on a pair of byte channels (stdin and stdout by default). */
export class McpStdioTransport implements Transport {
  /** Set by the SDK: a message arrived. */
  onmessage?: (message: JSONRPCMessage) => void;
  /** Set by the SDK: the connection ended. */
  onclose?: () => void;
  /** Set by the SDK: something went wrong that did not end the connection. */
  onerror?: (error: Error) => void;
  #lines: LineTransport;
  #closed = false;

  /**
   * Creates the transport; the SDK starts it.
   *
   * @param input Bytes from the MCP client.
   * @param output Bytes to the MCP client.
   * @param maxMessageBytes The longest line read.
   */
  constructor(
    input: ByteSource = Deno.stdin,
    output: ByteSink = Deno.stdout,
    maxMessageBytes = MCP_MAX_MESSAGE_BYTES,
  ) {
    this.#lines = stdioTransport(input, output, {
      maxLineBytes: maxMessageBytes,
      label: "MCP stdio",
    });
  }

  /** Starts reading (called by the SDK's `connect`). */
  start(): Promise<void> {
    this.#read().catch((err) => this.onerror?.(err as Error)).finally(() => this.close());
    return Promise.resolve();
  }

  async #read(): Promise<void> {
    while (!this.#closed) {
      const inbound = await this.#lines.receive!();
      if (inbound === null) return;
      if (typeof inbound !== "string") {
        await this.#parseError(`message refused: ${inbound.fault}`);
        continue;
      }
      let message: JSONRPCMessage;
      try {
        message = JSONRPCMessageSchema.parse(JSON.parse(inbound));
      } catch {
        await this.#parseError("message is not a JSON-RPC 2.0 message");
        continue;
      }
      this.onmessage?.(message);
    }
  }

  #parseError(message: string): Promise<void> {
    return this.#lines.send(
      JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: PARSE_ERROR, message } }),
    );
  }

  /**
   * Sends one message (waits while the output is backed up).
   *
   * @param message The JSON-RPC message.
   */
  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) return;
    await this.#lines.send(JSON.stringify(message));
  }

  /** Closes stdin's reading and stdout; tells the SDK once. */
  close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#lines.close();
      this.onclose?.();
    }
    return Promise.resolve();
  }
}
