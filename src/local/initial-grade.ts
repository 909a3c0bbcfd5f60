// The initial workspace graded as a judge grades an episode (confined, in a clean checkout, after
// setup), and, when the commit gets no score, the working tree graded too: a grader that reads a
// file the user did not commit is told apart from one that fails on the task.
import { cp, lstat, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  NAMED_FILES_MAX,
  REGRADE_CHECK_MAX_SECONDS,
  WORKING_TREE_MAX_BYTES,
  WORKING_TREE_MAX_FILES,
} from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { DEPENDENCY_HINT, MISSING_PACKAGE } from '../core/judge-hints.js';
import { formatNumber, shellQuote } from '../core/text.js';
import { Git } from '../io/git.js';
import type { SandboxAccount, Unaccounted } from '../io/sandbox.js';
import { graderConfinement, type Isolation, privateTmp, setupConfinement, withAccount } from '../worker/boundary.js';
import type { CheckoutIndex } from '../worker/cleanroom.js';
import { allowedEnv } from '../worker/env.js';
import { type Grading, runGrader } from '../worker/grade.js';
import { runSetup } from '../worker/setup.js';
import { offCommitAtProtectedPaths, unrecordable } from '../worker/snapshot.js';
import type { LocalForge } from './forge.js';
import { untrackedFiles, whileWatchingReads } from './grader-reads.js';
import { RunStore } from './store.js';

/** The initial workspace's grading; a run whose commit gets no score for want of an uncommitted file is refused. */
export async function gradeBase(
  config: Config,
  b: {
    repo: string;
    base: string;
    scratch: boolean;
    store: RunStore;
    forge: LocalForge;
    isolation: Isolation;
    /** The environment the grader's and setup's allowlists are taken from. */
    env: NodeJS.ProcessEnv;
  },
): Promise<InitialGrade> {
  const baseGrade = await b.forge.withCheckout(b.base, 'base', async (dir, places, checkout) => {
    const scratch = b.store.path('episodes', 'base');
    const grade = await gradeInitial(config, dir, places, b.isolation, scratch, b.env, checkout);
    // What the grader leaves in its folder, it leaves in the workspace of every agent that grades.
    const left = config.setup.commands.length === 0 ? await unrecordable(checkout, dir) : null;
    if (left)
      throw new UserError(
        `grading the initial workspace left a file in it that no episode could record: ${left}. Every agent that runs "$FORKFLUSH_GRADE" ` +
          'would leave it too, and its episode would get no score; nothing ran',
      );
    return grade;
  });
  // A grader that cannot load a package fails every branch the same way: said before any agent.
  if (baseGrade.score === null && MISSING_PACKAGE.test(baseGrade.reason ?? ''))
    throw new UserError(`the initial workspace gets no score (${baseGrade.reason}): ${DEPENDENCY_HINT}; nothing ran`);
  if (baseGrade.score === null && !b.scratch) {
    // No score for the commit: is it the commit's fault? The working tree with what is not
    // committed, graded the same way, tells a grader that reads an uncommitted file apart.
    const working = await gradeWorkingTree(config, b.repo, b.store, b.isolation, b.env);
    if (working && working.grade.score !== null) throw new UserError(uncommittedGraderInputs(baseGrade, working));
  }
  return baseGrade;
}

/** The initial workspace's grading; `again`: the score of a second grading, where the first was quick. */
export type InitialGrade = Grading & { again?: number | null };

/** The warning when the initial workspace, graded twice (`again`), got two scores; null otherwise. */
export function notDeterministic({ score, again }: InitialGrade): string | null {
  if (score === null || again === undefined || again === null || again === score) return null;
  return (
    `the grader gave the initial workspace two scores, ${formatNumber(score, 6)} and ${formatNumber(again, 6)}, graded twice as ` +
    'committed: a grader that is not deterministic (a timing, a sample) makes the best, and the winner of each round, partly ' +
    'luck; have grader.command repeat its measurement and print the mean, or round the score to what it can tell apart'
  );
}

type InitialGrading = Parameters<typeof gradeInitial>;

