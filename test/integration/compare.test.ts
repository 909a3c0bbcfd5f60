// forkflush compare and probe, whole, on real task repositories: the command test agent
// (test/fixtures/agent.mjs), and the bundled example run on a copy of its folder.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliWith, interruptAfter } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

// A row's bound catches a hang, not slowness: whole compares took up to two minutes each on a busy
// two-core machine, and the 120 s bound failed one there (stop 41).
const BUDGET = 'total: 12\n  unit: tokens\n  episode: 6';
const folderOf = (out: string) => (/results: (.*)\/results\.json/.exec(out)?.[1] ?? '') as string;
const json = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const runFolders = (dir: string) =>
  readdirSync(join(dir, '.forkflush')).filter(
    (n) => /^\d{8}-\d{6}/.test(n) && existsSync(join(dir, '.forkflush', n, 'state.json')),
  );

describe('forkflush compare', () => {
  it('runs strategies x seeds at equal budget and writes results.json, report.md and chart.svg', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const r = await cliWith([
      'compare',
      t.dir,
      '--strategies',
      'fork-and-flush,single-run',
      '--seeds',
      '2',
      '--branches',
      '2',
      '--seed',
      '3',
    ]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('compare compare-20261130-100000: 4 runs, 4 to do; up to 2 episodes at once');
    expect(r.out).toMatch(
      /run 1 of 4 \(fork-and-flush, seed 3\) finished: best \d+, spent [\d.]+ tokens in \d+ s\. 3 left: about/,
    );
    expect(r.out).toContain('All runs are done.');
    expect(r.out).toMatch(/rank +strategy +runs +mean +sd +best +worst +normalized/);
    const folder = folderOf(r.out);
    const results = json(join(folder, 'results.json'));
    expect(results.runs.map((x: { strategy: string; seed: number }) => `${x.strategy}:${x.seed}`)).toEqual([
      'fork-and-flush:3',
      'single-run:3',
      'fork-and-flush:4',
      'single-run:4',
    ]);
    for (const x of results.runs) {
      expect(Object.keys(x)).toEqual(
        expect.arrayContaining(['strategy', 'variant', 'seed', 'run', 'best', 'spent', 'episodes', 'wallSeconds']),
      );
      expect(x.spendOk).toBe(true);
      expect(x.spent).toBeGreaterThan(12 - 6);
    }
    expect(Object.keys(results.summary[0])).toEqual(
      expect.arrayContaining(['strategy', 'variant', 'runs', 'mean', 'sd', 'max', 'min', 'normalized']),
    );
    // Each run is an ordinary run of its own, seed i the same for both strategies.
    const states = results.runs.map((x: { run: string }) => json(join(t.dir, '.forkflush', x.run, 'state.json')));
    expect(states.map((s: { seed: number; config: { strategy: string } }) => `${s.config.strategy}:${s.seed}`)).toEqual(
      ['fork-and-flush:3', 'single-run:3', 'fork-and-flush:4', 'single-run:4'],
    );
    expect(t.git('branch', '--list', `forkflush/${results.runs[0].run}/*`)).toContain('best');
    const report = readFileSync(join(folder, 'report.md'), 'utf8');
    for (const heading of [
      "## Results (as the paper's Table 1)",
      '## Fork-and-flush against the baselines',
      '## Spend and wall time per strategy',
      '## Runs',
    ])
      expect(report).toContain(heading);
    expect(report).toMatch(/fork-and-flush was better than single-run on \d of 2 seeds/);
    expect(readFileSync(join(folder, 'chart.svg'), 'utf8')).toContain('single-run: median, p10–p90');
    const status = await cliWith(['status', t.dir, '--run', results.runs[1].run]);
    expect(status.out).toContain('Strategy single-run');
    // The same command again, its compare done: a new compare, said before it spends.
    const plan = ['compare', t.dir, '--strategies', 'fork-and-flush,single-run', '--seeds', '2', '--branches', '2'];
    const again = await cliWith([...plan, '--seed', '3', '--dry-run']);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toMatch(
      /note: compare compare-\S+ ran this plan to its end \(.*results\.json\); this is a new compare, spending its budget again/,
    );
  }, 300_000);

  it('resumes an interrupted compare: finishes the missing runs and redoes none', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const argv = [
      'compare',
      t.dir,
      '--strategies',
      'single-run,flush-only',
      '--seeds',
      '2',
      '--seed',
      '5',
      '--concurrency',
      '1',
    ];
    const first = await interruptAfter(argv, 2);
    expect(first.code).toBe(130);
    expect(first.err).toContain(`Continue with: forkflush compare ${t.dir} --resume`);
    const manifestFile = join(t.dir, '.forkflush', 'compare-20261130-100000', 'compare.json');
    const before = json(manifestFile);
    const done = before.entries.slice(0, 2).map((e: { run: string }) => e.run);
    const snapshot = done.map((id: string) => readFileSync(join(t.dir, '.forkflush', id, 'state.json'), 'utf8'));
    const callsBefore = t.calls().length;
    const partial = json(join(t.dir, '.forkflush', 'compare-20261130-100000', 'results.json'));
    expect(partial.complete).toBe(false);

    const again = await cliWith(argv);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain('(resumed)');
    const after = json(manifestFile);
    expect(after.entries.slice(0, 2).map((e: { run: string }) => e.run)).toEqual(done);
    expect(done.map((id: string) => readFileSync(join(t.dir, '.forkflush', id, 'state.json'), 'utf8'))).toEqual(
      snapshot,
    );
    // Every run exactly once, and no episode run twice but the one the interruption stopped.
    expect(runFolders(t.dir)).toHaveLength(4);
    const states = after.entries.map((e: { run: string }) => json(join(t.dir, '.forkflush', e.run, 'state.json')));
    const episodes = states.reduce(
      (n: number, s: { rounds: { episodes: unknown[] }[] }) => n + s.rounds.flatMap((r) => r.episodes).length,
      0,
    );
    expect(t.calls().length).toBeLessThanOrEqual(episodes + 1);
    expect(t.calls().length).toBeGreaterThan(callsBefore);
    const results = json(join(t.dir, '.forkflush', 'compare-20261130-100000', 'results.json'));
    expect(results.complete).toBe(true);
    expect(results.runs.every((x: { status: string }) => x.status === 'finished')).toBe(true);

    // A run started just before a crash, before the manifest recorded it, is found again, not redone.
    const lost = json(manifestFile);
    const orphan = lost.entries[3].run;
    lost.entries[3].run = null;
    writeFileSync(manifestFile, JSON.stringify(lost));
    const adopted = await cliWith([...argv.slice(0, 2), '--resume']);
    expect(adopted.code, adopted.err).toBe(0);
    expect(json(manifestFile).entries[3].run).toBe(orphan);
    expect(runFolders(t.dir)).toHaveLength(4);

    const finished = await cliWith([...argv.slice(0, 2), '--resume']);
    expect(finished.code).toBe(2);
    expect(finished.err).toContain('has no unfinished compare to resume');
  }, 300_000);

  it('compares variants of the config: --variant NAME=KEY=VALUE', async () => {
    // K = 2 in the config: the as-is run of the default K = 4 took two minutes of a busy machine.
    const t = makeTaskRepo({ budget: BUDGET, extra: 'fork: {branches: 2}' });
    const r = await cliWith([
      'compare',
      t.dir,
      '--strategies',
      'fork-and-flush',
      '--seeds',
      '1',
      '--variant',
      'one-fork=fork.at=[0.5],fork.directives=0',
      '--variant',
      'as-is=',
      '--json',
    ]);
    expect(r.code, r.err).toBe(0);
    const results = JSON.parse(r.out);
    expect(results.variants).toEqual(['one-fork', 'as-is']);
    const [one, asIs] = results.runs.map((x: { run: string }) => json(join(t.dir, '.forkflush', x.run, 'state.json')));
    expect(one.config.fork).toMatchObject({ at: [0.5], branches: 2, directives: 0 });
    expect(one.config.grader.protected).toContain('.github/autoresearch.yml');
    expect(asIs.config.fork).toMatchObject({ at: [0.33, 0.66], branches: 2 });
    expect(results.comparisons).toEqual([
      expect.objectContaining({ a: { strategy: 'fork-and-flush', variant: 'as-is' } }),
    ]);
    expect(r.err).toContain('2 runs, 2 to do');
  }, 300_000);

  it('refuses what cannot be compared before it starts anything', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const bad = await cliWith(['compare', t.dir, '--variant', 'g=grader.command=true']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(
      'variant g: grader.command cannot vary: scores from different graders cannot be compared',
    );
    expect((await cliWith(['compare', t.dir, '--strategies', 'fork-and-flash'])).err).toContain(
      '--strategies: "fork-and-flash" is not a strategy',
    );
    const dry = await cliWith(['compare', t.dir, '--seeds', '2', '--seed', '1', '--dry-run']);
    expect(dry.code, dry.err).toBe(0);
    expect(dry.out).toContain(
      '10 runs = 5 strategies (fork-and-flush, single-run, best-of-n, fork-only, flush-only) x 1 variant (as-is) x 2 seeds (1, 2);',
    );
    expect(dry.out).toContain('12 tokens each, 120 tokens in all; initial score 0.');
    expect(existsSync(join(t.dir, '.forkflush'))).toBe(false);
  }, 60_000);

  it('stops after the first run whose grader scored nothing: every other run would spend its budget the same way', async () => {
    const t = makeTaskRepo({ budget: BUDGET, grader: 'sh said.sh', files: { 'said.sh': 'echo "score: 1"\n' } });
    const r = await cliWith(['compare', t.dir, '--strategies', 'fork-and-flush,single-run', '--seeds', '2']);
    expect(r.code, `${r.out}${r.err}`).toBe(1);
    expect(r.err).toMatch(/neither the initial workspace nor any episode of the opening round got a score/);
    expect(runFolders(t.dir)).toHaveLength(1);
  }, 300_000);

  it('passes a damaged manifest by for a new compare, and names it with the fix for a resume', async () => {
    const t = makeTaskRepo({ budget: BUDGET });
    const damaged = join(t.dir, '.forkflush', 'compare-20261101-000000');
    mkdirSync(damaged, { recursive: true });
    writeFileSync(join(damaged, 'compare.json'), '{"version": 1, "entr');
    const dry = await cliWith(['compare', t.dir, '--seeds', '1', '--dry-run']);
    expect(dry.code, dry.err).toBe(0);
    const resume = await cliWith(['compare', t.dir, '--resume']);
    expect(resume.code).toBe(2);
    expect(resume.err.trimEnd()).toBe(
      `forkflush: ${join(damaged, 'compare.json')}: not JSON: the compare's manifest is damaged; remove its folder to start afresh`,
    );
  }, 60_000);
});

