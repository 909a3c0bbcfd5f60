// Review rows for fork.losers: journal (core/losers.ts, worker/episode.ts, local/forge.ts journalAt):
// the losers' notes a decided fork round records, and the section the lineage carries on.
import { describe, expect, it } from 'vitest';
import { drive } from '../../src/local/runner.js';
import { startRun } from '../../src/local/start.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const BUDGET = 'total: 40\n  unit: tokens\n  episode: 6';

/** A task that forks at half its budget, keeping the losers' notes, its agent the script `w.sh`. */
function forkedRepo(script: string): TaskRepo {
  return makeTaskRepo({
    extra: 'fork: {branches: 2, at: [0.5], branch_budget: 0.15, losers: journal}',
    budget: BUDGET,
    agentCommand: 'sh w.sh',
    files: { 'w.sh': script },
  });
}

async function runToEnd(repo: TaskRepo) {
  const run = await startRun({ dir: repo.dir, seed: 42, now: new Date('2026-11-30T10:00:00Z') });
  const { state } = await drive(run.state, run);
  return state;
}

describe('fork.losers: journal, review', () => {
  // Before: when a fork round's base is the winner of the fork round before (the opening spends the
  // first fork point's share; on GitHub every nightly round forks the last night's winner), each
  // branch is given the earlier round's section, and recordLosers diffs against the base's journal,
  // which lacks it: the earlier section (fences, header, the earlier losers' quotes) is recorded as
  // this round's loser's own entries and quoted again, nested, in the next section. Should hold:
  // a loser's entries are only what its agent wrote.
  it("records, for a fork round right after another, only what its losers wrote, not the earlier round's section", async () => {
    const repo = makeTaskRepo({
      extra: 'fork: {branches: 2, at: [0.3], branch_budget: 0.15, losers: journal}',
      budget: BUDGET,
    });
    const state = await runToEnd(repo);
    expect(state.status).toBe('finished');
    expect(state.rounds[1]?.kind).toBe('fork');
    const loser = state.rounds[1]?.losers?.[0];
    expect(loser?.entries).toHaveLength(1);
    expect(loser?.entries[0]).toMatch(new RegExp(`^- ${loser?.episode}: tried \\+1, score \\d+$`));
    const journal = repo.git('show', `forkflush/${state.id}/lineage:NOTES.md`);
    expect(journal).not.toContain('> <!-- forkflush:');
  }, 180_000);

  // Before: the first episode after a fork gets the section in its workspace, but when what its agent
  // left cannot be recorded (a 101 MB file), the episode "keeps its base": its commit is the base's
  // tree plus forkflush's line, without the section; the lineage goes on from that commit and no
  // later episode gets the section again: round 0's losers' notes are gone from the journal for the
  // rest of the run. Should hold: the episode keeps the tree it started from (base + section).
  it('keeps the section in the lineage when the first episode after the fork leaves a workspace git cannot take', async () => {
    const repo = forkedRepo(
      'if [ "$FORKFLUSH_EPISODE" = r1.b0 ]; then truncate -s 101M weights.bin; fi\nexec node agent.mjs improve\n',
    );
    const state = await runToEnd(repo);
    expect(state.rounds[0]?.losers?.length).toBe(1);
    expect(state.rounds[1]?.episodes[0]?.result?.reason).toMatch(/the workspace could not be recorded/);
    const journal = repo.git('show', `forkflush/${state.id}/lineage:NOTES.md`);
    expect(journal).toContain('<!-- forkflush: branches that lost round 0 (opening), begin -->');
  }, 180_000);

  // Before: locally, journalAt returns '' for a journal over 16 MiB (JOURNAL_READ_MAX_BYTES), so a
  // loser that dumped a log into its journal is recorded with entries [] and the section says
  // "(no new entries in its journal)"; the GitHub side (sync.ts, api.readFile up to 100 MB, then
  // journalWindow) records its last entries. Should hold: the last 1 MiB is read, on both sides.
  it("records a loser's last entries when its journal grew past 16 MiB, as the GitHub side does", async () => {
    const repo = forkedRepo(
      [
        'if [ "$FORKFLUSH_EPISODE" = r0.b1 ]; then',
        `  node -e "require('fs').appendFileSync('NOTES.md', '- a line of a log the agent dumped into its journal\\\\\\\\n'.repeat(340000))"`,
        "  printf '\\n- r0.b1: tabu tenure=9 over the packing order: score 0, a dead end\\n' >> NOTES.md",
        '  echo \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"',
        '  exit 0',
        'fi',
        'exec node agent.mjs improve',
      ].join('\n'),
    );
    const state = await runToEnd(repo);
    expect(state.rounds[0]?.decision?.winner).toBe('r0.b0');
    const loser = state.rounds[0]?.episodes[1]?.result?.commit;
    expect(Number(repo.git('cat-file', '-s', `${loser}:NOTES.md`))).toBeGreaterThan(16 * 2 ** 20);
    expect(state.rounds[0]?.losers?.[0]?.entries.at(-1)).toBe(
      '- r0.b1: tabu tenure=9 over the packing order: score 0, a dead end',
    );
  }, 180_000);
});
