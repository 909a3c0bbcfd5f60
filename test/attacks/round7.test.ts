// Round 7 attacks (a helper session): hostile command agents against what is still open. Each
// test fails against the code it was written on (main at e1cecad) but for the two (control) rows,
// which show the defence the attack beside them gets around.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { attackTemp, cleanupAttackTemps, describeSandboxed, makeAttackRepo, runCli, runLocal } from './helpers.js';
import { controlAndTrick, hasPytest } from './rows.js';

afterAll(cleanupAttackTemps);

const KEY = `sk-ant-api03-${randomBytes(24).toString('hex')}`;
let mock: Server;
let mockPort = 0;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  mock = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  await new Promise<void>((resolve) => mock.listen(0, '127.0.0.1', resolve));
  mockPort = (mock.address() as AddressInfo).port;
});
afterAll(() => {
  mock.closeAllConnections();
  mock.close();
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

function userEnv(vars: Record<string, string>): void {
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
}

describeSandboxed('round 7: the model key and the gradings the agent asks for', () => {
  it('a grading asked for through $FORKFLUSH_GRADE does not hand the agent the real model key (it holds a placeholder)', async () => {
    userEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: `http://127.0.0.1:${mockPort}` });
    const repo = makeAttackRepo({ agent: `sh {fx}/round7-grade-env.sh {logs}` });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace('agent:\n', 'agent:\n  env: [ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL]\n'),
    );
    repo.git('commit', '-qam', 'the key');
    const { result, state } = await runLocal(repo);
    // The agent itself holds the placeholder, as the README says...
    const agentEnv = readFileSync(join(repo.logs, 'agent-env.txt'), 'utf8');
    expect(agentEnv).toMatch(/ANTHROPIC_API_KEY=forkflush-placeholder-/);
    expect(agentEnv).not.toContain(KEY);
    expect(result.score).toBe(5);
    // ...but what its grading printed came back to it, and went into the committed result.
    const got = readFileSync(join(repo.logs, 'grade-err.txt'), 'utf8');
    const committed = repo.git('show', `${result.commit}:loot.txt`);
    expect.soft(got, 'the real key reached the agent through $FORKFLUSH_GRADE').not.toContain(KEY);
    expect.soft(committed, 'the real key is in the committed branch').not.toContain(KEY);
    expect(state.status).toBeDefined();
  });
});

describeSandboxed('round 7: what runs by itself once the best branch is merged', () => {
  const autorun = [
    '.husky/pre-commit',
    '.githooks/pre-commit',
    '.pre-commit-config.yaml',
    'lefthook.yml',
    '.gitea/workflows/x.yml',
    '.forgejo/workflows/x.yml',
    '.circleci/config.yml',
    '.travis.yml',
    'azure-pipelines.yml',
    'bitbucket-pipelines.yml',
  ];
  const run = async (hooksPath: boolean) => {
    const marker = join(attackTemp('autorun'), 'hook-ran');
    const repo = makeAttackRepo({ agent: `sh {fx}/round7-autorun.sh ${marker}` });
    // The user's repository runs its hooks from a tracked folder, as husky sets it up.
    if (hooksPath) repo.git('config', 'core.hooksPath', '.husky');
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 120_000 });
    const id = readdirSync(join(repo.dir, '.forkflush')).find((d) => /^\d/.test(d)) as string;
    return { r, repo, marker, best: `forkflush/${id}/best` };
  };

  it("the end of the run warns about every file that runs by itself (hook managers, other forges' CI)", async () => {
    const { r, repo, best } = await run(false);
    expect(r.exitCode, r.out).toBe(0);
    const changed = repo.git('diff', '--name-only', 'main', best).split('\n');
    for (const f of autorun) expect(changed).toContain(f);
    expect(
      autorun.filter((f) => r.out.includes(f)),
      'files that run by themselves, named in the warning',
    ).toEqual(autorun);
  });

  it("the repository's own hooks folder (core.hooksPath) is protected: the agent's hook never runs on the next commit", async () => {
    const { r, repo, marker, best } = await run(true);
    expect(r.out).toMatch(/the agent changed protected paths: [^\n]*\.husky\/pre-commit/);
    expect(repo.git('diff', '--name-only', 'main', best)).not.toContain('.husky/pre-commit');
    // What the user does next, as the run tells them: merge, then commit. No hook of the agent's runs.
    repo.git('merge', '-q', best);
    repo.git('commit', '-q', '--allow-empty', '-m', 'after the merge');
    expect(existsSync(marker)).toBe(false);
  });

  it("a plain folder's take-home command writes the files as graded, whatever the agent's .gitattributes says (export-subst, export-ignore)", async () => {
    // git archive applies the archived tree's .gitattributes: export-subst expands $Format:…$ (%n
    // a newline), export-ignore leaves files out. The agent's, recorded as written, turned a graded
    // comment into a command in the user's copy (found by a review; the copy's info/attributes).
    const root = attackTemp('takehome');
    const marker = join(attackTemp('takehome-marker'), 'ran');
    // The agent's script, where its sandbox can read it (no shell quoting between it and its bytes).
    const script = join(attackTemp('takehome-agent'), 'agent.sh');
    writeFileSync(
      script,
      [
        'printf "5\\n" > value.txt',
        // Graded: one comment line. Archived: `#`, a newline, then a command of the agent's.
        `printf 'echo built\\n# build id $Format:%%n$touch ${marker}\\n' > build.sh`,
        'printf "build.sh export-subst\\nvalue.txt export-ignore\\n" > .gitattributes',
        '',
      ].join('\n'),
    );
    const repo = makeAttackRepo({ dir: root, agent: `sh ${script}` });
    // Not a repository: forkflush runs it on a copy and prints the archive line.
    rmSync(join(repo.dir, '.git'), { recursive: true, force: true });
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 120_000 });
    expect(r.exitCode, r.out).toBe(0);
    const line = /Copy its files over yours: (.+)/.exec(r.out)?.[1];
    expect(line, r.out).toBeDefined();
    const id = readdirSync(join(repo.dir, '.forkflush')).find((d) => /^\d/.test(d)) as string;
    const copy = join(repo.dir, '.forkflush', id, 'repo');
    const best = `forkflush/${id}/best`;
    const graded = (path: string) => execFileSync('git', ['-C', copy, 'show', `${best}:${path}`], { encoding: 'utf8' });
    expect(graded('value.txt')).toBe('5\n');
    // What the judge graded: one comment line, no command.
    expect(graded('build.sh')).toBe(`echo built\n# build id $Format:%n$touch ${marker}\n`);
    // What the user does next, as the run tells them.
    execFileSync('sh', ['-c', line as string], { cwd: repo.dir });
    expect.soft(readFileSync(join(repo.dir, 'value.txt'), 'utf8'), 'value.txt taken home').toBe(graded('value.txt'));
    expect.soft(readFileSync(join(repo.dir, 'build.sh'), 'utf8'), 'build.sh taken home').toBe(graded('build.sh'));
    execFileSync('sh', ['build.sh'], { cwd: repo.dir });
    expect(existsSync(marker), "the user's `sh build.sh` ran the agent's command").toBe(false);
  }, 180_000);
});

