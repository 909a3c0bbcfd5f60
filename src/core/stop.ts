// When a run must stop because its setup cannot work, before it spends the rest of its budget:
// an agent that cannot start will not start in the next episode either; a round in which every
// branch's setup failed (setup: in the config) let no agent work, and the next round starts from
// the same commits; and an opening round in which no episode got a score usually means a grader
// that cannot score anything. (A workspace may legitimately start without a score: the paper
// starts from an empty one. Its first round gets a score, or something is wrong.)
import type { Action } from './reconcile.js';
import { reconcile } from './reconcile.js';
import { allEpisodes, type Episode, type Round, type RunState, setupFailed } from './state.js';
import { inertCodeSpan } from './text.js';

export interface SetupFailure {
  /** 2: the setup is wrong (fix the config); 1: the run produced nothing. */
  code: 1 | 2;
  message: string;
  /** The message for GitHub: what an agent, its setup or the grader wrote in it as inert code. */
  markdown: string;
}

/** Text that quotes what an agent wrote, `quote` applied to those parts. */
type Quoting = (quote: (agentText: string) => string) => string;

function failure(code: 1 | 2, text: Quoting): SetupFailure {
  return { code, message: text((t) => t), markdown: text(inertCodeSpan) };
}

export function setupFailure(state: RunState): SetupFailure | null {
  const notStarted = allEpisodes(state).find((e) => e.result?.agentNotStarted);
  if (notStarted?.result?.agentNotStarted) {
    const why = notStarted.result.agentNotStarted;
    return failure(
      2,
      (q) =>
        `the agent could not start in ${notStarted.id} (${q(why)}), so it will not ` +
        'start in any episode: check agent.command (and agent.kind), then start a new run',
    );
  }
  const unprepared = state.rounds.find((r) => r.episodes.length > 0 && r.episodes.every(setupFailed));
  if (unprepared) return everySetupFailed(unprepared, state.config.setup.commands.length > 0);
  const opening = state.rounds[0];
  // Branches whose setup failed did not try: the grader is judged by those that did.
  const tried = opening?.episodes.filter((e) => !setupFailed(e)) ?? [];
  if (
    state.base.score === null &&
    opening?.decision &&
    tried.length > 0 &&
    tried.every((e) => e.result && e.result.score === null)
  ) {
    const reasons = [...new Set(tried.map((e) => e.result?.reason ?? 'no reason given'))];
    return failure(
      1,
      (q) =>
        `neither the initial workspace nor any episode of the opening round got a score (${reasons.slice(0, 3).map(q).join('; ')}), so the run stopped ` +
        'rather than spend the rest of its budget: run the grader by hand on the workspace, fix it, then start a new run',
    );
  }
  return null;
}

/** What a resume does after a setup stop (retrySetup). */
const RESUME = 'resume the run: its round runs again';

/** Every branch of the round failed its setup: no agent worked, and the next round would start from the same commits. */
function everySetupFailed(round: Round, hasCommands: boolean): SetupFailure {
  const reasons = [...new Set(round.episodes.map((e) => e.result?.reason ?? 'no reason given'))];
  const bases = [...new Set(round.episodes.map((e) => e.base.slice(0, 10)))];
  const where = bases.length === 1 ? `commit ${bases[0]}` : `commits ${bases.join(', ')}`;
  return failure(
    2,
    (q) =>
      `setup failed in every branch of round ${round.index} (${round.phase}) on ${where} (${reasons.slice(0, 3).map(q).join('; ')}), ` +
      'so no agent could work and the run stopped: ' +
      (round.episodes.every((e) => e.result?.reason?.startsWith(WORKER_CANNOT_READ))
        ? `update the worker Action as the reasons say, then ${RESUME}`
        : hasCommands
          ? `run setup.commands by hand in a fresh checkout of ${bases.length === 1 ? 'that commit' : 'those commits'} and fix what fails: ` +
            `after a fix outside the repository (a registry, a secret, the runner), ${RESUME}; ` +
            'a fix to the config or to the files of the commit needs a new run'
          : `fix what the reasons say (the agent CLI install, or the worker), then ${RESUME}`),
  );
}

