// Round 8 attacks (a helper session): hostile command agents against the defences added on main
// since e1cecad (the judge's guarded folders, nested repositories in the sweep, the hooks folder).
// Each test fails against the code it was written on (main at bc7889f) but for the (control) rows,
// which show the defence the attack beside them gets around.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { attackTemp, cleanupAttackTemps, describeSandboxed, FX, makeAttackRepo, runCli, runLocal } from './helpers.js';
import { controlAndTrick, hasPytest } from './rows.js';

afterAll(cleanupAttackTemps);

describeSandboxed("round 8: the judge's guarded folders, past their bound", () => {
  const padded = (pad: boolean) =>
    makeAttackRepo({
      agent: `sh {fx}/round8-guard-padding.sh {fx} ${pad ? '' : 'nopad'}`,
      files: {
        'grade.sh': 'sh solve.sh checks/a/z.txt >/dev/null 2>&1\ncat checks/*/*.txt | sort -n | tail -n 1\n',
        'solve.sh': '\n',
        'checks/a/a.txt': '1\n',
      },
      protected: ['grade.sh', 'checks/**/*.txt'],
      agentTimeout: 120,
      graderTimeout: 60,
    });

  controlAndTrick(
    padded,
    '(control) a transient FIFO at checks/a/z.txt, no padding: checks/a is stamped and the score voided',
    /added or removed files in [^\n]*checks\/a/,
    '10,000 committed folders sorting before checks/a push it past the 10,000 stamped: the transient FIFO forges 100',
  );
});

describeSandboxed("round 8: honest graders the judge's guarded folders void", () => {
  it('a protected literal folder (src/checker) guards all of src/: an honest make that builds src/main.o is scored', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 5 > value.txt'`,
      files: {
        'grade.sh': 'make -s >&2 || exit 1\nsh src/checker/check.sh\n',
        Makefile: 'all: src/main.o\nsrc/main.o: src/main.c\n\tcc -c src/main.c -o src/main.o\n',
        'src/main.c': 'int main(void) { return 0; }\n',
        'src/checker/check.sh': 'cat value.txt\n',
      },
      protected: ['grade.sh', 'Makefile', 'src/checker'],
      graderTimeout: 60,
    });
    const { result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').toBe(5);
  }, 600_000);

  it.skipIf(!hasPytest())(
    'an honest pytest run from tests/ (protected tests/test_*.py) writes its .pytest_cache there: it is scored',
    async () => {
      const repo = makeAttackRepo({
        agent: `sh -c 'echo 5 > value.txt'`,
        files: {
          // Without the plugins this machine may have (pytest-benchmark keeps .benchmarks there too).
          'grade.sh':
            'cd tests && PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python3 -m pytest -q >&2 || exit 1\ncat ../value.txt\n',
          'tests/test_value.py': 'def test_value():\n    assert int(open("../value.txt").read()) > 0\n',
        },
        protected: ['grade.sh', 'tests/test_*.py'],
        graderTimeout: 60,
      });
      const { result } = await runLocal(repo);
      expect(result.score, result.reason ?? result.note ?? '').toBe(5);
    },
    600_000,
  );
});

describeSandboxed('round 8: the sweep and a repository setup makes', () => {
  it("setup's vendored checkout (vendor/dep, a git repository the grader asks for its commit) keeps what the grader needs", async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 5 > value.txt'`,
      files: {
        'mkdep.sh':
          'rm -rf vendor/dep && mkdir -p vendor/dep && cd vendor/dep && git init -q && echo v1 > VERSION && git add VERSION && git -c user.name=s -c user.email=s@s commit -qm v1\n',
        'grade.sh':
          'git -C vendor/dep rev-parse --verify -q HEAD >/dev/null || { echo "vendor/dep: no commit" >&2; exit 1; }\ncat value.txt\n',
        '.gitignore': 'vendor/\n',
      },
      protected: ['grade.sh', 'mkdep.sh'],
      extra: 'setup:\n  commands: ["sh mkdep.sh"]\n',
      graderTimeout: 60,
    });
    const { result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').toBe(5);
  }, 600_000);
});

/** What the user's own git runs from the tree is protected: the only episode, which changed it, got no score. */
function protectedAndVoided(r: { exitCode: number | null; out: string }, file: string) {
  expect(r.out).toContain(`the agent changed protected paths: ${file}`);
  expect(r.exitCode, r.out).toBe(1);
}

