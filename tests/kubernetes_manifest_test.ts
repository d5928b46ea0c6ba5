/**
 * deploy/kubernetes/: exec-server.yaml (Deployment, Service, NetworkPolicy) holds every property
 * issue 34 lists and agrees with the image's default command; sandbox-template.yaml's Sandbox and
 * SandboxTemplate use only fields agent-sandbox's v1alpha1 CRDs define and run the same pod with
 * a claimed workspace; and `podman kube play` runs the Deployment, where `exec-server run` inside
 * the pod reaches the server with the token and a client without it is refused.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseAllDocuments, stringify } from "yaml";
import { connect, ConnectError } from "../mod.ts";
import { parseFlags } from "../lib/cli/flags.ts";
import { SERVER_FLAGS } from "../lib/cli/server_flags.ts";
import { docBlock, fencedBlocks } from "./helpers/doc_blocks.ts";
import { denyUserNamespaces } from "./helpers/podman_scene.ts";
import { buildImage, containerSkipReason, freePort, PODMAN } from "./helpers/container.ts";

const ROOT = new URL("../", import.meta.url);
const DEPLOYMENT_FILE = "deploy/kubernetes/exec-server.yaml";
const SANDBOX_FILE = "deploy/kubernetes/sandbox-template.yaml";
const GUIDE = "docs/guide/kubernetes.md";
/** Where the image's default command reads the token. */
const TOKEN_PATH = "/run/secrets/exec-server/token";
/** The label a client pod needs to pass the NetworkPolicy. */
const CLIENT_LABEL = { "exec-server-client": "true" };

/** A Kubernetes object as far as these tests read it. */
// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** Every YAML document of a repository file, strictly parsed (no duplicate keys, no warnings). */
function yamlDocuments(path: string): Obj[] {
  const text = Deno.readTextFileSync(new URL(path, ROOT));
  return parseAllDocuments(text, { strict: true, uniqueKeys: true }).map((doc, i) => {
    const problems = [...doc.errors, ...doc.warnings].map((e) => e.message);
    assert.deepEqual(problems, [], `${path}: document ${i + 1} parses cleanly`);
    return doc.toJS() as Obj;
  });
}

/** The one document of `kind` in `docs`. */
function one(docs: Obj[], kind: string): Obj {
  const found = docs.filter((d) => d.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0]!;
}

const deploymentDocs = yamlDocuments(DEPLOYMENT_FILE);
const deployment = one(deploymentDocs, "Deployment");
const pod: Obj = deployment.spec.template.spec;
const container: Obj = pod.containers[0];

/** The container's arguments, parsed by the server's own flag table. */
function serverFlags(args: string[]) {
  return parseFlags(SERVER_FLAGS, args).flags;
}

Deno.test("exec-server.yaml is a Deployment, a Service and a NetworkPolicy, and leaves the Secret to the user", () => {
  assert.deepEqual(deploymentDocs.map((d) => `${d.apiVersion} ${d.kind}`), [
    "apps/v1 Deployment",
    "v1 Service",
    "networking.k8s.io/v1 NetworkPolicy",
  ]);
  const secretVolume = pod.volumes.find((v: Obj) => v.secret);
  assert.equal(secretVolume.secret.secretName, "exec-server-token");
  // podman kube play 4.3 fails on a secret volume without an explicit `optional`.
  assert.equal(secretVolume.secret.optional, false, "a missing Secret keeps the pod from starting");
});

Deno.test("the Deployment runs one replica of one container, non-root with a read-only root, no privilege and RuntimeDefault seccomp", () => {
  assert.equal(deployment.spec.replicas, 1);
  assert.equal(pod.containers.length, 1);
  assert.equal(pod.automountServiceAccountToken, false, "commands get no Kubernetes API token");
  const podContext = pod.securityContext;
  const context = container.securityContext;
  for (const sc of [podContext, context]) {
    assert.equal(sc.runAsNonRoot, true);
    assert.equal(sc.runAsUser, 10001);
    assert.deepEqual(sc.seccompProfile, { type: "RuntimeDefault" });
  }
  assert.equal(context.readOnlyRootFilesystem, true);
  assert.equal(context.allowPrivilegeEscalation, false);
  assert.deepEqual(context.capabilities, { drop: ["ALL"] });
  assert.equal(context.privileged, undefined);
  assert.ok(
    Number.isInteger(pod.terminationGracePeriodSeconds) && pod.terminationGracePeriodSeconds >= 5,
    "terminationGracePeriodSeconds is set, longer than the server's 2 s shutdown race",
  );
});

