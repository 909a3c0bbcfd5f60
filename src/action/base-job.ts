// The job that grades a GitHub run's initial workspace, once per run, beside the opening round's
// episodes (its matrix value is `base`): the base commit is checked out and graded as the local
// runner grades it, in the sandbox, after setup, with no agent. The grade is recorded as a commit
// on the base's tree (its parent the base, the grade in its trailers) on refs/forkflush/<run>/base,
// where the app reads it: the result pull request can then say how much the run gained.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { UserError } from '../core/errors.js';
import { commitMessage, resultFromCommit } from '../core/journal.js';
import { BASE_JOB, baseGradeRef } from '../core/names.js';
import type { EpisodeResult } from '../core/state.js';
import { formatNumber } from '../core/text.js';
import { gradeInitial, notDeterministic } from '../local/initial-grade.js';
import { checkoutInto, commitTree } from '../worker/cleanroom.js';
import type { JobOptions } from './episode-job.js';
import type { RecordsRepo } from './records.js';
import type { Remote } from './remote.js';
import { openRunRecords } from './run-records.js';
import { prepareIsolation } from './sandbox-setup.js';
import type { ActionSettings } from './settings.js';

export interface BaseOutcome {
  run: string;
  /** ran: this job graded it; already-recorded: a grade was there (a doubled job, a re-run). */
  attempt: 'ran' | 'already-recorded';
  score: number | null;
  reason?: string;
  commit: string;
}

export async function runBaseJob(s: ActionSettings, o: JobOptions): Promise<BaseOutcome> {
  const { places, records, remote, read } = await openRunRecords(s, o.log);
  // Nothing to push a grade beside: the episodes of the round say why the record cannot be read.
  if ('unreadable' in read) throw new Error(read.unreadable);
  const { state, facts } = read;
  if (facts.baseGrade !== 'asked') throw new Error(`run ${s.run} does not ask for its initial workspace to be graded`);
  const dispatched = facts.dispatched['0']?.runId;
  if (dispatched !== undefined && s.workflowRunId !== null && dispatched !== s.workflowRunId) {
    throw new Error(
      `the opening round of run ${state.id} runs in workflow run ${dispatched}, not in this one (${s.workflowRunId}): nothing to grade`,
    );
  }
  const ref = baseGradeRef(s.run);
  const base = state.base.commit;
  const known = await recorded(records, remote, s.run, ref, base);
  if (known) {
    o.log(`the initial workspace was graded already (${known.commit.slice(0, 10)}): not grading it again`);
    return { run: s.run, attempt: 'already-recorded', ...grade(known) };
  }
  const isolation = await prepareIsolation(state.config.sandbox.mode, o.log);
  o.log(`sandbox: ${isolation.label}`);
  const scratch = join(places.scratch, 'base');
  await mkdir(scratch, { recursive: true });
  await remote.fetchCommit(base);
  const checkout = { own: records.own, index: join(places.scratch, 'checkout.index') };
  await checkoutInto(checkout.own, base, s.workspace, checkout.index);
  o.log(`grading the initial workspace ${base.slice(0, 10)} in ${s.workspace}`);
  const started = Date.now();
  let score: number | null = null;
  let reason: string | undefined;
  let graderSeconds = 0;
  try {
    const g = await gradeInitial(
      state.config,
      s.workspace,
      { objects: [], private: [s.privateDir] },
      isolation,
      scratch,
      process.env,
      checkout,
    );
    score = g.score;
    if (g.reason) reason = g.reason;
    const noisy = notDeterministic(g);
    if (noisy) o.log(`warning: ${noisy}`);
    graderSeconds = g.seconds;
  } catch (e) {
    // Setup that fails here fails every episode of the opening round as well: they say so too.
    if (!(e instanceof UserError)) throw e;
    reason = e.message;
  }
  const result: Omit<EpisodeResult, 'commit'> = {
    score,
    ...(reason ? { reason } : {}),
    spent: 0,
    exit: 'finished',
    protectedChanged: [],
    agentSeconds: 0,
    graderSeconds,
    wallSeconds: (Date.now() - started) / 1000,
    sandbox: isolation.label,
  };
  const message = commitMessage(s.run, state.config.budget.unit, { id: BASE_JOB }, result);
  const tree = await records.git.out(['rev-parse', `${base}^{tree}`]);
  const commit = await commitTree(records.own, tree, base, message);
  const pushed = await remote.pushAtomic([`${commit}:${ref}`]);
  if (pushed.some((p) => p.flag === '!')) {
    const other = await recorded(records, remote, s.run, ref, base);
    if (!other) throw new Error(`the grade was not pushed to ${ref}: ${pushed.map((p) => p.summary).join('; ')}`);
    o.log(`another job graded the initial workspace first (${other.commit.slice(0, 10)})`);
    return { run: s.run, attempt: 'already-recorded', ...grade(other) };
  }
  o.log(
    `initial workspace: ${score === null ? `no score (${reason ?? 'no reason given'})` : `score ${formatNumber(score, 6)}`}; pushed ${ref}`,
  );
  return { run: s.run, attempt: 'ran', score, ...(reason ? { reason } : {}), commit };
}

/** The grade a commit on the base ref records, or null when there is none. */
async function recorded(
  records: RecordsRepo,
  remote: Remote,
  run: string,
  ref: string,
  base: string,
): Promise<EpisodeResult | null> {
  if (!(await remote.listRefs([ref])).has(ref)) return null;
  await remote.fetch([ref]);
  const head = await records.git.revParse(ref);
  if (!head) return null;
  const [parents = '', ...rest] = (await records.git.out(['log', '-1', '--format=%P%n%B', head])).split('\n');
  const read = resultFromCommit(
    run,
    { id: BASE_JOB, base },
    { sha: head, message: rest.join('\n'), parents: parents.split(' ') },
  );
  return 'result' in read ? read.result : null;
}

function grade(r: EpisodeResult): Pick<BaseOutcome, 'score' | 'reason' | 'commit'> {
  return { score: r.score, ...(r.reason ? { reason: r.reason } : {}), commit: r.commit };
}
