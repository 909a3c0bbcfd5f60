// Every name forkflush gives on a forge is read back by the same module that builds it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  bestBranch,
  checkRunName,
  contextRef,
  episodeBranch,
  episodeJobName,
  isRoundRunOf,
  issueRunId,
  lineageBranch,
  MAP_JOB,
  mapRunTitle,
  parseEpisodeJobName,
  parseIssueRunId,
  parseMapRunTitle,
  parseRoundRunTitle,
  parseStateRef,
  roundBranchPrefix,
  roundRunTitle,
  runIdAt,
  stateRef,
} from '../../src/core/names.js';

const RUNS = ['issue-7', 'issue-12345', '20261130-100000', '20261130-100000-2'];

describe('names round-trip', () => {
  it('state refs', () => {
    for (const run of RUNS) expect(parseStateRef(stateRef(run))).toBe(run);
    expect(parseStateRef('refs/forkflush/issue-7/contexts/r0.b0')).toBeNull();
    expect(parseStateRef(contextRef('issue-7', 'r0.b0'))).toBeNull();
    expect(parseStateRef('refs/forkflush/../state')).toBeNull();
  });

  it('issue run ids', () => {
    for (const n of [1, 7, 12345]) expect(parseIssueRunId(issueRunId(n))).toBe(n);
    expect(parseIssueRunId('20261130-100000')).toBeNull();
    expect(parseIssueRunId('issue-7x')).toBeNull();
  });

  it("rounds' workflow-run titles, and which run they belong to", () => {
    for (const run of RUNS) {
      for (const round of [0, 3, 41]) {
        expect(parseRoundRunTitle(roundRunTitle(run, round))).toEqual({ run, round });
        expect(isRoundRunOf(roundRunTitle(run, round), run)).toBe(true);
      }
    }
    // issue-1's rounds are not issue-12's, whatever a substring match would say.
    expect(isRoundRunOf(roundRunTitle('issue-12', 0), 'issue-1')).toBe(false);
    expect(parseRoundRunTitle('forkflush issue-7 round 2 (copy)')).toBeNull();
    expect(parseRoundRunTitle('evil forkflush issue-7 round 2')).toBeNull();
  });

  it("the map job's workflow-run title: no round's, and no other run's", () => {
    for (const run of RUNS) {
      expect(parseMapRunTitle(mapRunTitle(run))).toBe(run);
      expect(parseRoundRunTitle(mapRunTitle(run))).toBeNull();
      expect(isRoundRunOf(mapRunTitle(run), run)).toBe(false);
      expect(parseEpisodeJobName(episodeJobName(run, MAP_JOB))).toEqual({ run, episode: MAP_JOB });
    }
    expect(parseMapRunTitle(roundRunTitle('issue-7', 0))).toBeNull();
    expect(parseMapRunTitle('forkflush issue-7 round map (copy)')).toBeNull();
  });

  it("episodes' job names", () => {
    for (const run of RUNS) {
      for (const episode of ['r0.b0', 'r12.b3'])
        expect(parseEpisodeJobName(episodeJobName(run, episode))).toEqual({ run, episode });
    }
    expect(parseEpisodeJobName('forkflush issue-7 r0.b0 extra')).toBeNull();
    expect(parseEpisodeJobName('forkflush issue-7 round 0')).toBeNull();
  });

  it('branches: each round has its own prefix, and its branches are under it', () => {
    for (const run of RUNS) {
      expect(episodeBranch(run, 2, 1).startsWith(roundBranchPrefix(run, 2))).toBe(true);
      expect(episodeBranch(run, 12, 1).startsWith(roundBranchPrefix(run, 1))).toBe(false);
      expect(
        new Set([lineageBranch(run, 0, 1), lineageBranch(run, 0, 2), lineageBranch(run, 1, 2), bestBranch(run)]).size,
      ).toBe(4);
    }
    expect(checkRunName('r1.b2')).toBe('forkflush r1.b2');
    expect(runIdAt(new Date('2026-11-30T10:00:05Z'))).toBe('20261130-100005');
  });

  it('are the names the worker workflow gives its runs and jobs', () => {
    const workflow = parse(readFileSync(join(import.meta.dirname, '../../examples/workflows/forkflush.yml'), 'utf8'));
    const fill = (template: string, values: Record<string, string>) =>
      template.replace(/\$\{\{\s*([\w.]+)\s*\}\}/g, (_, key: string) => values[key] ?? `<${key}>`);
    const values = { 'inputs.run': 'issue-7', 'inputs.round': '3', 'matrix.episode': 'r3.b1' };
    expect(fill(workflow['run-name'], values)).toBe(roundRunTitle('issue-7', 3));
    const [job] = Object.values(workflow.jobs) as { name: string }[];
    expect(fill(job?.name ?? '', values)).toBe(episodeJobName('issue-7', 'r3.b1'));
  });
});
