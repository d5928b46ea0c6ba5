/**
 * The bound on bytes a reply built whole carries as base64 (a buffered
 * `http/request` body; `fs/readFile` streams its replies instead).
 *
 * @module
 */

/**
 * Most bytes of data a reply built whole carries: 32 MiB (about 43 MiB of
 * base64). Encoding such a reply takes several copies of it at once (the
 * bytes, the base64 text, the JSON message, its UTF-8 frame), so one at this
 * bound peaks at about five times the reply in server memory; larger data is
 * read in parts (`streamResponse`).
 */
export const MAX_REPLY_DATA_BYTES = 32 * 1024 * 1024;
