// npm run bench:api: the GitHub API requests the app makes per fork round (K = 4) and per serial
// episode, against the fewest each needs (docs/architecture.md, "GitHub API calls"). It drives the
// real app with signed webhooks against the tests' GitHub in a box (test/github/box.ts, over HTTP
// on 127.0.0.1), plays the worker jobs' part as the tests do, and reads every request from the
// fake's log.
import type { Round, RunState } from '../src/core/state.js';
import { Harness } from '../test/github/harness.js';

const K = 4;
const ISSUE = 7;
const RUN = `issue-${ISSUE}`;
// The paper's schedule with K = 4 (fork.at and branch_budget are its defaults, the episode is
// 0.06 of the total): an opening fork round, serial episodes, two more fork rounds, a final phase.
// With a pull request per episode (`pull_requests: episodes`), the busiest mode: the floors below
// count one per result.
const CONFIG = `grader:
  command: node grade.mjs
  protected: [grade.mjs]
agent:
  command: node agent.mjs
budget:
  total: 400
  unit: tokens
  episode: 24
fork:
  branches: ${K}
  at: [0.33, 0.66]
  branch_budget: 0.06
pull_requests: episodes
`;

/**
 * Scores, maximized. Every round beats the last, so every stage moves the best branch; in a fork
 * round the second result to land wins (branches score 1, 4, 3, 2), so the best moves twice, as it
 * may when results land in any order.
 */
const score = (round: number, branch: number) => 10 * round + ((3 * branch) % 4) + 1;

/** What a round must do on GitHub; the floor is counted from it. */
interface Shape {
  episodes: number;
  adopted: number;
  /** Episodes not adopted: their pull requests are closed with a comment. */
  losers: number;
  movesBest: boolean;
  /** The last round also opens the final pull request and swaps the issue's labels. */
  last: boolean;
}

interface Endpoint {
  label: string;
  what: string;
  /** The fewest requests to this endpoint a round needs (docs/architecture.md, "GitHub API calls"). */
  floor: (s: Shape) => number;
}

// In the order a round uses them; the floor of a round is the sum of the floors.
const ENDPOINTS: Endpoint[] = [
  { label: 'POST git/refs', what: 'create a branch', floor: (s) => s.episodes },
  { label: 'GET (repository)', what: 'read the default branch (it may be renamed mid-run)', floor: () => 0 },
  { label: 'GET issues/{issue}', what: 'check the issue is there (a deleted one stops the run)', floor: () => 0 },
  { label: 'POST actions/workflows/{workflow}/dispatches', what: 'dispatch the round', floor: () => 1 },
  { label: 'GET git/ref/forkflush/{run}/state', what: "read the record: its ref's commit", floor: () => 1 },
  { label: 'GET contents/{state,run}.json', what: 'read the record: its files', floor: () => 1 },
  { label: 'GET git/matching-refs/heads/forkflush/{run}/round-{r}/', what: 'list the branch heads', floor: () => 0 },
  { label: 'GET git/commits/{sha}', what: 'read a result from its commit', floor: (s) => s.episodes },
  {
    label: 'GET git/trees/{sha}',
    what: "check a result's protected paths",
    floor: (s) => s.episodes,
  },
  { label: 'POST git/trees', what: 'write the record: tree', floor: () => 1 },
  { label: 'POST git/commits', what: 'write the record: commit', floor: () => 1 },
  { label: 'PATCH git/refs/forkflush/{run}/state', what: 'write the record: compare-and-swap', floor: () => 1 },
  { label: 'POST check-runs', what: 'a check run per result', floor: (s) => s.episodes },
  { label: 'PATCH check-runs/{check}', what: "complete an episode's check run", floor: (s) => s.episodes },
  { label: 'GET git/ref/forkflush/{run}/base', what: "look for the initial workspace's grade", floor: () => 0 },
  {
    label: 'GET pulls',
    what: 'look for the pull request before opening one (an answer lost, a claim taken over)',
    floor: () => 0,
  },
  { label: 'POST pulls', what: 'a pull request per result', floor: (s) => s.episodes + (s.last ? 1 : 0) },
  { label: 'PATCH git/refs/heads/forkflush/{run}/best', what: 'move the best branch', floor: (s) => +s.movesBest },
  { label: 'PATCH git/refs/heads/forkflush/{run}/lineage', what: 'fast-forward the lineage', floor: (s) => s.adopted },
  { label: 'POST issues/{pr}/comments', what: "comment on a loser's pull request", floor: (s) => s.losers },
  { label: 'PATCH pulls/{pr}', what: "close a loser's pull request", floor: (s) => s.losers },
  {
    label: 'DELETE git/refs/heads/forkflush/{run}/round-{r}/branch-{b}',
    what: 'delete a branch',
    floor: (s) => s.episodes,
  },
  {
    label: 'DELETE git/refs/forkflush/{run}/contexts/{episode}',
    what: "delete a loser's context",
    floor: (s) => s.losers,
  },
  { label: 'PATCH issues/comments/{comment}', what: "edit the issue's comment", floor: () => 1 },
  { label: 'POST issues/{issue}/labels', what: 'label the issue done', floor: (s) => +s.last },
  { label: 'DELETE issues/{issue}/labels/{label}', what: 'remove the start label', floor: (s) => +s.last },
];

