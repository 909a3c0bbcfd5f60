// Version skew during a long run: records, results and manifests written by another forkflush
// release (a newer one, most often: the team upgraded one side first) are read whole or refused
// with what to do; never read leniently, written back without what this release does not know, or
// taken as a crash. Each row failed before its fix (found by a review); its comment says how.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitMessage } from '../../src/core/journal.js';
import { stateRef } from '../../src/core/names.js';
import type { Episode, RunState } from '../../src/core/state.js';
import { repositoryKey, sealedFiles } from '../../src/github/record-seal.js';
import { FAKE_REPOSITORY_ID } from '../github/fake-github.js';
import { Harness, issueText } from '../github/harness.js';
import { useGitHubInABox } from '../github/use-box.js';
import { cli } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const small = { budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' };
const runsOf = (dir: string) => readdirSync(join(dir, '.forkflush')).filter((n) => /^\d{8}-\d{6}/.test(n));

/** A finished local run, its state.json's path and its state. */
async function finishedRun() {
  const repo = makeTaskRepo(small);
  const r = await cli('run', repo.dir);
  if (r.code !== 0) throw new Error(`the run failed: ${r.err}`);
  const [id] = runsOf(repo.dir) as [string];
  const file = join(repo.dir, '.forkflush', id, 'state.json');
  return { repo, id, file, state: JSON.parse(readFileSync(file, 'utf8')) };
}

/** A finished compare of two runs, and its manifest's path. */
async function finishedCompare() {
  const repo = makeTaskRepo(small);
  const r = await cli('compare', repo.dir, '--strategies', 'single-run', '--seeds', '2');
  if (r.code !== 0) throw new Error(`the compare failed: ${r.err}`);
  const folder = readdirSync(join(repo.dir, '.forkflush')).find((d) => d.startsWith('compare-')) as string;
  return { repo, file: join(repo.dir, '.forkflush', folder, 'compare.json') };
}

describe('a local run or compare written by a newer forkflush, resumed by this one', () => {
  it('a resume does not silently drop the fields of state.json that this forkflush does not know', async () => {
    // Before: the resume exits 0 and writes state.json back without the unknown fields (zod strips
    // them), so what a newer release recorded there (say a spend, as `earlierSpent` was added
    // after state.json had a version, without a new one) is lost for good. Should: refuse, naming
    // the field and "upgrade forkflush", or keep the fields; never lose them silently.
    const { repo, file, state } = await finishedRun();
    state.status = 'running';
    state.rounds[0].episodes[0].result.laterSpent = 4;
    writeFileSync(file, JSON.stringify(state));
    const r = await cli('resume', repo.dir);
    const kept = readFileSync(file, 'utf8').includes('laterSpent');
    const refused = r.code !== 0 && /upgrade forkflush/.test(r.err);
    expect(kept || refused, `exit ${r.code}, state.json kept the field: ${kept}; ${r.err}`).toBe(true);
  }, 300_000);

  it("a state.json whose config holds a newer release's key is refused with 'upgrade forkflush', not as not forkflush's", async () => {
    // Before: "state.json: config.sandbox: unknown key "egress" (not a forkflush run record)", exit 2:
    // it is forkflush's record, from a newer release, and the message names no fix. Should say a
    // newer forkflush wrote it and to upgrade (as a record of a newer version is refused).
    const { repo, file, state } = await finishedRun();
    state.status = 'running';
    state.config.sandbox.egress = 'proxy'; // a key a later release adds
    writeFileSync(file, JSON.stringify(state));
    const r = await cli('resume', repo.dir);
    expect(r.code).not.toBe(0);
    expect(r.err).not.toContain('not a forkflush run record');
    expect(r.err).toMatch(/newer forkflush|upgrade forkflush/);
  }, 300_000);

  it('compare --resume of a manifest from a newer forkflush says to upgrade, not to remove its folder', async () => {
    // Before: "compare.json: version: Invalid input: expected 1 (not a forkflush compare manifest;
    // remove its folder to start afresh)": following it deletes a night of results. Should say a
    // newer forkflush wrote it and to upgrade, as state.json's version check does.
    const { repo, file } = await finishedCompare();
    const m = JSON.parse(readFileSync(file, 'utf8'));
    m.version = 2;
    m.entries[1].run = null;
    writeFileSync(file, JSON.stringify(m));
    const r = await cli('compare', repo.dir, '--resume', '--dry-run');
    expect(r.code).not.toBe(0);
    expect(r.err).not.toContain('remove its folder');
    expect(r.err).toMatch(/newer forkflush|upgrade forkflush/);
  }, 300_000);

  it('a compare does not silently start over beside an unfinished compare of a newer forkflush', async () => {
    // Before: the newer manifest is passed over as if damaged and a new compare is planned (new seeds,
    // every run again: the runs done already are paid for twice), exit 0, no word of it. Should
    // stop and say that an unfinished compare from a newer forkflush is there (upgrade to go on).
    const { repo, file } = await finishedCompare();
    const m = JSON.parse(readFileSync(file, 'utf8'));
    m.version = 2;
    m.entries[1].run = null;
    writeFileSync(file, JSON.stringify(m));
    const r = await cli('compare', repo.dir, '--strategies', 'single-run', '--seeds', '2', '--dry-run');
    expect(r.code).not.toBe(0);
    expect(r.out + r.err).toMatch(/newer forkflush|upgrade forkflush/);
  }, 300_000);
});

const RUN = 'issue-7';

/** A result commit on the episode's base with the trailers the worker writes, `edit`ed. */
function pushEdited(h: Harness, state: RunState, e: Episode, score: number, edit: (m: string) => string): void {
  const msg = commitMessage(RUN, state.config.budget.unit, e, {
    score,
    spent: 2,
    exit: 'finished',
    protectedChanged: [],
    agentSeconds: 1,
    graderSeconds: 1,
    wallSeconds: 2,
  });
  const parent = h.gh.commits.get(e.base);
  const sha = h.gh.commit({ message: edit(msg), parents: [e.base], files: { ...parent?.files, 'NOTES.md': 'x\n' } });
  h.gh.refs.set(h.refs(RUN).episode(e.round, e.branch), sha);
}

describe('the app and the worker of different releases', () => {
  useGitHubInABox();

  it("an app reading a newer app's record does not write it back without the fields it does not know", async () => {
    // Before: run.json and state.json saved by forkflush 9.0.0 (one more field each) are read
    // leniently; the next save drops both fields (and stamps writtenBy 0.1.0 over 9.0.0), as after
    // an app rollback or with instances of two releases behind one webhook. Should: refuse the
    // record (the issue saying which release to run) or keep what it does not know.
    const h = await new Harness().load();
    await h.label(7);
    const ref = stateRef(RUN);
    const head = h.gh.refs.get(ref) as string;
    const files = structuredClone(h.gh.commits.get(head)?.files ?? {});
    const state = JSON.parse(files['state.json'] as string);
    state.rounds[0].laterField = { charged: 4 };
    const facts = JSON.parse(files['run.json'] as string);
    facts.laterField = { kept: true };
    facts.writtenBy = '9.0.0';
    files['state.json'] = JSON.stringify(state);
    files['run.json'] = sealedFiles(repositoryKey(h.recordKey, { id: FAKE_REPOSITORY_ID }), files['state.json'], facts);
    const newer = h.gh.commit({ message: 'forkflush 9.0.0 saved it', parents: [head], files });
    h.gh.refs.set(ref, newer);
    const e = h.state(RUN).rounds[0]?.episodes[0] as Episode;
    h.pushResult(h.state(RUN), e, 3);
    await h.jobCompleted(RUN, e.id).catch(() => {});
    const after = h.runFiles(RUN);
    // Refusing the record (nothing saved over it) is as good as keeping the fields.
    if (h.gh.refs.get(ref) !== newer) {
      expect(after?.laterField).toEqual({ kept: true });
      expect((h.state(RUN).rounds[0] as unknown as { laterField?: unknown }).laterField).toEqual({ charged: 4 });
    }
  }, 120_000);

  it("a result with a trailer the app does not know (a newer worker's) is not charged in silence", async () => {
    // Before: `Forkflush-Later-Spent: 7` is ignored: each episode is charged 2, the issue says
    // nothing (as an app older than `Forkflush-Earlier-Spent` dropped a re-run's charge). Should:
    // say the result comes from a worker newer than the app and name the trailer (update the app).
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    for (const e of state.rounds[0]?.episodes ?? [])
      pushEdited(h, state, e, 3, (m) =>
        m.replace('Forkflush-Seconds:', 'Forkflush-Later-Spent: 7\nForkflush-Seconds:'),
      );
    for (const e of state.rounds[0]?.episodes ?? []) await h.jobCompleted(RUN, e.id);
    const said = `${issueText(h)}\n${JSON.stringify(h.state(RUN).rounds[0])}`;
    expect(said).toContain('Later-Spent');
  }, 120_000);

  it("a newer worker's result with an exit this app does not know is not read as a crash that pushed someone else's commit", async () => {
    // Before: `Forkflush-Exit: stalled` makes parseCommitMessage return null; the episode is a crash
    // charged its whole allowance, score none, reason "its branch moved to …, which is not a
    // result of this episode": the score 9 the worker recorded is lost. Should: say the result
    // is from a newer worker (update the app), not blame the branch.
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    const [first, second] = state.rounds[0]?.episodes ?? [];
    pushEdited(h, state, first as Episode, 9, (m) => m.replace('Forkflush-Exit: finished', 'Forkflush-Exit: stalled'));
    h.pushResult(state, second as Episode, 1);
    for (const e of [first, second] as Episode[]) await h.jobCompleted(RUN, e.id);
    const r0 = h.state(RUN).rounds[0]?.episodes[0]?.result;
    const said = `${issueText(h)}\n${r0?.reason ?? ''}`;
    expect(r0?.reason ?? '').not.toMatch(/which is not a result of this episode/);
    expect(said).toMatch(/newer|another release|update/i);
  }, 120_000);
});
