// forkflush map, whole: a compare of a toy task whose idea basins are known (its agent works in one
// of three families of solutions, test/fixtures/map/toy-agent.mjs), mapped with an oracle judge
// that follows the command judge contract (test/fixtures/map/oracle-judge.sh), in the sandbox
// where it works. And judges that fail: reported with their error, never papered over.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { probeSandbox } from '../../src/io/sandbox.js';
import { cliWith } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'map');
const fixture = (name: string) => readFileSync(join(FIXTURES, name), 'utf8');
const json = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const FAMILIES = ['alpha', 'beta', 'gamma'];

/** The toy task: its agent, the oracle as judge.sh (protected, so every snapshot has it) and `map:`. */
function toyTask(map: string): TaskRepo {
  const t = makeTaskRepo({
    agentCommand: 'node toy-agent.mjs',
    budget: 'total: 60\n  unit: tokens\n  episode: 6',
    files: { 'toy-agent.mjs': fixture('toy-agent.mjs'), 'judge.sh': fixture('oracle-judge.sh') },
    extra: `map:\n${map}`,
  });
  return t;
}

/** The family of the toy's solution at a commit. */
function familyAt(t: TaskRepo, commit: string): string {
  return /family: (\w+)/.exec(t.git('show', `${commit}:solution.txt`))?.[1] ?? '?';
}

const logOf = (t: TaskRepo) => join(t.callsLog, '..', 'oracle.log');

describe('forkflush map of a toy with known basins', async () => {
  const sandboxed = 'sandbox' in (await probeSandbox());
  const t = toyTask('  judge: {kind: command, command: sh judge.sh, env: [ORACLE_LOG]}\n');
  const env = { ...process.env, ORACLE_LOG: logOf(t) };
  let folder = '';

  it('maps a compare: held-out agreement at least 0.8 and clearly above run identity, the families as basins', async () => {
    const c = await cliWith([
      'compare',
      t.dir,
      '--strategies',
      'fork-and-flush,single-run',
      '--seeds',
      '1',
      '--seed',
      '5',
    ]);
    expect(c.code, c.err).toBe(0);
    const dry = await cliWith(['map', t.dir, '--dry-run'], { env });
    expect(dry.code, dry.err).toBe(0);
    expect(dry.out).toMatch(/spec calls: \d+ \(0 cached\)\ntriplet calls: \d+ \(0 cached; \d+ judgments in all\)/);
    expect(existsSync(logOf(t))).toBe(false);

    const r = await cliWith(['map', t.dir], { env });
    expect(r.code, r.err).toBe(0);
    folder = /map: +(.*)\/map\.json/.exec(r.out)?.[1] as string;
    expect(folder).toMatch(/\.forkflush\/compare-/);
    const map = json(join(folder, 'map.json'));
    expect(map.agreement.heldOut).toBeGreaterThanOrEqual(0.8);
    expect(map.agreement.heldOut - map.agreement.runIdentity).toBeGreaterThan(0.15);
    expect(map.agreement.chance).toBe(0.5);
    // No basin mixes families, and each family present is found. A family may be cut in two pure
    // basins: its knob spreads it along a line, and whether the best silhouette cut splits that line
    // depends on which judgments are held out, drawn by the commits' hashes (new in every run).
    const families = map.basins.map((b: { points: string[] }) => {
      const counts = new Map<string, number>();
      for (const id of b.points) counts.set(familyAt(t, id), (counts.get(familyAt(t, id)) ?? 0) + 1);
      const [top, n] = [...counts].sort((x, y) => y[1] - x[1])[0] as [string, number];
      return { top, purity: n / b.points.length, size: b.points.length };
    });
    const big = families.filter((f: { size: number }) => f.size >= 3);
    const present = new Set(map.points.map((p: { id: string }) => familyAt(t, p.id)));
    expect(new Set(big.map((f: { top: string }) => f.top))).toEqual(present);
    expect(big.length).toBeLessThanOrEqual(2 * present.size);
    for (const f of big) expect(f.purity).toBeGreaterThanOrEqual(0.9);
    expect(FAMILIES).toEqual(expect.arrayContaining(big.map((f: { top: string }) => f.top)));
    // The picture, and the compare's report with its section.
    expect(readFileSync(join(folder, 'map.svg'), 'utf8')).toContain('<svg');
    expect(existsSync(join(folder, 'map.png'))).toBe(true);
    const report = readFileSync(join(folder, 'report.md'), 'utf8');
    expect(report).toContain('## Idea map');
    expect(report).toContain('![Idea map: where the agents searched](map.svg)');
    expect(report).toMatch(/Held-out agreement 0\.\d\d on \d+ judgments \(run identity alone 0\.\d\d, chance 0\.50/);
  }, 900_000);

  it('asks the judge by the contract, and every judgment in map.json is one the judge gave', () => {
    const map = json(join(folder, 'map.json'));
    const calls = readFileSync(logOf(t), 'utf8').trim().split('\n');
    const specs = calls.filter((l) => l.startsWith('spec '));
    const triplets = calls.filter((l) => l.startsWith('triplet ')).map((l) => l.split(' '));
    expect(specs).toHaveLength(map.points.length);
    // The spec's cwd was the snapshot, read-only where the sandbox works; stdin held the prompt file's prompt.
    for (const l of specs) expect(l).toMatch(sandboxed ? /^spec .+ read-only family: \w+ knob/ : /^spec .+ family/);
    const given = new Map(triplets.map(([, anchor, a, b, answer]) => [`${anchor} ${a} ${b}`, answer]));
    expect(map.judgments).toBe(triplets.length);
    expect(map.triplets).toHaveLength(triplets.length);
    for (const j of map.triplets) expect(given.get(`${j.anchor} ${j.a} ${j.b}`)).toBe(j.answer);
    expect(map.calls.triplet).toEqual({ made: triplets.length, cached: 0, failed: 0 });
    for (const p of map.points) expect(p.id).toBe(p.commit);
  });

  it('asks nothing again: a second map reuses every answer and draws the same map', async () => {
    const before = readFileSync(logOf(t), 'utf8');
    const first = json(join(folder, 'map.json'));
    const r = await cliWith(['map', t.dir], { env });
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(logOf(t), 'utf8')).toBe(before);
    const again = json(join(folder, 'map.json'));
    expect(again.calls.triplet).toEqual({ made: 0, cached: first.judgments, failed: 0 });
    expect(again.points).toEqual(first.points);
    expect(again.agreement).toEqual(first.agreement);
  }, 300_000);

  it("embeds the map in a run's report.md when one of its runs is mapped", async () => {
    const run = json(join(folder, 'map.json')).points[0].run;
    // A few judgments are enough to draw it: the drawing, not the map's quality, is what this checks.
    const few = join(t.dir, 'few-triplets.yml');
    const config = readFileSync(join(t.dir, '.github', 'autoresearch.yml'), 'utf8');
    writeFileSync(few, config.replace(/^map:\n/m, 'map:\n  triplets: 60\n'));
    const r = await cliWith(['map', t.dir, '--run', run, '--config', few], { env });
    expect(r.code, r.err).toBe(0);
    const report = readFileSync(join(t.dir, '.forkflush', run, 'report.md'), 'utf8');
    expect(report).toContain('## Idea map');
    expect(existsSync(join(t.dir, '.forkflush', run, 'map.json'))).toBe(true);
  }, 300_000);
});