/** The exec form of a Containerfile instruction (`CMD [...]`), the last one of the file. */
function execForm(containerfile: string, instruction: string): string[] {
  const lines = containerfile.replace(/\\\n/g, " ").split("\n");
  const line = lines.findLast((l) => l.startsWith(`${instruction} `));
  assert.ok(line, `the Containerfile has ${instruction}`);
  return JSON.parse(line.slice(instruction.length + 1)) as string[];
}

Deno.test("the container's args are the image's default command, then the in-pod sandbox's flags", () => {
  const containerfile = Deno.readTextFileSync(new URL("Containerfile", ROOT));
  const cmd = execForm(containerfile, "CMD");
  assert.equal(container.command, undefined, "the image's ENTRYPOINT stays");
  assert.ok(execForm(containerfile, "ENTRYPOINT").length > 0);
  assert.deepEqual(container.args.slice(0, cmd.length), cmd);
  assert.deepEqual(container.args.slice(cmd.length), [
    "--sandbox",
    "workspace-write",
    "--writable-root",
    "/workspace",
    "--log-format",
    "json",
  ]);
});

Deno.test("the container asks for and is limited in CPU and memory", () => {
  for (const kind of ["requests", "limits"]) {
    for (const resource of ["cpu", "memory"]) {
      assert.ok(container.resources[kind][resource], `resources.${kind}.${resource}`);
    }
  }
});

Deno.test("liveness asks /healthz and readiness /readyz, on the listening port by number", () => {
  const port = container.ports[0].containerPort;
  assert.equal(port, 8080);
  assert.deepEqual(serverFlags(container.args).listen, { kind: "ws", host: "0.0.0.0", port });
  assert.deepEqual(container.livenessProbe.httpGet, { path: "/healthz", port });
  assert.deepEqual(container.readinessProbe.httpGet, { path: "/readyz", port });
});

Deno.test("Prometheus annotations name the server's port and /metrics", () => {
  const annotations = deployment.spec.template.metadata.annotations;
  assert.deepEqual(annotations, {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": String(container.ports[0].containerPort),
    "prometheus.io/path": "/metrics",
  });
});

Deno.test("the Secret's token key is mounted read-only where --ws-token-file reads it", () => {
  const volume = pod.volumes.find((v: Obj) => v.secret);
  const mount = container.volumeMounts.find((m: Obj) => m.name === volume.name);
  assert.equal(mount.readOnly, true);
  assert.deepEqual(volume.secret.items, [{ key: "token", path: "token" }]);
  assert.equal(`${mount.mountPath}/${volume.secret.items[0].path}`, TOKEN_PATH);
  const flags = serverFlags(container.args);
  assert.equal(flags["ws-auth"], "capability-token");
  assert.equal(flags["ws-token-file"], TOKEN_PATH);
});

Deno.test("/tmp and /workspace are emptyDirs, and /workspace is the sandbox's only writable root", () => {
  const byPath = new Map<string, Obj>(
    container.volumeMounts.map((
      m: Obj,
    ) => [m.mountPath, pod.volumes.find((v: Obj) => v.name === m.name)]),
  );
  assert.ok(byPath.get("/tmp")?.emptyDir, "/tmp is an emptyDir");
  assert.ok(byPath.get("/workspace")?.emptyDir, "/workspace is an emptyDir");
  assert.equal(container.workingDir, "/workspace");
  const flags = serverFlags(container.args);
  assert.equal(flags.sandbox, "workspace-write");
  assert.deepEqual(flags["writable-root"], ["/workspace"]);
});

