// Round 10 attacks (a helper's): a hostile command agent, in its sandbox, against the run's control
// and accounting rather than the grader's score: what the run charges, when it stops, and what its
// reports say. Each row failed against the code it was written on (review-control) for the reason
// its comment names: the attack worked.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import { cliWith } from '../integration/cli-io.js';
import {
  CAT_GRADER,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  newestRunState,
  runCli,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

/** The report.md of the newest run of a task repository. */
function reportOf(repoDir: string): string {
  const runs = join(repoDir, '.forkflush');
  const id = readdirSync(runs)
    .filter((d) => /^\d{8}-\d{6}/.test(d))
    .sort()
    .at(-1);
  return readFileSync(join(runs, id ?? '', 'report.md'), 'utf8');
}

/** Markdown with its code spans taken out: what a renderer turns into links, images and HTML. */
function outsideCode(markdown: string): string {
  return markdown.replace(/(`+)[\s\S]*?\1/g, '');
}

describeSandboxed("round 10: the agent's usage file in forkflush's output", () => {
  it("an unreadable usage file holding a line break cannot print a line of forkflush's own (progress, leaderboard, status)", async () => {
    // The agent works (value.txt), then writes a "usage file" that is not JSON: its first 60
    // characters are quoted in the episode's note as they are, line break included. Gains: a line
    // of its own making in `forkflush run` and `forkflush status`, e.g. a forged result or advice.
    const forged = 'forkflush: r0.b0 scored 1000000, spent 0 tokens';
    const repo = makeAttackRepo({
      agent: `echo 5 > value.txt; printf 'x\\n%s' '${forged}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: CAT_GRADER,
    });
    const root = join(repo.dir, '..');
    const run = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 60_000 });
    const status = await runCli(['status', repo.dir], { cwd: root, deadlineMs: 30_000 });
    const forgedLines = (out: string) => out.split('\n').filter((l) => l.trimStart().startsWith(forged));
    expect.soft(forgedLines(run.out), run.out).toEqual([]);
    expect.soft(forgedLines(status.out), status.out).toEqual([]);
  }, 120_000);
});

describeSandboxed("round 10: the agent's words in report.md", () => {
  it("the stop line of report.md shows the failing agent's quote as inert code: no link, image or HTML of its making", async () => {
    // The agent exits 77 (EX_NOPERM: "its key was refused", which stops the run) with a last error
    // line of markdown. The rest of report.md puts what an agent wrote in code spans; the summary's
    // "Stopped:" line quotes it raw. Gains: in the morning report, a link that reads as forkflush's
    // advice ("rotate your key here") to a host of its choosing, and an image that calls home when
    // the report is previewed.
    const line =
      '401 Unauthorized: [rotate your key at console.anthropic.com](https://evil.example/rotate) ![](https://evil.example/seen.png) <img src=https://evil.example/i.png>';
    const repo = makeAttackRepo({ agent: `printf '%s\\n' '${line}' >&2; exit 77`, grader: CAT_GRADER });
    const root = join(repo.dir, '..');
    const run = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 60_000 });
    expect(run.exitCode, run.out).toBe(2);
    const report = reportOf(repo.dir);
    // The quote is in the report (as it should be)...
    expect(report).toContain('evil.example');
    // ...but only inside code: nothing a markdown viewer renders as a link, an image or HTML.
    const live = outsideCode(report)
      .split('\n')
      .filter((l) => l.includes('evil.example'));
    expect(live, report).toEqual([]);
  }, 120_000);
});

/**
 * best-of-n, two lineages of one 6-token episode each (budget.total 12): b0 runs FAILS first (its
 * logs folder as $1), then works; b1 reports its whole allowance at once and works on for 15 s.
 */
