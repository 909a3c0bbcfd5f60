// What the app checks of the repository's worker workflow before a run spends anything: that its
// episode job may run as long as an episode may take. Pure: the workflow's text in, a warning out.
import { parse } from 'yaml';
import { GITHUB_JOB_TIMEOUT_MINUTES } from './bounds.js';
import type { Config } from './config.js';
import { AGENT_INSTALL_TIMEOUT_SECONDS, episodeLimitSeconds, roundDeadlineMinutes } from './method.js';
import { GITHUB } from './names.js';

/**
 * Why the worker workflow's episode job (the one that uses the forkflush Action) would be stopped
 * by Actions before an episode that uses all its time is graded, or null: its timeout-minutes,
 * where it is a number, against the episode's limits (setup, agent, gradings).
 */
export function workerTimeoutProblem(workflowText: string | null, config: Config): string | null {
  if (workflowText === null) return null;
  let doc: unknown;
  try {
    doc = parse(workflowText);
  } catch {
    return null;
  }
  const jobs = (doc as { jobs?: unknown } | null)?.jobs;
  if (!jobs || typeof jobs !== 'object') return null;
  // The episode's limits, and the agent CLI's install before them (the Action's, up to its timeout).
  const install =
    config.agent.kind !== 'command' && config.agent.command === undefined ? AGENT_INSTALL_TIMEOUT_SECONDS : 0;
  const need = Math.ceil((episodeLimitSeconds(config) + install) / 60);
  for (const [name, job] of Object.entries(jobs as Record<string, unknown>)) {
    const j = job as { steps?: unknown; 'timeout-minutes'?: unknown } | null;
    const runsEpisodes =
      Array.isArray(j?.steps) &&
      j.steps.some(
        (s) => typeof (s as { uses?: unknown })?.uses === 'string' && /forkflush/i.test((s as { uses: string }).uses),
      );
    if (!runsEpisodes) continue;
    const minutes = j?.['timeout-minutes'] ?? GITHUB_JOB_TIMEOUT_MINUTES;
    // An expression (${{ … }}) is the workflow's own business.
    if (typeof minutes !== 'number' || minutes >= need) continue;
    const set = Math.ceil(roundDeadlineMinutes(config));
    return (
      `the job \`${name}\` of \`.github/workflows/${GITHUB.workflow}\` has \`timeout-minutes: ${minutes}\`, but an episode may take ` +
      `${need} minutes (agent.timeout, 2 × grader.timeout${config.setup.commands.length > 0 ? ', 2 × setup.timeout' : ''}${install > 0 ? ', installing the agent CLI' : ''}): ` +
      'Actions would cancel an episode that uses its time before it is graded, and the run would stop there, as at a cancel in the Actions tab. ' +
      `Set \`timeout-minutes: ${set}\` (README, "On GitHub"), or lower agent.timeout` +
      (set > GITHUB_JOB_TIMEOUT_MINUTES
        ? ` (GitHub-hosted runners stop every job at ${GITHUB_JOB_TIMEOUT_MINUTES} minutes: only a self-hosted runner takes more).`
        : '.')
    );
  }
  return null;
}
