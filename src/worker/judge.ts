// The judge: the snapshot's tree checked out into a fresh folder the agent never saw, setup run
// again there, the grader run in a sandbox of its own with the protected paths read-only, and what
// the graded code wrote under protected paths caught (episode.ts grades again when the machine ran short).
import { lstat, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { JUDGE_PLANTED_NAMED_MAX, JUDGE_WRITTEN_NAMED_MAX } from '../core/bounds.js';
import { CONFIG_PATH } from '../core/config.js';
import { guardedFolders, matchesAny } from '../core/globs.js';
import { addCleaned, type Cleaned, nestedRepoFiles, removeTree, sweepTree } from '../io/agent-files.js';
import { GitOutputTooLongError } from '../io/git.js';
import { NO_ACCOUNT, type Unaccounted } from '../io/sandbox.js';
import { expandHome, graderConfinement, judgeFixedPaths, privateTmp, setupConfinement } from './boundary.js';
import { checkoutInto, rewriteFiles, untrackedPaths } from './cleanroom.js';
import type { EpisodeJob } from './episode-input.js';
import { type JudgeGrading, runGrader } from './grade.js';
import { runSetup } from './setup.js';

/**
 * Grades the snapshot: its tree checked out into a fresh folder the agent never saw (no .git, and
 * none of the stored objects in sight), the grader run there, the folder removed.
 */
export async function judge(
  job: EpisodeJob,
  tree: string,
  env: NodeJS.ProcessEnv,
  swept: Cleaned,
): Promise<JudgeGrading> {
  // 1. The judge's checkout, its /tmp, and what of it is protected.
  const bench = await judgeBench(job, tree);
  try {
    // 2. Setup again, in the judge's checkout.
    let setupLog: string | undefined;
    if (job.config.setup.commands.length > 0) {
      const setup = await setupInJudge(bench, swept);
      setupLog = setup.log;
      if (setup.failure) {
        return { ...NO_GRADING, reason: `in the judge's checkout, ${setup.failure}`, setupLog, setupFailed: true };
      }
    }
    // 3. The grader, then what the graded code wrote under protected paths, or made and removed there.
    const confine = graderConfined(bench);
    // Handed over first: the change times read next are then the grader's to move, not forkflush's.
    await confine?.sandbox.handOver(confine.confinement);
    const guarded = guardedFolders(bench.treeFiles, bench.protectedGlobs);
    const before = await folderStamps(bench.dir, guarded);
    const grading = await gradeInJudge(bench, env, confine);
    const touched = await changedFolders(bench.dir, before);
    const left = await sweepTree(bench.dir, job.signal);
    addCleaned(swept, left.cleaned);
    const written = left.complete ? await writtenUnderProtected(bench, left.paths) : null;
    const voided =
      written === null
        ? `the graded code left more in the judge's checkout than forkflush can list (${UNLISTABLE}), so what it wrote under protected paths is not known`
        : written.length > 0
          ? `the graded code wrote under protected paths while the grader ran: ${listSome(written, JUDGE_WRITTEN_NAMED_MAX)}`
          : touched.length > 0
            ? `the graded code added or removed files in ${listSome(touched, JUDGE_WRITTEN_NAMED_MAX)} while the grader ran, where a new file can be at a protected path (one made and removed again is not seen after)`
            : null;
    const result = voided && grading.score !== null ? { ...grading, score: null, reason: voided } : grading;
    return { ...result, ...(setupLog !== undefined ? { setupLog } : {}) };
  } finally {
    bench.account.release();
    // The judge's copy holds the agent's files, any names, any depth: rm -rf, and never a reason to fail.
    for (const d of [bench.dir, bench.tmp]) await removeTree(d).catch(() => {});
  }
}

type Bench = Awaited<ReturnType<typeof judgeBench>>;

/** The judge's checkout and /tmp, its account, the places it never sees, and the tree's protected files. */
async function judgeBench(job: EpisodeJob, tree: string) {
  const { config, places, isolation } = job;
  const dir = join(job.scratchDir, 'judge');
  const tmp = join(job.scratchDir, 'judge-tmp');
  const index = join(job.scratchDir, 'judge.index');
  // A checkout that fails (a full disk) leaves no half copy behind.
  await checkoutInto(job.own, tree, dir, index).catch(async (e: unknown) => {
    await removeTree(dir).catch(() => {});
    throw e;
  });
  await removeTree(tmp);
  await mkdir(join(tmp, 'home'), { recursive: true });
  // Everything the agent could write or read by id: its places, the objects, the shared folders.
  const agentPlaces = [
    places.workspace,
    places.context,
    places.box,
    ...places.objects,
    ...config.sandbox.write.map(expandHome),
  ];
  const protectedGlobs = [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])];
  const treeFiles = (await job.own.out(['ls-tree', '-r', '-z', '--name-only', tree])).split('\0').filter(Boolean);
  return {
    job,
    dir,
    tmp,
    index,
    source: job.env ?? process.env,
    sandbox: isolation.sandbox,
    agentPlaces,
    judgePlaces: { objects: [], private: places.private },
    protectedGlobs,
    treeFiles,
    // The judge's own account (its setup and its grader), never the agent's: no sibling and no
    // agent counts against its limits.
    account: isolation.sandbox?.account() ?? NO_ACCOUNT,
  };
}

