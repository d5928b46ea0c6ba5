/**
 * The sandbox layers: the mechanisms that can enforce a {@linkcode SandboxPlan}
 * here, in the order the server prefers them, and the operator's choice
 * (`--sandbox-layer`). docs/guide/sandbox.md describes each for operators.
 *
 * - `bubblewrap`: user, mount, PID and IPC namespaces (and a network
 *   namespace when the network is restricted), a fresh `/proc`, the seccomp
 *   filter of `seccomp.ts`.
 * - `bubblewrap-no-proc`: the same without a fresh `/proc`, for where the
 *   kernel refuses to mount one (an unprivileged container whose `/proc` is
 *   masked): the host's `/proc` is bound read-only instead, as the
 *   reference does.
 * - `landlock`: no namespaces at all (where user namespaces are denied, as
 *   under Docker's or Kubernetes' default seccomp profile): Landlock for the
 *   file system, the same seccomp filter for the network, `no_new_privs`,
 *   applied by a small launcher (`landlock_exec.ts`) before it executes the
 *   command.
 *
 * @module
 */

/** The layers, most preferred first. */
export const SANDBOX_LAYERS = ["bubblewrap", "bubblewrap-no-proc", "landlock"] as const;

/** One of {@linkcode SANDBOX_LAYERS}. */
export type SandboxLayer = typeof SANDBOX_LAYERS[number];

/** The values of `--sandbox-layer`: a layer, or `auto` (the first that works here). */
export const SANDBOX_LAYER_CHOICES = ["auto", ...SANDBOX_LAYERS] as const;

/** One of {@linkcode SANDBOX_LAYER_CHOICES}. */
export type SandboxLayerChoice = typeof SANDBOX_LAYER_CHOICES[number];

/** What a layer gives besides the plan's file system and network rules (the same on every layer). */
export interface LayerTraits {
  /** The sandbox has its own PID namespace (its command is PID 2, bubblewrap's init PID 1). */
  readonly pidNamespace: boolean;
  /** A restricted network is also a network namespace of its own (loopback only). */
  readonly networkNamespace: boolean;
  /** `/proc` is a fresh one of the sandbox's PID namespace (else the host's, read-only, or the host's as is). */
  readonly freshProc: boolean;
  /**
   * A writable root's own entries can be added and removed. Landlock cannot
   * take rights away below a directory it grants them on, so a writable
   * root holding (or able to get) a read-only `.git` or `.codex` keeps its
   * top level fixed there: its files and subdirectories are writable, new
   * names directly in it are refused (`EACCES`).
   */
  readonly rootEntriesWritable: boolean;
}

/** The traits of each layer. */
export const LAYER_TRAITS: Readonly<Record<SandboxLayer, LayerTraits>> = {
  bubblewrap: {
    pidNamespace: true,
    networkNamespace: true,
    freshProc: true,
    rootEntriesWritable: true,
  },
  "bubblewrap-no-proc": {
    pidNamespace: true,
    networkNamespace: true,
    freshProc: false,
    rootEntriesWritable: true,
  },
  landlock: {
    pidNamespace: false,
    networkNamespace: false,
    freshProc: false,
    rootEntriesWritable: false,
  },
};

let chosen: SandboxLayerChoice = "auto";

/**
 * Sets the operator's choice of layer (`--sandbox-layer`), once at start,
 * before the first probe.
 *
 * @param choice A layer, or `auto`.
 */
export function setSandboxLayerChoice(choice: SandboxLayerChoice): void {
  chosen = choice;
}

/** The operator's choice of layer (`auto` unless set). */
export function sandboxLayerChoice(): SandboxLayerChoice {
  return chosen;
}
