// Agents and graders that misbehave: each case is one short run on a real git repository.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allEpisodes, type EpisodeResult, type RunState } from '../../src/core/state.js';
import { stopReason } from '../../src/core/stop.js';
import { drive } from '../../src/local/runner.js';
import { startRun } from '../../src/local/start.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const ONE_EPISODE = 'total: 6\n  unit: tokens\n  episode: 6';

async function oneEpisode(
  repo: TaskRepo,
  status: RunState['status'] = 'finished',
): Promise<{ result: EpisodeResult; base: { score: number | null; reason?: string }; state: RunState }> {
  const run = await startRun({ dir: repo.dir, seed: 1, now: new Date('2026-11-30T10:00:00Z') });
  const { state } = await drive(run.state, run);
  expect(state.status).toBe(status);
  const [episode] = allEpisodes(state);
  if (!episode?.result) throw new Error('no result');
  return { result: episode.result, base: state.base, state };
}

/** Live processes whose command line holds `text` (a zombie waiting to be reaped is not live). */
function processesWith(text: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const cmdline = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return cmdline.includes(text) && !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('agents that misbehave', () => {
  it('an agent that crashes still gets its workspace graded and committed', async () => {
    const repo = makeTaskRepo({ agent: 'crash', budget: ONE_EPISODE, extra: 'strategy: single-run' });
    const { result } = await oneEpisode(repo);
    expect(result).toMatchObject({ exit: 'crash', score: 1, spent: 1 });
    expect(result.note).toMatch(/agent exited with code 3/);
  });

  it('an agent that cannot reach its API is said while it still runs, and in its note', async () => {
    // It asks the proxy for a host it may reach that does not resolve, as a CLI retries its API offline.
    const agent = `const u = new URL(process.env.HTTPS_PROXY); const end = Date.now() + 6500;
const ask = () => require('node:http').request({ host: u.hostname, port: u.port, method: 'CONNECT', path: 'nowhere.invalid:443' })
  .on('connect', (res, s) => { s.destroy(); Date.now() < end ? setTimeout(ask, 500) : process.exit(1); })
  .on('error', () => process.exit(2)).end();
ask();`;
    const repo = makeTaskRepo({
      agentCommand: 'node offline.cjs',
      budget: ONE_EPISODE,
      extra: 'strategy: single-run',
      files: { 'offline.cjs': agent },
    });
    const config = `${repo.dir}/.github/autoresearch.yml`;
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace('sandbox:\n', 'sandbox:\n  network: {allow: [nowhere.invalid]}\n'),
    );
    repo.git('commit', '-qam', 'allow it');
    const run = await startRun({ dir: repo.dir, seed: 1, now: new Date('2026-11-30T10:00:00Z') });
    const seen: string[] = [];
    const { state } = await drive(run.state, {
      ...run,
      onEvent: (e) => {
        if (e.type === 'episode-warning' || e.type === 'episode-done')
          seen.push(e.type === 'episode-warning' ? e.warning : 'done');
      },
    });
    const said = "forkflush's proxy could not reach nowhere.invalid:443 (";
    // Each episode says it before it ends (the run stops after a streak of such crashes).
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen[0]).toContain(said);
    expect(seen[0]).toMatch(/: is this machine online, or does it reach the internet only through a proxy of its own/);
    expect(seen[1]).toBe('done');
    expect(allEpisodes(state)[0]?.result?.note).toContain(said);
  });

  it('an agent that hangs is stopped at its deadline, with its whole process group', async () => {
    // Room for ten episodes: on a busy machine the agent may not report its token within its
    // second, and is then charged its whole allowance (6), which ended a budget of one episode
    // before the stop it is here to show.
    const budget = 'total: 60\n  unit: tokens\n  episode: 6';
    const repo = makeTaskRepo({ agent: 'hang', budget, extra: 'strategy: single-run' });
    const config = `${repo.dir}/.github/autoresearch.yml`;
    const text = readFileSync(config, 'utf8').replace('timeout: 20', 'timeout: 1');
    writeFileSync(config, text);
    repo.git('commit', '-qam', 'short timeout');
    const started = Date.now();
    // The run stops after CRASH_STREAK time-outs with nothing to show.
    const { result, state } = await oneEpisode(repo, 'running');
    expect(allEpisodes(state)).toHaveLength(3);
    expect(stopReason(state)?.message).toMatch(
      /^the agent ran until its time limit \(agent\.timeout: 1 s\) without changing the workspace in 3 episodes in a row/,
    );
    expect(result.exit).toBe('timeout');
    expect(result.agentSeconds).toBeGreaterThanOrEqual(1);
    // Far below the 600 s its child sleeps: each episode was cut at its second, not waited out.
    expect(Date.now() - started).toBeLessThan(60_000);
    const marker = readFileSync(`${repo.callsLog}.child-marker`, 'utf8');
    expect(processesWith(marker)).toEqual([]);
  });

  it('an agent that overspends is stopped and charged what it reported', async () => {
    const repo = makeTaskRepo({ agent: 'overspend', budget: ONE_EPISODE, extra: 'strategy: single-run' });
    const { result } = await oneEpisode(repo);
    expect(result).toMatchObject({ exit: 'budget', spent: 18 });
    expect(result.agentSeconds).toBeLessThan(5);
  });

  it('an agent that edits a protected file gets no score, and the file is restored', async () => {
    const repo = makeTaskRepo({ agent: 'protected', budget: ONE_EPISODE, extra: 'strategy: single-run' });
    // It does so in every episode: the run stops after CRASH_STREAK of them (core/stop.ts noScoreYet).
    const { result } = await oneEpisode(repo, 'running');
    expect(result.score).toBeNull();
    expect(result.protectedChanged).toEqual(['grade.sh']);
    expect(result.reason).toBe('the agent changed protected paths: grade.sh');
    expect(repo.git('show', `${result.commit}:grade.sh`)).toBe(readFileSync(`${repo.dir}/grade.sh`, 'utf8').trim());
    // The rest of its work is kept.
    expect(repo.git('show', `${result.commit}:value.txt`)).toBe('1');
  });

  it('a file hidden by .gitignore under a protected path is removed before grading', async () => {
    const repo = makeTaskRepo({
      agent: 'hide',
      grader: "sh -c 'cat tests/override 2>/dev/null || cat value.txt'",
      budget: ONE_EPISODE,
      extra: 'strategy: single-run',
    });
    const config = `${repo.dir}/.github/autoresearch.yml`;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        'protected: [grade.sh, agent.mjs]',
        'protected: [grade.sh, agent.mjs, tests/**]',
      ),
    );
    repo.git('commit', '-qam', 'protect tests');
    const { result } = await oneEpisode(repo);
    expect(result.score).toBe(1);
  });

  it('an agent that reports no usage and ran its course is charged its whole allowance, as an estimate, and says so', async () => {
    const repo = makeTaskRepo({ agent: 'nousage', budget: ONE_EPISODE, extra: 'strategy: single-run' });
    const { result } = await oneEpisode(repo);
    expect(result).toMatchObject({ exit: 'finished', spent: 6, score: 1, spentBasis: 'estimated' });
    expect(result.note).toBe(
      'the agent wrote no usage file; no usage reported: charged 6 tokens as an estimate (it ran its course (finished): its whole allowance)',
    );
  });

  it('an evaluation budget is counted by FORKFLUSH_GRADE and stops the agent when used up', async () => {
    const repo = makeTaskRepo({
      agent: 'grade-loop',
      budget: 'total: 3\n  unit: evaluations\n  episode: 3',
      extra: 'strategy: single-run',
    });
    const { result } = await oneEpisode(repo);
    expect(result).toMatchObject({ exit: 'budget', spent: 3 });
  });

  it('a time budget stops the agent at its allowance', async () => {
    const repo = makeTaskRepo({
      agent: 'hang',
      budget: 'total: 0.02\n  unit: minutes\n  episode: 0.02',
      extra: 'strategy: single-run',
    });
    const { result } = await oneEpisode(repo);
    expect(result.exit).toBe('budget');
    expect(result.spent).toBeGreaterThanOrEqual(0.02);
    expect(result.spent).toBeLessThan(0.1);
  });
});

describe('graders that misbehave', () => {
  it.each([
    ['exit 4', /^the grader exited with code 4/],
    ['echo garbage', /^the grader's last line is not a number: garbage$/],
    ['echo NaN', /^the grader printed NaN, not a finite number$/],
    ['printf ""', /^the grader printed nothing on stdout$/],
    ['sleep 30', /^the grader timed out after 1 s$/],
  ])('"%s" gives no score, with the reason, and the run goes on', async (command, reason) => {
    // An agent that does not grade itself (it would crash on a grader that fails, and a crash that
    // spent little leaves budget: the opening round's no-score stop), so that the run ends.
    const repo = makeTaskRepo({
      agent: 'nousage',
      grader: command,
      budget: ONE_EPISODE,
      extra: 'strategy: single-run',
    });
    const config = `${repo.dir}/.github/autoresearch.yml`;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(config, readFileSync(config, 'utf8').replace('timeout: 5', 'timeout: 1'));
    repo.git('commit', '-qam', 'short grader timeout');
    const { result, base } = await oneEpisode(repo);
    expect(result.score).toBeNull();
    expect(result.reason).toMatch(reason);
    expect(base.score).toBeNull();
    expect(base.reason).toMatch(reason);
  });
});