/**
 * Grades the initial workspace the way the judge grades an episode: confined, in a clean checkout,
 * after setup (when there is one). A setup that fails there would fail in every branch of the
 * opening round (they start from the same commit): the run does not start (exit 2). So with a
 * grader that writes at protected paths (`checkout`: the checkout's, to tell): the judge keeps
 * them read-only, and in an agent's workspace what it wrote there is the agent's change.
 */
export async function gradeInitial(
  config: Config,
  dir: string,
  places: { objects: string[]; private: string[] },
  isolation: Isolation,
  scratch: string,
  source: NodeJS.ProcessEnv,
  checkout?: CheckoutIndex,
): Promise<InitialGrade> {
  // An account of its own, as every judge has.
  return withAccount(isolation.sandbox, (account) =>
    gradeInitialAs(account, config, dir, places, isolation, scratch, source, checkout),
  );
}

async function gradeInitialAs(
  account: SandboxAccount,
  ...[config, dir, places, isolation, scratch, source, checkout]: InitialGrading
) {
  const tmp = join(scratch, 'tmp');
  await mkdir(join(tmp, 'home'), { recursive: true });
  const env = { ...allowedEnv(source, config.grader.env), ...privateTmp(tmp, isolation.sandbox !== null) };
  const sandbox = isolation.sandbox;
  // Confined as a judge is, under its account; the user's commit borrows no objects.
  const judged = { objects: [], private: places.private };
  const confine = (confinement: () => Unaccounted) =>
    sandbox ? { sandbox, confinement: { ...confinement(), account } } : undefined;
  if (config.setup.commands.length > 0) {
    const setupTmp = join(scratch, 'setup-tmp');
    // Tracked files are not put back here: this is the user's own commit, and nothing of this
    // checkout is recorded (the episodes' judges do put them back).
    const run = await runSetup({
      config,
      dir,
      tmp: setupTmp,
      source,
      confine: confine(() => setupConfinement(dir, setupTmp, judged, config, source)),
    });
    if (run.failure) {
      throw new UserError(
        `${run.failure}, in a clean checkout of the initial workspace: every episode would fail the same way. ` +
          'Run setup.commands by hand in a fresh clone, fix them (or what they read), commit, and run again; nothing ran',
      );
    }
  }
  const globs = config.grader.protected;
  const before = checkout ? await offCommitAtProtectedPaths(checkout, dir, globs) : null;
  const grade = () =>
    runGrader(
      config,
      dir,
      env,
      confine(() => graderConfinement(dir, tmp, judged, config, source)),
    );
  const grading: InitialGrade = await grade();
  if (grading.score !== null && grading.seconds <= REGRADE_CHECK_MAX_SECONDS) grading.again = (await grade()).score;
  const after = checkout && before ? await offCommitAtProtectedPaths(checkout, dir, globs) : null;
  const had = new Set(before);
  const written = after?.filter((p) => !had.has(p)) ?? [];
  if (written.length > 0)
    throw new UserError(
      `grading the initial workspace wrote at paths grader.protected keeps (${globs.join(', ')}): ` +
        `${written.slice(0, NAMED_FILES_MAX).join(', ')}${written.length > NAMED_FILES_MAX ? ', ...' : ''}. ` +
        "The judge keeps those paths read-only, and what a grading writes there in an agent's workspace is taken for the agent's change, " +
        'so no episode would get a score: have the grader write elsewhere (under $TMPDIR, or a folder grader.protected does not cover), then run again; nothing ran',
    );
  return grading;
}

interface WorkingTreeGrading {
  grade: Grading;
  /** The untracked files the grader read (null: this filesystem does not say). */
  read: string[] | null;
  untracked: string[];
  /** Committed files git keeps through a filter, with its name (filteredFiles). */
  filtered: { path: string; filter: string }[];
}

/** Committed files whose .gitattributes name a filter (`filter=lfs`): the commit holds the filter's output. */
async function filteredFiles(git: Git): Promise<{ path: string; filter: string }[]> {
  const files = (await git.out(['ls-files', '-z'])).split('\0').filter(Boolean);
  if (files.length === 0 || files.length > WORKING_TREE_MAX_FILES) return [];
  const r = await git.exec(['check-attr', '-z', '--stdin', 'filter'], { input: files.join('\0'), check: false });
  const f = r.stdout.split('\0');
  const out: { path: string; filter: string }[] = [];
  for (let i = 0; i + 2 < f.length; i += 3)
    if (!['unspecified', 'unset', 'set'].includes(f[i + 2] as string))
      out.push({ path: f[i] as string, filter: f[i + 2] as string });
  return out;
}

