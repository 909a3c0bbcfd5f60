// The Action's one entry: reads the inputs, runs the episode, reports the agent's log, sets the
// outputs and the summary. The only module that knows @actions/core; every failure becomes one
// line naming the episode.
import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import * as core from '@actions/core';
import { ACTION_STOP_WITHIN_MS } from '../core/bounds.js';
import { BASE_JOB, MAP_JOB } from '../core/names.js';
import { formatNumber } from '../core/text.js';
import { exitWithin, stopAllCommands } from '../io/process.js';
import { DiskFullError, InterruptedError } from '../worker/episode-errors.js';
import { type AgentLogReport, publishAgentLog, workflowSafe } from './agent-log.js';
import {
  type ArtifactResult,
  type ArtifactService,
  artifactName,
  type UploadClient,
  uploadArtifact,
} from './artifact.js';
import { runBaseJob } from './base-job.js';
import { forgetForgeSecrets } from './env.js';
import { type JobOutcome, runEpisodeJob } from './episode-job.js';
import { MapNotDrawn, runMapJob } from './map-job.js';
import { basicCredentials } from './remote.js';
import {
  baseOutputs,
  baseSummary,
  jobFailure,
  jobNotice,
  jobOutputs,
  jobSummary,
  mapOutputs,
  mapSummary,
} from './report.js';
import { type ActionSettings, parseSettings } from './settings.js';

/** The artifact client, loaded only when there is a log to upload. */
const artifactClient = async (): Promise<UploadClient> =>
  new (await import('@actions/artifact')).DefaultArtifactClient();