/**
 * Why the run must stop before its next step, `next` (what reconcile returns first): an agent
 * that cannot start, or a round whose every setup failed, always stops it; no score stops it only
 * while there is budget left to save (one with nothing left finishes as usual). Both shells ask
 * this before each step: the local runner (exit with the failure's code) and the GitHub sync
 * (`advance(state, (s, next) => stopBefore(s, next) !== null)`: nothing more is opened or decided).
 */
export function stopBefore(state: RunState, next: Action | undefined): SetupFailure | null {
  const failure = setupFailure(state);
  return failure && (failure.code === 2 || (next !== undefined && next.type !== 'finish')) ? failure : null;
}

/**
 * Whether a run (advanced as far as it goes) is stopped by its setup, and why: for the issue
 * comment and the sync. On GitHub, where the initial workspace is never graded (its score is
 * always null), only the stops with code 2 say something about the setup.
 */
export function runStop(state: RunState): SetupFailure | null {
  if (state.status === 'finished') return null;
  return stopBefore(state, reconcile(state)[0]);
}

/**
 * Why a worker could not read the run's record (`why`), said so that the fix is clear. A record
 * last saved by a newer forkflush than the worker (`writer` and `worker` are release versions,
 * `writer` null when the record does not say) is version skew: the worker Action is pinned to an
 * older release than the app runs. It is not read leniently, dropping what it does not know:
 * a key this worker ignored could be one that confines the agent.
 */
export function unreadableRunReason(why: string, worker: string, writer: string | null): string {
  if (writer !== null && RELEASE.test(writer) && compareVersions(writer, worker) > 0) {
    return (
      `${WORKER_CANNOT_READ}: it is forkflush ${worker}, older than the app (forkflush ${writer}) that wrote it ` +
      `(${why}); use the worker Action of the app's release (uses: …/forkflush@v${writer} in the worker workflow)`
    );
  }
  return `${WORKER_CANNOT_READ} (forkflush ${worker}): ${why}`;
}

/** How every reason of unreadableRunReason starts: a stop it caused gives that fix. */
const WORKER_CANNOT_READ = "this worker Action cannot read the run's record";

/** A release version as the record states it (anything else there is not trusted into a message). */
const RELEASE = /^v?\d{1,6}\.\d{1,6}\.\d{1,6}(?:-[0-9A-Za-z.-]{1,40})?$/;

/** Orders release versions (1.2.10 after 1.2.9); a pre-release (1.2.0-rc.1) comes before its release. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core = '', pre] = v.replace(/^v/, '').split(/-(.*)/s);
    return { parts: core.split('.').map((n) => Number.parseInt(n, 10) || 0), pre: pre ?? null };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < Math.max(x.parts.length, y.parts.length); i++) {
    const d = (x.parts[i] ?? 0) - (y.parts[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === null) return 1;
  if (y.pre === null) return -1;
  // Pre-release identifiers one by one, numbers as numbers (rc.9 before rc.10), as semver orders them.
  const xs = x.pre.split('.');
  const ys = y.pre.split('.');
  for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
    const [p, q] = [xs[i], ys[i]];
    if (p === undefined) return -1;
    if (q === undefined) return 1;
    if (p === q) continue;
    const numeric = /^\d+$/.test(p) && /^\d+$/.test(q);
    if (numeric) return Math.sign(Number(p) - Number(q));
    return p < q ? -1 : 1;
  }
  return 0;
}

/**
 * The run with the round its setup stopped opened again, for a resume once the cause is fixed
 * (a registry that was down, a worker Action pinned too old): the open round's setup results are
 * cleared, and its episodes run again from the same bases. They spent nothing and no agent ran,
 * so nothing is lost. The shells move the episodes' branches back to their bases. Null when no
 * round's setup stopped the run.
 */
export function retrySetup(state: RunState): { state: RunState; episodes: Episode[] } | null {
  if (state.status === 'finished') return null;
  const open = state.rounds.find((r) => !r.decision);
  if (!open || open.episodes.length === 0 || !open.episodes.every(setupFailed)) return null;
  const cleared = open.episodes.map(({ result: _, ...e }) => e);
  return {
    state: { ...state, rounds: state.rounds.map((r) => (r === open ? { ...r, episodes: cleared } : r)) },
    episodes: open.episodes,
  };
}
