// One episode of a run on the forge, as one Actions job runs it: read the run's records, check
// out the episode's base, run the worker (the agent in its sandbox, the judge in a clean room),
// and push the result with the agent's context. The token stays in this process and the git
// commands of the records repository; nothing inside the sandbox can see either.
import { cp, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { agentFor } from '../agents/specs.js';
import type { Config, Unit } from '../core/config.js';
import type { GitHubRunRecord } from '../core/github-run-record.js';
import { forgeAlsoProtected } from '../core/globs.js';
import { commitMessage, describeContext, parseCommitMessage } from '../core/journal.js';
import { sectionFor } from '../core/losers.js';
import { contextRef, episodeBranch, parseEpisodeId, type RefsLayout, refName, runRefs } from '../core/names.js';
import { episodePrompt } from '../core/prompts.js';
import { type Episode, type EpisodeResult, findEpisode, type Round, type RunState } from '../core/state.js';
import { formatNumber } from '../core/text.js';
import { CONTEXT_LIMITS, cleanAgentFolder, removeTree } from '../io/agent-files.js';
import type { EpisodePlaces, Isolation } from '../worker/boundary.js';
import { checkoutInto, commitTree } from '../worker/cleanroom.js';
import { runEpisode } from '../worker/episode.js';
import { installAgentCli } from './agent-install.js';
import {
  type ContextStore,
  contextStore,
  decryptContext,
  repositoryIsPrivate,
  SEALED_CONTEXT,
  unpackFolder,
} from './contexts.js';
import { describeRefusal, pushResult, recordedResult, short } from './push-result.js';
import type { RecordsRepo } from './records.js';
import type { Remote } from './remote.js';
import { openRunRecords } from './run-records.js';
import { prepareIsolation } from './sandbox-setup.js';
import type { ActionSettings, jobPlaces } from './settings.js';

export interface JobOutcome {
  run: string;
  episode: Episode;
  phase: string;
  /** The run's config, as its record holds it. */
  config: Config;
  /**
   * ran: this attempt's result is on the branch; already-recorded: an earlier attempt had pushed
   * one, nothing ran; lost-race: another attempt's result landed while this one ran.
   */
  attempt: 'ran' | 'already-recorded' | 'lost-race';
  /** The result on the episode's branch. */
  result: EpisodeResult;
  /** Where the run keeps its work: layout 1 makes the episode's ref a branch people can open. */
  layout: RefsLayout;
}

export interface JobOptions {
  /** One line per step, for the job's log. */
  log: (line: string) => void;
  /** The job's environment, which the agent starts from (forge secrets are removed). */
  env: NodeJS.ProcessEnv;
  /** Stops the agent (the job was cancelled); the episode then ends without a result. */
  signal?: AbortSignal;
  /** How the episode is confined (default: from the run's sandbox mode and this machine). */
  isolation?: Isolation;
}

/** What the steps of one job share: the run's records, its episode and where its result goes. */
interface Job {
  s: ActionSettings;
  o: JobOptions;
  places: ReturnType<typeof jobPlaces>;
  records: RecordsRepo;
  remote: Remote;
  state: RunState;
  facts: GitHubRunRecord;
  episode: Episode;
  round: Round;
  /** The episode's ref: a branch (layout 1), or a ref under refs/forkflush/ that no workflow sees. */
  branchRef: string;
  layout: RefsLayout;
}

export async function runEpisodeJob(s: ActionSettings, o: JobOptions): Promise<JobOutcome> {
  // 1. The run's records: its state and facts, and the episode this job runs.
  const job = await openJob(s, o);
  const { episode, round, state } = job;
  const outcome = (attempt: JobOutcome['attempt'], result: EpisodeResult): JobOutcome => ({
    run: s.run,
    episode,
    phase: round.phase,
    config: state.config,
    attempt,
    result,
    layout: job.layout,
  });
  // 2. The episode's branch must be there (the app made it), and the context it continues, if any.
  const hasContext = await fetchEpisodeRefs(job);
  // 3. A branch past its base holds an earlier attempt's result: it is not run again.
  const earlier = await earlierAttempt(job);
  if (earlier) {
    o.log(`an earlier attempt already pushed this episode's result (${short(earlier.commit)}): not running it again`);
    return outcome('already-recorded', earlier);
  }
  const isolation = o.isolation ?? (await prepareIsolation(state.config.sandbox.mode, o.log));
  o.log(`sandbox: ${isolation.label}`);
  if (isolation.warning) o.log(`warning: ${isolation.warning}`);
  // The workspace: a fresh checkout of the base, with a .git of its own that borrows the records'
  // objects read-only. Whatever the agent does to it, forkflush records the files with its own git.
  const checkoutIndex = join(job.places.scratch, 'checkout.index');
  const localBranch = episodeBranch(s.run, episode.round, episode.branch);
  await checkoutInto(job.records.own, episode.base, s.workspace, checkoutIndex, localBranch);
  o.log(`workspace: ${s.workspace} on ${localBranch} at ${short(episode.base)}`);
  // 4. The context folder: empty, or the context the episode carries on (or copies).
  const { store, notes } = await fillContext(job, hasContext);
  // 5. The agent's CLI, at the version forkflush was tested with (unless agent.command names one).
  //    One that cannot be installed makes the episode a setup result: its agent never starts.
  const install = await installAgentCli(state.config.agent, { env: o.env, log: o.log });
  if (install.problem) o.log(`agent CLI: ${install.problem}`);
  // 6. The episode: setup, the agent, protected paths, the grader, the journal, the commit.
  const result = await runEpisode({
    ...episodeInput(job, checkoutIndex, isolation),
    env: install.env,
    ...(install.problem ? { setupProblem: install.problem } : {}),
    notes,
    contextStore: store,
    earlierAttempts: s.runAttempt - 1,
    warn: (line) => o.log(`warning: ${line}`),
  });
  o.log(`result: ${describeResult(result, state.config.budget.unit)}, commit ${short(result.commit)}`);
  // 7. Push the result and the context together.
  const push = { s, log: o.log, records: job.records, remote: job.remote, episode, branchRef: job.branchRef };
  const pushed = await pushResult({ ...push, contextDir: job.places.context }, result, store);
  return pushed === 'ran' ? outcome('ran', result) : outcome('lost-race', pushed);
}

/** The run's records read, and the episode this job runs found open in them (else the job's error). */
async function openJob(s: ActionSettings, o: JobOptions): Promise<Job> {
  const { places, records, remote, read } = await openRunRecords(s, o.log);
  if ('unreadable' in read) {
    // The reason is the job's error either way: a push that fails too must not hide it.
    await recordUnreadable(records, remote, s, read, o.log).catch((e: unknown) =>
      o.log(`the setup result was not pushed: ${e instanceof Error ? e.message : String(e)}`),
    );
    throw new Error(read.unreadable);
  }
  const { state, facts } = read;
  // A stop cancels the round's workflow run; "Re-run all jobs" on it keeps its id, and the round its open.
  if (facts.stopped)
    throw new Error(`run ${state.id} is stopped: nothing to run (\`/autoresearch resume\` dispatches its round again)`);
  const { episode, round } = findOpenEpisode(state, s.episode);
  // Only the workflow run the app dispatched for the round runs its episodes: a re-run of an
  // earlier one (a stopped round resumed, a round whose setup failed run again) would run the
  // agent a second time beside it.
  const dispatched = facts.dispatched[String(round.index)]?.runId;
  if (dispatched !== undefined && s.workflowRunId !== null && dispatched !== s.workflowRunId) {
    throw new Error(
      `round ${round.index} of run ${state.id} runs in workflow run ${dispatched}, not in this one (${s.workflowRunId}), ` +
        'which the app dispatched before: nothing to run (a re-run of an earlier workflow run?)',
    );
  }
  const layout = facts.refsLayout ?? 1;
  const branchRef = runRefs(s.run, layout).episode(episode.round, episode.branch);
  o.log(
    `episode ${episode.id} (${round.phase}): ${describeContext(episode)}, ` +
      `allowance ${formatNumber(episode.allowance)} ${state.config.budget.unit}, base ${short(episode.base)}`,
  );
  return { s, o, places, records, remote, state, facts, episode, round, branchRef, layout };
}

/** Fetches the episode's branch and the context ref it continues; says whether that context is there. */
async function fetchEpisodeRefs({ s, remote, episode, branchRef }: Job): Promise<boolean> {
  const fromRef = episode.contextFrom ? contextRef(s.run, episode.contextFrom) : null;
  const onRemote = await remote.listRefs([branchRef, ...(fromRef ? [fromRef] : [])]);
  if (!onRemote.has(branchRef)) {
    throw new Error(
      `the branch ${refName(branchRef)} is not in the repository; the app makes it when it opens round ${episode.round}`,
    );
  }
  const hasContext = fromRef !== null && onRemote.has(fromRef);
  await remote.fetch([branchRef, ...(fromRef && hasContext ? [fromRef] : [])]);
  return hasContext;
}

/** The result an earlier attempt pushed on the branch, or null when the branch is at its base. */
async function earlierAttempt({ s, records, episode, branchRef }: Job): Promise<EpisodeResult | null> {
  const head = (await records.git.revParse(branchRef)) ?? '';
  if (head === episode.base) return null;
  const earlier = await recordedResult(records.git, head, s.run, episode);
  if (earlier) return earlier;
  throw new Error(
    `the branch ${refName(branchRef)} is at ${short(head)}, which is neither the episode's base ` +
      `${short(episode.base)} nor a result of it; reset the branch to the base to run the episode again`,
  );
}

/** Empties the context folder and fills it with the context the episode continues, if any. */
async function fillContext(
  { s, o, places, records, episode }: Job,
  hasContext: boolean,
): Promise<{ store: ContextStore; notes: string[] }> {
  const store = contextStore(s.contextKey, await repositoryIsPrivate(o.env.GITHUB_EVENT_PATH));
  const contextDir = places.context;
  const notes: string[] = [];
  await removeTree(contextDir);
  await mkdir(contextDir, { recursive: true });
  if (episode.contextFrom) {
    const fromRef = contextRef(s.run, episode.contextFrom);
    const why = hasContext ? await openContext(records, s, fromRef, episode.contextFrom, contextDir) : null;
    const missing =
      store === 'none'
        ? `${episode.contextFrom}'s context was not kept (a public repository without FORKFLUSH_CONTEXT_KEY)`
        : `${episode.contextFrom} left none`;
    const problem = hasContext ? why : missing;
    if (problem) notes.push(`${problem}: this episode started with an empty context`);
    o.log(`context: ${problem ?? `${episode.contextFrom}'s context`} in ${contextDir}`);
  } else {
    o.log(`context: fresh (empty) in ${contextDir}`);
  }
  o.log(`the context this episode leaves: ${describeStore(store)}`);
  return { store, notes };
}

/** What the worker's episode is given that the job knows from its records and settings. */
function episodeInput(job: Job, checkoutIndex: string, isolation: Isolation) {
  const { s, o, state, facts, episode, round, records } = job;
  o.log(`agent: ${state.config.agent.kind} agent, up to ${state.config.agent.timeout} s`);
  // With fork.losers: journal, the losers' notes the app recorded when it decided the round.
  const section = sectionFor(state, episode);
  const places: EpisodePlaces = {
    workspace: s.workspace,
    context: job.places.context,
    box: join(job.places.scratch, 'box'),
    objects: [records.objects],
    private: [s.privateDir],
  };
  return {
    runId: s.run,
    ...(s.workflowRunUrl ? { workflowRunUrl: s.workflowRunUrl } : {}),
    config: state.config,
    episode,
    phase: round.phase,
    own: records.own,
    places,
    checkoutIndex,
    scratchDir: job.places.scratch,
    prompt: episodePrompt(state, episode, facts.task, facts.templates),
    agent: agentFor(state.config),
    isolation,
    alsoProtected: forgeAlsoProtected(facts.configPath),
    log: o.log,
    ...(section ? { journalSection: section } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  };
}

/**
 * Fills the context folder from the parent's context ref: an encrypted blob (opened with the key,
 * bound to the parent's episode) or plain files. Returns why it could not, or null.
 */
async function openContext(
  records: RecordsRepo,
  s: ActionSettings,
  ref: string,
  from: string,
  contextDir: string,
): Promise<string | null> {
  const incoming = join(s.privateDir, 'context-in');
  await rm(incoming, { recursive: true, force: true });
  await records.extract(ref, incoming);
  try {
    const sealed = await readFile(join(incoming, SEALED_CONTEXT)).catch(() => null);
    if (sealed === null) {
      await cp(incoming, contextDir, { recursive: true, verbatimSymlinks: true });
      await cleanAgentFolder(contextDir, CONTEXT_LIMITS);
      return null;
    }
    if (!s.contextKey) return `${from}'s context is encrypted, and this job has no FORKFLUSH_CONTEXT_KEY`;
    const archive = decryptContext(s.contextKey, s.run, from, sealed);
    if (!archive) return `${from}'s context cannot be opened with this FORKFLUSH_CONTEXT_KEY (was the key changed?)`;
    await unpackFolder(archive, contextDir);
    return null;
  } finally {
    await rm(incoming, { recursive: true, force: true });
  }
}

function describeStore(store: ContextStore): string {
  if (store === 'encrypted') return 'pushed encrypted with FORKFLUSH_CONTEXT_KEY';
  if (store === 'plain') return 'pushed as files (a private repository without FORKFLUSH_CONTEXT_KEY)';
  return 'not pushed (a public repository without FORKFLUSH_CONTEXT_KEY): serial episodes start fresh';
}

/**
 * A record this worker cannot read becomes the episode's setup result, pushed on its branch: no
 * agent ran and nothing was spent. The app stops the run when every branch of a round failed its
 * setup, and says why in the issue, instead of charging each failed job its whole allowance
 * round after round. A branch that already holds a result of the episode keeps it.
 */
async function recordUnreadable(
  records: RecordsRepo,
  remote: Remote,
  s: ActionSettings,
  { unreadable: reason, layout }: { unreadable: string; layout: unknown },
  log: (line: string) => void,
): Promise<void> {
  const id = parseEpisodeId(s.episode);
  if (!id) return;
  // Read without its schema, as the record is: the layout says where the episode's ref is.
  const branchRef = runRefs(s.run, layout === 2 ? 2 : 1).episode(id.round, id.branch);
  if (!(await remote.listRefs([branchRef])).has(branchRef)) return;
  await remote.fetch([branchRef]);
  const head = await records.git.revParse(branchRef);
  if (!head) return;
  if (parseCommitMessage(await records.git.out(['log', '-1', '--format=%B', head]), head)?.episode === s.episode)
    return;
  const result = {
    score: null,
    reason,
    spent: 0,
    exit: 'setup' as const,
    protectedChanged: [],
    wallSeconds: 0,
    agentSeconds: 0,
    graderSeconds: 0,
  };
  const tree = await records.git.out(['rev-parse', `${head}^{tree}`]);
  const message = commitMessage(s.run, null, { id: s.episode }, result);
  const commit = await commitTree(records.own, tree, head, message);
  const pushed = await remote.pushAtomic([`${commit}:${branchRef}`]);
  const refused = pushed.some((p) => p.flag === '!');
  log(
    refused
      ? `the setup result was not pushed (${describeRefusal(pushed)})`
      : `pushed a setup result to ${refName(branchRef)}: nothing was spent, and the app stops the run once every branch of the round says so`,
  );
}

/** The episode and its round, if the episode is due to run. */
function findOpenEpisode(state: RunState, id: string): { episode: Episode; round: Round } {
  const episode = findEpisode(state, id);
  const round = state.rounds.find((r) => r.episodes.some((e) => e.id === id));
  if (!episode || !round) {
    const open = state.rounds.find((r) => !r.decision)?.episodes.map((e) => e.id) ?? [];
    const hint = open.length > 0 ? `; its open round has ${open.join(', ')}` : '';
    throw new Error(`run ${state.id} has no episode ${id}${hint}`);
  }
  if (episode.result) {
    throw new Error(
      `episode ${id} of run ${state.id} already has a result (${describeResult(episode.result, state.config.budget.unit)}, ` +
        `commit ${short(episode.result.commit)}): nothing to run`,
    );
  }
  if (round.decision) throw new Error(`round ${round.index} of run ${state.id} is already decided: nothing to run`);
  return { episode, round };
}

function describeResult(r: EpisodeResult, unit: Unit): string {
  const score = r.score === null ? `no score (${r.reason ?? 'no reason given'})` : `score ${formatNumber(r.score, 6)}`;
  return `${score}, spent ${formatNumber(r.spent)} ${unit}, ended: ${r.exit}`;
}