describe('forkflush probe', () => {
  it('runs short single runs and recommends, with the next command', async () => {
    const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6' });
    const r = await cliWith(['probe', t.dir, '--seed', '1', '--json']);
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out);
    expect(out.runs).toHaveLength(4);
    // Two episodes of 6 each; the test agent adds seed % 10 + 1 a time, so the seeds spread the scores.
    expect(out.runs.every((x: { budget: number; episodes: number }) => x.budget === 12 && x.episodes === 2)).toBe(true);
    expect(out.probe).toMatchObject({ runs: 4, improved: 4, recommendation: 'help likely' });
    expect(out.probe.next).toContain(`forkflush run ${t.dir}`);
    const text = await cliWith(['probe', t.dir, '--seed', '1']);
    // A probe that finished is not resumed: the same command probes again, here with the same seeds.
    expect(text.out).toContain('probe probe-20261130-100000-2: 4 runs, 4 to do');
    expect(text.out).toContain('recommendation: help likely');
  }, 300_000);
});

describe('forkflush probe --dry-run', () => {
  it("checks with the probe runs' own config, and prints JSON with --json", async () => {
    const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6' });
    const r = await cliWith(['probe', t.dir, '--runs', '2', '--budget-each', '30', '--dry-run', '--json']);
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out);
    expect(out).toMatchObject({ kind: 'probe', dryRun: true, budgetEach: 30, planned: 60, complete: false });
    expect(out.runs.map((x: { status: string }) => x.status)).toEqual(['not started', 'not started']);
    expect(r.err).toContain('2 single runs of 30 tokens');
    expect(r.err).toContain(`Run it: forkflush probe ${t.dir} --runs 2 --budget-each 30 --json`);
    expect(t.calls()).toEqual([]);
  }, 60_000);
});