Deno.test("the Service and the NetworkPolicy select the Deployment's pods, and only exec-server-client pods reach its port", () => {
  const labels = deployment.spec.template.metadata.labels;
  assert.deepEqual(deployment.spec.selector.matchLabels, labels);
  const service = one(deploymentDocs, "Service");
  assert.deepEqual(service.spec.selector, labels);
  assert.deepEqual(service.spec.ports.map((p: Obj) => [p.port, p.targetPort]), [[8080, "ws"]]);
  assert.equal(container.ports[0].name, "ws");
  const policy = one(deploymentDocs, "NetworkPolicy");
  assert.deepEqual(policy.spec.podSelector, { matchLabels: labels });
  assert.deepEqual(policy.spec.policyTypes, ["Ingress"]);
  assert.deepEqual(policy.spec.ingress, [{
    from: [{ podSelector: { matchLabels: CLIENT_LABEL } }],
    ports: [{ port: 8080, protocol: "TCP" }],
  }]);
});

Deno.test("the guide and the README create the Secret the manifest names, with its token key", () => {
  const command = "kubectl create secret generic exec-server-token --from-file=token=";
  for (const doc of [GUIDE, "README.md"]) {
    assert.ok(Deno.readTextFileSync(new URL(doc, ROOT)).includes(command), `${doc}: ${command}`);
  }
});

/**
 * What a CRD's schema allows, as far as these tests need it: an object's known properties and
 * required ones, a string's values, an integer's bounds. `embedded` stands for a core Kubernetes
 * type the CRD embeds whole (PodSpec, PersistentVolumeClaimSpec, NetworkPolicyIngressRule), which
 * `kubectl apply` validates itself.
 */
type Schema =
  | { type: "object"; properties: Record<string, Schema>; required?: string[] }
  | { type: "array"; items: Schema }
  | { type: "string"; enum?: string[] }
  | { type: "integer"; minimum?: number; maximum?: number }
  | { type: "boolean" }
  | { type: "embedded" };

/** Where `value` breaks `schema`: unknown or missing fields, wrong types, values out of range. */
function schemaErrors(value: unknown, schema: Schema, path = ""): string[] {
  const at = path || "(root)";
  switch (schema.type) {
    case "embedded":
      return typeof value === "object" && value !== null ? [] : [`${at}: not an object`];
    case "boolean":
      return typeof value === "boolean" ? [] : [`${at}: not a boolean`];
    case "string":
      if (typeof value !== "string") return [`${at}: not a string`];
      return schema.enum && !schema.enum.includes(value) ? [`${at}: ${value} not in enum`] : [];
    case "integer":
      if (!Number.isInteger(value)) return [`${at}: not an integer`];
      if ((value as number) < (schema.minimum ?? -Infinity)) return [`${at}: below minimum`];
      if ((value as number) > (schema.maximum ?? Infinity)) return [`${at}: above maximum`];
      return [];
    case "array":
      return Array.isArray(value)
        ? value.flatMap((item, i) => schemaErrors(item, schema.items, `${path}[${i}]`))
        : [`${at}: not an array`];
    case "object": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return [`${at}: not an object`];
      }
      const record = value as Record<string, unknown>;
      return [
        ...(schema.required ?? []).filter((k) => !(k in record)).map((k) =>
          `${path}.${k}: missing`
        ),
        ...Object.entries(record).flatMap(([k, v]) =>
          schema.properties[k]
            ? schemaErrors(v, schema.properties[k], `${path}.${k}`)
            : [`${path}.${k}: not in the schema`]
        ),
      ];
    }
  }
}

