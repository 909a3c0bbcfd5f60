// The sandbox's syscall filter: a classic BPF program that bubblewrap installs (--seccomp) before
// it runs the command, inherited by everything the command starts. It refuses, with EPERM, the
// calls that reach into another process of the same user: ptrace, process_vm_readv/writev and
// pidfd_getfd. Inside one sandbox the grader and the code it grades are one user in one PID
// namespace; without this, a graded solver takes the grader's stdout (pidfd_getfd) or rewrites
// its memory and prints the score it likes. Syscalls of another ABI than the machine's own (x32,
// 32-bit compat) are refused whole: their numbers differ, and a filter that does not check them
// is a door. (/proc/<pid>/mem, the other way in, is closed by a read-only /proc: sandbox.ts.)

/** The program's layout: seccomp_data (linux/seccomp.h) and the BPF opcodes (linux/filter.h). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1;
/** x32 syscalls carry this bit in their number on x86_64. */
const X32_SYSCALL_BIT = 0x40000000;

interface Abi {
  /** AUDIT_ARCH_* (linux/audit.h). */
  arch: number;
  /** The refused calls' numbers (asm/unistd.h of the architecture). */
  refused: Record<string, number>;
  x32: boolean;
}

const ABIS: Partial<Record<NodeJS.Architecture, Abi>> = {
  x64: {
    arch: 0xc000003e,
    refused: { ptrace: 101, process_vm_readv: 310, process_vm_writev: 311, pidfd_getfd: 438 },
    x32: true,
  },
  arm64: {
    arch: 0xc00000b7,
    refused: { ptrace: 117, process_vm_readv: 270, process_vm_writev: 271, pidfd_getfd: 438 },
    x32: false,
  },
};

/** The calls the filter refuses, by name (for the docs and the tests). */
export const REFUSED_CALLS = ['ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd'] as const;

type Instruction = [code: number, jt: number, jf: number, k: number];

/**
 * The filter for this machine's architecture, as bubblewrap reads it (struct sock_filter, native
 * byte order: both architectures are little-endian); null on an architecture it does not know.
 */
export function seccompFilter(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const abi = ABIS[arch];
  if (!abi) return null;
  const numbers = REFUSED_CALLS.map((name) => abi.refused[name] as number);
  const program: Instruction[] = [
    [LD_W_ABS, 0, 0, OFFSET_ARCH],
    // Another ABI: refused (the jump skips the refusal when the arch is the machine's).
    [JEQ_K, 1, 0, abi.arch],
    [RET_K, 0, 0, RET_EPERM],
    [LD_W_ABS, 0, 0, OFFSET_NR],
    ...(abi.x32
      ? ([
          [JGE_K, 0, 1, X32_SYSCALL_BIT],
          [RET_K, 0, 0, RET_EPERM],
        ] as Instruction[])
      : []),
    // Each refused number jumps to the refusal after the last comparison and the allow.
    ...numbers.map((nr, i): Instruction => [JEQ_K, numbers.length - i, 0, nr]),
    [RET_K, 0, 0, RET_ALLOW],
    [RET_K, 0, 0, RET_EPERM],
  ];
  const out = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
