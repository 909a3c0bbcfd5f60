// One seeded chaos run of the GitHub app: label -> rounds -> final pull request, with webhooks
// duplicated, lost, shuffled and late, API calls failing, jobs failing, hanging or reporting twice,
// the app restarting and the clock jumping; then repair (status commands and nightly ticks) until
// the run finishes, and the invariants checked. Everything random comes from the seed.
import { nightlyTick } from '../../src/app/app.js';
import { spent } from '../../src/core/budget.js';
import { finalPrBody, finalPrTitle } from '../../src/core/github-status.js';
import { commentMarker } from '../../src/core/github-text.js';
import { BASE_JOB, issueRunId, stateRef } from '../../src/core/names.js';
import { extraRounds, extraSpent } from '../../src/core/schedule.js';
import { type Best, isBetter, type RunState } from '../../src/core/state.js';
import { haltsOnGitHub, retryStopped, runStop } from '../../src/core/stop.js';
import { resultCommit, viewOf } from '../../src/github/record.js';
import { RESET } from '../github/fake-github.js';
import { CONFIG, Harness, TEST_TOKEN } from '../github/harness.js';
import { prng } from './prng.js';

const ISSUE = 7;
const RUN = `issue-${ISSUE}`;
/** Steps of chaos, then steps without faults before a run that has not finished counts as stuck. */
const CHAOS_STEPS = 8;
const REPAIR_TICKS = 50;
/** Nights after the plan, each a nightly tick and its round's jobs. */
const NIGHTS = 3;
/** schedule.budget for k branches of at most 0.15 x 60 = 9 each: two rounds and half of one. */
const NIGHTLY_BUDGET: Record<number, number> = { 2: 45, 3: 67 };

export interface Outcome {
  seed: number;
  violations: string[];
  faults: number;
  /** What happened, step by step (printed with FORKFLUSH_CHAOS_DEBUG=1). */
  steps: string[];
  /** Requests the app made. */
  requests: number;
}

type Fate = 'ok' | 'fail' | 'hang' | 'twice';
type Event = { kind: 'job'; episode: string; conclusion: string } | { kind: 'run'; round: number };

/** The run's state as stored now, or null before it has a record. */
function stateOf(h: Harness): RunState | null {
  const sha = h.gh.refs.get(stateRef(RUN));
  const text = sha ? h.gh.commits.get(sha)?.files['state.json'] : undefined;
  return text === undefined ? null : (JSON.parse(text) as RunState);
}