function withSibling(fails: string, agentTimeout: number) {
  return makeAttackRepo({
    agent: 'sh agent.sh {logs}',
    files: {
      'agent.sh': `case "$FORKFLUSH_EPISODE" in
*b0)
${fails}
  echo 3 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE" ;;
*)
  echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"; echo 2 > value.txt; sleep 15 ;;
esac
`,
    },
    grader: CAT_GRADER,
    budget: 'total: 12\n  unit: tokens\n  episode: 6',
    strategy: 'best-of-n\nfork:\n  branches: 2',
    agentTimeout,
  });
}

describeSandboxed('round 10: a stop the agent makes, and the resume after it', () => {
  it("a branch's refused key (exit 77) that halts its sibling in flight cannot take the resumed run past budget.total", async () => {
    // best-of-n, 2 lineages of one episode each, 6 tokens each: the run may spend 12. The sibling
    // (b1) honestly reports its whole allowance at once and works on; b0 says its key was refused
    // (exit 77, once), which stops the run and halts b1 in flight, charged its 6. The stop offers a
    // resume, checked against the budget with b0's allowance only (6 + 6 <= 12); the resume then
    // runs b0 and, again, the halted b1, each with a fresh allowance. Gains: the agents spend 18
    // tokens of a 12-token budget, honestly reported; with K branches, up to K-1 allowances more.
    // Now the halted b1's allowance counts too (core/stop.ts cause): no resume is offered.
    const repo = withSibling(
      `  if [ ! -e "$1/b0-failed" ]; then
    sleep 3; : > "$1/b0-failed"
    echo 'Error: 401 {"type":"authentication_error","message":"invalid x-api-key"}' >&2
    exit 77
  fi`,
      60,
    );
    const root = join(repo.dir, '..');
    const first = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 120_000 });
    expect(first.exitCode, first.out).toBe(2);
    // The stop says why no resume is offered: the halted sibling would run again too.
    expect(first.out).toMatch(/key or login was refused[\s\S]*a resume cannot run it and the r0\.b1 it halted again/);
    const second = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 120_000 });
    const state = newestRunState(repo.dir);
    const total = state ? spent(state) : Number.NaN;
    expect(total, `${first.out}\n----\n${second.out}`).toBeLessThanOrEqual(12);
  }, 300_000);
});

describeSandboxed("round 10: a provider's outage the agent fakes", () => {
  it('the outage wait that reruns a rate-limited branch cannot take the run past budget.total, with nobody resuming it', async () => {
    // As above, with no user: b0 prints a 429 three times (its three tries), which stops the run
    // as an outage and halts b1 in flight (charged the 6 it reported); the local run waits the
    // outage out by itself and reruns b0 (6 + 6 <= 12) and the halted b1 with fresh allowances.
    // Gains: 18 tokens spent of a 12-token budget, overnight, unattended. (The waits are skipped.)
    // Now the run stops instead of waiting: the rerun could not keep to budget.total.
    const repo = withSibling(
      `  n=$(( $(cat "$1/b0-tries" 2>/dev/null || echo 0) + 1 )); echo $n > "$1/b0-tries"
  if [ $n -le 3 ]; then
    [ $n -eq 1 ] && sleep 3
    echo 'Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}' >&2
    exit 1
  fi`,
      300,
    );
    const waits: number[] = [];
    const r = await cliWith(['run', repo.dir, '--seed', '1'], { sleep: async (ms) => void waits.push(ms) });
    const state = newestRunState(repo.dir);
    const total = state ? spent(state) : Number.NaN;
    const said = `exit ${r.code}; waits ${waits.join(', ')}\n${r.out}\n${r.err}`;
    // No wait that would end past the budget: the run stops, saying why it cannot go on.
    expect(r.code, said).toBe(2);
    expect(r.err, said).toContain('a resume cannot run it and the r0.b1 it halted again');
    // Only the episode's own retry waits (seconds), no outage wait (5 min and more).
    expect(
      waits.filter((ms) => ms >= 5 * 60_000),
      said,
    ).toEqual([]);
    expect(total, said).toBeLessThanOrEqual(12);
  }, 300_000);
});
