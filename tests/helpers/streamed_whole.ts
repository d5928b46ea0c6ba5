/**
 * A handler's reply as the wire would carry it: a streamed member joined into one string.
 *
 * @module
 */

import { StreamedString } from "../../lib/protocol/streamed_json.ts";

/** A reply with its streamed member (if any) joined into one string. */
export async function whole<R>(reply: R): Promise<R> {
  if (reply === null || typeof reply !== "object") return reply;
  const joined: Record<string, unknown> = { ...reply as Record<string, unknown> };
  for (const [key, value] of Object.entries(joined)) {
    if (!(value instanceof StreamedString)) continue;
    let text = "";
    for await (const chunk of value.take()) text += chunk;
    joined[key] = text;
  }
  return joined as R;
}
