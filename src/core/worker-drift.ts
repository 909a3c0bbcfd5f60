// What the app checks of the repository's worker workflow against the one `forkflush init --github`
// of its release writes, in what matters to a run: the dispatch's inputs, the step that uses the
// forkflush Action (its reference and inputs), and the permissions the job needs to push. Each
// difference either stops the run before it spends (the jobs could not work) or is said and the
// run goes on. Pure: the workflow's text and the app's release in, the differences out.
import { parse } from 'yaml';
import { GITHUB } from './names.js';

/** The inputs the worker workflow's dispatch must take (the app sends these three). */
export const WORKER_DISPATCH_INPUTS: readonly string[] = ['run', 'round', 'episodes'];

/** The forkflush Action's inputs (action.yml): those the step must set, and the others it may. */
export const ACTION_INPUTS = { required: ['run', 'episode'], optional: ['token', 'context-key'] } as const;

/** The stand-in repository of the example workflows, which init replaces (or asks the user to). */
const PLACEHOLDER = 'your-org/forkflush';

export interface WorkerDrift {
  /** Differences the round's jobs cannot work with: the run stops before it spends. */
  stop: string[];
  /** Differences a run works with, said once in its status comment. */
  differ: string[];
}

type Job = { steps?: unknown; permissions?: unknown } | null;
type Step = { uses?: unknown; with?: unknown };

/**
 * How the worker workflow differs from what `init --github` of `release` writes (empty lists: it
 * does not). Without a release (an app built without one) the Action's reference is not compared.
 */
export function workerDrift(text: string, release: string | null): WorkerDrift {
  const drift: WorkerDrift = { stop: [], differ: [] };
  let doc: Record<string, unknown> | null;
  try {
    doc = parse(text) as Record<string, unknown> | null;
  } catch (e) {
    drift.stop.push(`it is not YAML that GitHub can read (${(e as Error).message.split('\n')[0]})`);
    return drift;
  }
  dispatchDrift(doc, drift);
  const jobs = (doc?.jobs ?? {}) as Record<string, Job>;
  const withAction = Object.entries(jobs).flatMap(([name, job]) =>
    (Array.isArray(job?.steps) ? (job.steps as Step[]) : [])
      .filter((s) => typeof s?.uses === 'string' && /forkflush/i.test(s.uses))
      .map((step) => ({ name, job, step })),
  );
  const first = withAction[0];
  if (!first) {
    drift.stop.push('no step uses the forkflush Action, so no job would run an episode');
    return drift;
  }
  stepDrift(first.step, text, release, drift);
  permissionDrift(first.name, first.job?.permissions ?? doc?.permissions, drift);
  return drift;
}

/** The dispatch: without one of the inputs the app sends, GitHub refuses every round's dispatch. */
function dispatchDrift(doc: Record<string, unknown> | null, drift: WorkerDrift): void {
  const on = doc?.on;
  // `on: workflow_dispatch` and `on: [push, workflow_dispatch]` name it without inputs.
  const named = on === 'workflow_dispatch' || (Array.isArray(on) && on.includes('workflow_dispatch'));
  const dispatch = named
    ? null
    : typeof on === 'object' && on !== null
      ? (on as Record<string, unknown>).workflow_dispatch
      : undefined;
  if (dispatch === undefined) {
    drift.stop.push('it has no `on: workflow_dispatch`, so the app cannot start its rounds');
    return;
  }
  const inputs = ((dispatch as { inputs?: unknown } | null)?.inputs ?? {}) as Record<string, unknown>;
  const missing = WORKER_DISPATCH_INPUTS.filter((i) => !(i in inputs));
  if (missing.length > 0)
    drift.stop.push(
      `its \`workflow_dispatch\` has no input ${missing.map((i) => `\`${i}\``).join(', ')}, so GitHub would refuse every round's dispatch`,
    );
}

