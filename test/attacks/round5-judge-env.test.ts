// A grader.env secret and the judge: the graded code (the agent's) runs with it, prints it and
// fails. The reason the judge gives goes into the journal the next agent reads, the state and the
// reports, and grader.log keeps the grader's whole output: none of them may hold the secret.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cleanupAttackTemps, describeSandboxed, makeAttackRepo, runCli } from './helpers.js';

afterAll(cleanupAttackTemps);

const SECRET = 'JS3CRET-judge-only-4f1c9a7e2b';

describeSandboxed('a secret of grader.env, printed by the graded code', () => {
  it("reaches neither the journal the next agent reads, nor the run's records, nor grader.log", async () => {
    // The first episode commits a solver that prints the secret and fails; the second reads the journal.
    const agent = `sh -c 'if [ -e {logs}/first ]; then cp NOTES.md {logs}/saw.md; else touch {logs}/first; printf "echo \\$JUDGE_SECRET | base64 >&2; echo \\"leak:\\$JUDGE_SECRET\\" >&2; exit 1\\n" > solve.sh; fi; echo 5 > value.txt'`;
    const repo = makeAttackRepo({
      agent,
      grader: 'sh grade.sh',
      files: { 'grade.sh': 'sh solve.sh || exit 1\ncat value.txt\n', 'solve.sh': 'true\n' },
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
    });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace(/^grader:\n/m, 'grader:\n  env: [JUDGE_SECRET]\n'));
    repo.git('commit', '-qam', 'grader.env');
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', JUDGE_SECRET: SECRET };
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 120_000, env });
    expect(r.out).toMatch(/the grader exited with code 1: leak:\*\*\*/);
    const saw = readFileSync(join(repo.logs, 'saw.md'), 'utf8');
    expect(saw).toMatch(/leak:\*\*\*/);
    const base64 = Buffer.from(`${SECRET}\n`).toString('base64');
    const runDir = join(
      repo.dir,
      '.forkflush',
      readdirSync(join(repo.dir, '.forkflush')).find((d) => /^\d/.test(d)) as string,
    );
    const texts = [
      r.out,
      saw,
      readFileSync(join(runDir, 'state.json'), 'utf8'),
      readFileSync(join(runDir, 'report.md'), 'utf8'),
      ...readdirSync(join(runDir, 'episodes')).map((e) =>
        readFileSync(join(runDir, 'episodes', e, 'grader.log'), 'utf8'),
      ),
    ];
    for (const text of texts) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(base64.slice(0, 20));
    }
  });
});
