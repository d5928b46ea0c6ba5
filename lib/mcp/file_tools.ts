/**
 * The file tools: `read_file` (a bounded range, text or base64),
 * `write_file`, `edit_file` (exact text replacements), `list_directory`,
 * `get_file_info`, `create_directory` and `remove_path`. Each takes its
 * arguments from the `fs/*` method of the method table it maps to; paths are
 * plain paths on the server.
 *
 * @module
 */

import type { ExecClient } from "../client/client.ts";
import type { JsonSchema } from "../protocol/schema.ts";
import {
  callMethod,
  checkSize,
  contentBytes,
  type ContentEncoding,
  contentOf,
  encodingArgument,
  type ToolDefinition,
  wholeCharacters,
} from "./tool.ts";
import { ToolError } from "./tool_errors.ts";
import { deriveArguments, inputSchema } from "./tool_schema.ts";

/** Default `maxBytes` of `read_file`: 256 KiB. */
export const DEFAULT_READ_FILE_BYTES = 256 * 1024;
/** Largest `maxBytes` of `read_file` (one `fs/readBlock`): 1 MiB. */
export const MAX_READ_FILE_BYTES = 1024 * 1024;
/** Largest content of `write_file`, and largest file `edit_file` edits: 8 MiB. */
export const MAX_WRITE_FILE_BYTES = 8 * 1024 * 1024;
/** Most edits in one `edit_file` call: 100. */
export const MAX_EDITS = 100;
/** Most entries `list_directory` returns (sorted by name; the total is stated): 1000. */
export const MAX_LIST_ENTRIES = 1000;

type Request = ExecClient["request"];

const annotationsRead = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };

// ---------------------------------------------------------------------------
// read_file

interface ReadFileArgs {
  path: string;
  offset?: number;
  maxBytes?: number;
  encoding?: ContentEncoding;
}

const READ_FILE_ARGUMENTS = deriveArguments<"fs/readFile", ReadFileArgs>("fs/readFile", {
  path: "take",
  sandbox: "omit",
});

/** A handle id for `fs/open` (at most 32 bytes). */
function handleId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

const readFile: ToolDefinition = {
  name: "read_file",
  title: "Read a file",
  description:
    `Reads a file on the server: maxBytes bytes (default ${DEFAULT_READ_FILE_BYTES}, at most ${MAX_READ_FILE_BYTES}) from offset, as UTF-8 text (cut between characters), or base64 when asked or when the bytes are not UTF-8. The result states the file's size and where to go on.`,
  inputSchema: inputSchema({
    derived: READ_FILE_ARGUMENTS,
    extra: {
      offset: { type: "integer", minimum: 0, default: 0, description: "The first byte to read." },
      maxBytes: {
        type: "integer",
        minimum: 1,
        maximum: MAX_READ_FILE_BYTES,
        default: DEFAULT_READ_FILE_BYTES,
        description: "Bytes to read at most.",
      },
      encoding: encodingArgument("the content is returned"),
    },
  }),
  annotations: annotationsRead,
  async run(raw, context) {
    const args = raw as unknown as ReadFileArgs;
    const { path } = READ_FILE_ARGUMENTS.params(args, context) as { path: string };
    const request = context.client.request.bind(context.client) as Request;
    const offset = args.offset ?? 0;
    const maxBytes = args.maxBytes ?? DEFAULT_READ_FILE_BYTES;
    const id = handleId();
    await request("fs/open", { handleId: id, path, mode: "read" });
    let bytes: Uint8Array;
    let eof: boolean;
    let size: number;
    try {
      const block = await request("fs/readBlock", { handleId: id, offset, len: maxBytes });
      bytes = Uint8Array.fromBase64(block.chunk);
      eof = block.eof;
      size = (await request("fs/getMetadata", { path })).size;
    } finally {
      await request("fs/close", { handleId: id }).catch(() => {});
    }
    const wanted = args.encoding ?? "text";
    if (wanted === "text" && !eof) bytes = bytes.subarray(0, wholeCharacters(bytes));
    const { content, encoding } = contentOf(bytes, wanted);
    const end = offset + bytes.length;
    const more = !eof && end < size;
    const structured = {
      path: args.path,
      size,
      offset,
      bytesRead: bytes.length,
      eof: !more,
      encoding,
      content,
      ...(more ? { nextOffset: end } : {}),
    };
    const note = more
      ? [`[${size - end} more bytes: read_file with offset ${end}]`]
      : encoding === "base64"
      ? ["[the content above is base64]"]
      : [];
    return { structured, text: [content, ...note] };
  },
};

// ---------------------------------------------------------------------------
// write_file