export async function chaosRun(seed: number): Promise<Outcome> {
  const rng = prng(seed);
  const k = rng.pick([2, 2, 3]);
  // A short budget: a fork round, serial episodes, a fork round and a last episode or two; or, one
  // run in five, best-of-n: k lineages side by side, two rounds of k episodes.
  const bestOfN = rng.chance(0.2);
  // The rounds after the plan have a budget of their own: what two and a half rounds of k
  // branches cost (the last opens with what is left; requested forks take their share first).
  const config = `${CONFIG.replace('total: 100', 'total: 60')
    .replace('episode: 10', 'episode: 15')
    .replace('branches: 2', `branches: ${k}`)
    .replace(
      'fork:',
      bestOfN ? 'strategy: best-of-n\nfork:' : 'fork:',
    )}schedule: { nightly: true, budget: ${NIGHTLY_BUDGET[k]}, rounds: 4 }\n`;
  const h = new Harness({ '.github/autoresearch.yml': config, 'grade.mjs': 'x' }, { repo: `octo-repo-${seed}` });
  await h.load();
  const violations: string[] = [];
  const steps: string[] = [];
  const step = (s: string) => steps.push(s);

  // Every ref update, in order, with the value it replaced (the fake's own writes and the worker's).
  const history: { ref: string; from: string | undefined; to: string }[] = [];
  const set = h.gh.refs.set.bind(h.gh.refs);
  h.gh.refs.set = (ref: string, sha: string) => {
    history.push({ ref, from: h.gh.refs.get(ref), to: sha });
    // 10. No branch a `push` workflow would run on, but the result's once the run is finished.
    if (ref.startsWith('refs/heads/') && ref !== 'refs/heads/main') {
      const now = stateOf(h);
      if (ref !== `refs/heads/forkflush/${RUN}/result` || now?.status !== 'finished')
        violations.push(`10: ${ref} was written while the run was ${now?.status ?? 'not started'}`);
    }
    return set(ref, sha);
  };

  // Faults: a delivery may be armed to fail its n-th request with a status that fits the method,
  // or a connection reset, or to crash there: the app process dies, so that request and every later
  // one of the handler never reach GitHub (they fail), and the app restarts. A server error or a
  // reset may be an outage: the requests right after it fail too (so the retries do).
  const CRASH = -1;
  let chaos = true;
  let countdown = 0;
  let armedStatus = 0;
  let outage = 0;
  let burst = 0;
  let dead = false;
  // Half the server errors, resets and crashes come after GitHub did what the request asked.
  let applied = false;
  h.gh.inject = (method) => {
    if (dead) return 503;
    if (burst > 0) {
      burst--;
      return armedStatus;
    }
    if (countdown <= 0 || --countdown > 0) return null;
    if (armedStatus === CRASH) {
      dead = true;
      return applied ? { status: 503, applied: true } : 503;
    }
    if (armedStatus >= 500 || armedStatus === RESET) {
      burst = outage;
      return applied ? { status: armedStatus, applied: true } : armedStatus;
    }
    if (method === 'GET') return armedStatus === 409 || armedStatus === 422 ? 404 : armedStatus;
    return armedStatus === 404 && method !== 'PATCH' ? 422 : armedStatus;
  };
  const arm = () => {
    countdown = 0;
    if (!chaos || !rng.chance(0.2)) return;
    countdown = rng.int(1, 14);
    armedStatus = rng.pick([500, 502, RESET, RESET, 403, 429, 404, 409, 422, CRASH, CRASH]);
    applied = rng.chance(0.5);
    outage = rng.pick([0, 0, 3]);
  };

  // What the worker pushed: commit -> score and spend, to check the ledger and the best ref against.
  const pushed = new Map<string, { commit: string; score: number; spent: number }>();
  const fates = new Map<string, Fate>();
  let bestSeen: Best | null = null;
  const direction = () => stateOf(h)?.config.grader.direction ?? 'maximize';

  /** After every step: the best score never goes down, and its workspace is reachable from a ref. */
  const watch = (what: string) => {
    const s = stateOf(h);
    if (!s) return;
    const prev = bestSeen;
    if (prev && (!s.best || isBetter(prev.score, s.best.score, direction()))) {
      violations.push(`5: best went from ${prev.score} (${prev.episode}) to ${s.best?.score ?? 'none'} after ${what}`);
    }
    bestSeen = s.best;
    const best = s.best?.commit;
    if (best && ![...h.gh.refs.values()].some((sha) => sha === best || h.gh.isAncestor(best, sha))) {
      violations.push(`4: after ${what}, the best workspace ${best.slice(0, 7)} (${s.best?.episode}) is on no ref`);
    }
  };

  const deliver = async (what: string, send: () => Promise<void>) => {
    arm();
    const before = h.gh.injected.length;
    const slow = h.stillProcessing.length;
    const fault = (armedStatus === CRASH ? 'the app dies at request' : 'fails') + (applied ? ' (done)' : '');
    const how =
      armedStatus === CRASH
        ? ''
        : ` ${armedStatus === RESET ? 'reset' : armedStatus}${outage > 0 && (armedStatus >= 500 || armedStatus === RESET) ? ` and ${outage} more` : ''}`;
    step(what + (countdown > 0 ? ` [${fault} ${countdown}${how}]` : ''));
    try {
      await send();
    } catch (e) {
      // GitHub does not retry a failed delivery: the error is dropped, as a real server's 500 would be.
      if (h.gh.injected.length === before) {
        violations.push(`handler error without an injected fault, on ${what}: ${(e as Error).message}`);
      }
    }
    countdown = 0;
    burst = 0;
    if (h.stillProcessing.length > slow) step('  answered 202 "still processing" (the box waited for the handler)');
    for (const f of h.gh.injected.slice(before))
      step(
        `  failed: ${f.method} ${f.path.replace(/^\/repos\/[^/]+\/[^/]+/, '')} ${f.status === RESET ? 'reset' : f.status}`,
      );
    if (dead) {
      dead = false;
      step('crash: restart');
      await h.restart();
    }
    watch(what);
  };

  const between = async () => {
    if (!chaos) return;
    if (rng.chance(0.06)) {
      step('restart');
      await h.restart();
    }
    if (rng.chance(0.06)) {
      step('clock +3h');
      h.clock = new Date(h.clock.getTime() + 3 * 60 * 60_000);
    }
  };

  const sendEvent = (ev: Event) =>
    ev.kind === 'job'
      ? deliver(`job ${ev.episode} ${ev.conclusion}`, () => h.jobCompleted(RUN, ev.episode, ev.conclusion))
      : deliver(`workflow run ${ev.round} completed`, () => h.runCompleted(RUN, ev.round));

  /** Plays the open round's dispatched jobs that have not run yet; returns their webhook events. */
  const playJobs = (state: RunState, faulty: boolean): Event[] => {
    const open = state.rounds.find((r) => !r.decision);
    if (!open) return [];
    const dispatched = new Set(h.gh.dispatches.flatMap((d) => JSON.parse(d.inputs.episodes ?? '[]') as string[]));
    const events: Event[] = [];
    for (const e of open.episodes) {
      if (e.result || fates.has(e.id) || !dispatched.has(e.id)) continue;
      const fate: Fate = faulty ? rng.pick(['ok', 'ok', 'ok', 'ok', 'ok', 'fail', 'hang', 'twice'] as const) : 'ok';
      fates.set(e.id, fate);
      if (fate === 'fail') {
        events.push({ kind: 'job', episode: e.id, conclusion: 'failure' });
        continue;
      }
      if (fate === 'hang') continue;
      const score = rng.int(0, 100);
      const cost = Math.max(1, Math.round(e.allowance * (0.5 + rng.next() / 2)));
      if (h.pushResult(state, e, score, cost)) {
        const head = h.gh.refs.get(h.refs(RUN).episode(e.round, e.branch)) as string;
        pushed.set(e.id, { commit: head, score, spent: cost });
      }
      events.push({ kind: 'job', episode: e.id, conclusion: 'success' });
      if (fate === 'twice') events.push({ kind: 'job', episode: e.id, conclusion: 'success' });
    }
    // The opening round's job that grades the initial workspace: it grades, fails, or hangs.
    if (open.index === 0 && dispatched.has(BASE_JOB) && !fates.has(BASE_JOB)) {
      const fate: Fate = faulty ? rng.pick(['ok', 'ok', 'fail', 'hang'] as const) : 'ok';
      fates.set(BASE_JOB, fate);
      if (fate === 'ok') {
        const score = rng.int(0, 100);
        if (h.pushBase(state, score)) pushed.set(BASE_JOB, { commit: state.base.commit, score, spent: 0 });
      }
      if (fate !== 'hang')
        events.push({ kind: 'job', episode: BASE_JOB, conclusion: fate === 'ok' ? 'success' : 'failure' });
    }
    if (faulty && rng.chance(0.25)) events.push({ kind: 'run', round: open.index });
    return events;
  };

  let finished = false;
  /** The open round at each resume: a resume dispatches that round's pending episodes again. */
  const resumed: number[] = [];
  try {
    await deliver('label', () => h.label(ISSUE));
    let late: Event[] = [];
    // Each step plays the open round's jobs and delivers their events: in the chaos steps mangled
    // (lost, duplicated, shuffled, held back until the next round has begun), then plainly. A step
    // with nothing to deliver is a repair: `/autoresearch status` or the nightly tick, an hour later.
    for (let i = 0; i < CHAOS_STEPS + REPAIR_TICKS; i++) {
      chaos = i < CHAOS_STEPS;
      const state = stateOf(h);
      if (!state) {
        // The label's handler failed before the run had a record: the user labels the issue again.
        await deliver('label again', () => h.label(ISSUE));
        continue;
      }
      const files = h.runFiles(RUN);
      // Finished: the final pull request is open and no work is left claimed (a handler that died
      // holding a claim leaves its work to the next trigger after the claim goes stale).
      if (state.status === 'finished' && files && files.finalPr !== null && Object.keys(files.claims).length === 0) {
        finished = true;
        break;
      }
      // Ended by a stop no resume can help: the maintainer starts a new run (check 1 reads the issue).
      if (!chaos && files && endedByStop(state, files) && Object.keys(files.claims).length === 0) break;
      // A stopped run is resumed by its maintainer, at once or a step later (always once the chaos is
      // over); so is one a stop halted that a resume can help (failed jobs in a row: the issue says so).
      const halted = files && haltsOnGitHub(runStop(state), files.baseGrade === 'done') && retryStopped(state);
      if ((files?.stopped || halted) && (!chaos || rng.chance(0.5))) {
        await deliver('/autoresearch resume', () => h.comment(ISSUE, '/autoresearch resume'));
        const open = state.rounds.find((r) => !r.decision);
        if (!h.runFiles(RUN)?.stopped && open) {
          resumed.push(open.index);
          // Its pending episodes are dispatched again: new jobs, each with a fate of its own.
          for (const e of open.episodes)
            if (!stateOf(h)?.rounds[open.index]?.episodes[e.branch]?.result) fates.delete(e.id);
        }
      }
      let events: Event[] = [];
      for (const ev of playJobs(state, chaos)) {
        if (chaos && rng.chance(0.15)) continue; // lost
        events.push(ev);
        if (chaos && rng.chance(0.2)) events.push(ev); // duplicated
      }
      if (chaos) rng.shuffle(events);
      const held = chaos ? events.filter(() => rng.chance(0.15)) : [];
      events = events.filter((ev) => !held.includes(ev));
      const [first, ...rest] = events;
      if (first) await sendEvent(first);
      for (const ev of late) await sendEvent(ev); // the last round's late events, after this one began
      late = held;
      for (const ev of rest) {
        await between();
        await sendEvent(ev);
      }
      // The maintainer steers: a fork round now, or a stop (resumed later).
      if (chaos && rng.chance(0.08)) await deliver('/autoresearch fork', () => h.comment(ISSUE, '/autoresearch fork'));
      if (chaos && rng.chance(0.06)) await deliver('/autoresearch stop', () => h.comment(ISSUE, '/autoresearch stop'));
      if (events.length === 0) {
        h.clock = new Date(h.clock.getTime() + 60 * 60_000);
        if (i % 2 === 0) await deliver('/autoresearch status', () => h.comment(ISSUE, '/autoresearch status'));
        else await deliver('nightly tick', async () => void (await nightlyTick(h.api(), h.clock)));
      }
    }
    chaos = false;
    if (finished) await nights(h, rng, violations, deliver, playJobs);
    check(h, violations, history, pushed, finished, resumed);
  } catch (e) {
    violations.push(`the chaos driver failed: ${(e as Error).stack ?? e}`);
  } finally {
    try {
      h.gh.assertNoViolations();
    } catch (e) {
      violations.push(`OpenAPI: ${(e as Error).message}`);
    }
    await h.close();
  }
  // A crash counts once (countFaults), not once per request its dead handler did not make (the 503s).
  const failed = h.gh.injected.filter((f) => f.status !== 503).length;
  return { seed, violations, faults: failed + countFaults(steps), steps, requests: h.gh.log.length };
}