/** The judge's confinement for setup or the grader, under its account (none without a sandbox). */
function confined(b: Bench, confinement: () => Unaccounted) {
  return b.sandbox ? { sandbox: b.sandbox, confinement: { ...confinement(), account: b.account } } : undefined;
}

/** Files in the checkout that the commit does not have, at protected paths; null: too many to list. */
async function madeAtProtectedPaths(b: Bench): Promise<string[] | null> {
  const made = await untrackedPaths(b.job.own, b.dir, b.index, { folders: false }).catch((e: unknown) => {
    if (e instanceof GitOutputTooLongError) return null;
    throw e;
  });
  return made === null ? null : made.filter((p) => matchesAny(p, b.protectedGlobs));
}

/** What the judge cannot list: more special files than its sweep keeps, or more new paths than git's output. */
const UNLISTABLE = 'more than 10 MB of special files or git redirects, or 64 MB of new paths';

/**
 * Setup again, in the judge's checkout: what the grader needs of it (node_modules, .venv) is made
 * afresh from the committed tree, never taken from the agent's workspace or a cache.
 */
async function setupInJudge(b: Bench, swept: Cleaned): Promise<{ log: string; failure?: string }> {
  const { job, dir, index, source } = b;
  const setupTmp = join(job.scratchDir, 'judge-setup-tmp');
  const run = await runSetup({
    config: job.config,
    dir,
    restore: { own: job.own, index },
    tmp: setupTmp,
    source,
    confine: confined(b, () => setupConfinement(dir, setupTmp, b.judgePlaces, job.config, source, b.agentPlaces)),
    signal: job.signal,
  });
  addCleaned(swept, run.cleaned);
  let log = `${run.log}(setup in the judge's checkout: ${run.failure ?? 'done'})\n`;
  if (run.failure) return { log, failure: run.failure };
  // Setup ran the commit's code (install scripts): what it made under a protected path (a
  // tests/conftest.py, a data file) is not the base's, and the grader must not read it; and
  // the protected files are written afresh, so that no hard link it made reaches them.
  // Its nested repositories keep their .git (the grader may ask git about them): their files are listed apart.
  const made = await madeAtProtectedPaths(b);
  const nested = await nestedRepoFiles(dir, job.signal);
  if (made === null || nested === null)
    return { log, failure: `setup left more in the checkout than forkflush can list (${UNLISTABLE})` };
  const planted = [...made, ...nested.filter((p) => matchesAny(p, b.protectedGlobs))];
  for (const p of planted) await removeTree(join(dir, p));
  if (planted.length > 0)
    log += `(removed what setup made under protected paths: ${listSome(planted, JUDGE_PLANTED_NAMED_MAX)})\n`;
  const protectedFiles = b.treeFiles.filter((f) => matchesAny(f, b.protectedGlobs));
  await rewriteFiles(job.own, dir, index, protectedFiles);
  return { log };
}