interface WriteFileArgs {
  path: string;
  content: string;
  encoding?: ContentEncoding;
}

const WRITE_FILE_ARGUMENTS = deriveArguments<"fs/writeFile", WriteFileArgs>("fs/writeFile", {
  path: "take",
  dataBase64: {
    as: "content",
    schema: { type: "string" },
    description: `The file's new content (at most ${MAX_WRITE_FILE_BYTES} bytes).`,
  },
  sandbox: "omit",
});

const writeFile: ToolDefinition = {
  name: "write_file",
  title: "Write a file",
  description:
    `Creates or replaces a file on the server with content (text, or base64 for any bytes; at most ${MAX_WRITE_FILE_BYTES} bytes), atomically. The parent directory must exist.`,
  inputSchema: inputSchema({
    derived: WRITE_FILE_ARGUMENTS,
    extra: { encoding: encodingArgument("content") },
  }),
  annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as WriteFileArgs;
    const bytes = contentBytes(args.content, args.encoding ?? "text", "content");
    checkSize(bytes.length, MAX_WRITE_FILE_BYTES, "content");
    await callMethod(context, WRITE_FILE_ARGUMENTS, args, { dataBase64: bytes.toBase64() });
    return { structured: { path: args.path, bytesWritten: bytes.length } };
  },
};

// ---------------------------------------------------------------------------
// edit_file

interface Edit {
  oldText: string;
  newText: string;
  replaceAll?: boolean;
}

interface EditFileArgs {
  path: string;
  edits: Edit[];
  dryRun?: boolean;
}

const EDIT_FILE_ARGUMENTS = deriveArguments<"fs/readFile", EditFileArgs>("fs/readFile", {
  path: "take",
  sandbox: "omit",
});

const EDIT: JsonSchema = {
  type: "object",
  properties: {
    oldText: { type: "string", minLength: 1, description: "Text to find, exactly." },
    newText: { type: "string", description: "Text to put in its place." },
    replaceAll: {
      type: "boolean",
      default: false,
      description: "Replace every occurrence (default: oldText must occur exactly once).",
    },
  },
  required: ["oldText", "newText"],
  additionalProperties: false,
};

function countOf(text: string, part: string): number {
  let count = 0;
  for (let at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + part.length)) count++;
  return count;
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

function prefixed(text: string, mark: string): string {
  return text.split("\n").map((line) => `${mark}${line}`).join("\n");
}

const editFile: ToolDefinition = {
  name: "edit_file",
  title: "Edit a file",
  description:
    `Edits a UTF-8 text file on the server (at most ${MAX_WRITE_FILE_BYTES} bytes) by exact replacements, applied in order: each oldText must occur exactly once, or replaceAll. Up to ${MAX_EDITS} edits; nothing is written unless every edit applies. dryRun shows the changes without writing. Returns the changed lines.`,
  inputSchema: inputSchema({
    derived: EDIT_FILE_ARGUMENTS,
    extra: {
      edits: { type: "array", items: EDIT, minItems: 1, maxItems: MAX_EDITS },
      dryRun: { type: "boolean", default: false, description: "Show the changes only." },
    },
    extraRequired: ["edits"],
  }),
  annotations: { destructiveHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as EditFileArgs;
    const { path } = EDIT_FILE_ARGUMENTS.params(args, context) as { path: string };
    const request = context.client.request.bind(context.client) as Request;
    const { size } = await request("fs/getMetadata", { path });
    checkSize(size, MAX_WRITE_FILE_BYTES, "the file");
    const { dataBase64 } = await request("fs/readFile", { path });
    const bytes = Uint8Array.fromBase64(dataBase64);
    checkSize(bytes.length, MAX_WRITE_FILE_BYTES, "the file");
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new ToolError("editFailed", "the file is not UTF-8 text; use write_file");
    }
    const changes: string[] = [];
    let replacements = 0;
    args.edits.forEach((edit, i) => {
      const count = countOf(text, edit.oldText);
      if (count === 0 || (count > 1 && !edit.replaceAll)) {
        throw new ToolError(
          "editFailed",
          `edit ${i + 1}: oldText occurs ${count} times${
            count > 1 ? " (give more context, or replaceAll)" : ""
          }; nothing was written`,
        );
      }
      changes.push(
        `@@ edit ${i + 1}, line ${lineOf(text, text.indexOf(edit.oldText))}${
          count > 1 ? `, ${count} times` : ""
        } @@\n${prefixed(edit.oldText, "-")}\n${prefixed(edit.newText, "+")}`,
      );
      text = text.replaceAll(edit.oldText, () => edit.newText);
      replacements += count;
    });
    const result = new TextEncoder().encode(text);
    checkSize(result.length, MAX_WRITE_FILE_BYTES, "the edited file");
    if (!args.dryRun) {
      await request("fs/writeFile", { path, dataBase64: result.toBase64() });
    }
    const diff = changes.join("\n");
    return {
      structured: { path: args.path, replacements, written: !args.dryRun, diff },
      text: [`${args.dryRun ? "would change" : "changed"} ${args.path}:\n${diff}`],
    };
  },
};