/**
 * After the plan: nights, each the nightly tick and its round's jobs (no faults), with the issue
 * closed before one night in four. Checks 11: the rounds after the plan never spend more than
 * schedule.budget; 12: once the issue is closed, no round opens; 13: the result pull request's
 * title and body say what the run's state says, and its branch is at the lineage's head.
 */
async function nights(
  h: Harness,
  rng: ReturnType<typeof prng>,
  violations: string[],
  deliver: (what: string, send: () => Promise<void>) => Promise<void>,
  playJobs: (state: RunState, faulty: boolean) => Event[],
): Promise<void> {
  let closedAt: number | null = null;
  for (let night = 0; night < NIGHTS; night++) {
    if (closedAt === null && rng.chance(0.25)) {
      closedAt = stateOf(h)?.rounds.length ?? 0;
      h.gh.issues.set(ISSUE, { state: 'closed' });
      await deliver('the issue is closed', () =>
        h.send('issues', 'closed', (p) => {
          p.issue.number = ISSUE;
          p.sender.login = 'maintainer';
          p.sender.type = 'User';
        }),
      );
    }
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await deliver('nightly tick', async () => void (await nightlyTick(h.api(), h.clock)));
    // 14. While a round after the plan runs, the run's check on the result says so.
    const running = stateOf(h);
    const check = h.gh.checkRuns.filter((c) => c.name === 'forkflush').at(-1);
    if (running?.status === 'running' && check?.status !== 'in_progress')
      violations.push(`14: a round after the plan runs, and the run's check is ${check?.status ?? 'missing'}`);
    for (let guard = 0; guard < 10; guard++) {
      const state = stateOf(h);
      if (!state || state.status === 'finished') break;
      const events = playJobs(state, false);
      if (events.length === 0) {
        h.clock = new Date(h.clock.getTime() + 60 * 60_000);
        await deliver('nightly tick', async () => void (await nightlyTick(h.api(), h.clock)));
      }
      for (const ev of events)
        await deliver(`job ${ev.kind === 'job' ? ev.episode : ev.round}`, () =>
          ev.kind === 'job' ? h.jobCompleted(RUN, ev.episode, ev.conclusion) : h.runCompleted(RUN, ev.round),
        );
    }
  }
  const state = stateOf(h);
  const files = h.runFiles(RUN);
  if (!state || !files) return;
  const budget = extraRounds(state.config).budget;
  if (extraSpent(state) > budget + 1e-9)
    violations.push(`11: the rounds after the plan spent ${extraSpent(state)}, schedule.budget is ${budget}`);
  if (closedAt !== null && state.rounds.length > closedAt)
    violations.push(`12: ${state.rounds.length - closedAt} round(s) opened after the issue was closed`);
  const pr = h.gh.pulls.find((p) => p.number === files.finalPr);
  if (state.status === 'finished' && pr) {
    if (pr.title !== finalPrTitle(state)) violations.push(`13: the result's title is "${pr.title}", not current`);
    if (pr.body !== finalPrBody(state, ISSUE, viewOf(state, files as never)))
      violations.push('13: the result pull request body is not current');
    const head = h.gh.branch(pr.head);
    if (head !== resultCommit(state))
      violations.push(
        `13: the result branch is at ${head?.slice(0, 7)}, the result at ${resultCommit(state).slice(0, 7)}`,
      );
  }
}

