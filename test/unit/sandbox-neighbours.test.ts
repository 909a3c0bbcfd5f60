// The sandbox against the processes around it: its syscall filter (src/io/seccomp.ts), run on a
// small interpreter of the classic BPF it is made of (linux/filter.h: the four instructions it uses),
// what the network it shares leaves open (abstract Unix sockets: worker/boundary.ts), and the
// accounts that keep sandboxes' process limits apart (io/accounts.ts).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SANDBOX_SLOTS_PER_PROCESS } from '../../src/core/bounds.js';
import {
  countsPerNamespace,
  type IdFiles,
  processLimit,
  rangeConflict,
  rangeUid,
  UID_RANGE,
  UidPool,
} from '../../src/io/accounts.js';
import { seccompFilter, withFilterAtFd3 } from '../../src/io/seccomp.js';
import { abstractSockets, judgeFixedPaths } from '../../src/worker/boundary.js';

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const X86_64 = 0xc000003e;
const AARCH64 = 0xc00000b7;
const I386 = 0x40000003;

/** What the filter answers for one syscall: the kernel's return action. */
function run(program: Buffer, data: { arch: number; nr: number; args?: number[] }): number {
  let acc = 0;
  for (let pc = 0; pc < program.length / 8; ) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) {
      if (k === 0) acc = data.nr >>> 0;
      else if (k === 4) acc = data.arch >>> 0;
      else if (k >= 16 && (k - 16) % 8 === 0) acc = (data.args?.[(k - 16) / 8] ?? 0) >>> 0;
      else throw new Error(`load of offset ${k}`);
      pc += 1;
    } else if (code === 0x15) pc += 1 + (acc === k ? jt : jf);
    else if (code === 0x35) pc += 1 + (acc >= k ? jt : jf);
    else if (code === 0x06) return k;
    else throw new Error(`opcode ${code}`);
  }
  throw new Error('the program ran off its end');
}