describe('forkflush probe --resume', () => {
  it("keeps the probe's own budgets: runs of the budget it planned, and a next command for the planned run's budget", async () => {
    const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6' });
    // One run at a time, so the interruption after the first leaves the others to do on a busy machine too.
    const argv = ['probe', t.dir, '--runs', '3', '--budget', '48', '--budget-each', '30', '--concurrency', '1'];
    const stopped = await interruptAfter(argv, 1);
    expect(stopped.code, stopped.err).toBe(130);
    const again = await cliWith(['probe', t.dir, '--resume', '--json']);
    expect(again.code, again.err).toBe(0);
    const out = JSON.parse(again.out);
    expect(out.runs.every((x: { budget: number }) => x.budget === 30)).toBe(true);
    expect(out.probe.next).toContain(`${t.dir} --budget 48`);
  }, 300_000);
});

describe('the bundled example, on a copy of its folder', () => {
  it('compares and probes examples/maxsat with a small budget', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-maxsat-'));
    cpSync(join(import.meta.dirname, '..', '..', 'examples', 'maxsat'), dir, {
      recursive: true,
      filter: (src) => !src.includes('.forkflush'),
    });
    try {
      const c = await cliWith([
        'compare',
        dir,
        '--strategies',
        'fork-and-flush,single-run',
        '--seeds',
        '1',
        '--budget',
        '48',
        '--seed',
        '2',
      ]);
      expect(c.code, c.err).toBe(0);
      expect(c.out).toContain('is not the root of a git repository: the run works on a copy');
      const results = json(join(folderOf(c.out), 'results.json'));
      expect(results.runs.every((x: { best: number }) => x.best > 87.3)).toBe(true);
      expect(results.summary).toHaveLength(2);
      const p = await cliWith(['probe', dir, '--runs', '2', '--budget-each', '24', '--seed', '2']);
      expect(p.code, p.err).toBe(0);
      expect(p.out).toMatch(/recommendation: (help likely|little to gain|too hard at this budget)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