export async function run(): Promise<void> {
  const runId = core.getInput('run');
  const episode = core.getInput('episode');
  const what = `forkflush ${runId || '(no run)'} ${episode || '(no episode)'}`;
  const cancel = new AbortController();
  // Set once the episode's result is on its branch: a cancel after that (during the log's upload) loses no result.
  let pushed: JobOutcome | null = null;
  const onSignal = signalHandler(cancel, () => `${what}: ${cancelledLine(pushed)}`);
  const started = new Date();
  // Before the forge secrets are forgotten: what the log must not show, and the artifact service.
  const jobEnv = { ...process.env };
  const service = artifactService(jobEnv);
  const known: string[] = [];
  let settings: ActionSettings | null = null;
  const report = (outcome: JobOutcome | null): Promise<AgentLogReport> | null =>
    settings ? publish({ settings, started, jobEnv, known, service }, outcome) : null;
  try {
    // 1. The inputs, their secrets masked and forgotten by the environment the agent starts from.
    settings = readSettings(runId, episode, known, service);
    // 2. A cancelled job stops the agent's whole process group rather than leaving it running.
    process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
    // What the job prints carries the agent's, setup's and the grader's words: no workflow command.
    const log = (line: string) => core.info(workflowSafe(line));
    if (settings.episode === BASE_JOB) {
      // The run's initial workspace, graded once: no agent, so no agent log to publish.
      const base = await runBaseJob(settings, { log, env: process.env, signal: cancel.signal });
      for (const [name, value] of Object.entries(baseOutputs(base))) core.setOutput(name, value);
      await core.summary.addRaw(baseSummary(base)).write();
      return;
    }
    if (settings.episode === MAP_JOB) {
      // The run's idea map: its judge is an agent, but the map's summary, not an agent log, says what it did.
      const map = await runMapJob(settings, { log, env: process.env, signal: cancel.signal });
      const artifact = await uploadArtifact({
        client: artifactClient,
        name: artifactName(settings.run, MAP_JOB, jobEnv.GITHUB_RUN_ATTEMPT),
        files: map.files,
        root: map.folder,
        service,
        env: process.env,
      });
      for (const [name, value] of Object.entries(mapOutputs(map))) core.setOutput(name, value);
      await core.summary.addRaw(mapSummary(map, artifact)).write();
      return;
    }
    // 3. The episode, then its agent's log published.
    const outcome = await runEpisodeJob(settings, { log, env: process.env, signal: cancel.signal });
    pushed = outcome;
    const published = await report(outcome);
    // 4. The outputs, the summary, and the job's colour.
    await reportOutcome(outcome, published, { jobEnv, service, what });
  } catch (e) {
    // An episode that failed after its agent ran (a refused push, say) still shows what the agent did.
    if (!(e instanceof InterruptedError) && settings?.episode !== BASE_JOB && settings?.episode !== MAP_JOB) {
      const log = await report(null)?.catch(() => null);
      if (log?.logFile) core.setOutput('log-file', log.logFile);
    }
    // A map the judge failed: the logs of its failed calls go up as the job's artifact, which the line names.
    if (e instanceof MapNotDrawn && e.failedLogs && settings) {
      const logs = await uploadFolder(settings, e.failedLogs, service, jobEnv.GITHUB_RUN_ATTEMPT);
      if (logs.uploaded) e.message = `${e.message}; their logs are the artifact ${logs.name}`;
    }
    // What the agent spent, where known: the job's line and its `spent` output say it.
    const spent = e instanceof InterruptedError || e instanceof DiskFullError ? e.spent : null;
    if (spent !== null) core.setOutput('spent', String(spent));
    const charged = spent === null ? '' : ` (its agent spent ${formatNumber(spent, 4)})`;
    if (e instanceof InterruptedError) core.setFailed(workflowSafe(`${what}: ${cancelledLine(pushed)}${charged}`));
    else core.setFailed(workflowSafe(`${what}: ${e instanceof Error ? e.message : String(e)}${charged}`));
    if (e instanceof Error && e.stack) core.debug(workflowSafe(e.stack));
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}

/** What a cancelled job says: whether the episode's result had reached its branch. */
function cancelledLine(pushed: JobOutcome | null): string {
  if (!pushed) return 'the job was cancelled before the episode had a result';
  const score = pushed.result.score === null ? 'no score' : `score ${formatNumber(pushed.result.score, 6)}`;
  return `the job was cancelled after the episode's result was pushed (commit ${pushed.result.commit.slice(0, 10)}, ${score}): the round has it; only the agent's log and this summary may be missing`;
}

/** SIGINT or SIGTERM: the episode is stopped; a second signal, or a stop that takes too long, ends it all. */
function signalHandler(cancel: AbortController, said: () => string) {
  return (signal: NodeJS.Signals) => {
    if (cancel.signal.aborted) {
      // A second signal: at once, with everything the episode started.
      stopAllCommands();
      process.exit(1);
    }
    cancel.abort(signal);
    exitWithin(ACTION_STOP_WITHIN_MS, 1, (line) => core.setFailed(workflowSafe(`${said()} (${line})`)));
  };
}

function artifactService(jobEnv: NodeJS.ProcessEnv): ArtifactService {
  return {
    token: jobEnv.ACTIONS_RUNTIME_TOKEN,
    resultsUrl: jobEnv.ACTIONS_RESULTS_URL,
    serverUrl: jobEnv.GITHUB_SERVER_URL,
    repository: jobEnv.GITHUB_REPOSITORY,
    runId: jobEnv.GITHUB_RUN_ID,
  };
}

/** The settings, each secret masked in the log and remembered in `known`, and the forge's secrets forgotten. */
function readSettings(run: string, episode: string, known: string[], service: ArtifactService): ActionSettings {
  const token = core.getInput('token');
  if (token) {
    core.setSecret(token);
    core.setSecret(basicCredentials(token));
    known.push(token, basicCredentials(token));
  }
  const contextKey = core.getInput('context-key') || process.env.FORKFLUSH_CONTEXT_KEY || '';
  if (contextKey) {
    core.setSecret(contextKey);
    known.push(contextKey);
  }
  if (service.token) core.setSecret(service.token);
  forgetForgeSecrets(process.env);
  delete process.env.FORKFLUSH_CONTEXT_KEY;
  return parseSettings({ run, episode, token, contextKey }, process.env);
}

function publish(
  job: {
    settings: ActionSettings;
    started: Date;
    jobEnv: NodeJS.ProcessEnv;
    known: string[];
    service: ArtifactService;
  },
  outcome: JobOutcome | null,
): Promise<AgentLogReport> {
  const { settings, started, jobEnv, known, service } = job;
  return publishAgentLog(
    {
      run: settings.run,
      episode: settings.episode,
      privateDir: settings.privateDir,
      workspace: settings.workspace,
      logsDir: join(dirname(settings.privateDir), 'forkflush-logs'),
      started,
      jobEnv,
      env: process.env,
      known,
      outcome,
      service,
    },
    core,
    artifactClient,
  );
}

/** The job's outputs, notice and summary; a broken agent fails the job (red), its result recorded all the same. */
async function reportOutcome(
  outcome: JobOutcome,
  published: AgentLogReport | null,
  job: { jobEnv: NodeJS.ProcessEnv; service: ArtifactService; what: string },
): Promise<void> {
  const { jobEnv, service } = job;
  const facts = { agentVersion: published?.version ?? null, logFile: published?.logFile ?? null };
  for (const [name, value] of Object.entries(jobOutputs(outcome, facts))) core.setOutput(name, value);
  const notice = jobNotice(outcome);
  if (notice) core.notice(workflowSafe(notice));
  const summary = jobSummary(outcome, {
    ...facts,
    agentKind: published?.kind ?? null,
    ...(published?.logFile ? { transcriptLines: published.lines } : {}),
    artifact: published?.artifact ?? null,
    diffStat: published?.facts.diffStat ?? [],
    journal: published?.facts.journal ?? [],
    issue: published?.facts.issue ?? null,
    ...(service.serverUrl ? { serverUrl: service.serverUrl } : {}),
    ...(service.repository ? { repository: service.repository } : {}),
    ...(service.runId ? { runId: service.runId } : {}),
    ...(jobEnv.GITHUB_RUN_ATTEMPT ? { runAttempt: jobEnv.GITHUB_RUN_ATTEMPT } : {}),
  });
  await core.summary.addRaw(summary).write();
  const failed = jobFailure(outcome);
  if (failed) core.setFailed(workflowSafe(`${job.what}: ${failed}`));
}

/** Every file of a folder as the map job's artifact (the logs of a failed judge's calls). */
async function uploadFolder(
  settings: ActionSettings,
  folder: string,
  service: ArtifactService,
  attempt: string | undefined,
): Promise<ArtifactResult> {
  const names = await readdir(folder).catch(() => [] as string[]);
  return uploadArtifact({
    client: artifactClient,
    name: artifactName(settings.run, MAP_JOB, attempt),
    files: names.map((n) => join(folder, n)),
    root: folder,
    service,
    env: process.env,
  });
}
