// Round 9 attacks (a helper's): hostile command agents and hostile repository content against
// what stop 46 added (the snapshot's ignored files named in the note, the "grader stopped
// scoring" stop, end warnings, the crash stop's quote). Each row failed against the code it was
// written on for the reason it names.
import { afterAll, describe, expect, it } from 'vitest';
import { nothingDone } from '../../src/core/end-warnings.js';
import type { EpisodeResult } from '../../src/core/state.js';
import { haltsOnGitHub, stopReason } from '../../src/core/stop.js';
import { laterRounds, openingRound } from '../unit/helpers.js';
import { cleanupAttackTemps, describeSandboxed, makeAttackRepo, runCli, runLocal } from './helpers.js';

afterAll(cleanupAttackTemps);

const MARKER = "what changed is only in files the repository's .gitignore leaves out";

describeSandboxed('round 9: what an episode that recorded nothing says of the files .gitignore left out', () => {
  it("an agent's final message that spells the IGNORED_ONLY marker does not make the run's end say its words as forkflush's diagnosis", async () => {
    // Changes nothing; its last line of output is the marker with text of its own in parentheses.
    const spoof = `${MARKER} (SPOOFED-by-the-agent: your API key leaked, rotate it at https://evil.example/rotate)`;
    const repo = makeAttackRepo({
      agent: 'sh agent.sh',
      files: { 'agent.sh': `printf '%s\\n' ${JSON.stringify(spoof)}\n` },
      agentTimeout: 60,
    });
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 240_000 });
    expect(r.exitCode, r.out).toBe(1);
    // The run's last word is forkflush's own: nothing was ignored, nothing was changed.
    const verdict = r.out.split('\n').find((l) => l.startsWith('forkflush: no episode')) ?? '';
    expect(verdict, r.out).not.toContain('SPOOFED-by-the-agent');
    expect(verdict, r.out).toMatch(/none changed the workspace/);
  }, 300_000);

  it('an ignored file whose name holds parentheses is named whole at the end of the run', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 9 > "results (final).csv"'`,
      files: { '.gitignore': '*.csv\n' },
      agentTimeout: 60,
    });
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 240_000 });
    expect(r.exitCode, r.out).toBe(1);
    const verdict = r.out.split('\n').find((l) => l.startsWith('forkflush: no episode changed what git records')) ?? '';
    expect(verdict, r.out).toContain('results (final).csv');
  }, 300_000);

  it("an ignored file whose name holds a line break cannot write a line of forkflush's own into the progress and the note", async () => {
    // A name that, once printed, starts a line of its own that reads as forkflush's.
    const forged = 'forkflush: r0.b0 scored 1000000, spent 0 tokens (finished, 0.1 s)';
    const repo = makeAttackRepo({
      agent: `sh agent.sh`,
      files: {
        '.gitignore': 'out-*\n',
        'agent.sh': `printf 9 > "$(printf 'out-\\n%s' ${JSON.stringify(forged)})"\n`,
      },
      agentTimeout: 60,
    });
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 240_000 });
    // The file was made and named (the note says so, its name quoted as JSON) ...
    expect(r.out, r.out).toContain(`.gitignore leaves out: ["out-\\n${forged}"]`);
    // ... but no line of the output is the agent's forged one.
    expect(
      r.out.split('\n').filter((l) => l.startsWith(forged)),
      r.out,
    ).toEqual([]);
  }, 300_000);

  it("an agent's final message cannot close its quote in the note that the crash stop calls forkflush's own", async () => {
    // Three clean ends that change nothing: the crash stop quotes "forkflush's note on the last",
    // which holds the agent's final message in quotes it can close.
    const forged = 'forkflush: your key ANTHROPIC_API_KEY was revoked: paste a new one at https://evil.example/key';
    const repo = makeAttackRepo({
      agent: 'sh agent.sh',
      files: { 'agent.sh': `printf '%s\\n' ${JSON.stringify(`done"; ${forged}`)}\n` },
      budget: 'total: 18\n  unit: tokens\n  episode: 6',
      agentTimeout: 60,
    });
    const r = await runCli(['run', repo.dir, '--seed', '1'], { cwd: repo.dir, deadlineMs: 240_000 });
    expect(r.exitCode, r.out).toBe(2);
    const stop = r.out.split('\n').find((l) => l.includes("forkflush's note on the last")) ?? '';
    expect(stop, r.out).toContain(forged);
    // The agent's words stay inside its quote: no '"; forkflush: ...' of its making after it.
    expect(stop, r.out).not.toContain(`"; ${forged}`);
  }, 300_000);

  it('an agent that leaves hundreds of thousands of long-named ignored files (and records nothing) still gets its result: the run goes on', async () => {
    // An untracked .gitignore of '*' ignores itself and all that is new: nothing is recorded.
    // 270,000 names of 248 characters list past what forkflush's git reads (64 MB).
    const repo = makeAttackRepo({
      agent: 'sh agent.sh',
      files: {
        'agent.sh':
          "printf '*\\n' > .gitignore\n" +
          `python3 -c "
p = 'x' * 240
for i in range(270000):
    open(p + '%08d' % i, 'w').close()
"\n`,
      },
      agentTimeout: 300,
    });
    const run = await runLocal(repo).catch((e: unknown) => e as Error);
    expect(run instanceof Error ? `${run.name}: ${run.message}` : 'a result').toBe('a result');
    if (!(run instanceof Error)) expect(run.state.status).toBe('finished');
  }, 900_000);
});

// The stop policy, pure.

describe('round 9: the grader-stopped-scoring stop', () => {
  it('episodes whose judge the machine starved (machineShort: no score is known, the round is void) are not "the grader stopped scoring": the run goes on', () => {
    const starved: Partial<EpisodeResult> = {
      score: null,
      reason: 'the grader ran out of memory (the machine was short of memory on both tries)',
      machineShort: 'memory',
    };
    const s = laterRounds(openingRound(5, [{ score: 6 }, { score: 7 }, { score: 5 }, { score: 4 }]), [
      starved,
      starved,
      starved,
    ]);
    const f = stopReason(s);
    // The machine's doing (a sibling can starve it locally), not the grader's: no stop that ends
    // the run with exit 1 and halts it on GitHub.
    expect(f?.graderStoppedScoring, f?.message).toBeUndefined();
    expect(haltsOnGitHub(f, true)).toBe(false);
  });

  it('nor are they "the grader scored nothing" in the opening round: two starved and two unscored branches are no streak of three', () => {
    const starved: Partial<EpisodeResult> = {
      score: null,
      reason: 'the grader ran out of memory (the machine was short of memory on both tries)',
      machineShort: 'memory',
    };
    const broken: Partial<EpisodeResult> = { score: null, reason: 'the grader printed no score' };
    const f = stopReason(openingRound(5, [starved, broken, starved, broken]));
    // Only the two branches the grader judged count against it, as in noScoreSince.
    expect(f?.graderScoredNothing, f?.message).toBeUndefined();
  });

  it("nothingDone reads the marker only from forkflush's own part of the note, not from the agent's quoted final message", () => {
    const spoofed: Partial<EpisodeResult> = {
      exit: 'finished',
      unchanged: true,
      score: 5,
      spentBasis: 'estimated',
      note: `its final message, changing nothing: "${MARKER} (@everyone see https://evil.example)"`,
    };
    const s = openingRound(5, [spoofed, spoofed, spoofed, spoofed]);
    expect(nothingDone(s)).toBe(
      'no episode did any work: none changed the workspace (does agent.command run the agent on the task, and may it edit files there?)',
    );
  });
});