/** Whether a stop halted the run for good: one a resume cannot help (core/stop.ts cause). */
function endedByStop(state: RunState, files: NonNullable<ReturnType<Harness['runFiles']>>): boolean {
  return !files.stopped && haltsOnGitHub(runStop(state), files.baseGrade === 'done') && !retryStopped(state);
}

/** Faults other than failed requests: restarts, crashes, clock jumps, failed jobs, stop and fork commands. */
function countFaults(steps: string[]): number {
  return steps.filter(
    (s) =>
      s === 'restart' ||
      s === 'crash: restart' ||
      s === 'clock +3h' ||
      / failure$/.test(s) ||
      /^\/autoresearch (stop|fork)/.test(s),
  ).length;
}

function check(
  h: Harness,
  violations: string[],
  history: { ref: string; from: string | undefined; to: string }[],
  pushed: Map<string, { commit: string; score: number; spent: number }>,
  finished: boolean,
  resumed: number[],
) {
  const state = stateOf(h);
  const files = h.runFiles(RUN);
  // 1. The run finishes, or a stop no resume can help ended it (its jobs kept giving no result until
  // running them again would pass the budget), and the issue says so.
  const ended = state && files && !finished && endedByStop(state, files);
  const status = h.gh.comments.find((c) => c.issue === ISSUE && c.body.startsWith(commentMarker(RUN)));
  if (ended && !status?.body.includes('a resume cannot run'))
    violations.push('1: a stop ended the run, and the issue does not say that a resume cannot help');
  if (!state || !files || (!finished && !ended)) {
    violations.push(
      `1: not finished after ${REPAIR_TICKS} repair ticks (status ${state?.status ?? 'no record'}, final PR ${files?.finalPr ?? 'none'})`,
    );
  }
  if (!state) return;
  const dir = state.config.grader.direction;

  // 2. Every episode dispatched, each round once, and again only after a resume while it was open
  // (stopping cancelled its jobs).
  const perRound = new Map<number, number>();
  for (const d of h.gh.dispatches)
    perRound.set(Number(d.inputs.round), (perRound.get(Number(d.inputs.round)) ?? 0) + 1);
  for (const [round, n] of perRound) {
    const allowed = 1 + resumed.filter((r) => r === round).length;
    if (n > allowed)
      violations.push(`2: round ${round} dispatched ${n} times (${allowed - 1} resumes while it was open)`);
  }
  const dispatched = new Set(h.gh.dispatches.flatMap((d) => JSON.parse(d.inputs.episodes ?? '[]') as string[]));
  for (const e of state.rounds.flatMap((r) => r.episodes)) {
    if (!dispatched.has(e.id)) violations.push(`2: ${e.id} was never dispatched`);
  }

  // 3. Each lineage only fast-forwards, to its adopted commits, in the rounds' order.
  for (const l of state.lineages) {
    const lineage = h.refs(RUN).lineage(l.index, state.lineages.length);
    const moves = history.filter((u) => u.ref === lineage && u.from !== undefined && u.from !== u.to);
    for (const m of moves) {
      if (!h.gh.isAncestor(m.from as string, m.to))
        violations.push(`3: ${lineage} moved sideways to ${m.to.slice(0, 7)}`);
    }
    const expected = state.rounds
      .flatMap((r) => r.episodes.filter((e) => e.lineage === l.index && r.decision?.adopted.includes(e.id)))
      .flatMap((e) => (e.result && e.result.commit !== e.base ? [e.result.commit] : []));
    // Each move goes to an adopted commit, in the rounds' order, none twice. One may be skipped: a
    // later round settled first (its handler's claim outlived a crash) carries the lineage past it.
    const actual = moves.map((m) => m.to);
    let at = 0;
    for (const sha of actual) {
      while (at < expected.length && expected[at] !== sha) at++;
      if (at === expected.length) {
        violations.push(
          `3: ${lineage} moved to [${actual.map((s) => s.slice(0, 7))}], the adopted commits are [${expected.map((s) => s.slice(0, 7))}]`,
        );
        break;
      }
      at++;
    }
    const head = h.gh.refs.get(lineage);
    if (finished && head !== l.head)
      violations.push(`3: ${lineage} is at ${head?.slice(0, 7)}, the state's leader at ${l.head.slice(0, 7)}`);
  }

  // 4. The best graded workspace is on the best branch; 5. which never moved to a worse score.
  const bestRef = h.refs(RUN).best;
  if (state.best && h.gh.refs.get(bestRef) !== state.best.commit) {
    violations.push(
      `4: ${bestRef} is at ${h.gh.refs.get(bestRef)?.slice(0, 7) ?? 'nothing'}, the best (${state.best.episode}, ${state.best.score}) at ${state.best.commit.slice(0, 7)}`,
    );
  }
  const scores = new Map([...pushed.values()].map((p) => [p.commit, p.score]));
  let bestScore: number | null = null;
  for (const u of history.filter((x) => x.ref === bestRef)) {
    const score = scores.get(u.to) ?? null;
    if (score === null) violations.push(`5: ${bestRef} moved to ${u.to.slice(0, 7)}, which has no score`);
    else if (bestScore !== null && isBetter(bestScore, score, dir))
      violations.push(`5: ${bestRef} moved from score ${bestScore} to ${score}`);
    else bestScore = score;
  }

  // 6. The ledger is what the episodes spent: what each job reported, an unreported one its allowance.
  let reported = 0;
  for (const e of state.rounds.flatMap((r) => r.episodes)) {
    if (!e.result) continue;
    const p = pushed.get(e.id);
    // A job whose result came too late (after the deadline or its workflow run's end) is charged its allowance.
    const landed = p !== undefined && e.result.commit === p.commit;
    if (!landed && e.result.commit !== e.base)
      violations.push(`6: ${e.id}'s result is ${e.result.commit.slice(0, 7)}, not a commit of its job`);
    const want = landed ? p.spent : e.allowance;
    if (e.result.spent !== want) violations.push(`6: ${e.id} is charged ${e.result.spent}, it spent ${want}`);
    if (landed && e.result.score !== p.score)
      violations.push(`6: ${e.id} has score ${e.result.score}, it pushed ${p.score}`);
    // An episode a resume ran again keeps what its stopped tries were charged.
    reported += want + (e.interruptedSpent ?? 0);
  }
  if (Math.abs(spent(state) - reported) > 1e-9)
    violations.push(`6: the ledger says ${spent(state)}, the episodes ${reported}`);

  // 15. The initial workspace is graded once, with the score its job pushed, or has none.
  const base = pushed.get(BASE_JOB);
  // (Given up by the opening round's deadline at the latest, unless the run was stopped before it.)
  if (files && !files.stopped && files.baseGrade !== 'done')
    violations.push(`15: the initial workspace's grade is still ${files.baseGrade}`);
  if (state.base.score !== null && state.base.score !== base?.score)
    violations.push(`15: the initial workspace has score ${state.base.score}, its job pushed ${base?.score ?? 'none'}`);
  if (
    h.gh.dispatches.filter((d) => JSON.parse(d.inputs.episodes ?? '[]').includes(BASE_JOB)).length >
    1 + resumed.filter((r) => r === 0).length
  )
    violations.push('15: the initial workspace was dispatched more than once');

  // 9. A finished run's issue says so: labelled done, no longer labelled to run.
  const labels = [...(h.gh.labels.get(ISSUE) ?? [])];
  if (finished && (!labels.includes('autoresearch: done') || labels.includes('autoresearch'))) {
    violations.push(`9: the finished run's issue is labelled [${labels.join(', ')}]`);
  }

  // 8. Nothing shown twice: once the run is finished every check run is completed (a stop and a
  // resume, or a round after the end, make new ones; none is left running), one pull request per
  // branch, one status comment.
  if (finished) {
    for (const c of h.gh.checkRuns.filter((x) => x.status !== 'completed'))
      violations.push(`8: the check run "${c.name}" on ${c.head_sha.slice(0, 7)} is still ${c.status}`);
  }
  // 14. The run's check follows the result: the newest is on the result's commit (or where the run
  // started, if nothing beat it), completed: success when an episode beat the initial workspace
  // (neutral when its job gave no grade: the gain is unknown).
  const runChecks = h.gh.checkRuns.filter((c) => c.name === 'forkflush');
  const newest = runChecks.at(-1);
  if (finished && state.status === 'finished' && !files?.stopped) {
    const home = files?.finalPr ? (h.gh.branch(`forkflush/${RUN}/result`) ?? '') : state.base.commit;
    const want =
      state.best === null ? 'failure' : state.best.episode === 'base' || files?.baseUngraded ? 'neutral' : 'success';
    if (!newest || newest.head_sha !== home || newest.conclusion !== want)
      violations.push(
        `14: the run's newest check is ${newest ? `${newest.status} ${newest.conclusion} on ${newest.head_sha.slice(0, 7)}` : 'missing'}, the result ${want} on ${home.slice(0, 7)}`,
      );
  }
  const pulls = new Map<string, number>();
  for (const p of h.gh.pulls) pulls.set(p.head, (pulls.get(p.head) ?? 0) + 1);
  for (const [head, n] of pulls) if (n > 1) violations.push(`8: ${n} pull requests from ${head}`);
  const statusComments = h.gh.comments.filter((c) => c.body.includes(commentMarker(issueRunId(ISSUE)))).length;
  if (statusComments > 1) violations.push(`8: ${statusComments} status comments on issue #${ISSUE}`);

  // 7. No secret in anything the app wrote.
  const written = JSON.stringify([
    h.gh.comments,
    h.gh.checkRuns,
    h.gh.pulls,
    [...h.gh.commits.values()],
    h.gh.dispatches,
  ]);
  const secrets = [
    TEST_TOKEN,
    ...h.box.auth.issued(),
    h.box.webhookSecret,
    h.box.auth.privateKey.split('\n')[1] as string,
  ];
  for (const secret of secrets) {
    if (written.includes(secret))
      violations.push(`7: a secret (${secret.slice(0, 6)}...) appears in what the app wrote`);
  }
}
