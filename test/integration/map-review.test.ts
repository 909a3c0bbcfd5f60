// Review of forkflush map: what a team running it after a night would meet. A cache line a crash
// tore, a map drawn while its run was still going, and a judge whose failed calls cost money.
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MapCache } from '../../src/local/map-cache.js';
import { until } from './cli-child.js';
import { cliWith } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);
const D = 'd'.repeat(40);

describe("the judge's answers cache", () => {
  // Before: saveJudgment appends after the torn half-line without a newline first, so the new answer
  // joins the torn line and is unreadable on the next open: paid for, lost, asked (and paid) again.
  // Should hold: a torn line is read as missing and every answer appended after it is kept.
  it('keeps an answer appended after a line a crash tore', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-map-cache-'));
    const judge = { kind: 'command', command: 'sh judge.sh', args: [], env: [], timeout: 60 } as never;
    const cache = await MapCache.open(dir, judge);
    await cache.make();
    await cache.saveJudgment({ anchor: A, a: B, b: C, answer: 'a', spent: 1 });
    // A crash in the middle of the next append: half a line, no newline.
    appendFileSync(join(dir, 'judgments.jsonl'), `{"anchor":"${A}","a":"${C}","b":"${D}","ans`);
    const after = await MapCache.open(dir, judge);
    expect(after.judgments.size).toBe(1);
    // The map run again asks the torn one again and keeps its answer.
    await after.saveJudgment({ anchor: A, a: C, b: D, answer: 'b', spent: 1 });
    const again = await MapCache.open(dir, judge);
    expect([...again.judgments.values()].map((j) => j.answer).sort()).toEqual(['a', 'b']);
  });
});

/** How the judge scripts below answer: a spec of the snapshot's value, and always "a". */
const ANSWER = `case "$FORKFLUSH_MAP_STEP" in
spec) cat > /dev/null; echo "keeps the value $(cat value.txt)" ;;
triplet) echo a ;;
esac
`;

/** A task whose map judge is a script in the logs folder (shared with the sandbox), with `map:`. */
function judgedTask(judge: string, map: string): { t: TaskRepo; logs: string } {
  const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6' });
  const logs = dirname(t.callsLog);
  writeFileSync(join(logs, 'judge.sh'), judge);
  const config = join(t.dir, '.github', 'autoresearch.yml');
  writeFileSync(
    config,
    `${readFileSync(config, 'utf8')}map:\n  judge: {kind: command, command: ${JSON.stringify(`sh ${join(logs, 'judge.sh')} ${logs}`)}, timeout: 900}\n${map}`,
  );
  t.git('commit', '-qam', 'map settings');
  return { t, logs };
}

const runIdOf = (t: TaskRepo) => {
  const ids = t.git('branch', '--list', 'forkflush/*/lineage', '--format=%(refname:short)').split('\n');
  return (ids[0] ?? '').split('/')[1] as string;
};

describe('a map drawn while its run goes on', () => {
  // The judge waits for the test's go before it answers anything.
  const GATED = `L="$1"
touch "$L/judge-started"
while [ ! -e "$L/go" ]; do sleep 0.1; done
echo '{"spent": 1}' > "$FORKFLUSH_USAGE_FILE"
${ANSWER}`;

  // Before: once drawn, the map rewrites the run's report.md from the state it loaded when it started:
  // the finished run's report goes back to "in progress", "Best score: 22 from round 3" instead of
  // round 10's 57, and nothing writes it again. Should hold: the map's refresh shows the run as it is.
  it("leaves the run's final report as the run wrote it, with the map added", async () => {
    const { t, logs } = judgedTask(GATED, '  budget: 1000000\n  triplets: 12\n');
    // The run stops (Ctrl-C) after a few episodes...
    const stop = new AbortController();
    const running = cliWith(['run', t.dir, '--strategy', 'single-run'], { signal: stop.signal });
    await until(() => existsSync(t.callsLog) && t.calls().length >= 5, 240_000, 100);
    stop.abort();
    expect((await running).code).toBe(130);
    const id = runIdOf(t);
    // ...its map starts, and while its judge works the run is resumed to its end.
    const mapping = cliWith(['map', t.dir, '--run', id]);
    expect(await until(() => existsSync(join(logs, 'judge-started')), 240_000, 100)).toBe(true);
    const resumed = await cliWith(['resume', t.dir]);
    expect(resumed.code, resumed.err).toBe(0);
    const report = join(t.dir, '.forkflush', id, 'report.md');
    const final = readFileSync(report, 'utf8');
    writeFileSync(join(logs, 'go'), '');
    const m = await mapping;
    expect(m.code, m.err).toBe(0);
    const after = readFileSync(report, 'utf8');
    expect(after).toContain('## Idea map');
    // The run's own lines are still its final ones (its best score, its status).
    const best = (text: string) => text.split('\n').find((l) => l.includes('Best score:'));
    expect(best(final)).toMatch(/from round 10/);
    expect(best(after)).toBe(best(final));
    expect(after).not.toMatch(/: in progress/);
  }, 900_000);
});

describe("a map whose judge's failed calls cost money", () => {
  // Each call reports it spent its whole allowance (as a judge that used it up would), logs it,
  // and fails while $L/fail exists.
  const SPENDING = `L="$1"
echo "$FORKFLUSH_BUDGET" >> "$L/allowances"
echo "{\\"spent\\": $FORKFLUSH_BUDGET}" > "$FORKFLUSH_USAGE_FILE"
if [ -e "$L/fail" ]; then echo "judge: rate limited" >&2; exit 1; fi
${ANSWER}`;

  // Before: a judge failing every call (exit 1, "judge: rate limited") burns map.budget on the retries
  // and the map stops with only "the map's budget of 100 tokens is spent ...: raise map.budget": the
  // judge's error is never shown. Should hold: the failures and the first error are said.
  it("says the judge's error when its failed calls used up the budget", async () => {
    const { t, logs } = judgedTask(SPENDING, '  budget: 100\n  snapshots: 4\n  triplets: 10\n');
    const run = await cliWith(['run', t.dir, '--strategy', 'single-run']);
    expect(run.code, run.err).toBe(0);
    writeFileSync(join(logs, 'fail'), '');
    const r = await cliWith(['map', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('judge: rate limited');
  }, 900_000);

  // Before: the failed map spent the whole budget (100), recorded nowhere; the next map starts its
  // ledger from the cached answers only and spends 97 more: 197 tokens for a map.budget of 100.
  // Should hold: what failed calls cost counts against map.budget when the map is run again.
  it('never spends more than map.budget across a failed map and the map run again after it', async () => {
    const { t, logs } = judgedTask(SPENDING, '  budget: 100\n  snapshots: 4\n  triplets: 10\n');
    const run = await cliWith(['run', t.dir, '--strategy', 'single-run']);
    expect(run.code, run.err).toBe(0);
    const spent = () =>
      readFileSync(join(logs, 'allowances'), 'utf8')
        .trim()
        .split('\n')
        .reduce((s, x) => s + Number(x), 0);
    writeFileSync(join(logs, 'fail'), '');
    const first = await cliWith(['map', t.dir]);
    expect(first.code).toBe(1);
    const failedSpend = spent();
    rmSync(join(logs, 'fail'));
    const second = await cliWith(['map', t.dir]);
    const total = spent();
    const said = `first map spent ${failedSpend}, both ${total}\n${first.err}\n${second.code}: ${second.err}`;
    expect(total, said).toBeLessThanOrEqual(100 + 1e-6);
  }, 900_000);
});
