/**
 * Seccomp profiles for container tests: podman's default profile, and a copy of it that denies
 * user namespaces as Docker's, containerd's and so Kubernetes' `RuntimeDefault` profiles do.
 *
 * @module
 */

/** Podman's default seccomp profile. */
export const DEFAULT_SECCOMP_PROFILE = "/usr/share/containers/seccomp.json";

/**
 * Writes to `profile` podman's default seccomp profile, denying user namespaces as Docker's
 * default does (no `unshare`, `clone` without namespace flags only, `clone3` answering `ENOSYS`).
 *
 * @param profile Where to write it.
 * @returns `profile`.
 */
export function denyUserNamespaces(profile: string): string {
  const json = JSON.parse(Deno.readTextFileSync(DEFAULT_SECCOMP_PROFILE)) as {
    syscalls: { names: string[]; action: string }[];
  };
  for (const rule of json.syscalls) {
    if (rule.action === "SCMP_ACT_ALLOW") {
      rule.names = rule.names.filter((name) => !["unshare", "clone", "clone3"].includes(name));
    }
  }
  // CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: none may be set.
  json.syscalls.push({
    names: ["clone"],
    action: "SCMP_ACT_ALLOW",
    args: [{ index: 0, value: 0x7e020000, valueTwo: 0, op: "SCMP_CMP_MASKED_EQ" }],
  } as never);
  json.syscalls.push({ names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: 38 } as never);
  Deno.writeTextFileSync(profile, JSON.stringify(json));
  return profile;
}
