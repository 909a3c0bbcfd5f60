// Hostile agents and the files forkflush touches after them: the journal, the usage file, the
// context folder, protected folders, what the judge can see, nested repositories, attributes,
// unreadable files.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/config.js';
import { startRun } from '../../src/local/start.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanRegrade,
  cleanupAttackTemps,
  commitHolds,
  commitMessage,
  describeSandboxed,
  fingerprint,
  folderText,
  makeAttackRepo,
  runLocal,
  showFile,
  treeMode,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

describeSandboxed('the journal', () => {
  it.each(['../../outside.md', '/tmp/outside.md'])(
    'journal: %s is a config error, and nothing is written',
    async (journal) => {
      const root = attackTemp('task');
      const repo = makeAttackRepo({ agent: 'true', dir: root, extra: `journal: ${journal}` });
      const outside = journal.startsWith('/') ? journal : join(repo.dir, journal);
      rmSync(outside, { force: true });
      const error = await startRun({ dir: repo.dir, now: new Date() }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String((error as ConfigError).problems)).toMatch(/journal/);
      expect(existsSync(outside)).toBe(false);
      expect(existsSync(join(repo.dir, '.forkflush'))).toBe(false);
    },
  );

  it('a journal replaced by a link to a file outside (a sentinel, /etc/passwd) is not followed', async () => {
    const secret = unique('journal-sentinel');
    const root = attackTemp('task');
    const sentinel = join(root, 'sentinel.md');
    writeFileSync(sentinel, `${secret}\n`);
    const before = fingerprint(sentinel);
    for (const target of [sentinel, '/etc/passwd']) {
      const repo = makeAttackRepo({ agent: `sh {fx}/journal-link.sh ${target}`, grader: CAT_GRADER });
      const { result } = await runLocal(repo);
      const gitDir = join(repo.dir, '.git');
      expect(fingerprint(sentinel)).toBe(before);
      expect(treeMode(gitDir, result.commit, 'NOTES.md')).toBe('100644');
      const notes = showFile(gitDir, result.commit, 'NOTES.md') ?? '';
      expect(notes).toMatch(/^# Journal\n\n- forkflush r0\.b0 .*score 5;/);
      expect(commitHolds(gitDir, result.commit, secret)).toBe(false);
      expect(commitHolds(gitDir, result.commit, 'root:x:0:0')).toBe(false);
      expect(result.score).toBe(5);
    }
  });

  it('a journal folder replaced by a link to a folder outside is not followed', async () => {
    const root = attackTemp('task');
    const outside = join(root, 'outside');
    const repo = makeAttackRepo({
      agent: `sh {fx}/journal-link.sh - notes ${outside}`,
      grader: CAT_GRADER,
      extra: 'journal: notes/NOTES.md',
      files: { 'notes/NOTES.md': '# Notes\n' },
      dir: root,
    });
    (await import('node:fs')).mkdirSync(outside);
    const { result } = await runLocal(repo);
    expect(readdirSync(outside)).toEqual([]);
    const gitDir = join(repo.dir, '.git');
    expect(showFile(gitDir, result.commit, 'notes/NOTES.md')).toMatch(/- forkflush r0\.b0 .*score 5;/);
  });

  it('a 15 MB one-line journal with 200000 more lines gives a short commit message', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/huge-journal.sh', grader: CAT_GRADER });
    const { result, ms } = await runLocal(repo);
    expect(result.score).toBe(5);
    const message = commitMessage(join(repo.dir, '.git'), result.commit);
    expect(message.length).toBeLessThan(8_000);
    // A hang bound, not a speed target (bench/ has those): reading the journal line by line more
    // than once would take minutes; a busy CI machine stretched the few seconds it takes past 20.
    expect(ms).toBeLessThan(90_000);
  });
});

