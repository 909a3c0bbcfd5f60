// What an idea map is made of: the snapshots of each run (episode commits, as the paper samples
// each run's artifacts), and the triplet questions asked about them. Pure and seeded: the same runs
// give the same snapshots, the same points the same questions, and a question is held out of the
// fit or not by its own hash, so a judgment keeps its part in every map that reuses it.
import { outcomeOf } from '../report.js';
import { randomFrom } from '../rng.js';
import type { Episode, Round, RunState } from '../state.js';

/** One snapshot of a run: an episode's commit, with what it was in the run. */
export interface Snapshot {
  run: string;
  episode: string;
  commit: string;
  /** The commit the episode started from (in a fork round: the fork point). */
  base: string;
  score: number | null;
  round: number;
  phase: string;
  lineage: number;
  /** The lineage's workspace continued from it (a fork round's winner, a serial episode). */
  path: boolean;
  /** A fork round started from it. */
  forkPoint: boolean;
  /** In a fork round: the branch its round selected, or one it rejected. */
  branch: 'selected' | 'rejected' | null;
  /** The run's best workspace. */
  final: boolean;
}

/**
 * A run's snapshots: at most `limit` of its episodes' commits (the initial workspace is not one),
 * always with every fork point, every branch's end (each fork-round episode and each lineage's
 * last one) and the final best, even past the limit; the rest are spread evenly over the run.
 */
export function runSnapshots(state: RunState, limit: number): Snapshot[] {
  const all = candidates(state);
  const must = all.filter((s) => s.forkPoint || s.branch !== null || s.final || lastOfLineage(all, s));
  const rest = all.filter((s) => !must.includes(s));
  const room = Math.max(0, limit - must.length);
  const picked = new Set<Snapshot>(must);
  if (room >= rest.length) for (const s of rest) picked.add(s);
  else for (let i = 0; i < room; i++) picked.add(rest[Math.floor(((i + 0.5) * rest.length) / room)] as Snapshot);
  return all.filter((s) => picked.has(s));
}

/** Every episode with a workspace of its own (a commit that is not the run's base), in run order. */
function candidates(state: RunState): Snapshot[] {
  const forkBases = new Set(
    state.rounds.filter((r) => r.kind === 'fork').flatMap((r) => r.episodes.map((e) => e.base)),
  );
  const seen = new Set<string>();
  const out: Snapshot[] = [];
  for (const round of state.rounds) {
    for (const e of round.episodes) {
      const commit = e.result?.commit;
      if (!commit || commit === state.base.commit || seen.has(commit)) continue;
      seen.add(commit);
      out.push(snapshotOf(state, round, e, commit, forkBases));
    }
  }
  return out;
}

function snapshotOf(state: RunState, round: Round, e: Episode, commit: string, forkBases: Set<string>): Snapshot {
  const outcome = outcomeOf(round, e);
  const fork = round.kind === 'fork' && round.decision !== undefined;
  return {
    run: state.id,
    episode: e.id,
    commit,
    base: e.base,
    score: e.result?.score ?? null,
    round: round.index,
    phase: round.phase,
    lineage: e.lineage,
    path: outcome === 'adopted' || outcome === 'kept',
    forkPoint: forkBases.has(commit),
    branch: fork ? (round.decision?.winner === e.id ? 'selected' : 'rejected') : null,
    final: state.best?.commit === commit,
  };
}

function lastOfLineage(all: Snapshot[], s: Snapshot): boolean {
  return all.filter((x) => x.lineage === s.lineage && x.path).at(-1) === s;
}

/** A triplet question by point id: is `anchor` closer to `a` or to `b`? */
export interface TripletQuestion {
  anchor: string;
  a: string;
  b: string;
}

/** The same question whichever of a and b is shown first. */
export function tripletKey(t: TripletQuestion): string {
  return t.a < t.b ? `${t.anchor} ${t.a} ${t.b}` : `${t.anchor} ${t.b} ${t.a}`;
}

/** Whether a question is held out of the fit: by its own hash, so in every map the same. */
export function heldOut(t: TripletQuestion, share: number): boolean {
  return fnv1a(tripletKey(t)) / 2 ** 32 < share;
}

/**
 * The new questions a map asks: `count` in all, less those already answered (`answered`, keys of
 * tripletKey). Drawn by the seed over the points sorted by id, so the same points give the same
 * questions: an interrupted map asks the rest of the same ones, and a bigger one (more runs) reuses
 * every answer among the points it shares. At most every distinct question there is.
 */
export function newQuestions(
  ids: readonly string[],
  count: number,
  answered: ReadonlySet<string>,
  seed: number,
): TripletQuestion[] {
  const points = [...new Set(ids)].sort();
  const n = points.length;
  const possible = (n * (n - 1) * (n - 2)) / 2;
  const want = Math.min(count, possible);
  const have = new Set(answered);
  const inMap = new Set(points);
  let already = 0;
  for (const k of answered) if (k.split(' ').every((id) => inMap.has(id))) already++;
  const out: TripletQuestion[] = [];
  const random = randomFrom(seed);
  const pick = () => points[Math.floor(random() * n)] as string;
  // Past `possible` draws of nothing new, the rest are found by listing (a small, nearly full map).
  let misses = 0;
  while (already + out.length < want && misses < 20 * possible + 1000) {
    const t = { anchor: pick(), a: pick(), b: pick() };
    const key = tripletKey(t);
    if (t.anchor === t.a || t.anchor === t.b || t.a === t.b || have.has(key)) {
      misses++;
      continue;
    }
    have.add(key);
    out.push(t);
  }
  return out;
}

/** FNV-1a, 32 bits, over the string's UTF-16 units. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h >>> 0;
}