describe('the syscall filter', () => {
  it('on x86_64 refuses ptrace, process_vm_readv/writev and pidfd_getfd, every x32 and 32-bit call, and allows the rest', () => {
    const f = seccompFilter('grader', 'x64');
    if (!f) throw new Error('x64 has a filter');
    for (const nr of [101, 310, 311, 438]) expect(run(f, { arch: X86_64, nr }), `nr ${nr}`).toBe(EPERM);
    // read, write, openat, clone, execve, socket, connect, pidfd_open, kill: allowed.
    for (const nr of [0, 1, 257, 56, 59, 41, 42, 434, 62]) expect(run(f, { arch: X86_64, nr }), `nr ${nr}`).toBe(ALLOW);
    expect(run(f, { arch: X86_64, nr: 0x40000000 + 521 })).toBe(EPERM);
    expect(run(f, { arch: X86_64, nr: 0x40000000 })).toBe(EPERM);
    expect(run(f, { arch: I386, nr: 26 })).toBe(EPERM);
    expect(run(f, { arch: I386, nr: 3 })).toBe(EPERM);
  });

  it("on arm64 refuses the same calls by arm64's numbers", () => {
    const f = seccompFilter('grader', 'arm64');
    if (!f) throw new Error('arm64 has a filter');
    for (const nr of [117, 270, 271, 438]) expect(run(f, { arch: AARCH64, nr }), `nr ${nr}`).toBe(EPERM);
    for (const nr of [63, 64, 56, 220, 221, 198, 101, 310])
      expect(run(f, { arch: AARCH64, nr }), `nr ${nr}`).toBe(ALLOW);
    expect(run(f, { arch: X86_64, nr: 0 })).toBe(EPERM);
  });

  it('refuses sending the debugger signals (SIGUSR1, SIGQUIT), by every call that sends one, fcntl F_SETSIG included', () => {
    const f = seccompFilter('grader', 'x64');
    if (!f) throw new Error('x64 has a filter');
    // kill(pid, sig), tkill(tid, sig), rt_sigqueueinfo(pid, sig), pidfd_send_signal(fd, sig): the signal second;
    // tgkill(tgid, tid, sig), rt_tgsigqueueinfo(tgid, tid, sig): third.
    const second = [62, 200, 129, 424];
    const third = [234, 297];
    for (const sig of [10, 3]) {
      for (const nr of second) expect(run(f, { arch: X86_64, nr, args: [7, sig] }), `nr ${nr} sig ${sig}`).toBe(EPERM);
      for (const nr of third)
        expect(run(f, { arch: X86_64, nr, args: [7, 7, sig] }), `nr ${nr} sig ${sig}`).toBe(EPERM);
      // fcntl(fd, F_SETSIG, sig): the signal a file's owner (set by F_SETOWN) gets on I/O.
      expect(run(f, { arch: X86_64, nr: 72, args: [5, 10, sig] }), `F_SETSIG ${sig}`).toBe(EPERM);
    }
    for (const sig of [15, 9, 2, 12, 0]) {
      for (const nr of second) expect(run(f, { arch: X86_64, nr, args: [7, sig] }), `nr ${nr} sig ${sig}`).toBe(ALLOW);
      for (const nr of third)
        expect(run(f, { arch: X86_64, nr, args: [7, 7, sig] }), `nr ${nr} sig ${sig}`).toBe(ALLOW);
      expect(run(f, { arch: X86_64, nr: 72, args: [5, 10, sig] }), `F_SETSIG ${sig}`).toBe(ALLOW);
    }
    // Any other fcntl, whatever its third argument: F_SETOWN (8), F_GETFL (3), F_SETFL (4), F_DUPFD (0).
    for (const cmd of [8, 3, 4, 0])
      expect(run(f, { arch: X86_64, nr: 72, args: [5, cmd, 10] }), `cmd ${cmd}`).toBe(ALLOW);
    const arm = seccompFilter('grader', 'arm64');
    if (!arm) throw new Error('arm64 has a filter');
    expect(run(arm, { arch: AARCH64, nr: 129, args: [7, 10] })).toBe(EPERM);
    expect(run(arm, { arch: AARCH64, nr: 131, args: [7, 7, 3] })).toBe(EPERM);
    expect(run(arm, { arch: AARCH64, nr: 25, args: [5, 10, 10] })).toBe(EPERM);
    expect(run(arm, { arch: AARCH64, nr: 25, args: [5, 4, 10] })).toBe(ALLOW);
    expect(run(arm, { arch: AARCH64, nr: 129, args: [7, 15] })).toBe(ALLOW);
  });

  it("refuses the kernel keyring's calls in every sandbox; an agent's refuses nothing else of its own ABI", () => {
    const keyrings = { x64: [X86_64, [248, 249, 250]], arm64: [AARCH64, [217, 218, 219]] } as const;
    for (const [abi, [arch, calls]] of Object.entries(keyrings)) {
      const [agent, grader] = [
        seccompFilter('agent', abi as NodeJS.Architecture),
        seccompFilter('grader', abi as NodeJS.Architecture),
      ];
      if (!agent || !grader) throw new Error(`${abi} has filters`);
      for (const nr of calls) {
        expect(run(agent, { arch, nr }), `${abi} agent nr ${nr}`).toBe(EPERM);
        expect(run(grader, { arch, nr }), `${abi} grader nr ${nr}`).toBe(EPERM);
      }
    }
    const agent = seccompFilter('agent', 'x64') as Buffer;
    // ptrace, process_vm_*, pidfd_getfd, kill SIGUSR1, fcntl F_SETSIG: the agent's own debuggers use them.
    for (const [nr, args] of [[101], [310], [311], [438], [62, [7, 10]], [72, [5, 10, 10]]] as [number, number[]?][])
      expect(run(agent, { arch: X86_64, nr, ...(args ? { args } : {}) }), `nr ${nr}`).toBe(ALLOW);
    expect(run(agent, { arch: I386, nr: 286 })).toBe(EPERM);
    expect(run(agent, { arch: X86_64, nr: 0x40000000 + 248 })).toBe(EPERM);
  });

  it('has none for an architecture it does not know', () => {
    expect(seccompFilter('grader', 'riscv64')).toBeNull();
    expect(seccompFilter('agent', 'riscv64')).toBeNull();
  });
});