/**
 * The working tree as it is (the commit's files with their changes, and the files git does not
 * have and does not ignore), copied and graded as the initial workspace is; with the untracked
 * files the grader read (null: this filesystem does not say). Null when the working tree is the
 * commit, or too large to copy.
 */
async function gradeWorkingTree(
  config: Config,
  repo: string,
  store: RunStore,
  isolation: Isolation,
  env: NodeJS.ProcessEnv,
): Promise<WorkingTreeGrading | null> {
  const git = new Git(repo);
  const filtered = await filteredFiles(git);
  const clean = (await git.out(['status', '--porcelain', '--untracked-files=all'])).trim() === '';
  // A file git keeps through a filter (git-lfs) is, in the commit, what the filter made of it.
  if (clean && filtered.length === 0) return null;
  const files = (await git.out(['ls-files', '--cached', '--others', '--exclude-standard', '-z']))
    .split('\0')
    .filter(Boolean);
  if (files.length > WORKING_TREE_MAX_FILES) return null;
  const dir = store.workspace('working-tree');
  const scratch = store.path('episodes', 'working-tree');
  try {
    let bytes = 0;
    for (const f of files) {
      const s = await lstat(join(repo, f)).catch(() => null);
      if (!s || s.isDirectory()) continue;
      bytes += s.size;
      if (bytes > WORKING_TREE_MAX_BYTES) return null;
      await mkdir(dirname(join(dir, f)), { recursive: true });
      await cp(join(repo, f), join(dir, f), { preserveTimestamps: true });
    }
    const untracked = await untrackedFiles(repo);
    const places = { objects: [], private: [repo, RunStore.runsDir(repo)] };
    const watched = await whileWatchingReads(dir, untracked, () =>
      gradeInitial(config, dir, places, isolation, scratch, env).catch((): Grading | null => null),
    );
    return watched.result ? { grade: watched.result, read: watched.read, untracked, filtered } : null;
  } finally {
    await rm(dir, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Why the run does not start: the commit gets no score, the working tree with uncommitted files does. */
function uncommittedGraderInputs(committed: Grading, working: WorkingTreeGrading): string {
  const read = working.read ?? [];
  const { filtered } = working;
  if (read.length === 0 && filtered.length > 0) {
    const named = filtered.slice(0, NAMED_FILES_MAX).map((f) => f.path);
    const filters = [...new Set(filtered.map((f) => f.filter))].join(', ');
    return (
      `the initial workspace as committed gets no score (${committed.reason ?? 'no reason given'}), but the working tree scores ` +
      `${working.grade.score}: git keeps ${named.join(', ')}${filtered.length > NAMED_FILES_MAX ? ', ...' : ''} through its filter ` +
      `${filters} (.gitattributes), so the commit holds what the filter made of ${filtered.length === 1 ? 'it' : 'them'} (for git-lfs, a pointer), ` +
      'and episodes and the judge get that. Commit the files themselves (git lfs untrack, then git add --renormalize .), ' +
      'or have setup.commands fetch them, then run again'
    );
  }
  const which =
    read.length > 0
      ? `it reads ${read.length === 1 ? 'a file' : 'files'} git does not have: ${read.slice(0, NAMED_FILES_MAX).join(', ')}${read.length > NAMED_FILES_MAX ? ', ...' : ''}`
      : 'it needs a change or a file that is not committed (git status lists them)';
  return (
    `the initial workspace as committed gets no score (${committed.reason ?? 'no reason given'}), but the working tree scores ` +
    `${working.grade.score}: episodes start from the commit, and the grader fails there because ${which}. ` +
    `Commit ${read.length > 0 ? `${read.length === 1 ? 'it' : 'them'} (git add ${read.slice(0, NAMED_FILES_MAX).map(shellQuote).join(' ')}, git commit)` : 'what it needs'}, then run again`
  );
}