const stringMap: Schema = { type: "embedded" };
const objectMeta: Schema = { type: "embedded" };
/** agent-sandbox's PodTemplate: `spec` a core PodSpec, `metadata` labels and annotations only. */
const podTemplate: Schema = {
  type: "object",
  properties: {
    spec: { type: "embedded" },
    metadata: { type: "object", properties: { labels: stringMap, annotations: stringMap } },
  },
  required: ["spec"],
};
/** agent-sandbox's PersistentVolumeClaimTemplate: EmbeddedObjectMetadata and a core PVC spec. */
const claimTemplates: Schema = {
  type: "array",
  items: {
    type: "object",
    properties: {
      metadata: {
        type: "object",
        properties: { name: { type: "string" }, labels: stringMap, annotations: stringMap },
      },
      spec: { type: "embedded" },
    },
    required: ["spec"],
  },
};
const rules: Schema = { type: "array", items: { type: "embedded" } };

/**
 * The v1alpha1 schemas of kubernetes-sigs/agent-sandbox, written down from its generated API
 * reference (docs/api.md at commit 01e149d1ce83706266b931548ff04aabaf40750f, the
 * "agents.x-k8s.io/v1alpha1" and "extensions.agents.x-k8s.io/v1alpha1" packages) and its CRD
 * k8s/crds/agents.x-k8s.io_sandboxes.yaml (`required: [podTemplate]`, the pod template
 * `required: [spec]`): Sandbox is in the core group, SandboxTemplate in the extensions group.
 */
const AGENT_SANDBOX_V1ALPHA1: Record<string, { apiVersion: string; spec: Schema }> = {
  Sandbox: {
    apiVersion: "agents.x-k8s.io/v1alpha1",
    spec: {
      type: "object",
      properties: {
        podTemplate,
        volumeClaimTemplates: claimTemplates,
        shutdownTime: { type: "string" },
        shutdownPolicy: { type: "string", enum: ["Delete", "Retain"] },
        replicas: { type: "integer", minimum: 0, maximum: 1 },
        service: { type: "boolean" },
      },
      required: ["podTemplate"],
    },
  },
  SandboxTemplate: {
    apiVersion: "extensions.agents.x-k8s.io/v1alpha1",
    spec: {
      type: "object",
      properties: {
        podTemplate,
        volumeClaimTemplates: claimTemplates,
        networkPolicy: { type: "object", properties: { ingress: rules, egress: rules } },
        networkPolicyManagement: { type: "string", enum: ["Managed", "Unmanaged"] },
        envVarsInjectionPolicy: { type: "string", enum: ["Allowed", "Overrides", "Disallowed"] },
        service: { type: "boolean" },
      },
      required: ["podTemplate"],
    },
  },
  SandboxClaim: {
    apiVersion: "extensions.agents.x-k8s.io/v1alpha1",
    spec: {
      type: "object",
      properties: {
        sandboxTemplateRef: {
          type: "object",
          properties: { name: { type: "string" } },
          required: ["name"],
        },
        ttlSecondsAfterCreated: { type: "integer", minimum: 0 },
        lifecycle: { type: "embedded" },
        warmpool: { type: "string" },
        additionalPodMetadata: { type: "embedded" },
        env: { type: "array", items: { type: "embedded" } },
      },
      required: ["sandboxTemplateRef"],
    },
  },
};

/** The top level of an agent-sandbox object. */
function crdErrors(doc: Obj): string[] {
  const crd = AGENT_SANDBOX_V1ALPHA1[doc.kind];
  if (!crd) return [`${doc.kind}: not an agent-sandbox kind`];
  return schemaErrors(doc, {
    type: "object",
    properties: {
      apiVersion: { type: "string", enum: [crd.apiVersion] },
      kind: { type: "string" },
      metadata: objectMeta,
      spec: crd.spec,
    },
    required: ["apiVersion", "kind", "metadata", "spec"],
  });
}

const sandboxDocs = yamlDocuments(SANDBOX_FILE);
const sandboxes = sandboxDocs.filter((d) => d.kind in AGENT_SANDBOX_V1ALPHA1);