describeSandboxed('links and special files where forkflush reads', () => {
  it.each(['link', 'fifo'])(
    'a usage file that is a %s, and links, a FIFO, a folder link in the context, are never followed or read',
    async (usage) => {
      const repo = makeAttackRepo({
        agent: `sh {fx}/planted-links.sh {logs} {repo} ${usage}`,
        grader: CAT_GRADER,
        budget: 'total: 12\n  unit: tokens\n  episode: 6',
      });
      const { results, run, ms } = await runLocal(repo);
      // A read of the FIFO would never return: the bound tells a hang apart, with room for a busy
      // machine (27 s beside a review and three test files, past the 25 s it had).
      expect(ms).toBeLessThan(60_000);
      expect(results).toHaveLength(2);
      const shadowLine = readFileSync('/etc/shadow', 'utf8').split('\n')[0] ?? 'root:';
      const key = readFileSync(run.store.path('seal.key'));
      const gitDir = join(repo.dir, '.git');
      for (const r of results) {
        expect(r.note).toBe(
          'the agent wrote no usage file; no usage reported: charged 6 tokens as an estimate (it ran its course (finished): its whole allowance)',
        );
        expect(commitHolds(gitDir, r.commit, shadowLine)).toBe(false);
        expect(commitHolds(gitDir, r.commit, key.toString('hex'))).toBe(false);
      }
      // The second episode carried the context: the memory, none of the links or the FIFO.
      const seen = readFileSync(join(repo.logs, 'context-r1.b0'), 'utf8');
      expect(seen).toContain('memory.txt');
      expect(seen).not.toMatch(/shadow|seal|pipe|runs/);
      const contexts = run.store.path('contexts');
      const text = folderText(contexts);
      expect(text).not.toContain(shadowLine);
      expect(text.includes(key.toString('latin1'))).toBe(false);
    },
    120_000,
  );
});

describeSandboxed('what the judge sees', () => {
  const EXPECTED = {
    'grade.sh':
      '# 100 when the answer matches the protected expectation.\n[ "$(cat answer.txt)" = "$(cat tests/expected.txt)" ] && echo 100 || echo 0\n',
    'tests/expected.txt': '42\n',
    'answer.txt': '0\n',
  };

  it.each(['logs', 'tmp'])(
    'a protected folder replaced by a link to one the agent filled (in %s) gives no forged score',
    async (where) => {
      const repo = makeAttackRepo({
        agent: `sh {fx}/protected-link.sh ${where} {logs}`,
        files: EXPECTED,
        protected: ['grade.sh', 'tests/**'],
      });
      const { result } = await runLocal(repo);
      const gitDir = join(repo.dir, '.git');
      expect(result.score).not.toBe(100);
      expect(showFile(gitDir, result.commit, 'tests/expected.txt')).toBe('42\n');
      expect(result.protectedChanged).toContain('tests/expected.txt');
    },
  );

  it.each(['logs', 'tmp', 'home'])(
    'an answer that links to a file the agent left in its %s is not what the judge reads',
    async (where) => {
      const repo = makeAttackRepo({ agent: `sh {fx}/judge-view.sh ${where} {logs}`, grader: CAT_GRADER });
      const { result } = await runLocal(repo);
      expect(result.score).not.toBe(999);
      expect(treeMode(join(repo.dir, '.git'), result.commit, 'value.txt')).toBe('120000');
    },
  );

  it('nested repositories with an fsmonitor and hooks, and a .git file pointing at the main repository, run nothing outside', async () => {
    const root = attackTemp('task');
    const pwned = join(root, 'pwned');
    const repo = makeAttackRepo({ agent: `sh {fx}/nested-git.sh ${pwned} {repo}`, grader: CAT_GRADER, dir: root });
    const config = fingerprint(join(repo.dir, '.git', 'config'));
    const { result } = await runLocal(repo);
    expect(readdirSync(root).filter((f) => f.startsWith('pwned'))).toEqual([]);
    expect(fingerprint(join(repo.dir, '.git', 'config'))).toBe(config);
    expect(result.score).toBe(5);
    expect(result.score).toBe(cleanRegrade(join(repo.dir, '.git'), result.commit, repo.grader));
  });

  it.each(['crlf', 'utf16'])(
    'a .gitattributes that re-encodes the protected grader (%s) does not change what the judge runs',
    async (how) => {
      // A grader whose one line breaks if its bytes change (a CR, a UTF-16 code unit).
      const repo = makeAttackRepo({
        agent: `sh {fx}/reencode-grader.sh ${how}`,
        files: { 'grade.sh': 'cat value.txt\n' },
      });
      const { result } = await runLocal(repo);
      expect(result.protectedChanged).toEqual([]);
      // The base's grader, run on the agent's value.txt, says 5.
      expect(result.score).toBe(5);
    },
  );

  it('files the agent made unreadable (chmod 000, the workspace itself too) are still recorded and graded', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/unreadable.sh', grader: CAT_GRADER });
    const { result } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    expect(showFile(gitDir, result.commit, 'value.txt')).toBe('5\n');
    expect(showFile(gitDir, result.commit, 'work/inner.txt')).toBe('kept\n');
    expect(result.score).toBe(5);
  });
});