describe('a judge that fails', () => {
  // One run for the three judges: each is committed with the task (a judge's cwd is the snapshot),
  // and each test names its own in the working tree's config, which the map reads.
  const judges = {
    'down.sh': 'echo "judge: the model is down" >&2\nexit 1\n',
    'maybe.sh': 'if [ "$FORKFLUSH_MAP_STEP" = spec ]; then cat solution.txt; else echo maybe; fi\n',
  };
  let t: TaskRepo;
  const config = join('.github', 'autoresearch.yml');
  let committed = '';
  const judgedBy = (judge: string) =>
    writeFileSync(
      join(t.dir, config),
      committed.replace(/^map:\n.*$/m, `map:\n  judge: {kind: command, command: ${judge}}`),
    );

  beforeAll(async () => {
    t = makeTaskRepo({
      agentCommand: 'node toy-agent.mjs',
      budget: 'total: 60\n  unit: tokens\n  episode: 6',
      files: { 'toy-agent.mjs': fixture('toy-agent.mjs'), ...judges },
      extra: 'map:\n  judge: {kind: command, command: sh down.sh}\n',
    });
    committed = readFileSync(join(t.dir, config), 'utf8');
    const run = await cliWith(['run', t.dir, '--strategy', 'single-run']);
    expect(run.code, run.err).toBe(0);
  }, 300_000);

  it('is reported with its error, exit 1, and no map is drawn', async () => {
    judgedBy('sh down.sh');
    const r = await cliWith(['map', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      'the judge failed 5 specs in a row, so the map stopped; the last: the judge exited with code 1: judge: the model is down',
    );
    expect(r.err).toMatch(/logs of the failed calls: .*\/map\/failed/);
    expect(readdirIn(t, 'map.json')).toEqual([]);
  }, 300_000);

  it('answering neither a nor b fails each judgment, said with what it answered', async () => {
    judgedBy('sh maybe.sh');
    const r = await cliWith(['map', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`the judge's last stdout line was "maybe", not "a" or "b"`);
    expect(readdirIn(t, 'map.json')).toEqual([]);
  }, 300_000);

  it('that cannot start stops the map at once (exit 2)', async () => {
    judgedBy('no-such-judge-here');
    const r = await cliWith(['map', t.dir]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/the map's judge could not start: .*no-such-judge-here/);
  }, 300_000);
});

/** The run folders of the task that hold `name`. */
function readdirIn(t: TaskRepo, name: string): string[] {
  return execFileSync('find', [join(t.dir, '.forkflush'), '-name', name], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}
