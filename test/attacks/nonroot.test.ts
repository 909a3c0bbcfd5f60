// A whole local run as an ordinary user (nobody, uid 65534), through the built CLI: the sandbox
// then runs in a user namespace of its own, and forkflush must cope with files its agent made
// unreadable. Needs root to switch user; skipped (loudly) otherwise.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { RunState } from '../../src/core/state.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  describeSandboxed,
  fingerprint,
  makeAttackRepo,
  processesWith,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

const CLI = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');
const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('\n!!!!!!!! the non-root attack test needs root to switch to uid 65534: SKIPPED !!!!!!!!\n');

describeSandboxed('a run by an ordinary user', () => {
  it.skipIf(!isRoot)('finishes with a score, and the attacks stay contained', async () => {
    const root = attackTemp('nonroot');
    const marker = unique('ff-nonroot');
    const repo = makeAttackRepo({ agent: `sh {fx}/nonroot.sh {logs} ${marker}`, grader: CAT_GRADER, dir: root });
    const home = join(root, 'home');
    mkdirSync(home);
    execFileSync('chown', ['-R', '65534:65534', root]);
    const r = spawnSync(
      'setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, CLI, 'run', repo.dir, '--seed', '1'],
      {
        encoding: 'utf8',
        timeout: 60_000,
        cwd: root,
        env: { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8' },
      },
    );
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(/sandbox is off/);
    const runs = join(repo.dir, '.forkflush');
    const [id] = readdirSync(runs);
    const state = JSON.parse(readFileSync(join(runs, id ?? '', 'state.json'), 'utf8')) as RunState;
    const result = state.rounds[0]?.episodes[0]?.result;
    if (!result) throw new Error('no result');
    const gitDir = join(repo.dir, '.git');
    expect(result.sandbox).toMatch(/^bubblewrap/);
    expect(result.score).toBe(5);
    expect(showFile(gitDir, result.commit, 'uid.txt')?.trim()).not.toBe('0');
    expect(showFile(gitDir, result.commit, 'value.txt')).toBe('5\n');
    expect(showFile(gitDir, result.commit, 'work/inner.txt')).toBe('kept\n');
    expect((showFile(gitDir, result.commit, 'shadow.txt') ?? '').length).toBe(0);
    expect(showFile(gitDir, result.commit, 'sysctl.txt')).toBeNull();
    // Its home and /tmp are gone, folders it locked against itself too.
    const episode = state.rounds[0]?.episodes[0]?.id ?? '';
    expect(readdirSync(join(runs, id ?? '', 'episodes', episode))).toContain('agent.log');
    expect(readdirSync(join(runs, id ?? '', 'episodes', episode))).not.toContain('box');
    expect(processesWith(marker)).toEqual([]);
    const beat = fingerprint(join(repo.logs, 'beat'));
    expect(beat).not.toBe('missing');
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(fingerprint(join(repo.logs, 'beat'))).toBe(beat);
  });
});
