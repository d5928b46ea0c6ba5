/**
 * The default bound of the WebSocket listener's connections, in a module of
 * its own so that the command line's flag table (and `--help`) can name it
 * without importing the listener.
 *
 * @module
 */

/** Default of `--max-connections`: most upgraded WebSocket connections at once. */
export const DEFAULT_MAX_CONNECTIONS = 1024;
