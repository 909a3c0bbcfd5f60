import { describe, expect, it } from 'vitest';
import { chartData, renderChartSvg, ticks } from '../../src/core/chart.js';
import { simulate } from '../../src/core/plan.js';
import {
  leaderboard,
  leaderboardRows,
  outcomeOf,
  renderReport,
  statusJson,
  summary,
  takeHomeLines,
} from '../../src/core/report.js';
import { config } from './helpers.js';

// Scores rise with the round; branch 1 of each fork round wins; one branch never scores.
const state = simulate(config(), (e) => ({
  spent: e.allowance,
  score: e.id === 'r0.b3' ? null : e.round * 10 + (e.branch === 1 ? 5 : e.branch),
}));

describe('reports', () => {
  it('ranks episodes best first, without-score last, and marks adopted and dropped branches', () => {
    const rows = leaderboard(state);
    expect(rows[0]?.episode.result?.score).toBe(Math.max(...rows.map((r) => r.episode.result?.score ?? 0)));
    expect(rows.at(-1)?.episode.id).toBe('r0.b3');
    const opening = rows.filter((r) => r.episode.round === 0);
    expect(opening.find((r) => r.episode.branch === 1)?.outcome).toBe('adopted');
    expect(opening.find((r) => r.episode.branch === 0)?.outcome).toBe('dropped');
    expect(rows.find((r) => r.phase === 'final')?.outcome).toBe('kept');
  });

  it("says what each round's decision did: a serial episode it did not adopt is dropped, not kept", () => {
    const serial = state.rounds.find((r) => r.kind === 'serial' && r.decision);
    const fork = state.rounds.find((r) => r.kind === 'fork' && r.decision);
    const [e] = serial?.episodes ?? [];
    if (!serial?.decision || !fork?.decision || !e) throw new Error('the plan has a decided serial and fork round');
    expect(outcomeOf(serial, e)).toBe('kept');
    expect(outcomeOf({ ...serial, decision: { ...serial.decision, adopted: [] } }, e)).toBe('dropped');
    const winner = fork.episodes.find((x) => x.id === fork.decision?.winner);
    const loser = fork.episodes.find((x) => x.id !== fork.decision?.winner);
    if (!winner || !loser) throw new Error('a fork round has a winner and a loser');
    expect([outcomeOf(fork, winner), outcomeOf(fork, loser)]).toEqual(['adopted', 'dropped']);
    expect(outcomeOf({ ...fork, decision: undefined }, winner)).toBe('undecided');
  });

  it('says the best score and where it is', () => {
    expect(summary(state)).toContain(`Best score: ${state.best?.score} from round`);
    expect(summary(state)).toContain('on branch forkflush/plan/best');
    const report = renderReport(state, { chartFile: 'chart.svg' });
    expect(report).toContain('![Score versus spend](chart.svg)');
    expect(report).toMatch(/\| 1 \| r\d+\.b\d+ \|/);
    expect(report).toContain('| 0 | opening | fork | r0.b0 0, r0.b1 5, r0.b2 2, r0.b3 - | r0.b1 | 96 |');
    expect(report).toContain('_adopted: the winner of its fork round');
  });

  it('says how to take the best workspace home: a merge, or, from a copy, an archive', () => {
    const inRepo = renderReport(state, { place: { repo: '/r', taskDir: '/r', scratch: false } });
    expect(inRepo).toContain(
      'Take the best workspace into your branch: `git merge --no-overwrite-ignore forkflush/plan/best`',
    );
    // The parenthesis closes the sentence outside the code: a copied command must run.
    expect(inRepo).toContain(
      '(or look at it first: `git switch --no-overwrite-ignore --create try-plan forkflush/plan/best`)',
    );
    const copy = takeHomeLines(state, { repo: '/t/.forkflush/plan/repo', taskDir: "/my task's", scratch: true });
    expect(copy[1]).toBe(
      "Copy its files over yours: git -C /t/.forkflush/plan/repo archive forkflush/plan/best | tar -x -C '/my task'\\''s'",
    );
  });

  it('says which spend is an estimate, in the leaderboard, the summary and status --json, and why an agent failed', () => {
    const s = structuredClone(state);
    const [a, b] = s.rounds[0]?.episodes ?? [];
    if (!a?.result || !b?.result) throw new Error('the opening round has results');
    a.result = {
      ...a.result,
      exit: 'crash',
      spentBasis: 'estimated',
      spent: 3,
      failure: { kind: 'crash', quote: 'exit 1: boom' },
    };
    b.result = { ...b.result, spentBasis: 'none', spent: 0 };
    b.interruptedSpent = 1.5;
    b.interruptedBasis = 'estimated';
    expect(leaderboardRows(s).find((r) => r[1] === a.id)?.[5]).toBe('~3');
    expect(leaderboardRows(s).find((r) => r[1] === b.id)?.[5]).toBe('0');
    expect(summary(s)).toMatch(/\(spent [\d.]+, of which 4\.5 estimated\)/);
    const report = renderReport(s, { episodeLogs: () => [] });
    expect(report).toContain('~ marks an estimate');
    expect(report).toContain(`- ${a.id}: \`crash; crash: exit 1: boom\``);
    const json = statusJson(s, { folder: '/f', live: null, resume: null }) as {
      budget: { estimated: number };
      rounds: { episodes: Record<string, unknown>[] }[];
    };
    expect(json.budget.estimated).toBe(4.5);
    expect(json.rounds[0]?.episodes[0]).toMatchObject({
      spentBasis: 'estimated',
      failure: { kind: 'crash' },
      retries: 0,
    });
    expect(json.rounds[0]?.episodes[1]).toMatchObject({ spentBasis: 'none', interruptedBasis: 'estimated' });
    expect(json.rounds[0]?.episodes[2]).toMatchObject({
      spentBasis: 'measured',
      interruptedBasis: 'measured',
      failure: null,
    });
  });

  it('lists the episodes without a score with a link to their logs', () => {
    const report = renderReport(state, {
      episodeLogs: (id) => [{ name: 'agent log', path: `episodes/${id}/agent.log` }],
    });
    expect(report).toContain('## Episodes without a score, or that crashed');
    expect(report).toMatch(/- r0\.b3: `.*` \(\[agent log\]\(episodes\/r0\.b3\/agent\.log\)\)/);
  });

  it('draws branches from their round start, the best-so-far line, and the fork points', () => {
    const d = chartData(state);
    const opening = d.segments.filter((s) => s.id.startsWith('r0.'));
    expect(new Set(opening.map((s) => s.x0))).toEqual(new Set([0]));
    expect(d.failures).toEqual([{ id: 'r0.b3', x: 96 }]);
    expect(d.forkPoints).toEqual([132, 264]);
    const ys = d.best.map((b) => b.y);
    expect([...ys].sort((a, b) => a - b)).toEqual(ys);
    const svg = renderChartSvg(state);
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(svg).toContain('<title>r0.b1: 5 (adopted)</title>');
    expect(svg).toContain('<title>r0.b0: 0 (dropped)</title>');
    expect(svg).toContain('<title>r0.b3: no score</title>');
    expect(svg.trim().endsWith('</svg>')).toBe(true);
  });

  it('picks round tick values', () => {
    expect(ticks(0, 400)).toEqual([0, 100, 200, 300, 400]);
    expect(ticks(87.2, 99.6)).toEqual([87.5, 90, 92.5, 95, 97.5]);
    expect(ticks(5, 5)).toEqual([5]);
  });
});

describe('check run outputs', () => {
  it('stay within GitHub limits whatever the agent wrote', async () => {
    const { checkRunOutput } = await import('../../src/core/github-text.js');
    const e = state.rounds[0]?.episodes[0];
    if (!e?.result) throw new Error('no result');
    const out = checkRunOutput(
      state,
      e,
      { ...e.result, note: 'x'.repeat(100_000) },
      { diffStat: '', journalTail: ['y'.repeat(100_000)] },
    );
    expect(out.summary.length).toBeLessThanOrEqual(65_535);
    expect(out.text.length).toBeLessThanOrEqual(65_535);
  });
});

describe('usage', () => {
  it('reads as tokens in/out, cost and turns', async () => {
    const { usageText } = await import('../../src/core/report.js');
    expect(usageText({ inputTokens: 12_345, outputTokens: 678, costUsd: 0.0412, turns: 7 })).toBe(
      '12.3k/678 tokens, $0.041 as the agent reported it, 7 turns',
    );
    expect(usageText({ inputTokens: 10, outputTokens: 2, costUsd: 1, turns: null, pricedFrom: 'table' })).toBe(
      '10/2 tokens, $1 priced by forkflush',
    );
  });
});
