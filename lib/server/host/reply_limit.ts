/**
 * The bound on bytes one reply carries as base64 (`fs/readFile` content, a
 * buffered `http/request` body).
 *
 * @module
 */

/**
 * Most bytes of data one reply carries: 32 MiB (about 43 MiB of base64).
 * Encoding a reply takes several copies of it at once (the bytes, the base64
 * text, the JSON message, its UTF-8 frame), so a read at this bound peaks at
 * about five times the reply in server memory; larger data is read in parts
 * (`fs/open` + `fs/readBlock`, `streamResponse`).
 */
export const MAX_REPLY_DATA_BYTES = 32 * 1024 * 1024;
