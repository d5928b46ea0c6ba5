/**
 * The sandbox layers the sandbox tests run against: each of
 * `lib/server/sandbox/layer.ts`, forced (`--sandbox-layer`), with whether
 * it works here and why not (for test names: a layer that does not work is
 * reported as ignored, with the reason).
 *
 * @module
 */

import { probeSandbox, type SandboxAvailability } from "../../lib/server/sandbox/availability.ts";
import {
  LAYER_TRAITS,
  type LayerTraits,
  SANDBOX_LAYERS,
  type SandboxLayer,
  sandboxLayerChoice,
  setSandboxLayerChoice,
} from "../../lib/server/sandbox/layer.ts";

/** One layer as the tests see it. */
export interface TestLayer {
  /** The layer. */
  readonly layer: SandboxLayer;
  /** What its probe found. */
  readonly availability: SandboxAvailability;
  /** `""`, or ` (ignored: <why it does not work here>)` for test names. */
  readonly skip: string;
  /** What it gives besides the plan's rules. */
  readonly traits: LayerTraits;
  /** The server flags that force it. */
  readonly serverArgs: readonly string[];
}

/** Every layer, probed once. */
export const TEST_LAYERS: readonly TestLayer[] = SANDBOX_LAYERS.map((layer) => {
  const availability = probeSandbox({ layer });
  return {
    layer,
    availability,
    skip: availability.ok ? "" : ` (ignored: ${availability.reason})`,
    traits: LAYER_TRAITS[layer],
    serverArgs: ["--sandbox-layer", layer],
  };
});

/**
 * Runs `fn` with this process's layer choice forced to `layer` (for the
 * in-process server), then restores it.
 *
 * @param layer The layer.
 * @param fn What to run.
 */
export async function withLayer<T>(layer: SandboxLayer, fn: () => Promise<T>): Promise<T> {
  const before = sandboxLayerChoice();
  setSandboxLayerChoice(layer);
  try {
    return await fn();
  } finally {
    setSandboxLayerChoice(before);
  }
}

/** The message a write refused by the layer prints (`EROFS` with mounts, `EACCES` with Landlock). */
export function refusedWrite(layer: SandboxLayer): RegExp {
  return layer === "landlock" ? /Permission denied/ : /Read-only file system/;
}
