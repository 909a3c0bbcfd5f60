// Round 2: git edge cases between the workspace and the judge (protected paths replaced by
// something of another kind, gitlinks and .gitmodules, the workspace's .git made a file, a link,
// nothing, or a config that moves things), attributes in subfolders, and trailers smuggled into
// the commit message through the journal, file names and stderr. The honest outcome: the score
// is what a clean checkout of the result commit earns, the protected files in it are the base's,
// the main repository is untouched, and the message's trailers say what forkflush decided.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parseCommitMessage } from '../../src/core/journal.js';
import { verifySeal } from '../../src/worker/seal.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanRegrade,
  cleanupAttackTemps,
  commitMessage,
  describeSandboxed,
  fingerprint,
  makeAttackRepo,
  runLocal,
  showFile,
  treeMode,
} from './helpers.js';

afterAll(cleanupAttackTemps);

/** 100 when answer.txt matches the protected expectation in tests/. */
const EXPECTED = {
  'grade.sh':
    '# 100 when the answer matches the protected expectation.\n[ "$(cat answer.txt)" = "$(cat tests/expected.txt)" ] && echo 100 || echo 0\n',
  'tests/expected.txt': '42\n',
  'answer.txt': '0\n',
};

describeSandboxed('protected paths replaced by something of another kind', () => {
  it.each([
    ['the protected folder tests/ by a file', 'tests-file', 'tests/expected.txt'],
    ['tests/ by a nested repository (a gitlink, with a .gitmodules)', 'tests-gitlink', 'tests/expected.txt'],
    ['the protected grade.sh by a folder', 'grader-folder', 'grade.sh'],
    ['tests/ by Tests/ and a TESTS file (case-only renames)', 'tests-case', 'tests/expected.txt'],
  ])('%s: no forged score, the base files judged', async (_, mode, changed) => {
    const repo = makeAttackRepo({
      agent: `sh {fx}/round2-protected-swap.sh ${mode}`,
      files: EXPECTED,
      protected: ['grade.sh', 'tests/**'],
    });
    const { result } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    expect(result.score).not.toBe(100);
    expect(result.protectedChanged).toContain(changed);
    // The commit holds the base's protected files, as files.
    expect(showFile(gitDir, result.commit, 'grade.sh')).toBe(EXPECTED['grade.sh']);
    expect(showFile(gitDir, result.commit, 'tests/expected.txt')).toBe('42\n');
    expect(treeMode(gitDir, result.commit, 'tests')).toBe('040000');
    // What the judge would say of that commit, and what anyone checking it out gets: the same.
    expect(cleanRegrade(gitDir, result.commit, repo.grader)).toBe(0);
  });
});

