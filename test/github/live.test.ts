// What a person sees while a run goes on: the run's own check run (stable by name, in progress while
// rounds run, its conclusion the result's), a check run per episode (queued when its round is
// dispatched, in progress when its job starts, completed with its score), the status comment's
// checklist of rounds, and reactions to commands.
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

/** Plays the open round: each job pushes a score, then reports completed. */
async function playRound(h: Harness, score: (id: string) => number | null) {
  const state = h.state(RUN);
  const open = h.openEpisodes(RUN);
  for (const e of open) if (!e.result) h.pushResult(state, e, score(e.id));
  for (const e of open) await h.jobCompleted(RUN, e.id);
}

async function playToEnd(h: Harness, score: (id: string) => number | null) {
  for (let guard = 0; guard < 50 && h.state(RUN).status !== 'finished'; guard++) await playRound(h, score);
}

const runChecks = (h: Harness) => h.gh.checkRuns.filter((c) => c.name === 'forkflush');
const comment = (h: Harness) => h.gh.comments.find((c) => c.issue === 7)?.body ?? '';

describe("the run's check", () => {
  it('is in progress on the commit the run starts from while rounds run, then moves to the result with its conclusion', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const main = h.gh.branch('main');
    expect(runChecks(h).map((c) => [c.head_sha, c.status, c.conclusion, c.output.title])).toEqual([
      [main, 'in_progress', null, 'round 0 (opening) running; no score yet'],
    ]);
    await playRound(h, (id) => (id === 'r0.b1' ? 50 : 40));
    expect(runChecks(h)[0]?.output.title).toBe('round 1 (solo 1) running; best 50');
    expect(runChecks(h)[0]?.status).toBe('in_progress');
    await playToEnd(h, () => 60);
    const state = h.state(RUN);
    const result = h.gh.branch('forkflush/issue-7/result');
    expect(result).toBe(state.lineages[0]?.head);
    // The one on main is completed; the result's head has its own, where a required check is read.
    expect(runChecks(h).map((c) => [c.head_sha, c.status, c.conclusion])).toEqual([
      [main, 'completed', 'success'],
      [result, 'completed', 'success'],
    ]);
    expect(runChecks(h)[1]?.output.title).toBe('finished; best 60');
    expect(runChecks(h)[1]?.request.external_id).toBe(RUN);
  });

  it('runs again on the result while a round after the plan runs, then follows its result', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 3 }\n`,
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    // The initial workspace graded: past the opening round's deadline, one never graded makes the
    // check neutral (the gain is unknown: overnight.test.ts).
    h.pushBase(h.state(RUN), 1);
    await h.jobCompleted(RUN, 'base');
    await playToEnd(h, () => 10);
    const first = h.gh.branch('forkflush/issue-7/result');
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    // A new check on the result's head, in progress; the completed one is left as it was.
    expect(
      runChecks(h)
        .slice(-2)
        .map((c) => [c.head_sha, c.status, c.conclusion]),
    ).toEqual([
      [first, 'completed', 'success'],
      [first, 'in_progress', null],
    ]);
    await playToEnd(h, (id) => (id.endsWith('.b1') ? 30 : 20));
    const moved = h.gh.branch('forkflush/issue-7/result');
    expect(moved).not.toBe(first);
    expect(
      runChecks(h)
        .slice(-2)
        .map((c) => [c.head_sha, c.status, c.conclusion]),
    ).toEqual([
      [first, 'completed', 'success'],
      [moved, 'completed', 'success'],
    ]);
    expect(runChecks(h).at(-1)?.output.title).toBe('finished; best 30 (+29 over the initial workspace)');
  });

  it('is cancelled when a person stops the run, and failure when no branch could set up', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.comment(7, '/autoresearch stop');
    expect(runChecks(h).map((c) => [c.status, c.conclusion])).toEqual([['completed', 'cancelled']]);
    // The episodes' checks are cancelled with it; a resume makes new ones, and a new run check.
    expect(h.gh.checkRuns.filter((c) => c.name !== 'forkflush').map((c) => c.conclusion)).toEqual([
      'cancelled',
      'cancelled',
    ]);
    await h.comment(7, '/autoresearch resume');
    expect(runChecks(h).map((c) => [c.status, c.conclusion])).toEqual([
      ['completed', 'cancelled'],
      ['in_progress', null],
    ]);
    const state = h.state(RUN);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, null, 0, { setupFailed: 'the registry is down' });
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure');
    expect(runChecks(h).at(-1)).toMatchObject({ status: 'completed', conclusion: 'failure' });
  });
  it("a resume that dies right after saving still completes the stopped episodes' checks: the next sync does", async () => {
    const h = await new Harness().load();
    await h.label(7);
    const stopped = h.gh.checkRuns.filter((c) => c.name !== 'forkflush').map((c) => c.id);
    /** The app dies at the first request matching `at` (GitHub did it, the answer is lost), and at every one after. */
    const dieAt = (at: (method: string, path: string) => boolean) => {
      let dead = false;
      h.gh.inject = (method, path) => {
        if (dead) return 503;
        if (!at(method, path)) return null;
        dead = true;
        return { status: 503, applied: true };
      };
    };
    // The stop dies before it completes any episode's check: they stay queued.
    dieAt((method, path) => method === 'PATCH' && /\/check-runs\/\d+$/.test(path));
    await expect(h.comment(7, '/autoresearch stop')).rejects.toThrow(/answered 503|with 5/);
    h.gh.inject = null;
    await h.restart();
    const episodeChecks = () => h.gh.checkRuns.filter((c) => stopped.includes(c.id));
    expect(episodeChecks().map((c) => c.status)).toEqual(['queued', 'queued']);
    // The resume dies right after its record is saved (the state ref moved): its handler completes nothing.
    dieAt(
      (method, path) => method === 'PATCH' && decodeURIComponent(path).endsWith('/git/refs/forkflush/issue-7/state'),
    );
    await expect(h.comment(7, '/autoresearch resume')).rejects.toThrow(/answered 503|with 5/);
    h.gh.inject = null;
    await h.restart();
    expect(h.runFiles(RUN)?.orphanChecks).toEqual(stopped);
    expect(episodeChecks().map((c) => c.status)).toEqual(['queued', 'queued']);
    // Whatever triggers the next sync completes them, and takes them off the record.
    await h.comment(7, '/autoresearch status');
    expect(episodeChecks().map((c) => [c.status, c.conclusion])).toEqual([
      ['completed', 'cancelled'],
      ['completed', 'cancelled'],
    ]);
    expect(h.runFiles(RUN)?.orphanChecks).toBeUndefined();
    // The episodes run again under checks of their own, queued; nothing else is left queued.
    const queued = h.gh.checkRuns.filter((c) => c.status === 'queued');
    expect(queued.map((c) => c.name)).toEqual(['forkflush r0.b0', 'forkflush r0.b1']);
    expect(queued.map((c) => c.id)).not.toContain(stopped[0]);
    // A doubled status changes nothing more.
    const patches = h.gh.checkRuns.map((c) => c.status);
    await h.comment(7, '/autoresearch status');
    expect(h.gh.checkRuns.map((c) => c.status)).toEqual(patches);
  });
});

describe("an episode's check", () => {
  it('is queued when its round is dispatched, in progress when its job starts, completed with its score', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const [first, second] = h.openEpisodes(RUN);
    if (!first || !second) throw new Error('no episodes');
    const check = (id: string) => h.gh.checkRuns.find((c) => c.name === `forkflush ${id}`);
    expect([check('r0.b0')?.status, check('r0.b0')?.head_sha]).toEqual(['queued', first.base]);
    expect(check('r0.b0')?.output.title).toBe('r0.b0: waiting for its job');
    await h.jobStarted(RUN, 'r0.b0');
    expect(check('r0.b0')?.status).toBe('in_progress');
    expect(check('r0.b0')?.output.title).toBe('r0.b0: running');
    // It links the job that runs it (the job's page on GitHub).
    expect(check('r0.b0')?.request.details_url).toMatch(/^https:\/\/github\.com\/.+\/(job|runs)\//);
    // A job of another branch's workflow with the same name starts nothing.
    await h.jobStarted(RUN, 'r0.b1', 'attacker-branch');
    expect(check('r0.b1')?.status).toBe('queued');
    h.pushResult(h.state(RUN), first, 42);
    await h.jobCompleted(RUN, 'r0.b0');
    expect([check('r0.b0')?.status, check('r0.b0')?.conclusion, check('r0.b0')?.output.title]).toEqual([
      'completed',
      'success',
      'r0.b0: score 42',
    ]);
    // A late or doubled start changes nothing once it has a result.
    await h.jobStarted(RUN, 'r0.b0');
    expect(check('r0.b0')?.status).toBe('completed');
    // A job that fails completes its check with why.
    await h.jobCompleted(RUN, 'r0.b1', 'failure');
    expect([check('r0.b1')?.status, check('r0.b1')?.conclusion]).toEqual(['completed', 'neutral']);
    expect(check('r0.b1')?.output.title).toMatch(/^r0\.b1: no score: its job ended: failure/);
    // One check per episode, none twice.
    expect(h.gh.checkRuns.filter((c) => c.name.startsWith('forkflush r0.')).map((c) => c.name)).toEqual([
      'forkflush r0.b0',
      'forkflush r0.b1',
    ]);
  });
});

describe('the status comment', () => {
  it('keeps a checklist of rounds with their branches, scores and spend', async () => {
    const h = await new Harness().load();
    await h.label(7);
    expect(comment(h)).toContain('#### Rounds\n\n- [ ] round 0 (opening): r0.b0 running · r0.b1 running; 0 tokens');
    await playRound(h, (id) => (id === 'r0.b1' ? 50 : 40));
    expect(comment(h)).toContain(
      '- [x] round 0 (opening): r0.b0 40 · **r0.b1 50** (won); 30 tokens\n- [ ] round 1 (solo 1): r1.b0 running; 0 tokens',
    );
    expect(h.gh.comments.filter((c) => c.issue === 7)).toHaveLength(1);
  });
});

describe('commands', () => {
  it('are acknowledged: eyes when taken, +1 when done, -1 when refused; readers get nothing', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const reactions = () => h.gh.reactions.map((r) => r.content);
    await h.comment(7, '/autoresearch status');
    expect(reactions()).toEqual(['eyes', '+1']);
    await h.comment(7, '/autoresearch stop');
    await h.comment(7, '/autoresearch fork');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe('The run is stopped: `/autoresearch resume` first.');
    expect(reactions().slice(2)).toEqual(['eyes', '+1', 'eyes', '-1']);
    await h.comment(7, '/autoresearch status', 'reader');
    expect(reactions()).toHaveLength(6);
  });

  it("on the run's result pull request steer the run; on a pull request that is no run's, nothing", async () => {
    // A run of one episode: its result pull request comes soon.
    const h = await new Harness({
      '.github/autoresearch.yml': CONFIG.replace('  total: 100', '  total: 10'),
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    await playToEnd(h, () => 10);
    const pr = h.runFiles(RUN)?.finalPr as number;
    expect(h.gh.pulls.find((p) => p.number === pr)?.head).toBe('forkflush/issue-7/result');
    await h.comment(pr, '/autoresearch status', 'maintainer', true);
    expect(h.gh.reactions.map((r) => r.content)).toEqual(['eyes', '+1']);
    // Readers, and pull requests that are no run's (none of that number here): not a word.
    const comments = h.gh.comments.length;
    await h.comment(pr, '/autoresearch stop', 'reader', true);
    await h.comment(pr + 1, '/autoresearch stop', 'maintainer', true);
    expect(h.gh.comments).toHaveLength(comments);
    expect(h.gh.reactions).toHaveLength(2);
    expect(h.runFiles(RUN)?.stopped).toBe(false);
    await h.comment(pr, '/autoresearch stop', 'maintainer', true);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
  });
});
