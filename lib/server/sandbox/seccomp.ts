/**
 * The seccomp filter of a sandboxed process, as a classic BPF program for
 * bubblewrap's `--seccomp FD` (docs/protocol.md section 13, sandboxing).
 *
 * It follows the reference's Linux sandbox helper, and is stricter where
 * the reference leaves a way out. In `"restricted"` mode (network
 * `restricted`) it fails with `EPERM` every socket call that could reach a
 * network or another process's socket: `connect`, `accept`, `accept4`,
 * `bind`, `listen`, `getpeername`, `getsockname`, `shutdown`, `sendto`,
 * `sendmsg`, `sendmmsg`, `recvmmsg`, `getsockopt`, `setsockopt`, and
 * `socket`/`socketpair` for any family but `AF_UNIX`; it also denies
 * `ptrace`, `process_vm_readv`/`process_vm_writev`, `pidfd_getfd` and
 * `io_uring_*`. The reference allows `sendmsg`, which sends a datagram to
 * any unix socket path the sandbox can see; a filter cannot read the
 * message header to tell whether a call names a destination, so `sendmsg`
 * is denied outright (passing descriptors over a socketpair fails too).
 * `pidfd_getfd` (copying a descriptor out of another process) is denied
 * as well. In
 * `"vsock"` mode (network `enabled` with a restricted file system) it only
 * denies `AF_VSOCK` sockets and `io_uring_*`; `"nounix"` (network `enabled`, the
 * default: see `unix_sockets.ts`) also denies `socket(AF_UNIX)`, so that the
 * process cannot connect to the host's unix sockets (`docker.sock`, D-Bus),
 * which a filter cannot tell apart by path; `socketpair` stays allowed. A syscall of another ABI (x32,
 * or 32-bit code on a 64-bit kernel) kills the process (`SIGSYS`).
 *
 * @module
 */

/** Which syscalls the filter denies; see the module documentation. */
export type SeccompMode = "restricted" | "vsock" | "nounix";

/** The CPU architectures the filter knows the syscall numbers of. */
export type SeccompArch = "x86_64" | "aarch64";

const BPF_LD_W_ABS = 0x20;
const BPF_JMP_JEQ_K = 0x15;
const BPF_JMP_JGE_K = 0x35;
const BPF_RET_K = 0x06;

const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const EPERM = 1;

const AF_UNIX = 1;
const AF_VSOCK = 40;
/** Offsets in `struct seccomp_data`. */
const DATA_NR = 0;
const DATA_ARCH = 4;
const DATA_ARG0_LOW = 16;
/** Syscall numbers with this bit set belong to the x32 ABI. */
const X32_SYSCALL_BIT = 0x40000000;

interface ArchTable {
  auditArch: number;
  x32Guard: boolean;
  nr: Record<string, number>;
}

const ARCHES: Record<SeccompArch, ArchTable> = {
  "x86_64": {
    auditArch: 0xc000003e,
    x32Guard: true,
    nr: {
      socket: 41,
      connect: 42,
      accept: 43,
      sendto: 44,
      sendmsg: 46,
      shutdown: 48,
      bind: 49,
      listen: 50,
      getsockname: 51,
      getpeername: 52,
      socketpair: 53,
      setsockopt: 54,
      getsockopt: 55,
      ptrace: 101,
      accept4: 288,
      recvmmsg: 299,
      sendmmsg: 307,
      process_vm_readv: 310,
      process_vm_writev: 311,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      pidfd_getfd: 438,
    },
  },
  aarch64: {
    auditArch: 0xc00000b7,
    x32Guard: false,
    nr: {
      socket: 198,
      socketpair: 199,
      bind: 200,
      listen: 201,
      accept: 202,
      connect: 203,
      getsockname: 204,
      getpeername: 205,
      sendto: 206,
      setsockopt: 208,
      sendmsg: 211,
      getsockopt: 209,
      shutdown: 210,
      ptrace: 117,
      accept4: 242,
      recvmmsg: 243,
      sendmmsg: 269,
      process_vm_readv: 270,
      process_vm_writev: 271,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      pidfd_getfd: 438,
    },
  },
};

const IO_URING = ["io_uring_setup", "io_uring_enter", "io_uring_register"];
const RESTRICTED_DENIED = [
  "ptrace",
  "process_vm_readv",
  "process_vm_writev",
  "pidfd_getfd",
  ...IO_URING,
  "connect",
  "accept",
  "accept4",
  "bind",
  "listen",
  "getpeername",
  "getsockname",
  "shutdown",
  "sendto",
  "sendmsg",
  "sendmmsg",
  "recvmmsg",
  "getsockopt",
  "setsockopt",
];

