// The sandbox's syscall filter: a classic BPF program that bubblewrap installs (--seccomp) before
// it runs the command, inherited by everything the command starts. It refuses, with EPERM, the
// calls that reach into another process of the same user: ptrace, process_vm_readv/writev and
// pidfd_getfd. Inside one sandbox the grader and the code it grades are one user in one PID
// namespace; without this, a graded solver takes the grader's stdout (pidfd_getfd) or rewrites
// its memory and prints the score it likes. A grader's filter also refuses the signals that start
// a runtime's debugger (SIGUSR1, SIGQUIT): the same solver would open the grader's own door. Syscalls of another ABI than the machine's own (x32,
// 32-bit compat) are refused whole: their numbers differ, and a filter that does not check them
// is a door. (/proc/<pid>/mem, the other way in, is closed by a read-only /proc: sandbox.ts.)

/** The program's layout: seccomp_data (linux/seccomp.h) and the BPF opcodes (linux/filter.h). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** seccomp_data.args[i], its low 32 bits (both architectures are little-endian). */
const offsetOfArg = (i: number) => 16 + 8 * i;
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1;
/** x32 syscalls carry this bit in their number on x86_64. */
const X32_SYSCALL_BIT = 0x40000000;
/** The signals runtimes take as "start your debugger": Node's SIGUSR1 (its inspector), the JVM's SIGQUIT (its attach listener). */
const DEBUGGER_SIGNALS = [10, 3];

interface Abi {
  /** AUDIT_ARCH_* (linux/audit.h). */
  arch: number;
  /** The refused calls' numbers (asm/unistd.h of the architecture). */
  refused: Record<(typeof REFUSED_CALLS)[number], number>;
  /** The calls that send a signal, and which argument is the signal. */
  signals: Record<(typeof SIGNAL_CALLS)[number], [nr: number, arg: number]>;
  x32: boolean;
}

/** The calls the filter refuses, by name (for the docs and the tests). */
export const REFUSED_CALLS = ['ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd'] as const;
/** The calls that send a signal: refused for DEBUGGER_SIGNALS in a grader's filter. */
export const SIGNAL_CALLS = [
  'kill',
  'tkill',
  'tgkill',
  'rt_sigqueueinfo',
  'rt_tgsigqueueinfo',
  'pidfd_send_signal',
] as const;

const ABIS: Partial<Record<NodeJS.Architecture, Abi>> = {
  x64: {
    arch: 0xc000003e,
    refused: { ptrace: 101, process_vm_readv: 310, process_vm_writev: 311, pidfd_getfd: 438 },
    signals: {
      kill: [62, 1],
      tkill: [200, 1],
      tgkill: [234, 2],
      rt_sigqueueinfo: [129, 1],
      rt_tgsigqueueinfo: [297, 2],
      pidfd_send_signal: [424, 1],
    },
    x32: true,
  },
  arm64: {
    arch: 0xc00000b7,
    refused: { ptrace: 117, process_vm_readv: 270, process_vm_writev: 271, pidfd_getfd: 438 },
    signals: {
      kill: [129, 1],
      tkill: [130, 1],
      tgkill: [131, 2],
      rt_sigqueueinfo: [138, 1],
      rt_tgsigqueueinfo: [240, 2],
      pidfd_send_signal: [424, 1],
    },
    x32: false,
  },
};

type Instruction = [code: number, jt: number, jf: number, k: number];

/**
 * The filter for this machine's architecture, as bubblewrap reads it (struct sock_filter, native
 * byte order: both architectures are little-endian); null on an architecture it does not know.
 * `grader`: also refuse sending the debugger signals. A grader and the code it grades are one
 * user in one PID namespace: a solver would signal the grader's Node to open its inspector, or
 * its JVM to take an agent, and run code of its own inside the grader.
 */
export function seccompFilter(arch: NodeJS.Architecture = process.arch, o: { grader?: boolean } = {}): Buffer | null {
  const abi = ABIS[arch];
  if (!abi) return null;
  const numbers = REFUSED_CALLS.map((name) => abi.refused[name]);
  // Per signal call: not it, skip the block; else load the signal and refuse the debugger's.
  const signalBlocks: Instruction[] = o.grader
    ? SIGNAL_CALLS.flatMap((name): Instruction[] => {
        const [nr, arg] = abi.signals[name];
        const n = DEBUGGER_SIGNALS.length;
        return [
          [JEQ_K, 0, n + 3, nr],
          [LD_W_ABS, 0, 0, offsetOfArg(arg)],
          ...DEBUGGER_SIGNALS.map((sig, i): Instruction => [JEQ_K, n - i, 0, sig]),
          [RET_K, 0, 0, RET_ALLOW],
          [RET_K, 0, 0, RET_EPERM],
        ];
      })
    : [];
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
    // Each refused number jumps over the comparisons after it, the signal blocks and the allow.
    ...numbers.map((nr, i): Instruction => [JEQ_K, numbers.length - i - 1 + signalBlocks.length + 1, 0, nr]),
    ...signalBlocks,
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
