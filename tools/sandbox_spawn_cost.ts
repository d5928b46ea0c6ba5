/**
 * What a sandbox costs per spawn, on each layer that works here: the time
 * from spawning `/bin/true` (under Codex's workspace-write policy, as the
 * server builds its command line) to its exit, against `/bin/true` spawned
 * directly. Runs are interleaved (one of each kind per round) and the
 * median and 90th percentile are printed, in milliseconds, as a Markdown
 * table (docs/guide/sandbox.md).
 *
 * Usage: `deno run -A tools/sandbox_spawn_cost.ts [ROUNDS]` (default 30).
 *
 * @module
 */

import { probeSandbox, type SandboxAvailability } from "../lib/server/sandbox/availability.ts";
import { launchSandboxed } from "../lib/server/sandbox/launch.ts";
import { SANDBOX_LAYERS } from "../lib/server/sandbox/layer.ts";
import { planFromPaths } from "../lib/server/sandbox/policy.ts";

const rounds = Number(Deno.args[0] ?? 30);
const workspace = Deno.makeTempDirSync({ dir: "/var/tmp", prefix: "spawn-cost-" });
Deno.mkdirSync(`${workspace}/.git`);
const plan = planFromPaths("read", [{ path: workspace, access: "write" }], "restricted");
const env = { PATH: "/usr/bin:/bin" };

type Kind = { name: string; availability?: SandboxAvailability };
const kinds: Kind[] = [{ name: "none (direct spawn)" }];
for (const layer of SANDBOX_LAYERS) {
  const availability = probeSandbox({ layer });
  if (availability.ok) kinds.push({ name: layer, availability });
  else console.error(`${layer}: not measured (${availability.reason})`);
}

async function once(kind: Kind): Promise<number> {
  const launch = kind.availability === undefined
    ? undefined
    : launchSandboxed(plan, ["/bin/true"], {
      cwd: workspace,
      env,
      availability: kind.availability,
    });
  const argv = launch?.argv ?? ["/bin/true"];
  const started = performance.now();
  const status = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd: workspace,
    env: launch?.env ?? env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  const elapsed = performance.now() - started;
  launch?.release();
  if (!status.success) {
    const stderr = new TextDecoder().decode(status.stderr);
    throw new Error(`${kind.name}: /bin/true failed (${status.code}): ${stderr}`);
  }
  return elapsed;
}

const samples = new Map<string, number[]>(kinds.map((kind) => [kind.name, []]));
for (let round = 0; round < rounds; round++) {
  for (const kind of kinds) samples.get(kind.name)!.push(await once(kind));
}
Deno.removeSync(workspace, { recursive: true });

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

console.log("| layer | median ms | p90 ms |");
console.log("| --- | --- | --- |");
for (const [name, values] of samples) {
  console.log(
    `| ${name} | ${quantile(values, 0.5).toFixed(1)} | ${quantile(values, 0.9).toFixed(1)} |`,
  );
}