describe('how a filter reaches bwrap (its fd 3)', () => {
  /** Blocks this process (its event loop too) until `path` exists or 20 s pass. */
  const blockUntil = (path: string) => {
    const end = Date.now() + 20_000;
    while (!existsSync(path) && Date.now() < end) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  };

  // As bwrap does: read fd 3 to its end. Failed before its fix (a pipe this process wrote and
  // closed): the close waited for the event loop, so a forkflush stopped (Ctrl-Z) or starved right
  // after the spawn held the sandbox before its command began (CI: laptop-night.test.ts).
  it('is read whole by each child while this process runs nothing, each from its start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fd3-'));
    const filter = seccompFilter('grader') ?? randomBytes(400);
    const read = (name: string) =>
      withFilterAtFd3(filter, (extra) =>
        spawn('sh', ['-c', `cat <&3 > ${name}.part && mv ${name}.part ${name}`], {
          cwd: dir,
          stdio: ['ignore', 'ignore', 'ignore', ...extra],
        }),
      );
    read('a');
    read('b');
    blockUntil(join(dir, 'a'));
    blockUntil(join(dir, 'b'));
    expect(readFileSync(join(dir, 'a')).equals(filter)).toBe(true);
    expect(readFileSync(join(dir, 'b')).equals(filter)).toBe(true);
    // Unlinked: nothing of it in the temp folder for a later sandbox to find or change.
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith('forkflush-filter-'))).toEqual([]);
  });
});

describe('what the shared network leaves open', () => {
  it("names the machine's listening abstract Unix sockets, each once, and nothing else", () => {
    const text = [
      'Num       RefCount Protocol Flags    Type St Inode Path',
      '0000000000000000: 00000002 00000000 00010000 0001 01 23456 @/tmp/.X11-unix/X0',
      '0000000000000000: 00000003 00000000 00000000 0001 03 23457 @/tmp/.X11-unix/X0',
      '0000000000000000: 00000002 00000000 00010000 0001 01 23460 @/tmp/.X11-unix/X0',
      '0000000000000000: 00000002 00000000 00010000 0001 01 23458 /run/user/1000/bus',
      '0000000000000000: 00000002 00000000 00000000 0002 01 23459 @/org/freedesktop/systemd1/notify',
      '0000000000000000: 00000002 00000000 00010000 0001 01 23461',
      '',
    ].join('\n');
    expect(abstractSockets(text)).toEqual(['@/tmp/.X11-unix/X0']);
    expect(abstractSockets('')).toEqual([]);
  });
});

describe("what the judge's grader may not change", () => {
  const files = [
    'grade.sh',
    'check.sh',
    'src/main.py',
    'tools/checker/check.sh',
    'tools/other.sh',
    'data/a.txt',
    'data/b/c.txt',
  ];

  it('makes protected folders read-only whole, protected files one by one, and pins the folders above them', () => {
    expect(judgeFixedPaths(files, ['grade.sh', 'tools/checker/check.sh', 'data/**'])).toEqual({
      readOnly: ['data', 'grade.sh', 'tools/checker/check.sh'],
      pinned: ['tools', 'tools/checker'],
    });
    // A folder named without wildcards is protected whole, as git's pathspecs take it.
    expect(judgeFixedPaths(files, ['tools/checker', '*.sh'])).toEqual({
      readOnly: ['check.sh', 'grade.sh', 'tools/checker'],
      pinned: ['tools'],
    });
    expect(judgeFixedPaths(files, ['missing/**', 'nothing.txt'])).toEqual({ readOnly: [], pinned: [] });
    expect(judgeFixedPaths(files, ['data/**/*'])).toEqual({ readOnly: ['data'], pinned: [] });
    // Nested protected folders: the outer one is read-only whole, and nothing inside it is bound again.
    expect(judgeFixedPaths(files, ['tools/**', 'tools/checker/**', 'data', 'data/b', 'data/b/c.txt'])).toEqual({
      readOnly: ['data', 'tools'],
      pinned: [],
    });
  });

  it('past 256 protected files, makes their top folders read-only instead of pinning each', () => {
    const many = Array.from({ length: 300 }, (_, i) => `cases/c${i}.txt`);
    expect(judgeFixedPaths([...many, 'grade.sh', 'src/x.py'], ['**/*.txt', 'grade.sh'])).toEqual({
      readOnly: ['cases', 'grade.sh'],
      pinned: [],
    });
  });
});