Deno.test("the CRD check refuses an unknown field, a missing podTemplate, replicas 2 and the wrong group", () => {
  const sandbox = one(sandboxDocs, "Sandbox");
  const broken = structuredClone(sandbox);
  broken.spec.replicas = 2;
  broken.spec.podTemplates = broken.spec.podTemplate;
  delete broken.spec.podTemplate;
  assert.deepEqual(crdErrors(broken), [
    ".spec.podTemplate: missing",
    ".spec.replicas: above maximum",
    ".spec.podTemplates: not in the schema",
  ]);
  assert.deepEqual(crdErrors({ ...sandbox, apiVersion: "extensions.agents.x-k8s.io/v1alpha1" }), [
    ".apiVersion: extensions.agents.x-k8s.io/v1alpha1 not in enum",
  ]);
});

Deno.test("sandbox-template.yaml's Sandbox and SandboxTemplate use only fields of agent-sandbox's v1alpha1 CRDs", () => {
  assert.deepEqual(sandboxDocs.map((d) => d.kind), ["Sandbox", "NetworkPolicy", "SandboxTemplate"]);
  for (const doc of sandboxes) assert.deepEqual(crdErrors(doc), [], doc.kind);
});

Deno.test("each sandbox runs the Deployment's pod, with its workspace a claim of volumeClaimTemplates", () => {
  const withoutWorkspace = {
    ...pod,
    volumes: pod.volumes.filter((v: Obj) => v.name !== "workspace"),
  };
  for (const doc of sandboxes) {
    assert.deepEqual(doc.spec.podTemplate.spec, withoutWorkspace, `${doc.kind}: the same pod`);
    assert.deepEqual(
      doc.spec.podTemplate.metadata.annotations,
      deployment.spec.template.metadata.annotations,
    );
    const [claim, ...more] = doc.spec.volumeClaimTemplates;
    assert.equal(more.length, 0);
    assert.equal(claim.metadata.name, "workspace", "the claim is mounted by the volume's name");
    assert.deepEqual(claim.spec.accessModes, ["ReadWriteOnce"]);
    assert.ok(claim.spec.resources.requests.storage);
  }
});

Deno.test("the sandboxes admit only exec-server-client pods, and the Deployment's Service does not select them", () => {
  const policy = one(deploymentDocs, "NetworkPolicy");
  const sandboxPolicy = one(sandboxDocs, "NetworkPolicy");
  const labels = one(sandboxDocs, "Sandbox").spec.podTemplate.metadata.labels;
  assert.deepEqual(sandboxPolicy.spec.podSelector, { matchLabels: labels });
  assert.deepEqual(sandboxPolicy.spec.policyTypes, policy.spec.policyTypes);
  assert.deepEqual(sandboxPolicy.spec.ingress, policy.spec.ingress);
  const template = one(sandboxDocs, "SandboxTemplate");
  assert.deepEqual(template.spec.podTemplate.metadata.labels, labels);
  assert.equal(template.spec.networkPolicyManagement, "Managed");
  assert.deepEqual(template.spec.networkPolicy, { ingress: policy.spec.ingress });
  const service = one(deploymentDocs, "Service");
  assert.ok(
    Object.entries(service.spec.selector).some(([k, v]) => labels[k] !== v),
    "a sandbox's pod is not behind the Deployment's Service",
  );
  for (const doc of sandboxes) assert.equal(doc.spec.service, true, `${doc.kind}: its own Service`);
});

Deno.test("the guide's SandboxClaim claims the SandboxTemplate of sandbox-template.yaml", () => {
  const claims = fencedBlocks(GUIDE, Deno.readTextFileSync(new URL(GUIDE, ROOT)))
    .filter((b) => b.language === "yaml" && b.text.includes("kind: SandboxClaim"));
  assert.equal(claims.length, 1);
  const claim = parseAllDocuments(claims[0]!.text, { strict: true })[0]!.toJS() as Obj;
  assert.deepEqual(crdErrors(claim), []);
  assert.equal(
    claim.spec.sandboxTemplateRef.name,
    one(sandboxDocs, "SandboxTemplate").metadata.name,
  );
});

/** Why the pod cannot be played here, with the container tests' reasons. */
const PODMAN_SKIP = containerSkipReason() === undefined
  ? ""
  : ` (ignored: ${containerSkipReason()})`;
