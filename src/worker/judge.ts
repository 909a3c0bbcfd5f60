// The judge: the snapshot's tree checked out into a fresh folder the agent never saw, setup run
// again there, the grader run in a sandbox of its own with the protected paths read-only, and what
// the graded code wrote under protected paths caught (episode.ts grades again when the machine ran short).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CONFIG_PATH } from '../core/config.js';
import { matchesAny } from '../core/globs.js';
import { addCleaned, type Cleaned, removeTree, sweepTree } from '../io/agent-files.js';
import { NO_ACCOUNT } from '../io/sandbox.js';
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
  const { config, places, isolation } = job;
  const dir = join(job.scratchDir, 'judge');
  const tmp = join(job.scratchDir, 'judge-tmp');
  const index = join(job.scratchDir, 'judge.index');
  const source = job.env ?? process.env;
  // A checkout that fails (a full disk) leaves no half copy behind.
  await checkoutInto(job.own, tree, dir, index).catch(async (e: unknown) => {
    await removeTree(dir).catch(() => {});
    throw e;
  });
  await removeTree(tmp);
  await mkdir(join(tmp, 'home'), { recursive: true });
  const sandbox = isolation.sandbox;
  // Everything the agent could write or read by id: its places, the objects, the shared folders.
  const agentPlaces = [
    places.workspace,
    places.context,
    places.box,
    ...places.objects,
    ...config.sandbox.write.map(expandHome),
  ];
  const judgePlaces = { objects: [], private: places.private };
  const protectedGlobs = [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])];
  const treeFiles = (await job.own.out(['ls-tree', '-r', '-z', '--name-only', tree])).split('\0').filter(Boolean);
  const protectedFiles = treeFiles.filter((f) => matchesAny(f, protectedGlobs));
  // Files in the checkout that the commit does not have, at protected paths.
  const madeAtProtectedPaths = async () =>
    (await untrackedPaths(job.own, dir, index, { folders: false })).filter((p) => matchesAny(p, protectedGlobs));
  const listSome = (paths: string[], n: number) => `${paths.slice(0, n).join(', ')}${paths.length > n ? ', ...' : ''}`;
  // The judge's own account (its setup and its grader), never the agent's: no sibling and no
  // agent counts against its limits.
  const account = sandbox?.account() ?? NO_ACCOUNT;
  try {
    // Setup again, in the judge's checkout: what the grader needs of it (node_modules, .venv) is
    // made afresh from the committed tree, never taken from the agent's workspace or a cache.
    let setupLog: string | undefined;
    if (config.setup.commands.length > 0) {
      const setupTmp = join(job.scratchDir, 'judge-setup-tmp');
      const run = await runSetup({
        config,
        dir,
        restore: { own: job.own, index },
        tmp: setupTmp,
        source,
        confine: sandbox
          ? {
              sandbox,
              confinement: { ...setupConfinement(dir, setupTmp, judgePlaces, config, source, agentPlaces), account },
            }
          : undefined,
        signal: job.signal,
      });
      addCleaned(swept, run.cleaned);
      setupLog = `${run.log}(setup in the judge's checkout: ${run.failure ?? 'done'})\n`;
      if (run.failure) {
        return { ...NO_GRADING, reason: `in the judge's checkout, ${run.failure}`, setupLog, setupFailed: true };
      }
      // Setup ran the commit's code (install scripts): what it made under a protected path (a
      // tests/conftest.py, a data file) is not the base's, and the grader must not read it; and
      // the protected files are written afresh, so that no hard link it made reaches them.
      const planted = await madeAtProtectedPaths();
      for (const p of planted) await removeTree(join(dir, p));
      if (planted.length > 0) setupLog += `(removed what setup made under protected paths: ${listSome(planted, 5)})\n`;
      await rewriteFiles(job.own, dir, index, protectedFiles);
    }
    // A home and a /tmp of the judge's own: nothing the agent left (in its home, its box, or a
    // shared sandbox.write folder) can reach the grading of its work. The protected paths are
    // read-only while the grader runs the agent's code: a solver could rewrite the checker.
    const fixed = sandbox ? judgeFixedPaths(treeFiles, protectedGlobs) : undefined;
    const grading = await runGrader(
      config,
      dir,
      { ...env, ...privateTmp(tmp, sandbox !== null), ...JUDGE_PYTHON },
      sandbox
        ? {
            sandbox,
            confinement: { ...graderConfinement(dir, tmp, judgePlaces, config, source, agentPlaces, fixed), account },
          }
        : undefined,
      job.signal,
    );
    // What the graded code left that would stall git goes before git lists the checkout.
    const left = await sweepTree(dir, job.signal);
    addCleaned(swept, left.cleaned);
    // A file at a protected path the checkout did not have was made while the grader ran the
    // agent's code (a conftest.py in a protected tests folder): what it graded was not the commit.
    // A FIFO or a socket there counts too, swept or not.
    const tracked = new Set(treeFiles);
    const sweptThere = left.paths.filter((p) => !tracked.has(p) && matchesAny(p, protectedGlobs));
    const written = [...sweptThere, ...(await madeAtProtectedPaths())];
    const result =
      written.length > 0 && grading.score !== null
        ? {
            ...grading,
            score: null,
            reason: `the graded code wrote under protected paths while the grader ran: ${listSome(written, 3)}`,
          }
        : grading;
    return { ...result, ...(setupLog !== undefined ? { setupLog } : {}) };
  } finally {
    account.release();
    // The judge's copy holds the agent's files, any names, any depth: rm -rf, and never a reason to fail.
    for (const d of [dir, tmp]) await removeTree(d).catch(() => {});
  }
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
