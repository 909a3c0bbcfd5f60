// Kinds of tasks a new user brings that forkflush had not seen (a review's): a pytest suite, data
// in git-lfs, a grader that prints a long JSON report, a result in a file git ignores, a grader
// that leaves a huge file behind. Each row is a whole CLI run (or init) with a command agent, and
// says what the user expects: a score read as the README's grader contract says, and messages
// that name the real cause before anything is spent.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolationFor } from '../../src/worker/boundary.js';
import { cli, said } from './cli-io.js';
import { makeTaskRepo, retask } from './task-repo.js';

const status = async (dir: string) => JSON.parse((await cli('status', dir, '--json')).out);

/** A small config: two serial episodes of 6 tokens, the given grader and protected paths. */
const config = (grader: string, protectedPaths: string[], agent = 'sh agent.sh') => `grader:
  command: ${grader}
  protected: ${JSON.stringify(protectedPaths)}
  timeout: 60
agent:
  command: ${agent}
  timeout: 60
budget:
  total: 12
  unit: tokens
  episode: 6
strategy: single-run
`;

function hasPytest(): boolean {
  try {
    execFileSync('python3', ['-m', 'pytest', '--version'], { stdio: 'pipe' });
    return true;
  } catch {
    console.warn('\n!!!!!!!! PYTEST TASK TEST SKIPPED: no python3 -m pytest here. !!!!!!!!\n');
    return false;
  }
}