/** The step that uses the Action: its reference against the app's release, and its inputs. */
function stepDrift(step: Step, text: string, release: string | null, drift: WorkerDrift): void {
  const uses = step.uses as string;
  const [repo = '', ref = ''] = uses.split('@');
  if (repo.toLowerCase() === PLACEHOLDER) {
    drift.stop.push(`it still names \`${uses}\`, the example's stand-in, so every job would fail to find the Action`);
  } else if (release !== null) {
    const version = versionOf(ref, text, uses);
    const want = release.replace(/^v/, '');
    if (version === null) {
      drift.differ.push(
        `it uses \`${uses}\`, which names no release (init writes the release \`v${want}\`, pinned to its commit): what runs may change under the app`,
      );
    } else if (version.split('.')[0] !== want.split('.')[0]) {
      drift.stop.push(
        `it uses the forkflush Action at \`v${version}\`, another major release than the app's (\`v${want}\`)`,
      );
    } else if (version.includes('.') && version !== want) {
      drift.differ.push(`it uses the forkflush Action at \`v${version}\`, and the app is \`v${want}\``);
    }
  }
  const given = typeof step.with === 'object' && step.with !== null ? Object.keys(step.with) : [];
  const missing = ACTION_INPUTS.required.filter((i) => !given.includes(i));
  if (missing.length > 0)
    drift.stop.push(
      `its forkflush step sets no ${missing.map((i) => `\`${i}\``).join(', ')}, so no job would know its episode`,
    );
  const known: readonly string[] = [...ACTION_INPUTS.required, ...ACTION_INPUTS.optional];
  const unknown = given.filter((i) => !known.includes(i));
  if (unknown.length > 0)
    drift.differ.push(
      `its forkflush step sets ${unknown.map((i) => `\`${i}\``).join(', ')}, which the Action does not take (it takes ${known.map((i) => `\`${i}\``).join(', ')})`,
    );
  if (!given.includes('context-key'))
    drift.differ.push(
      'its forkflush step sets no `context-key`, so the agents’ contexts are kept unencrypted in a private repository and not at all in a public one',
    );
}

/**
 * The release a reference names: a tag (`v1`, `v0.1.0`), or a full commit SHA with the comment init
 * writes after it (`# v0.1.0`); null for anything else (a branch, a SHA without its comment).
 */
function versionOf(ref: string, text: string, uses: string): string | null {
  const tag = /^v?(\d+(?:\.\d+){0,2})$/.exec(ref);
  if (tag) return tag[1] as string;
  if (!/^[0-9a-f]{40}$/.test(ref)) return null;
  const line = text.split('\n').find((l) => /^\s*(-\s*)?uses:/.test(l) && l.includes(uses));
  return /#\s*v?(\d+\.\d+\.\d+)\b/.exec(line ?? '')?.[1] ?? null;
}

/** The job pushes its episode's commit and context: it needs `contents: write`. */
function permissionDrift(job: string, permissions: unknown, drift: WorkerDrift): void {
  if (permissions === undefined) {
    drift.differ.push(
      'it sets no `permissions:`, so its jobs get the repository’s default token permissions, which push only when they are "Read and write" (init writes `contents: write`)',
    );
    return;
  }
  const contents =
    typeof permissions === 'string'
      ? permissions === 'write-all'
        ? 'write'
        : 'read'
      : (permissions as Record<string, unknown> | null)?.contents;
  if (contents !== 'write')
    drift.stop.push(
      `the job \`${job}\` has no \`contents: write\` permission, so it could not push its episode's result`,
    );
}

/** What the issue is told of the differences: the fix, and which of them stop the run. */
export function workerDriftText(drift: WorkerDrift, branch: string): string | null {
  if (drift.stop.length === 0 && drift.differ.length === 0) return null;
  const path = `.github/workflows/${GITHUB.workflow}`;
  const list = (xs: string[]) => xs.map((x) => `- ${x}`).join('\n');
  const fix =
    `The fix: in a clone of this repository, delete \`${path}\`, run \`forkflush init --github\` (it writes only the files ` +
    `that are missing) and push the workflow it writes to \`${branch}\` (README, "On GitHub").`;
  if (drift.stop.length > 0)
    return (
      `\`${path}\` on \`${branch}\` is not the worker workflow this forkflush release writes, and its jobs could not work, so no run started:\n\n${list(drift.stop)}\n\n` +
      (drift.differ.length > 0 ? `It also differs in what a run works with:\n\n${list(drift.differ)}\n\n` : '') +
      `${fix} Then label the issue again.`
    );
  return `\`${path}\` on \`${branch}\` differs from the worker workflow this forkflush release writes; the run goes on with it:\n\n${list(drift.differ)}\n\n${fix}`;
}