type Label = "allowed" | "deny" | "kill" | "family" | "pair";

interface Insn {
  code: number;
  k: number;
  jt?: Label;
  jf?: Label;
  label?: Label;
}

/**
 * Returns the architecture of this process for {@linkcode seccompProgram},
 * or `undefined` when the filter does not support it.
 */
export function seccompArch(): SeccompArch | undefined {
  const arch = Deno.build.arch as string;
  return arch === "x86_64" || arch === "aarch64" ? arch : undefined;
}

/**
 * Builds the filter as the bytes of a `struct sock_filter` array (8 bytes
 * per instruction, little endian), the format `bwrap --seccomp` reads.
 *
 * @param mode Which syscalls to deny.
 * @param arch The architecture whose syscall numbers to use.
 *
 * @example Build the filter for a network-restricted sandbox
 * ```ts
 * import { seccompProgram } from "./seccomp.ts";
 * const program = seccompProgram("restricted", "x86_64");
 * console.log(program.length % 8); // 0
 * ```
 */
export function seccompProgram(mode: SeccompMode, arch: SeccompArch): Uint8Array {
  const table = ARCHES[arch];
  const insns: Insn[] = [
    { code: BPF_LD_W_ABS, k: DATA_ARCH },
    { code: BPF_JMP_JEQ_K, k: table.auditArch, jf: "kill" },
    { code: BPF_LD_W_ABS, k: DATA_NR },
  ];
  if (table.x32Guard) insns.push({ code: BPF_JMP_JGE_K, k: X32_SYSCALL_BIT, jt: "deny" });
  const denied = mode === "restricted" ? RESTRICTED_DENIED : IO_URING;
  for (const name of denied) insns.push({ code: BPF_JMP_JEQ_K, k: table.nr[name]!, jt: "deny" });
  insns.push({ code: BPF_JMP_JEQ_K, k: table.nr.socket!, jt: "family" });
  insns.push({
    code: BPF_JMP_JEQ_K,
    k: table.nr.socketpair!,
    jt: mode === "nounix" ? "pair" : "family",
  });
  insns.push({ code: BPF_RET_K, k: SECCOMP_RET_ALLOW });
  insns.push({ code: BPF_LD_W_ABS, k: DATA_ARG0_LOW, label: "family" });
  if (mode === "restricted") {
    // Any family but AF_UNIX is denied.
    insns.push({ code: BPF_JMP_JEQ_K, k: AF_UNIX, jt: "allowed", jf: "deny" });
  } else if (mode === "nounix") {
    // socket(AF_UNIX) is denied (a socket that could connect to a path); socketpair is not.
    insns.push({ code: BPF_JMP_JEQ_K, k: AF_UNIX, jt: "deny" });
    insns.push({ code: BPF_JMP_JEQ_K, k: AF_VSOCK, jt: "deny", jf: "allowed" });
    insns.push({ code: BPF_LD_W_ABS, k: DATA_ARG0_LOW, label: "pair" });
    insns.push({ code: BPF_JMP_JEQ_K, k: AF_VSOCK, jt: "deny", jf: "allowed" });
  } else {
    insns.push({ code: BPF_JMP_JEQ_K, k: AF_VSOCK, jt: "deny", jf: "allowed" });
  }
  insns.push({ code: BPF_RET_K, k: SECCOMP_RET_ALLOW, label: "allowed" });
  insns.push({ code: BPF_RET_K, k: SECCOMP_RET_ERRNO | EPERM, label: "deny" });
  insns.push({ code: BPF_RET_K, k: SECCOMP_RET_KILL_PROCESS, label: "kill" });

  const at = new Map<Label, number>();
  insns.forEach((insn, index) => insn.label && at.set(insn.label, index));
  const bytes = new Uint8Array(insns.length * 8);
  const view = new DataView(bytes.buffer);
  insns.forEach((insn, index) => {
    // Classic BPF jumps are forward only, relative to the next instruction.
    const offset = (label: Label | undefined): number =>
      label === undefined ? 0 : at.get(label)! - index - 1;
    const jt = offset(insn.jt);
    const jf = offset(insn.jf);
    if (jt < 0 || jf < 0 || jt > 255 || jf > 255) {
      throw new RangeError("Cannot encode seccomp jump: offset out of range");
    }
    view.setUint16(index * 8, insn.code, true);
    view.setUint8(index * 8 + 2, jt);
    view.setUint8(index * 8 + 3, jf);
    view.setUint32(index * 8 + 4, insn.k >>> 0, true);
  });
  return bytes;
}