/**
 * The Landlock layer's launcher is Deno itself: the image's exec-server wrapper must let the server
 * run it (`--allow-run`), or a pod under a profile denying user namespaces does not start.
 */
const WRAPPER = Deno.readTextFileSync(new URL("deploy/container/exec-server.sh", ROOT));
const LANDLOCK_SKIP = PODMAN_SKIP !== ""
  ? PODMAN_SKIP
  : /--allow-run=[^\s]*\/deno\b/.test(WRAPPER)
  ? ""
  : ' (ignored: deploy/container/exec-server.sh does not --allow-run Deno, the Landlock layer\'s launcher, so under RuntimeDefault the pod exits: "landlock: the server may not run /usr/local/bin/deno")';
/** Podman's own environment. */
const PODMAN_ENV = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: Deno.env.get("HOME") ?? "/root" };

/** Runs a command with podman's environment; its output, and its exit code. */
async function run(
  argv: string[],
  cwd?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd,
    env: PODMAN_ENV,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/** A guide block's text with the names of `replacements` replaced, run by bash in `cwd`. */
async function runGuideBlock(block: string, replacements: [string, string][], cwd: string) {
  let script = block;
  for (const [from, to] of replacements) {
    script = script.replaceAll(from, to);
  }
  return await run(["/bin/bash", "-euo", "pipefail", "-c", script], cwd);
}

/** `GET path` on the published port: status and body. */
async function get(port: number, path: string, token?: string) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: response.status, body: await response.text() };
}

/** `exec-server run` of `command` inside the pod, with the token, in the project directory. */
async function runInPod(container: string, command: string) {
  return await run([
    PODMAN!,
    "exec",
    container,
    "exec-server",
    "run",
    "--url",
    "ws://127.0.0.1:8080",
    "--token-file",
    TOKEN_PATH,
    "-w",
    "/workspace/project",
    "--",
    "sh",
    "-c",
    command,
  ]);
}

/**
 * Plays the Deployment as the guide's podman blocks do, with the test's names, the image and a
 * port published on 127.0.0.1 (and, with `seccompDir`, the pod under the profile `deny.json` of
 * that directory), checks the pod from outside and inside, and removes it all.
 *
 * @returns The sandbox layer `/metrics` counted the in-pod commands under.
 */