describe('tasks forkflush had not seen', async () => {
  const sandboxed = (await isolationFor('auto')).sandbox !== null;
  if (!sandboxed) console.warn('\n!!!!!!!! UNSEEN-TASK RUN TESTS SKIPPED: no sandbox here. !!!!!!!!\n');
  const maybe = sandboxed ? it : it.skip;

  // A Python project graded by pytest, its tests protected (`tests/**`, as `forkflush init
  // --protected` suggests), a conftest.py in them, no .gitignore. The agent fixes the code and
  // checks its score with $FORKFLUSH_GRADE, as the prompt tells it to: pytest, run there, writes
  // tests/__pycache__/*.pyc into the live workspace, which forkflush recorded as the agent's change
  // to a protected path. Every episode got "no score: the agent changed protected paths:
  // tests/__pycache__/conftest.cpython-311-pytest-9.0.3.pyc, ...", and the run stopped (exit 1)
  // telling the user "the agent changes what grader.protected keeps every time: say in the task
  // that it must not" -- the agent never wrote them, the grader did. Bytecode and pytest's cache
  // are now never recorded (worker/cleanroom.ts RUNTIME_CACHES): the run scores, and no branch
  // holds them.
  maybe(
    'a pytest grader with protected tests and no .gitignore: the run scores, and no branch holds its caches',
    async () => {
      if (!hasPytest()) return;
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          'src/calc.py': 'def add(a, b):\n    return 0\n\ndef mul(a, b):\n    return 0\n',
          'tests/conftest.py':
            "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n",
          'tests/test_calc.py':
            'from calc import add, mul\n\ndef test_add():\n    assert add(1, 2) == 3\n\ndef test_add2():\n    assert add(2, 2) == 4\n\ndef test_mul():\n    assert mul(2, 3) == 6\n',
          'grade.py':
            "import re, subprocess, sys\nr = subprocess.run([sys.executable, '-m', 'pytest', '-q', 'tests'], capture_output=True, text=True)\nprint(r.stdout)\nm = re.search(r'(\\d+) passed', r.stdout)\nprint(int(m.group(1)) if m else 0)\n",
          'agent.sh':
            'cat > /dev/null\nprintf "def add(a, b):\\n    return a + b\\n\\ndef mul(a, b):\\n    return 0\\n" > src/calc.py\n"$FORKFLUSH_GRADE" > /dev/null\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('python3 grade.py', ['grade.py', 'tests/**']),
      );
      const r = await cli('run', repo.dir);
      expect(r.err).not.toMatch(/say in the task that it must not/);
      expect(r.code, r.err).toBe(0);
      expect((await status(repo.dir)).best.score).toBe(2);
      const recorded = repo.git('log', '--all', '--name-only', '--format=');
      expect(recorded).toContain('src/calc.py');
      expect(recorded).not.toMatch(/__pycache__|\.pyc|\.pytest_cache/);
    },
    300_000,
  );

  // Data in git-lfs (`git lfs track '*.csv'`): the commit holds a pointer, the working tree the
  // data, through the filter lfs's install put in the repository's config (faked here, as git-lfs
  // is not installed: the same clean and smudge contract). forkflush's git checks out bytes as they
  // are, so every episode and the judge read the pointer: the grader failed with KeyError. The dry
  // run said "no score, as committed and as it is" (the working tree scores 6: it was never
  // graded, git status being clean) and blamed the environment ("the grader gets only the basics
  // (PATH, locale, proxies) and what grader.env lists"), then "the checks passed", exit 0; the run
  // spent its opening round and stopped. A working tree that differs from the commit only through
  // a filter is now graded too, and the run refused, naming the file and the filter.
  maybe(
    'data in git-lfs: the run and its dry run refuse before any agent, naming the file and its filter',
    async () => {
      const repo = makeTaskRepo();
      const gitDir = join(repo.dir, '.git');
      mkdirSync(join(gitDir, 'fake-lfs', 'objects'), { recursive: true });
      writeFileSync(
        join(gitDir, 'fake-lfs', 'clean'),
        `#!/bin/sh\nt=$(mktemp); cat > "$t"; s=$(sha256sum "$t" | cut -d' ' -f1)\ncp "$t" ${gitDir}/fake-lfs/objects/$s\nprintf 'version https://git-lfs.github.com/spec/v1\\noid sha256:%s\\nsize %s\\n' "$s" "$(wc -c < "$t" | tr -d ' ')"\n`,
      );
      writeFileSync(
        join(gitDir, 'fake-lfs', 'smudge'),
        `#!/bin/sh\ns=$(grep '^oid' | sed 's/oid sha256://'); cat ${gitDir}/fake-lfs/objects/$s\n`,
      );
      chmodSync(join(gitDir, 'fake-lfs', 'clean'), 0o755);
      chmodSync(join(gitDir, 'fake-lfs', 'smudge'), 0o755);
      repo.git('config', 'filter.lfs.clean', join(gitDir, 'fake-lfs', 'clean'));
      repo.git('config', 'filter.lfs.smudge', join(gitDir, 'fake-lfs', 'smudge'));
      repo.git('config', 'filter.lfs.required', 'true');
      retask(
        repo,
        {
          '.gitattributes': '*.csv filter=lfs diff=lfs merge=lfs -text\n',
          'data.csv': 'a,b\n1,2\n3,4\n',
          'grade.py':
            "import csv\nrows = list(csv.DictReader(open('data.csv')))\nv = float(open('value.txt').read())\nprint(sum(float(r['b']) for r in rows) + v)\n",
          'agent.sh':
            'cat > /dev/null\nv=$(cat value.txt); echo $((v+1)) > value.txt\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('python3 grade.py', ['grade.py', 'data.csv']),
      );
      // The commit holds the pointer; the working tree, as git status says, is the commit.
      expect(repo.git('show', 'HEAD:data.csv')).toMatch(/^version https:\/\/git-lfs/);
      expect(repo.git('status', '--porcelain')).toBe('');
      expect(execFileSync('python3', ['grade.py'], { cwd: repo.dir, encoding: 'utf8' }).trim()).toBe('6.0');

      for (const how of [['--dry-run'], []]) {
        const r = await cli('run', repo.dir, ...how);
        expect(r.code, r.err).toBe(2);
        expect(said(r.err).join('\n')).toContain(
          'but the working tree scores 6: git keeps data.csv through its filter lfs (.gitattributes), so the commit holds what the filter made of it',
        );
      }
    },
    300_000,
  );

  // A grader that prints its report as one JSON line, per-test details and "score" (the README:
  // "JSON with a numeric score"), of ~2.9 MB for a suite of 100,000 cases. forkflush keeps the
  // last 1,000,000 characters of a grading's stdout, so the line it parsed was a fragment, and
  // every grading got "no score (the grader's last line is not a number: true}, {"test": 65518,
  // ...)": a valid JSON line with a numeric score, called not a number. The run stopped after its
  // opening round. The reason now says the line is too long, how long it may be, and the fix.
  maybe(
    'a grader whose last line is a long JSON report with a numeric score: the reason says too long, and the fix',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          'grade.py':
            "import json\nv = float(open('value.txt').read())\nprint(json.dumps({'details': [{'test': i, 'ok': True} for i in range(100000)], 'score': v}))\n",
          'agent.sh':
            'cat > /dev/null\nv=$(cat value.txt); echo $((v+1)) > value.txt\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('python3 grade.py', ['grade.py']),
      );
      const dry = await cli('run', repo.dir, '--dry-run');
      const all = dry.out + dry.err;
      expect(all).not.toMatch(/last line is not a number/);
      expect(all).toContain(
        "the grader's last line is longer than the 1,000,000 characters forkflush reads of its output: print the score on a line of its own, last",
      );
    },
    300_000,
  );

  // A task whose answer is a file the repository's .gitignore covers (`*.out`, as build outputs
  // and results often are): the agent writes answer.out, its own $FORKFLUSH_GRADE prints 42, but
  // forkflush records only what git takes, so the judge graded 0 every time. The run ended, exit
  // 1, with "no episode did any work: none changed the workspace (does agent.command run the agent
  // on the task, and may it edit files there?)": false (every agent wrote answer.out, and graded
  // it), and it sent the user to debug an agent that works. An episode that records no change now
  // names the files its workspace's .gitignore leaves out (worker/cleanroom.ts ignoredFiles), and
  // the run's end says that is all the agents wrote.
  maybe(
    'an agent whose only change is a git-ignored file the grader reads: the end names the ignored file, not a lazy agent',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          // Python's bytecode too, which forkflush never records anyway: not named as the agent's.
          '.gitignore': '*.out\n__pycache__/\n',
          'grade2.sh': 'cat answer.out 2>/dev/null || echo 0\n',
          'agent.sh':
            'cat > /dev/null\necho 42 > answer.out\nmkdir -p __pycache__ && : > __pycache__/x.pyc\n"$FORKFLUSH_GRADE" >&2\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('sh grade2.sh', ['grade2.sh']),
      );
      const r = await cli('run', repo.dir);
      expect(r.code, r.err).toBe(1);
      const told = said(r.err).join('\n');
      expect(told).not.toMatch(/none changed the workspace/);
      expect(told).toContain(
        `no episode changed what git records: what their agents changed is only in files the repository's .gitignore leaves out ("answer.out")`,
      );
    },
    300_000,
  );
  // The grader writes a large by-product into the workspace each time it runs (a model
  // checkpoint, a build cache of 101 MB), as graders of training or build tasks do. The judge's
  // checkout is thrown away, so the dry run's grading saw nothing wrong ("the checks passed");
  // in the run, every $FORKFLUSH_GRADE the agent called left the file in its workspace, every
  // episode got "no score: the workspace could not be recorded ("model.ckpt" is 101 MB, more than
  // a file may be ...)" and the run stopped after three episodes, exit 1. The initial grade now
  // looks at what the grader left in its folder, and the run and its dry run refuse at once.
  maybe(
    'a grader that writes a file over 100 MB into the workspace: the run and its dry run refuse before any agent, naming it',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          'grade2.sh': 'truncate -s 101M model.ckpt\ncat value.txt\n',
          'agent.sh':
            'cat > /dev/null\nv=$(cat value.txt); echo $((v+1)) > value.txt\n"$FORKFLUSH_GRADE" > /dev/null\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('sh grade2.sh', ['grade2.sh']),
      );
      for (const how of [['--dry-run'], []]) {
        const r = await cli('run', repo.dir, ...how);
        expect(r.code, r.err).toBe(2);
        expect(said(r.err).join('\n')).toContain(
          'grading the initial workspace left a file in it that no episode could record: "model.ckpt" is 101 MB, more than a file may be',
        );
      }
    },
    300_000,
  );
});

/** `forkflush init --yes` in a new repository with a command agent, grading with `grader`. */
async function initWith(dir: string, grader: string, graderFile: string) {
  writeFileSync(join(dir, 'agent.sh'), 'cat > /dev/null\n');
  execFileSync('git', ['init', '-q', '--initial-branch=main'], { cwd: dir });
  const flags = ['--agent', 'command', '--agent-command', 'sh agent.sh', '--budget', '60', '--unit', 'tokens'];
  return cli('init', dir, '--grader', grader, ...flags, '--protected', graderFile, '--yes');
}

describe('forkflush init on a grader whose last line is not a score', () => {
  // A new user gives init the test runner's own command, or a script that ends with a summary
  // line: pytest -q's last line is "3 passed in 0.01s". init graded the workspace once and printed
  // "score: 3 passed in 0.01s" (for a grader ending with "Done.", "score: Done."): what looks like
  // a score to the user, while the dry run and every episode say "no score (the grader's last line
  // is not a number: ...)". init printed whatever the last line was, unparsed; it now reads it as
  // the run does (core/score.ts parseScore) and says there is no score, and why.
  it('says no score and why, not "score: <the last line>"', async () => {
    for (const last of ['3 passed in 0.01s', 'Done.']) {
      const dir = mkdtempSync(join(tmpdir(), 'forkflush-init-'));
      writeFileSync(join(dir, 'grade.sh'), `echo 5\necho '${last}'\n`);
      const r = await initWith(dir, 'sh grade.sh', 'grade.sh');
      expect(r.code, r.err).toBe(0);
      expect(r.out).not.toContain(`score: ${last}`);
      expect(r.out).toMatch(/no score/);
    }
  }, 120_000);

  // The same, by size: init kept 200,000 characters of the grader's output and printed the tail
  // of a long JSON line as its "score" ("score: : true}, {"test": 2858, ...") where the run reads
  // the whole line and scores it. init now keeps what a grading of the run keeps.
  it('a JSON report of 280 KB: init says its score, as the run reads it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-init-'));
    writeFileSync(
      join(dir, 'grade.py'),
      "import json\nprint(json.dumps({'details': [{'test': i, 'ok': True} for i in range(10000)], 'score': 7}))\n",
    );
    const r = await initWith(dir, 'python3 grade.py', 'grade.py');
    expect(r.code, r.err).toBe(0);
    const line = r.out.match(/^ {2}(score|no score).*$/m)?.[0] ?? '';
    expect(line.slice(0, 200)).toMatch(/^ {2}score: 7\b/);
  }, 120_000);
});