describe('the accounts sandboxes run under', () => {
  const host: IdFiles = {
    passwd:
      'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nalice:x:1000:1000::/home/alice:/bin/sh\n',
    group: 'root:x:0:\nnogroup:x:65534:\n',
    subuid: 'alice:100000:65536\n',
    subgid: 'alice:100000:65536\n',
    uidMap: '         0          0 4294967295\n',
    gidMap: '         0          0 4294967295\n',
  };

  it('uses a range no user, group, subordinate range or container mapping claims, and says which one does', () => {
    expect(rangeConflict(host)).toBeNull();
    expect(rangeConflict({ ...host, passwd: `${host.passwd}svc:x:${UID_RANGE.first + 5}:1::/:/bin/false\n` })).toBe(
      `user svc has id ${UID_RANGE.first + 5}`,
    );
    expect(rangeConflict({ ...host, group: `${host.group}ad:x:${UID_RANGE.group}:\n` })).toBe(
      `group ad has id ${UID_RANGE.group}`,
    );
    // SSSD's default Active Directory ranges stop below it; a huge subordinate range does not.
    expect(rangeConflict({ ...host, passwd: `${host.passwd}bob:x:2000199999:1::/:/bin/sh\n` })).toBeNull();
    expect(rangeConflict({ ...host, subuid: 'ci:1000000000:1500000000\n' })).toBe(
      '/etc/subuid gives ci ids 1000000000 to 2499999999',
    );
    // A container that maps 65536 uids (rootless podman, user namespace remapping) cannot use it.
    expect(rangeConflict({ ...host, uidMap: '0 100000 65536\n' })).toMatch(/maps no uids as high as/);
    expect(rangeConflict({ ...host, gidMap: '' })).toMatch(/maps no gids/);
  });

  it('gives each live sandbox of a process a uid of its own, the longest-released slot first, and refuses a 33rd at once', () => {
    const pool = new UidPool(4_194_303);
    const leases = Array.from({ length: SANDBOX_SLOTS_PER_PROCESS }, () => pool.lease());
    expect(new Set(leases.map((l) => l.uid)).size).toBe(SANDBOX_SLOTS_PER_PROCESS);
    expect(Math.max(...leases.map((l) => l.uid))).toBeLessThan(UID_RANGE.first + UID_RANGE.size);
    expect(Math.max(...leases.map((l) => l.uid))).toBeLessThan(2147352576);
    expect(leases.every((l) => l.gid === UID_RANGE.group)).toBe(true);
    expect(() => pool.lease()).toThrow(/at most 32 sandboxes at once/);
    const [first, second] = leases;
    first?.release();
    first?.release();
    second?.release();
    // The slot released first comes back first, and only once.
    expect(pool.lease().uid).toBe(first?.uid);
    expect(pool.lease().uid).toBe(second?.uid);
    expect(() => pool.lease()).toThrow();
    // Two processes alive at once never share a uid.
    expect(rangeUid(1234, SANDBOX_SLOTS_PER_PROCESS - 1)).toBeLessThan(rangeUid(1235, 0));
  });

  it('limits each sandbox to a quarter of what the machine and the user may have, at most 8192', () => {
    const free = { ownLimit: null, hardLimit: null };
    expect(processLimit({ pidMax: 4_194_304, threadsMax: 200_000, ...free })).toBe(8192);
    expect(processLimit({ pidMax: 32_768, threadsMax: 200_000, ...free })).toBe(8192);
    expect(processLimit({ pidMax: 32_768, threadsMax: 20_000, ...free })).toBe(5000);
    expect(processLimit({ pidMax: 4_194_304, threadsMax: 200_000, ownLimit: 4096, hardLimit: 4096 })).toBe(1024);
  });

  it("never above forkflush's own hard limit, which prlimit in the sandbox (no capabilities) cannot raise", () => {
    // Root's own soft limit does not count (root is not held to it), its hard one does.
    expect(processLimit({ pidMax: 4_194_304, threadsMax: 200_000, ownLimit: null, hardLimit: 1000 })).toBe(1000);
    expect(processLimit({ pidMax: 4_194_304, threadsMax: 200_000, ownLimit: 500, hardLimit: 1000 })).toBe(125);
  });

  it("knows which kernels count an ordinary user's processes per user namespace", () => {
    expect(countsPerNamespace('6.18.44-fc-v1252')).toBe(true);
    expect(countsPerNamespace('5.14.0-284.el9.x86_64')).toBe(true);
    expect(countsPerNamespace('5.10.0-28-amd64')).toBe(false);
    expect(countsPerNamespace('4.19.0')).toBe(false);
  });
});
