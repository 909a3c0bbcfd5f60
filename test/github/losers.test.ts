// fork.losers: journal on GitHub: the app reads the losers' journals through the API when it
// decides a fork round, before it closes their branches, and saves the notes in the record that
// claims the round's settling: every record in which the next round exists holds them, so its
// jobs (the worker Action: sectionFor) append the section the local runner appends.
import { describe, expect, it } from 'vitest';
import { recordLosers, sectionFor } from '../../src/core/losers.js';
import { stateRef } from '../../src/core/names.js';
import type { Episode, RunState } from '../../src/core/state.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

describe('fork.losers: journal on GitHub', () => {
  it("records each loser's entries before its branch goes, in every record the next round is in", async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}  losers: journal\n`,
      'grade.mjs': 'x',
      'NOTES.md': '# Notes\n\n- before: score 1\n',
    }).load();
    await h.label(7);
    const opening = h.state(RUN);
    const journals: Record<string, string> = {
      'r0.b0': '# Notes\n\n- before: score 1\n- r0.b0: walksat noise=0.3, score 40\n',
      'r0.b1': '# Notes\n\n- before: score 1\n- r0.b1: tabu, score 50\n',
    };
    for (const e of opening.rounds[0]?.episodes ?? []) {
      h.pushResult(opening, e, e.id === 'r0.b1' ? 50 : 40, e.allowance, {
        files: { 'NOTES.md': journals[e.id] ?? '' },
      });
    }
    for (const e of opening.rounds[0]?.episodes ?? []) await h.jobCompleted(RUN, e.id);

    const state = h.state(RUN);
    expect(state.rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(state.rounds[0]?.losers).toEqual([
      { episode: 'r0.b0', entries: ['- r0.b0: walksat noise=0.3, score 40'], earlier: 0 },
    ]);
    // The loser's branch is gone; the notes were read while it was there.
    expect([...h.gh.refs.keys()].filter((r) => r.includes('/round-0/'))).toEqual([]);
    // As the local runner reads them (git, at the same commits): the same notes, the same section.
    const unrecorded: RunState = {
      ...state,
      rounds: state.rounds.map(({ losers: _, ...r }) => r),
    };
    const files = (commit: string) => h.gh.commits.get(commit)?.files['NOTES.md'] ?? '';
    const local = await recordLosers(unrecorded, async (commit) => files(commit));
    expect(local.rounds[0]?.losers).toEqual(state.rounds[0]?.losers);
    const next = state.rounds[1]?.episodes[0] as Episode;
    const section = sectionFor(state, next);
    expect(section).toContain('### r0.b0: score 40; spent ');
    expect(section).toContain('> - r0.b0: walksat noise=0.3, score 40');
    expect(sectionFor(local, next)).toBe(section);

    // No record a job could read has the next round without the notes of the one before.
    let sha = h.gh.refs.get(stateRef(RUN));
    let checked = 0;
    while (sha) {
      const commit = h.gh.commits.get(sha);
      const saved: RunState = JSON.parse(commit?.files['state.json'] ?? '{"rounds":[]}');
      if (saved.rounds.length > 1) {
        expect(saved.rounds[0]?.losers).toEqual(state.rounds[0]?.losers);
        checked++;
      }
      sha = commit?.parents[0];
    }
    expect(checked).toBeGreaterThan(0);
  });

  it("records a loser's entries from a journal grown past 1 MiB over many nights", async () => {
    // Before: a journal over 1 MiB (a lineage's, after many nights) was read as empty, at the base
    // and at every loser: no loser's notes were recorded again for the rest of the run, and the
    // section said nothing of it. Now the last 1 MiB is read: what a branch added is at the end.
    const nights = Array.from(
      { length: 30_000 },
      (_, i) => `- night ${i}: tried tenure ${i % 97}, score ${i % 1000}\n`,
    );
    const base = `# Notes\n\n${nights.join('')}`;
    expect(Buffer.byteLength(base)).toBeGreaterThan(2 ** 20);
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}  losers: journal\n`,
      'grade.mjs': 'x',
      'NOTES.md': base,
    }).load();
    await h.label(7);
    const opening = h.state(RUN);
    for (const e of opening.rounds[0]?.episodes ?? [])
      h.pushResult(opening, e, e.id === 'r0.b1' ? 50 : 40, e.allowance, {
        files: { 'NOTES.md': `${base}- ${e.id}: tabu over the packing order, score ${e.id === 'r0.b1' ? 50 : 40}\n` },
      });
    for (const e of opening.rounds[0]?.episodes ?? []) await h.jobCompleted(RUN, e.id);
    expect(h.state(RUN).rounds[0]?.losers).toEqual([
      { episode: 'r0.b0', entries: ['- r0.b0: tabu over the packing order, score 40'], earlier: 0 },
    ]);
  });
});
