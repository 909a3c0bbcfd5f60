// The Action's one entry: reads the inputs, runs the episode, sets the outputs and the summary.
// The only module that knows @actions/core; every failure becomes one line naming the episode.
import * as core from '@actions/core';
import { InterruptedError } from '../worker/episode.js';
import { forgetForgeSecrets } from './env.js';
import { runEpisodeJob } from './episode-job.js';
import { basicCredentials } from './remote.js';
import { jobNotice, jobOutputs, jobSummary } from './report.js';
import { parseSettings } from './settings.js';

export async function run(): Promise<void> {
  const runId = core.getInput('run');
  const episode = core.getInput('episode');
  const what = `forkflush ${runId || '(no run)'} ${episode || '(no episode)'}`;
  const cancel = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => cancel.abort(signal);
  try {
    const token = core.getInput('token');
    if (token) {
      core.setSecret(token);
      core.setSecret(basicCredentials(token));
    }
    const contextKey = core.getInput('context-key') || process.env.FORKFLUSH_CONTEXT_KEY || '';
    if (contextKey) core.setSecret(contextKey);
    forgetForgeSecrets(process.env);
    delete process.env.FORKFLUSH_CONTEXT_KEY;
    const settings = parseSettings({ run: runId, episode, token, contextKey }, process.env);
    // A cancelled job stops the agent's whole process group rather than leaving it running.
    process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
    const outcome = await runEpisodeJob(settings, { log: core.info, env: process.env, signal: cancel.signal });
    for (const [name, value] of Object.entries(jobOutputs(outcome))) core.setOutput(name, value);
    const notice = jobNotice(outcome);
    if (notice) core.notice(notice);
    await core.summary.addRaw(jobSummary(outcome)).write();
  } catch (e) {
    if (e instanceof InterruptedError) core.setFailed(`${what}: the job was cancelled before the episode had a result`);
    else core.setFailed(`${what}: ${e instanceof Error ? e.message : String(e)}`);
    if (e instanceof Error && e.stack) core.debug(e.stack);
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}