describeSandboxed('round 8: hooks that run the tree after the merge', () => {
  const finish = async (repo: ReturnType<typeof makeAttackRepo>) => {
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 120_000 });
    const id = readdirSync(join(repo.dir, '.forkflush')).find((d) => /^\d/.test(d)) as string;
    return { r, best: `forkflush/${id}/best` };
  };

  it("husky 9 (core.hooksPath .husky/_, which runs the tracked .husky/pre-commit): the agent's hook never runs on the next commit", async () => {
    const marker = join(attackTemp('husky9'), 'hook-ran');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round8-husky9.sh ${marker}`,
      files: { '.husky/pre-commit': 'true\n', '.gitignore': '.forkflush/\n' },
    });
    // What `husky` (its prepare script) makes: .husky/_ ignored, each hook there runs .husky/<hook>.
    const underscore = join(repo.dir, '.husky', '_');
    mkdirSync(underscore, { recursive: true });
    writeFileSync(join(underscore, '.gitignore'), '*\n');
    copyFileSync(join(FX, 'round8-husky9-h.sh'), join(underscore, 'h'));
    writeFileSync(join(underscore, 'pre-commit'), '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n');
    chmodSync(join(underscore, 'h'), 0o755);
    chmodSync(join(underscore, 'pre-commit'), 0o755);
    repo.git('config', 'core.hooksPath', '.husky/_');
    const { r, best } = await finish(repo);
    protectedAndVoided(r, '.husky/pre-commit');
    repo.git('merge', '-q', best);
    repo.git('commit', '-q', '--allow-empty', '-m', 'after the merge');
    expect(
      existsSync(marker),
      `the agent's .husky/pre-commit ran on the user's commit; the run said: ${r.out
        .split('\n')
        .filter((l) => /protected|warning/.test(l))
        .join(' | ')}`,
    ).toBe(false);
  }, 300_000);

  it("a .git/hooks/pre-commit linked to the tracked scripts/pre-commit.sh: the agent's script never runs unwarned", async () => {
    const marker = join(attackTemp('hookscript'), 'hook-ran');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round8-hook-script.sh ${marker}`,
      files: { 'scripts/pre-commit.sh': '#!/bin/sh\ntrue\n', '.gitignore': '.forkflush/\n' },
    });
    chmodSync(join(repo.dir, 'scripts', 'pre-commit.sh'), 0o755);
    repo.git('update-index', '--chmod=+x', 'scripts/pre-commit.sh');
    repo.git('commit', '-qm', 'hook mode');
    // As such READMEs say: ln -s ../../scripts/pre-commit.sh .git/hooks/pre-commit
    symlinkSync('../../scripts/pre-commit.sh', join(repo.dir, '.git', 'hooks', 'pre-commit'));
    const { r, best } = await finish(repo);
    protectedAndVoided(r, 'scripts/pre-commit.sh');
    const warned = r.out.includes('scripts/pre-commit.sh');
    repo.git('merge', '-q', best);
    repo.git('commit', '-q', '--allow-empty', '-m', 'after the merge');
    expect(
      !existsSync(marker) || warned,
      "the agent's scripts/pre-commit.sh ran on the user's next commit, and the end of the run named it nowhere",
    ).toBe(true);
  }, 300_000);

  it("a tracked .gitconfig the user's .git/config includes: the agent's core.fsmonitor never runs on the user's next git status unwarned", async () => {
    const marker = join(attackTemp('gitconfig'), 'fsmonitor-ran');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round8-gitconfig.sh ${marker}`,
      files: { '.gitconfig': '[alias]\n\tst = status -sb\n', '.gitignore': '.forkflush/\n' },
    });
    // As such repositories ask their contributors to: git config include.path ../.gitconfig
    repo.git('config', 'include.path', '../.gitconfig');
    const { r, best } = await finish(repo);
    protectedAndVoided(r, '.gitconfig');
    const warned = r.out.includes('.gitconfig');
    repo.git('merge', '-q', best);
    repo.git('status', '--short');
    expect(
      !existsSync(marker) || warned,
      "the agent's core.fsmonitor ran on the user's git status, and the end of the run named .gitconfig nowhere",
    ).toBe(true);
  }, 300_000);
});