/** A request of the fake's log ("PATCH /repos/o/r/git/refs/heads%2F...") as an endpoint label. */
function endpoint(request: string): string {
  const [method, path = ''] = request.split(' ');
  const p = decodeURIComponent(path)
    .replace(`/repos/${h.gh.owner}/${h.gh.repo}`, '')
    .replace(/^\//, '')
    .replaceAll(`forkflush/${RUN}/`, 'forkflush/{run}/')
    .replace(/round-\d+/, 'round-{r}')
    .replace(/branch-\d+/, 'branch-{b}')
    .replace(/contexts\/r\d+\.b\d+$/, 'contexts/{episode}')
    .replace(/\b[0-9a-f]{40}\b/, '{sha}')
    .replace(/^contents\/(state|run)\.json$/, 'contents/{state,run}.json')
    .replace(/^actions\/workflows\/[^/]+\//, 'actions/workflows/{workflow}/')
    .replace(/^app\/installations\/\d+\//, 'app/installations/{installation}/')
    .replace(/^issues\/comments\/\d+$/, 'issues/comments/{comment}')
    .replace(new RegExp(`^issues/${ISSUE}/labels/.+$`), 'issues/{issue}/labels/{label}')
    .replace(new RegExp(`^issues/${ISSUE}/`), 'issues/{issue}/')
    .replace(new RegExp(`^issues/${ISSUE}$`), 'issues/{issue}')
    .replace(/^check-runs\/\d+$/, 'check-runs/{check}')
    .replace(/^(issues|pulls)\/\d+/, '$1/{pr}');
  return `${method} ${p || '(repository)'}`;
}

const h = await new Harness({ '.github/autoresearch.yml': CONFIG, 'grade.mjs': 'x' }).load();

// Stages: 'start' (the label's handler) and one per round, by index. A round is charged with the
// requests of its own job events' handlers, from the first result that lands through its decision
// carried out, plus the creation of its branches and its dispatch, which the handler that closed
// the round before made. So every request of the run is charged to exactly one stage.
const charged = new Map<string, string[]>();
const events = new Map<string, number>();
let logged = 0;

/** Charges the requests of the handler that just returned to `stage`, but a dispatch to its round. */
function chargeHandler(stage: string): void {
  const requests = h.gh.log.slice(logged);
  logged = h.gh.log.length;
  events.set(stage, (events.get(stage) ?? 0) + 1);
  const d = dispatchIn(requests);
  const own = d ? [...requests.slice(0, d.from), ...requests.slice(d.to)] : requests;
  charged.set(stage, [...(charged.get(stage) ?? []), ...own]);
  if (d) charged.set(d.round, [...(charged.get(d.round) ?? []), ...requests.slice(d.from, d.to)]);
}

/**
 * The dispatch of a round within a handler's requests: the workflow dispatch and, right before
 * it, the creation of the round's branches, its check runs and a read of the default branch.
 */
function dispatchIn(requests: string[]): { round: string; from: number; to: number } | null {
  const at = requests.findIndex((r) => endpoint(r) === 'POST actions/workflows/{workflow}/dispatches');
  if (at < 0) return null;
  const inputs = h.gh.dispatches.at(-1)?.inputs;
  // The opening round's dispatch also grades the initial workspace (a job, no branch of its own).
  const branches = (JSON.parse(inputs?.episodes ?? '[]') as string[]).filter((e) => e !== 'base').length;
  let from = at;
  for (let created = 0; created < branches; from--) {
    const label = from > 0 ? endpoint(requests[from - 1] as string) : '';
    if (label === 'POST git/refs') created++;
    // Between them, the round's check runs (queued) and a read of the default branch.
    else if (label !== 'GET (repository)' && label !== 'POST check-runs') {
      throw new Error(`round ${inputs?.round}: its ${branches} branches are not created just before its dispatch`);
    }
  }
  return { round: String(inputs?.round), from, to: at + 1 };
}

// While jobs run the app must do nothing: it never polls, only webhooks wake it.
let idleChecks = 0;
let idleRequests = 0;
let idleTimers = 0;
async function whileJobRuns(): Promise<void> {
  const before = h.gh.log.length;
  await new Promise((resolve) => setTimeout(resolve, 20));
  idleChecks++;
  idleRequests += h.gh.log.length - before;
  idleTimers += process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

await h.label(ISSUE);
chargeHandler('start');
for (let guard = 0; h.state(RUN).status !== 'finished'; guard++) {
  const state = h.state(RUN);
  const open = state.rounds.find((r) => !r.decision);
  if (!open || guard > 50) throw new Error('the run stalled');
  // The jobs finish one after the other: each pushes its result, then GitHub reports it completed.
  for (const e of open.episodes) {
    await whileJobRuns();
    h.pushResult(state, e, score(e.round, e.branch));
    await h.jobCompleted(RUN, e.id);
    chargeHandler(String(open.index));
  }
}
await h.close();

const final = h.state(RUN);
const total = [...charged.values()].reduce((n, calls) => n + calls.length, 0);
if (total !== h.gh.log.length) throw new Error(`${h.gh.log.length} requests, ${total} charged`);

function shape(state: RunState, round: Round): Shape {
  const adopted = round.decision?.adopted.length ?? 0;
  const best = (rounds: Round[]) =>
    Math.max(-Infinity, ...rounds.flatMap((r) => r.episodes.map((e) => e.result?.score ?? -Infinity)));
  return {
    episodes: round.episodes.length,
    adopted,
    losers: round.episodes.length - adopted,
    movesBest: best([round]) > best(state.rounds.slice(0, round.index)),
    last: round.index === state.rounds.length - 1,
  };
}

const floorOf = (s: Shape) => ENDPOINTS.reduce((n, e) => n + e.floor(s), 0);
const count = (calls: string[], label: string) => calls.filter((c) => endpoint(c) === label).length;
const pad = (x: string | number, n: number) => String(x).padStart(n);
const name = (r: Round) => `round ${r.index} ${r.phase} (${r.kind}, ${r.episodes.length})`;

console.log(`the run: ${final.rounds.length} rounds, ${total} requests`);
console.log(`  ${'stage'.padEnd(28)} events calls floor`);
console.log(`  ${'start (label)'.padEnd(28)} ${pad(1, 6)} ${pad(charged.get('start')?.length ?? 0, 5)}     -`);
for (const r of final.rounds) {
  const calls = charged.get(String(r.index)) ?? [];
  console.log(
    `  ${name(r).padEnd(28)} ${pad(events.get(String(r.index)) ?? 0, 6)} ${pad(calls.length, 5)} ${pad(floorOf(shape(final, r)), 5)}`,
  );
}
console.log(
  `while jobs ran (${idleChecks} waits): ${idleRequests} requests, ${idleTimers} timers pending; the app does not poll`,
);
if (idleRequests + idleTimers > 0) throw new Error('the app worked while no webhook arrived');

/** Prints a stage's requests by endpoint, beside the floor; returns [requests, floor]. */
function breakdown(title: string, round: Round): [number, number] {
  const calls = charged.get(String(round.index)) ?? [];
  const s = shape(final, round);
  console.log(`\n${title}: ${name(round)}, ${events.get(String(round.index))} job event(s)`);
  console.log(`  calls floor  endpoint${' '.repeat(52)}for`);
  const known = new Set(ENDPOINTS.map((e) => e.label));
  const unknown = [...new Set(calls.map(endpoint).filter((l) => !known.has(l)))];
  for (const e of [...ENDPOINTS, ...unknown.map((label) => ({ label, what: '?', floor: () => 0 }))]) {
    const n = count(calls, e.label);
    if (n === 0 && e.floor(s) === 0) continue;
    console.log(`  ${pad(n, 5)} ${pad(e.floor(s), 5)}  ${e.label.padEnd(60)}${e.what}`);
  }
  console.log(`  ${pad(calls.length, 5)} ${pad(floorOf(s), 5)}  in all`);
  return [calls.length, floorOf(s)];
}

// The stages the summary reports: the first fork round after the opening, and the first serial
// episode (the others of their kind cost the same, as the table above shows).
const fork = final.rounds.find((r) => r.kind === 'fork' && r.index > 0);
const serial = final.rounds.find((r) => r.kind === 'serial');
if (!fork || !serial || fork.episodes.length !== K)
  throw new Error(`expected a fork round of ${K} and a serial episode`);
const [n, f] = breakdown('fork round', fork);
const [m, g] = breakdown('serial episode', serial);
console.log(`\napi: fork round K=${K} ${n} calls (floor ${f}), serial episode ${m} calls (floor ${g})`);
