// compare and probe when things go wrong overnight: a run whose agents all crashed, a task
// committed between a stop and a resume, a probe stopped half way, a variant whose runs cannot
// start. Each ends red and says which, with the runs done kept and no figure that misleads.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliWith, interruptAfter } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const BUDGET = 'total: 12\n  unit: tokens\n  episode: 6';
const json = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const folderOf = (out: string) => (/results: (.*)\/results\.json/.exec(out)?.[1] ?? '') as string;

/**
 * A flaky agent: its first `crashes` calls (over the whole night, counted in the logs folder the
 * sandbox lets it write) spend their allowance and crash without changing the workspace (a CLI
 * that dies on an API error after its session's requests); every later call is the test agent's
 * `improve`.
 */
function flakyRepo(crashes: number, budget = BUDGET): TaskRepo {
  const t = makeTaskRepo({ budget });
  const cfg = join(t.dir, '.github', 'autoresearch.yml');
  const text = readFileSync(cfg, 'utf8');
  writeFileSync(cfg, text.replace(/node agent\.mjs improve (\S+)/, `node flaky.mjs ${crashes} $1`));
  writeFileSync(
    join(t.dir, 'flaky.mjs'),
    `import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const [crashes, log] = process.argv.slice(2);
const file = log + '.count';
const n = (existsSync(file) ? Number(readFileSync(file, 'utf8')) : 0) + 1;
writeFileSync(file, String(n));
if (n <= Number(crashes)) {
  writeFileSync(process.env.FORKFLUSH_USAGE_FILE, JSON.stringify({ spent: Number(process.env.FORKFLUSH_BUDGET) }));
  console.error('request failed: context window exceeded');
  process.exit(3);
}
process.argv = [process.argv[0], 'agent.mjs', 'improve', log];
await import('./agent.mjs');
`,
  );
  t.git('add', '-A');
  t.git('commit', '-qm', 'flaky agent');
  return t;
}

describe('compare and probe overnight', () => {
  it('compare: a run whose every agent crashed is not averaged in as a score, and a strategy does not "win" because the other one crashed', async () => {
    // single-run goes first; both of its episodes crash, fork-and-flush's do not.
    const t = flakyRepo(2);
    const r = await cliWith([
      'compare',
      t.dir,
      '--strategies',
      'single-run,fork-and-flush',
      '--seeds',
      '1',
      '--branches',
      '2',
      '--seed',
      '3',
      '--concurrency',
      '1',
    ]);
    const results = json(join(folderOf(r.out), 'results.json'));
    const single = results.runs.find((x: { strategy: string }) => x.strategy === 'single-run');
    const row = results.summary.find((x: { strategy: string }) => x.strategy === 'single-run');
    const facts = `code ${r.code}; single-run run: ${JSON.stringify(single)}; its row: ${JSON.stringify(row)}\n${r.out}${r.err}`;
    // Both of its episodes crashed without changing anything: it did no work, so it has no score to
    // average, and the compare says so with a red exit rather than a ranked table.
    expect(row.scored, facts).toBe(0);
    expect(r.code, facts).toBe(1);
    expect(r.err, facts).toContain(
      'forkflush: 1 of the 2 runs of the compare did no work (single-run seed 3: no episode did any work: every one that got a score had crashed',
    );
    expect(r.out, facts).toContain('Idle: in 1 run no agent did any work; it is counted in runs, not in the scores.');
  }, 180_000);

  it('probe: a run whose every agent crashed is not taken for a run that scored the initial score (no "help likely" from a crash)', async () => {
    const t = flakyRepo(2, 'total: 60\n  unit: tokens\n  episode: 6');
    const r = await cliWith(['probe', t.dir, '--runs', '3', '--seed', '1', '--concurrency', '1', '--json']);
    const out = JSON.parse(r.out);
    const facts = `code ${r.code}; probe: ${JSON.stringify(out.probe)}; runs: ${JSON.stringify(out.runs.map((x: { best: number; episodes: number; status: string }) => [x.best, x.episodes, x.status]))}\n${r.err}`;
    // The first run's two episodes both crashed: only the two other runs measured a spread.
    expect(out.probe.scored, facts).toBe(2);
    expect(r.code, facts).not.toBe(0);
  }, 180_000);

  it('compare: a resume after the task changed (a new commit of the grader) is refused naming both commits, not mixed into one table', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const argv = ['compare', t.dir, '--strategies', 'single-run', '--seeds', '2', '--seed', '5', '--concurrency', '1'];
    const first = await interruptAfter(argv, 1);
    expect(first.code, first.err).toBe(130);
    // In the morning someone commits a grader that scores on another scale, then resumes.
    writeFileSync(join(t.dir, 'grade.sh'), 'echo $(( $(cat value.txt 2>/dev/null || echo 0) * 1000 + 500 ))\n');
    t.git('commit', '-qam', 'grader on a new scale');
    const again = await cliWith(['compare', t.dir, '--resume', '--concurrency', '1']);
    const facts = `code ${again.code}\n${again.out}${again.err}`;
    expect(again.code, facts).toBe(2);
    expect(again.err, facts).toMatch(
      /the task is at commit \w{7}, not \w{7} where compare compare-20261130-100000 started/,
    );
    // The same command without --resume is a new compare, from the new commit.
    const fresh = await cliWith(argv);
    expect(fresh.out).toMatch(/compare compare-20261130-100000-2: 2 runs, 2 to do/);
  }, 180_000);

  it('probe: an interrupted probe recommends nothing from the runs it has (2 of 4)', async () => {
    const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6' });
    const r = await interruptAfter(['probe', t.dir, '--runs', '4', '--seed', '1', '--concurrency', '1'], 2);
    expect(r.code, r.err).toBe(130);
    const results = json(join(t.dir, '.forkflush', 'probe-20261130-100000', 'results.json'));
    const facts = `probe in results.json: ${JSON.stringify(results.probe)}\n${r.out}`;
    expect(r.out, facts).not.toMatch(/recommendation: (help likely|little to gain)/);
    expect(results.probe.recommendation, facts).not.toMatch(/help likely|little to gain/);
  }, 180_000);
  it('compare: a variant whose runs cannot start stops red naming that variant, and keeps the runs done', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const r = await cliWith([
      'compare',
      t.dir,
      '--strategies',
      'single-run',
      '--seeds',
      '1',
      '--seed',
      '2',
      '--concurrency',
      '1',
      '--variant',
      'ok=',
      '--variant',
      'broken=agent.command=no-such-agent-cli --go',
    ]);
    const facts = `code ${r.code}\n${r.out}${r.err}`;
    expect(r.code, facts).not.toBe(0);
    expect(r.err, facts).toMatch(/broken/);
    const results = json(join(t.dir, '.forkflush', 'compare-20261130-100000', 'results.json'));
    expect(results.runs[0].status, facts).toBe('finished');
  }, 180_000);
});
