// The sandboxes' syscall filters: classic BPF programs that bubblewrap installs (--seccomp) before
// it runs the command, inherited by everything the command starts.
// Every sandbox's (`agent`): no kernel keyring calls. Keyrings belong to no namespace bwrap makes: a
// key one sandbox adds, readable by any user, outlives it and is read by any later one (a branch's
// judge, a sibling's agent), and setup's or a grader's variables leave the same way.
// A grader's (`grader`) refuses more. A grader and the code it grades (the
// agent's solver, its tests) are one user in one PID namespace; without the filter the graded code
// takes the grader's stdout (pidfd_getfd), rewrites its memory (ptrace, process_vm_writev), or
// signals the grader's runtime to open its debugger (Node's SIGUSR1 inspector, the JVM's SIGQUIT
// attach listener; by kill and its kin, or by fcntl F_SETSIG on a file the grader owns) and prints
// the score it likes. Those calls get EPERM. Syscalls of another ABI than the machine's own (x32,
// 32-bit compat) are refused whole: their numbers differ, and a filter that does not check them is
// a door. (/proc/<pid>/mem, the other way in, is closed by a read-only /proc: sandbox.ts.)

import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
  refused: Record<(typeof REFUSED_CALLS)[number] | (typeof KEYRING_CALLS)[number], number>;
  /** The calls that send a signal, and which argument is the signal. */
  signals: Record<(typeof SIGNAL_CALLS)[number], [nr: number, arg: number]>;
  /** fcntl: F_SETSIG (its arg 1) names the signal (its arg 2) a file's owner gets. */
  fcntl: number;
  x32: boolean;
}

/** The calls a grader's filter refuses, by name. */
const REFUSED_CALLS = ['ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd'] as const;
/** The kernel keyring's calls: every filter refuses them. */
const KEYRING_CALLS = ['add_key', 'request_key', 'keyctl'] as const;
/** The calls that send a signal: refused for DEBUGGER_SIGNALS. */
const SIGNAL_CALLS = ['kill', 'tkill', 'tgkill', 'rt_sigqueueinfo', 'rt_tgsigqueueinfo', 'pidfd_send_signal'] as const;

const ABIS: Partial<Record<NodeJS.Architecture, Abi>> = {
  x64: {
    arch: 0xc000003e,
    refused: {
      ...{ ptrace: 101, process_vm_readv: 310, process_vm_writev: 311, pidfd_getfd: 438 },
      ...{ add_key: 248, request_key: 249, keyctl: 250 },
    },
    signals: {
      kill: [62, 1],
      tkill: [200, 1],
      tgkill: [234, 2],
      rt_sigqueueinfo: [129, 1],
      rt_tgsigqueueinfo: [297, 2],
      pidfd_send_signal: [424, 1],
    },
    fcntl: 72,
    x32: true,
  },
  arm64: {
    arch: 0xc00000b7,
    refused: {
      ...{ ptrace: 117, process_vm_readv: 270, process_vm_writev: 271, pidfd_getfd: 438 },
      ...{ add_key: 217, request_key: 218, keyctl: 219 },
    },
    signals: {
      kill: [129, 1],
      tkill: [130, 1],
      tgkill: [131, 2],
      rt_sigqueueinfo: [138, 1],
      rt_tgsigqueueinfo: [240, 2],
      pidfd_send_signal: [424, 1],
    },
    fcntl: 25,
    x32: false,
  },
};

type Instruction = [code: number, jt: number, jf: number, k: number];

/** fcntl's F_SETSIG (linux/fcntl.h). */
const F_SETSIG = 10;

export type FilterProfile = 'agent' | 'grader';

/**
 * A profile's filter for this machine's architecture, as bubblewrap reads it (struct sock_filter,
 * native byte order: both architectures are little-endian); null on an architecture it does not know.
 */
export function seccompFilter(profile: FilterProfile, arch: NodeJS.Architecture = process.arch): Buffer | null {
  const abi = ABIS[arch];
  if (!abi) return null;
  const grader = profile === 'grader';
  const numbers = [...(grader ? REFUSED_CALLS : []), ...KEYRING_CALLS].map((name) => abi.refused[name]);
  const n = DEBUGGER_SIGNALS.length;
  // Per signal call: not it, skip the block; else load the signal and refuse the debugger's.
  const refuseSignal = (arg: number): Instruction[] => [
    [LD_W_ABS, 0, 0, offsetOfArg(arg)],
    ...DEBUGGER_SIGNALS.map((sig, i): Instruction => [JEQ_K, n - i, 0, sig]),
    [RET_K, 0, 0, RET_ALLOW],
    [RET_K, 0, 0, RET_EPERM],
  ];
  const signalBlocks: Instruction[] = !grader
    ? []
    : [
        ...SIGNAL_CALLS.flatMap((name): Instruction[] => {
          const [nr, arg] = abi.signals[name];
          return [[JEQ_K, 0, n + 3, nr], ...refuseSignal(arg)];
        }),
        // fcntl(fd, F_SETSIG, sig): only F_SETSIG's signal is looked at; any other fcntl is allowed.
        [JEQ_K, 0, n + 5, abi.fcntl],
        [LD_W_ABS, 0, 0, offsetOfArg(1)],
        [JEQ_K, 0, n + 1, F_SETSIG],
        ...refuseSignal(2),
      ];
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

/**
 * Starts a child with `filter` at its fd 3 (bwrap's --seccomp 3), on a descriptor of its own to an
 * unlinked file: bwrap reads it to its end with no help from this process. Through a pipe bwrap
 * waited for this process to close its end, and a forkflush stopped (Ctrl-Z) or starved right after
 * the spawn held the sandbox, and the grader in it, before it began.
 */
export function withFilterAtFd3<T>(filter: Buffer | undefined, start: (fd3: number[]) => T): T {
  if (!filter) return start([]);
  const fd = openSync(`/proc/self/fd/${keptFile(filter)}`, 'r');
  try {
    return start([fd]);
  } finally {
    closeSync(fd);
  }
}

/** One unlinked file per filter, open for this process's life; each child opens it afresh (its own offset). */
const keptFiles = new Map<string, number>();
function keptFile(data: Buffer): number {
  const key = data.toString('base64');
  let fd = keptFiles.get(key);
  if (fd === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-filter-'));
    try {
      writeFileSync(join(dir, 'filter'), data, { mode: 0o400 });
      fd = openSync(join(dir, 'filter'), 'r');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    keptFiles.set(key, fd);
  }
  return fd;
}