/** The run, which must end with results: an exception out of it (its stack shown) fails the row. */
async function runWithoutThrowing(repo: ReturnType<typeof makeAttackRepo>) {
  let failure: unknown = null;
  const run = await runLocal(repo).catch((e: unknown) => {
    failure = e;
    return null;
  });
  expect(failure === null ? null : String((failure as Error).stack ?? failure).slice(0, 600)).toBeNull();
  return run as Awaited<ReturnType<typeof runLocal>>;
}

describeSandboxed('round 7: a lineage whose listing grows past what forkflush lists', () => {
  it('two episodes of 5,500 files with 3,500-byte paths each (each within the bounds): the second is not recorded, and the run ends with results', async () => {
    const repo = makeAttackRepo({
      // Its spend reported: a crash's charge is a share of its time, which a busy machine changes.
      agent: `sh -c 'node {fx}/round7-long-listing.mjs 5500; echo "{\\"spent\\": 6}" > "$FORKFLUSH_USAGE_FILE"'`,
      agentTimeout: 120,
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
    });
    const run = await runWithoutThrowing(repo);
    const seen = run.results.map((r) => ({ score: r.score, basis: r.spentBasis, reason: r.reason?.slice(0, 300) }));
    expect(run.results.length, JSON.stringify(seen)).toBe(2);
    expect(seen.map((r) => r.basis)).toEqual([undefined, undefined]);
    // 19.5 MB of paths each: the second episode's tree lists both, past RECORDED_TREE_LISTING_MAX_BYTES.
    expect(run.results[0]?.score).toBe(5);
    expect(run.results[1]?.reason).toMatch(/the workspace's paths, listed, pass 30.5 MB/);
  }, 900_000);
});

describeSandboxed('round 7: the size check and a path past PATH_MAX only with the workspace before it', () => {
  it('a 200 MB file at a 4,0xx-byte relative path is refused like any file over 100 MB', async () => {
    const repo = makeAttackRepo({ agent: `node {fx}/round7-long-path-big.mjs 200` });
    const { result, run } = await runLocal(repo);
    const gitDir = run.info.repo ? join(run.info.repo, '.git') : join(repo.dir, '.git');
    const sizes = execFileSync('git', ['--git-dir', gitDir, 'ls-tree', '-r', '-l', result.commit], {
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    })
      .split('\n')
      .filter(Boolean)
      .map((l) => Number(l.split(/\s+/)[3]));
    const biggest = Math.max(...sizes.filter((n) => Number.isFinite(n)));
    expect(biggest, 'bytes of the largest file in the recorded commit').toBeLessThanOrEqual(100 * 1024 * 1024);
  }, 300_000);
});

describeSandboxed("round 7: what the graded code leaves in the judge's checkout", () => {
  it('19,000 files with 3,500-byte paths (68 MB of names) written by the solver while the judge grades: a result, not an exception that ends the run', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'cp {fx}/round7-judge-litter.mjs solve.mjs; echo 5 > value.txt'`,
      files: { 'grade.sh': 'node solve.mjs 19000 >/dev/null 2>&1\ncat value.txt\n', 'solve.mjs': '\n' },
      graderTimeout: 120,
    });
    const run = await runWithoutThrowing(repo);
    expect(run.results.length).toBe(1);
    expect(run.results[0]?.reason).toMatch(/left more in the judge's checkout than forkflush can list/);
  }, 600_000);
});

/** The checkers the graders below read last (their largest number is the score), and the glob that protects them. */
const CHECKS = { read: 'cat checks/*.txt | tail -n 1', glob: 'checks/*.txt' };
const NESTED_CHECKS = { read: 'cat checks/*/*.txt | sort -n | tail -n 1', glob: 'checks/**/*.txt' };

/** A task whose grader runs the solver the agent copied from `fixture` (with `args`), then reads the checkers. */
function solverTask(
  fixture: string,
  args: string,
  checks: { read: string; glob: string },
  files: Record<string, string>,
  graderTimeout?: number,
) {
  return makeAttackRepo({
    agent: `sh -c 'cp {fx}/${fixture} solve.sh; echo 1 > value.txt'`,
    files: { 'grade.sh': `sh solve.sh ${args} >/dev/null 2>&1\n${checks.read}\n`, 'solve.sh': '\n', ...files },
    protected: ['grade.sh', checks.glob],
    ...(graderTimeout ? { graderTimeout } : {}),
  });
}

describeSandboxed("round 7: a FIFO at a protected path, its name buried in the sweep's listing", () => {
  const fifoTask = (flood: boolean) =>
    solverTask('round7-fifo-flood.sh', flood ? '' : 'noflood', CHECKS, { 'checks/a.txt': '1\n' }, 120);

  controlAndTrick(
    fifoTask,
    '(control) the FIFO alone: the judge sees it at the protected path and voids the score',
    /protected paths while the grader ran: checks\/z\.txt/,
    'the FIFO, then 24,000 FIFOs with long names in the folder find walks next: the forged 100 is still voided',
  );
});

describeSandboxed('round 7: a file at a protected path that is gone when the judge looks', () => {
  it('a FIFO the checker reads "100" from, removed once read: the forged score is voided', async () => {
    const repo = solverTask('round7-transient.sh', '', CHECKS, { 'checks/a.txt': '1\n' }, 60);
    const { result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').not.toBe(100);
  }, 600_000);
});

describeSandboxed('round 7: a file at a protected path inside a repository the graded code made', () => {
  const nestedTask = (git: boolean) =>
    solverTask('round7-nested-repo.sh', git ? '' : 'nogit', NESTED_CHECKS, { 'checks/a/a.txt': '1\n' });

  controlAndTrick(
    nestedTask,
    '(control) checks/z/z.txt made by the graded code: the score is voided',
    /protected paths while the grader ran: checks\/z\/z\.txt/,
    'the same file, its folder made a git repository (checks/z/.git): the forged 100 is voided too',
  );
});

describeSandboxed("round 7: what the judge's setup plants at a protected path, inside a repository it made", () => {
  it("setup (the commit's plant.sh) writes checks/z/z.txt in checks/z/.git's folder: removed before grading, or the score voided", async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'cp {fx}/round7-nested-repo.sh plant.sh; echo 1 > value.txt'`,
      grader: "sh -c 'cat checks/*/*.txt | sort -n | tail -n 1'",
      files: { 'plant.sh': '\n', 'checks/a/a.txt': '1\n' },
      protected: ['checks/**/*.txt'],
      extra: 'setup:\n  commands: ["sh plant.sh"]\n',
    });
    const { result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').not.toBe(100);
  }, 300_000);
});