// ---------------------------------------------------------------------------
// list_directory, get_file_info, create_directory, remove_path

interface PathArgs {
  path: string;
}

const LIST_ARGUMENTS = deriveArguments<"fs/readDirectory", PathArgs>("fs/readDirectory", {
  path: "take",
  sandbox: "omit",
});

const listDirectory: ToolDefinition = {
  name: "list_directory",
  title: "List a directory",
  description:
    `Lists a directory on the server: each entry's name and type (file, directory, other), sorted by name, at most ${MAX_LIST_ENTRIES} (the total is stated).`,
  inputSchema: inputSchema({ derived: LIST_ARGUMENTS }),
  annotations: annotationsRead,
  async run(raw, context) {
    const args = raw as unknown as PathArgs;
    const { entries } = await callMethod(context, LIST_ARGUMENTS, args);
    const sorted = entries.map((entry) => ({
      name: entry.fileName,
      type: entry.isDirectory ? "directory" : entry.isFile ? "file" : "other",
    })).sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    const listed = sorted.slice(0, MAX_LIST_ENTRIES);
    const truncated = sorted.length > listed.length;
    const lines = listed.map((e) => `${e.type === "directory" ? "[DIR]" : "[FILE]"} ${e.name}`);
    if (truncated) lines.push(`[... ${sorted.length - listed.length} more entries]`);
    return {
      structured: { path: args.path, entries: listed, total: sorted.length, truncated },
      text: [lines.join("\n") || "(empty directory)"],
    };
  },
};

const INFO_ARGUMENTS = deriveArguments<"fs/getMetadata", PathArgs>("fs/getMetadata", {
  path: "take",
  sandbox: "omit",
});

const getFileInfo: ToolDefinition = {
  name: "get_file_info",
  title: "Get file information",
  description:
    "Returns a path's type, size in bytes, and creation and modification times (ms since the epoch).",
  inputSchema: inputSchema({ derived: INFO_ARGUMENTS }),
  annotations: annotationsRead,
  async run(raw, context) {
    const args = raw as unknown as PathArgs;
    const info = await callMethod(context, INFO_ARGUMENTS, args);
    const type = info.isDirectory ? "directory" : info.isFile ? "file" : "other";
    return { structured: { path: args.path, type, ...info } };
  },
};

interface CreateDirectoryArgs extends PathArgs {
  recursive?: boolean;
}

const CREATE_ARGUMENTS = deriveArguments<"fs/createDirectory", CreateDirectoryArgs>(
  "fs/createDirectory",
  { path: "take", recursive: "take", sandbox: "omit" },
);

const createDirectory: ToolDefinition = {
  name: "create_directory",
  title: "Create a directory",
  description:
    "Creates a directory on the server, with its missing parents (unless recursive is false); an existing directory is no error.",
  inputSchema: inputSchema({ derived: CREATE_ARGUMENTS }),
  annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as CreateDirectoryArgs;
    await callMethod(context, CREATE_ARGUMENTS, args);
    return { structured: { path: args.path, created: true } };
  },
};

interface RemoveArgs extends PathArgs {
  recursive?: boolean;
  force?: boolean;
}

const REMOVE_ARGUMENTS = deriveArguments<"fs/remove", RemoveArgs>("fs/remove", {
  path: "take",
  recursive: {
    description: "Remove a directory with its contents (default false: only an empty one).",
  },
  force: { description: "A missing path is no error (default false)." },
  sandbox: "omit",
});

const removePath: ToolDefinition = {
  name: "remove_path",
  title: "Remove a file or directory",
  description:
    "Removes a file, symlink or empty directory on the server; with recursive, a directory and everything in it.",
  inputSchema: inputSchema({ derived: REMOVE_ARGUMENTS }),
  annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run(raw, context) {
    const args = raw as unknown as RemoveArgs;
    await callMethod(context, REMOVE_ARGUMENTS, args, {
      recursive: args.recursive ?? false,
      force: args.force ?? false,
    });
    return { structured: { path: args.path, removed: true } };
  },
};

/** The file tools, in the order `tools/list` shows them. */
export const FILE_TOOLS: readonly ToolDefinition[] = [
  readFile,
  writeFile,
  editFile,
  listDirectory,
  getFileInfo,
  createDirectory,
  removePath,
];