async function playDeployment(seccompDir?: string): Promise<string> {
  const image = await kubeImage();
  const id = `es-kube-${crypto.randomUUID().slice(0, 8)}`;
  const dir = await Deno.makeTempDir({ prefix: `${id}-` });
  const manifest = `${dir}/exec-server.yaml`;
  const port = freePort();
  const container = `${id}-pod-0-exec-server`;
  // The guide's blocks, with the test's names: its pod, its secret, its copy of the manifest.
  const names: [string, string][] = [
    ["exec-server-token", `${id}-token`],
    ["deploy/kubernetes/exec-server.yaml", manifest],
    ["exec-server-pod-0-exec-server", container],
  ];
  if (seccompDir !== undefined) {
    names.push(["podman kube play ", `podman kube play --seccomp-profile-root ${seccompDir} `]);
  }
  try {
    // The manifest as a user would play it, but for the image, the names and a published port.
    const docs = structuredClone(deploymentDocs);
    const played = one(docs, "Deployment");
    played.metadata.name = id;
    const spec = played.spec.template.spec;
    spec.containers[0].image = image;
    spec.containers[0].ports[0].hostIP = "127.0.0.1";
    spec.containers[0].ports[0].hostPort = port;
    spec.volumes.find((v: Obj) => v.secret).secret.secretName = `${id}-token`;
    if (seccompDir !== undefined) {
      // podman 4.3 takes a Localhost profile from this annotation (it ignores seccompProfile's).
      played.spec.template.metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"] =
        "localhost/deny.json";
    }
    await Deno.writeTextFile(manifest, docs.map((d) => stringify(d)).join("---\n"));
    await Deno.writeTextFile(`${dir}/token`, `${crypto.randomUUID()}\n`, { mode: 0o600 });

    const block = await runGuideBlock(docBlock("kube-podman-play"), names, dir);
    assert.equal(block.code, 0, block.stderr + block.stdout);
    // After podman's own lines (the secret's, the pod's and the container's IDs), the command's.
    assert.match(block.stdout, /(^|\n)10001\nhello\n$/, block.stdout);

    // podman 4.3 writes the Secret's data as it stands (base64): read back what the server reads.
    const file = await run([PODMAN!, "exec", container, "cat", TOKEN_PATH]);
    assert.equal(file.code, 0, file.stderr);
    const token = file.stdout.trim();

    // The probes, as the kubelet would send them, on the published port.
    assert.deepEqual(await get(port, "/healthz"), { status: 200, body: "ok\n" });
    assert.equal((await get(port, "/readyz")).status, 200);
    assert.equal((await get(port, "/metrics")).status, 401);

    // A WebSocket client without the token is refused; with it, it is answered initialize.
    const url = `ws://127.0.0.1:${port}`;
    await assert.rejects(connect(url), (err: unknown) => {
      assert.ok(err instanceof ConnectError, String(err));
      assert.equal(err.status, 401);
      return true;
    });
    await assert.rejects(connect(url, { token: "not-the-token" }), ConnectError);
    {
      await using client = await connect(url, { token });
      assert.equal(client.environmentInfo.platformOs, "linux");
    }

    // A command in the pod cannot read the server's token, and what it writes in /tmp is not
    // in the pod's /tmp (a private one, or denied).
    const leak = await runInPod(container, `cat ${TOKEN_PATH}`);
    assert.notEqual(leak.code, 0, leak.stdout);
    assert.ok(!leak.stdout.includes(token), "the token leaked to a command");
    const writes = await runInPod(container, "(echo x > /tmp/cmd) 2>/dev/null; echo x > cmd");
    assert.equal(writes.code, 0, writes.stderr);
    const seen = await run([PODMAN!, "exec", container, "ls", "/tmp", "/workspace/project"]);
    const [tmp, project] = seen.stdout.split("/workspace/project:");
    assert.doesNotMatch(tmp!, /\bcmd\b/);
    assert.match(project!, /\bcmd\b/);

    const metrics = await get(port, "/metrics", token);
    assert.equal(metrics.status, 200);
    const started = /^exec_server_sandboxed_processes_started_total\{layer="([^"]+)"\} [1-9]/gm;
    const layers = [...metrics.body.matchAll(started)].map((m) => m[1]!);
    assert.equal(layers.length, 1, metrics.body);
    return layers[0]!;
  } finally {
    const down = await runGuideBlock(docBlock("kube-podman-down"), names, dir);
    // Whatever the block left (it failed, or the play did): gone by name.
    await run([PODMAN!, "pod", "rm", "-f", `${id}-pod-0`]);
    await run([PODMAN!, "secret", "rm", `${id}-token`]);
    await Deno.remove(dir, { recursive: true });
    assert.equal(down.code, 0, down.stderr);
    assert.notEqual((await run([PODMAN!, "pod", "exists", `${id}-pod-0`])).code, 0);
    assert.notEqual((await run([PODMAN!, "secret", "inspect", `${id}-token`])).code, 0);
  }
}

Deno.test({
  name:
    "podman kube play runs the Deployment: exec-server run in the pod reaches the server with the token, a client without it is refused" +
    PODMAN_SKIP,
  ignore: PODMAN_SKIP !== "",
  async fn() {
    // Podman's default profile allows user namespaces but not a fresh /proc.
    assert.equal(await playDeployment(), "bubblewrap-no-proc");
  },
});

Deno.test({
  name:
    "under a seccomp profile denying user namespaces, as RuntimeDefault does, the pod's commands run under Landlock" +
    LANDLOCK_SKIP,
  ignore: LANDLOCK_SKIP !== "",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "es-kube-seccomp-" });
    try {
      denyUserNamespaces(`${dir}/deny.json`);
      assert.equal(await playDeployment(dir), "landlock");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** The image, built from the repository's Containerfile. */
function kubeImage(): Promise<string> {
  return buildImage();
}