describeSandboxed('round 7: a repository the agent makes inside its workspace', () => {
  it('its files are recorded and graded, not a link to a commit the repository lacks', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'mkdir -p sub && cd sub && git init -q && echo 5 > f && git add f && git -c user.name=a -c user.email=a@b commit -qm x'`,
      grader: "sh -c 'cat sub/f 2>/dev/null || echo 1'",
    });
    const { result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').toBe(5);
    expect(repo.git('ls-tree', result.commit ?? '', 'sub/')).toMatch(/^100644 blob \S+\tsub\/f$/);
  }, 300_000);
});

describeSandboxed("round 7: an honest grader beside the judge's guarded folders", () => {
  it.skipIf(!hasPytest())(
    'pytest with its ini in the protected tests folder (its rootdir, where it keeps a cache) keeps its score',
    async () => {
      const repo = makeAttackRepo({
        agent: `sh -c 'echo 5 > value.txt'`,
        grader: "sh -c 'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python3 -m pytest -q tests >/dev/null && cat value.txt'",
        files: { 'tests/pytest.ini': '[pytest]\n', 'tests/test_value.py': 'def test_value():\n    assert True\n' },
        protected: ['tests/*.py', 'tests/*.ini'],
        // pytest's start is seconds of CPU: a busy machine took it past the default 5 s.
        graderTimeout: 60,
      });
      const { result } = await runLocal(repo);
      expect(result.score, result.reason ?? result.note ?? '').toBe(5);
    },
    300_000,
  );
});
