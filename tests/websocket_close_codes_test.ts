/**
 * The close handshake's status codes, after RFC 6455 §5.5.1 and §7.4 and the
 * Autobahn test suite's section 7 (7.3: payload lengths, 7.5: the reason's
 * UTF-8, 7.7: valid codes, 7.9 and 7.13: invalid ones): a valid code is
 * echoed, a close without a code is answered with 1000, and anything else
 * fails the connection with 1002 (1007 for a reason that is not UTF-8).
 *
 * @module
 */

import assert from "node:assert/strict";
import { websocketConnTransport } from "../lib/server/listen/websocket_conn.ts";
import { encodeFrame } from "./helpers/reliability_server.ts";

/** A close payload: the code's two bytes, then the reason's. */
function closeOf(code: number, reason: Uint8Array = new Uint8Array(0)): Uint8Array {
  return new Uint8Array([code >> 8, code & 0xff, ...reason]);
}

const VALID = [
  1000,
  1001,
  1002,
  1003,
  ...[1007, 1008, 1009, 1010, 1011],
  // Registered with IANA after RFC 6455: Service Restart, Try Again Later, Bad Gateway.
  ...[1012, 1013, 1014],
  ...[3000, 3001, 3999, 4000, 4500, 4999],
];

const INVALID = [
  ...[0, 1, 500, 999],
  // Reserved: never sent on the wire (1004), or only a local API's "no code" and "abnormal".
  ...[1004, 1005, 1006],
  // 1015 is the local API's TLS failure; 1016 to 2999 are unassigned.
  ...[1015, 1016, 1100, 2000, 2999],
  ...[5000, 6000, 65535],
];

/** [what is sent, the close payload, the status of the server's close frame]. */
const MATRIX: [string, Uint8Array, number][] = [
  ["no payload", new Uint8Array(0), 1000],
  ["a payload of one byte", new Uint8Array([0x03]), 1002],
  ...VALID.map((code): [string, Uint8Array, number] => [`code ${code}`, closeOf(code), code]),
  ...INVALID.map((code): [string, Uint8Array, number] => [`code ${code}`, closeOf(code), 1002]),
  ["code 1000 with a reason", closeOf(1000, new TextEncoder().encode("bye")), 1000],
  ["code 1000 with a 123-byte reason", closeOf(1000, new Uint8Array(123).fill(0x2a)), 1000],
  ["code 1000 with a 124-byte reason (payload over 125)", closeOf(1000, new Uint8Array(124)), 1002],
  [
    "code 1000 with a reason of invalid UTF-8",
    closeOf(1000, new Uint8Array([0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xed, 0xa0, 0x80, 0x65])),
    1007,
  ],
  [
    "code 4000 with a reason cut inside a character",
    closeOf(4000, new Uint8Array([0xe2, 0x82])),
    1007,
  ],
  ["code 999 with a valid reason", closeOf(999, new TextEncoder().encode("x")), 1002],
];

/** Sends one close frame to a server-side transport; returns the close frame it answers with. */
async function answerTo(payload: Uint8Array): Promise<{ code?: number; frames: number }> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const client = await Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port });
  const server = await listener.accept();
  listener.close();
  const transport = websocketConnTransport(server, { label: "test", maxMessageBytes: 1 << 20 });
  const reader = transport.readable.getReader();
  try {
    const reading = reader.read();
    await client.write(encodeFrame(0x8, payload, true));
    assert.equal((await reading).done, true, "the stream ends with the close");
    const received: number[] = [];
    const buffer = new Uint8Array(512);
    while (true) {
      const n = await client.read(buffer).catch(() => null);
      if (n === null) break;
      received.push(...buffer.subarray(0, n));
    }
    assert.ok(received.length >= 2, "a close frame was sent back");
    assert.equal(received[0], 0x88, "one final close frame");
    const length = received[1]!;
    assert.equal(received.length, 2 + length, "nothing after it");
    return length >= 2
      ? { code: (received[2]! << 8) | received[3]!, frames: 1 }
      : { code: undefined, frames: 1 };
  } finally {
    reader.releaseLock();
    transport.close();
    client.close();
  }
}

Deno.test("a close frame is echoed when its code is valid and failed with 1002 or 1007 when not (the Autobahn section 7 matrix)", async (t) => {
  for (const [name, payload, expected] of MATRIX) {
    await t.step(`${name} is answered with ${expected}`, async () => {
      const { code } = await answerTo(payload);
      assert.equal(code, expected);
    });
  }
});