/**
 * The grader, with a home and a /tmp of the judge's own: nothing the agent left (in its home, its
 * box, or a shared sandbox.write folder) can reach the grading of its work. The protected paths
 * are read-only while the grader runs the agent's code: a solver could rewrite the checker.
 */
function gradeInJudge(b: Bench, env: NodeJS.ProcessEnv, confine: GraderConfined): Promise<JudgeGrading> {
  const { job, dir, tmp, sandbox } = b;
  // No .pytest_cache either: pytest writes it at its rootdir, which may be a guarded folder (tests/).
  const pytest = { PYTEST_ADDOPTS: [env.PYTEST_ADDOPTS, '-p no:cacheprovider'].filter(Boolean).join(' ') };
  return runGrader(
    job.config,
    dir,
    { ...env, ...privateTmp(tmp, sandbox !== null), ...JUDGE_PYTHON, ...pytest },
    confine,
    job.signal,
  );
}

/** The grader's confinement in the judge: the protected paths read-only (none without a sandbox). */
function graderConfined(b: Bench) {
  const { job, dir, tmp, sandbox } = b;
  const fixed = sandbox ? judgeFixedPaths(b.treeFiles, b.protectedGlobs) : undefined;
  return confined(b, () => graderConfinement(dir, tmp, b.judgePlaces, job.config, b.source, b.agentPlaces, fixed));
}
type GraderConfined = ReturnType<typeof graderConfined>;

/**
 * A file at a protected path the checkout did not have was made while the grader ran the agent's
 * code (a conftest.py in a protected tests folder): what it graded was not the commit. A FIFO or
 * a socket there (`swept`: what the sweep removed) counts too.
 */
async function writtenUnderProtected(b: Bench, swept: string[]): Promise<string[] | null> {
  const tracked = new Set(b.treeFiles);
  const sweptThere = swept.filter((p) => !tracked.has(p) && matchesAny(p, b.protectedGlobs));
  const made = await madeAtProtectedPaths(b);
  return made === null ? null : [...sweptThere, ...made];
}

/**
 * Each folder's inode and change time (ctime: no process of the sandbox's user can set it back),
 * which a file made, renamed or removed in it moves on; null for one that is not there.
 */
async function folderStamps(dir: string, folders: string[]): Promise<Map<string, string | null>> {
  const stamps = new Map<string, string | null>();
  for (const f of folders) {
    const s = await lstat(join(dir, f), { bigint: true }).catch(() => null);
    stamps.set(f, s?.isDirectory() ? `${s.ino}:${s.ctimeNs}` : null);
  }
  return stamps;
}

/** The folders whose stamp moved since `before`. */
async function changedFolders(dir: string, before: Map<string, string | null>): Promise<string[]> {
  const now = await folderStamps(dir, [...before.keys()]);
  return [...before].filter(([f, stamp]) => now.get(f) !== stamp).map(([f]) => f);
}

function listSome(paths: string[], n: number): string {
  return `${paths.slice(0, n).join(', ')}${paths.length > n ? ', ...' : ''}`;
}

/** A judge that graded nothing (its setup failed, or git stalled): the reason is added. */
export const NO_GRADING = { score: null, seconds: 0, exitCode: null, signal: null, stdout: '', stderr: '' } as const;

/**
 * Python in the judge reads no bytecode the graded code could have written or committed (a .pyc
 * that stands in for a protected module: __pycache__ is no protected path) and no user site
 * folder in the judge's home (a usercustomize.py): its cache goes to a path that cannot exist.
 */
export const JUDGE_PYTHON = {
  PYTHONPYCACHEPREFIX: '/dev/null/forkflush-no-bytecode',
  PYTHONDONTWRITEBYTECODE: '1',
  PYTHONNOUSERSITE: '1',
};