describeSandboxed("the workspace's own .git at its top", () => {
  it.each([
    ['a file pointing at the main repository', 'file'],
    ["a link to the main repository's .git", 'link'],
    ['removed', 'gone'],
    ['gone with the whole workspace, whose path the agent tries to move and replace by a link', 'root'],
    ['a config moving the work tree, bare, with includes, sparse checkout, excludes, fsmonitor and hooks', 'config'],
  ])('.git as %s: the workspace is recorded as it is, and nothing runs or changes outside', async (_, mode) => {
    const root = attackTemp('task');
    const pwned = join(root, 'pwned');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round2-dotgit.sh ${mode} {repo} ${pwned}`,
      grader: CAT_GRADER,
      dir: root,
    });
    const gitDir = join(repo.dir, '.git');
    const config = fingerprint(join(gitDir, 'config'));
    const head = fingerprint(join(gitDir, 'HEAD'));
    const { result } = await runLocal(repo);
    if (mode === 'root') {
      // It deleted the protected files with the rest: no score, and what is recorded is its
      // workspace (value.txt), not what the link would have shown (/etc).
      expect(result.score).toBeNull();
      expect(result.protectedChanged).toContain('grade.sh');
      expect(showFile(gitDir, result.commit, 'passwd')).toBeNull();
    } else {
      expect(result.score).toBe(5);
      expect(result.score).toBe(cleanRegrade(gitDir, result.commit, repo.grader));
    }
    expect(showFile(gitDir, result.commit, 'value.txt')).toBe('5\n');
    expect(showFile(gitDir, result.commit, '.git')).toBeNull();
    expect(fingerprint(join(gitDir, 'config'))).toBe(config);
    expect(fingerprint(join(gitDir, 'HEAD'))).toBe(head);
    expect(readdirSync(root).filter((f) => f.startsWith('pwned'))).toEqual([]);
  });
});

describeSandboxed('attributes in subfolders', () => {
  it('.gitattributes files in subfolders (eol, encoding, filters, ident, export-subst) change no byte the judge reads', async () => {
    const repo = makeAttackRepo({
      agent:
        'mkdir -p sub/deeper && printf "7\\n" > sub/answer.txt && printf "7\\n" > sub/deeper/answer.txt && ' +
        'printf "answer.txt text eol=crlf\\n* ident export-subst\\n" > sub/.gitattributes && ' +
        'printf "answer.txt working-tree-encoding=UTF-16 filter=lfs\\n" > sub/deeper/.gitattributes && ' +
        'echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      // 7 + 7 when both answers are exactly "7\n".
      grader: `sh -c '[ "$(od -An -c sub/answer.txt sub/deeper/answer.txt | tr -d " \\n")" = "7\\n7\\n" ] && echo 14 || echo 0'`,
    });
    const { result } = await runLocal(repo);
    // The judge reads the bytes the agent wrote, as they are stored (a plain checkout would apply
    // the committed attributes: git's eol and encoding conversions, and filters where installed).
    expect(result.score).toBe(14);
    expect(showFile(join(repo.dir, '.git'), result.commit, 'sub/deeper/answer.txt')).toBe('7\n');
  });
});

describeSandboxed('trailers smuggled into the commit message', () => {
  it.each([
    ['the journal and stderr', ''],
    ['the journal, stderr and names of protected files', 'names'],
  ])('through %s: the trailers read back are what forkflush decided', async (_, names) => {
    const seal = 'ab'.repeat(32);
    const repo = makeAttackRepo({
      agent: `sh {fx}/round2-trailers.sh ${seal} ${names}`,
      grader: CAT_GRADER,
      protected: ['grade.sh', 'tests/**'],
      files: { 'tests/keep.txt': 'kept\n' },
    });
    const { result, run, state } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    const message = commitMessage(gitDir, result.commit);
    const honest = names ? null : 5;
    expect(result.score).toBe(honest);
    // The two names with line breaks were seen as changed protected files.
    expect(result.protectedChanged).toHaveLength(names ? 2 : 0);
    // Exactly one line of each trailer starts a line, forkflush's, whatever the agent wrote.
    const starts = (t: string) => message.split('\n').filter((l) => l.startsWith(`${t}:`));
    expect(starts('Forkflush-Score')).toEqual([`Forkflush-Score: ${honest ?? 'none'}`]);
    expect(starts('Forkflush-Run')).toEqual([`Forkflush-Run: ${state.id}`]);
    expect(starts('Forkflush-Episode')).toEqual(['Forkflush-Episode: r0.b0']);
    expect(starts('Forkflush-Exit')).toEqual(['Forkflush-Exit: crash']);
    expect(starts('Forkflush-Seal')).toHaveLength(1);
    expect(message).not.toContain(seal);
    // Read back (as a resume or the app reads it), the result is the recorded one.
    const parsed = parseCommitMessage(message, result.commit);
    expect(parsed?.runId).toBe(state.id);
    expect(parsed?.episode).toBe('r0.b0');
    expect(parsed?.result.score).toBe(honest);
    expect(parsed?.result.exit).toBe('crash');
    expect(parsed?.result.protectedChanged).toEqual(result.protectedChanged);
    // And its seal holds: forkflush made exactly this message on the base.
    const key = readFileSync(run.store.path('seal.key'));
    const tree = repo.git('rev-parse', `${result.commit}^{tree}`);
    expect(verifySeal(key, message, tree, repo.git('rev-parse', 'main'))).toBe(true);
  });
});
