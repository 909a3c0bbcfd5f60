// Round 2: agents that go for forkflush's resources instead of its score: floods of output and
// closed streams, a terabyte (sparse) file, many files, names no program expects, trees deeper
// than PATH_MAX, a fork storm. Each must end within its bounds (the episode by its deadline plus
// a few seconds, the run finished), with forkflush's own memory and disk left alone, and without
// the run crashing: one agent must not be able to stop a whole run, now or on every resume.
// Sizes stay modest on disk (sparse files; 100 MB of output at most).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type AttackRepo,
  CAT_GRADER,
  type CliRun,
  cleanRegrade,
  cleanupAttackTemps,
  commitMessage,
  currentCli,
  describeSandboxed,
  FX,
  killProcessesUnder,
  type LocalRun,
  logWithoutMasks,
  makeActionRepo,
  makeAttackRepo,
  newestRunState,
  processesWith,
  runCli,
  runJob,
  runLocal,
  showFile,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

/**
 * Removes a task folder with rm(1): Node's rm (and the helpers' cleanup) cannot remove a tree
 * deeper than PATH_MAX.
 */
function removeDeep(repo: AttackRepo): void {
  execFileSync('rm', ['-rf', join(repo.dir, '..')]);
}

/** Two serial episodes (the second carries the first one's context). */
const TWO_EPISODES = 'total: 12\n  unit: tokens\n  episode: 6';

/** The paths of a commit's tree, as bytes. */
function treeNames(gitDir: string, commit: string): Buffer[] {
  const out = execFileSync('git', [`--git-dir=${gitDir}`, 'ls-tree', '-r', '-z', '--name-only', commit]);
  const names: Buffer[] = [];
  for (let at = 0; at < out.length; ) {
    const end = out.indexOf(0, at);
    names.push(out.subarray(at, end < 0 ? out.length : end));
    at = end < 0 ? out.length : end + 1;
  }
  return names;
}

/** The bytes of every file under a folder. */
function gitBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) total += statSync(join(e.parentPath, e.name)).size;
  }
  return total;
}

/** The whole run as the CLI runs it, in a child process, then anything it left is killed. */
async function cliRun(repo: AttackRepo, deadlineMs: number): Promise<CliRun> {
  const root = join(repo.dir, '..');
  try {
    return await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs, killAboveMb: 3_000 });
  } finally {
    killProcessesUnder(root);
  }
}

function describeCli(cli: CliRun, repo: AttackRepo): string {
  const state = newestRunState(repo.dir);
  return `exit ${cli.exitCode}${cli.timedOut ? ' (killed at the deadline)' : ''} after ${cli.ms} ms, run ${state?.status}, peak ${cli.peakMb} MB:\n${cli.out.slice(-1200)}`;
}

describeSandboxed('floods and closed streams', () => {
  it('100 MB of stdout and 50 MB of stderr, each one line: the run ends, small, with a short note and message', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/round2-flood.sh flood', grader: CAT_GRADER, agentTimeout: 20 });
    const cli = await cliRun(repo, 40_000);
    const how = describeCli(cli, repo);
    expect(cli.timedOut, how).toBe(false);
    expect(cli.exitCode, how).toBe(0);
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    expect(result?.exit).toBe('crash');
    expect(result?.score).toBe(6);
    expect((result?.note ?? '').length).toBeLessThan(600);
    expect(commitMessage(join(repo.dir, '.git'), result?.commit ?? '').length).toBeLessThan(4_000);
    expect(cli.peakMb, how).toBeLessThan(400);
  });

  it('an agent that closes stdin, stdout and stderr at once still has its work recorded', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/round2-flood.sh closed', grader: CAT_GRADER });
    const { result } = await runLocal(repo);
    // 'finished', not 'timeout': forkflush did not wait out agent.timeout (20 s) for streams that
    // never speak again; score 6: nor did it take their closing for the agent's end and cut it short.
    expect(result.exit).toBe('finished');
    expect(result.score).toBe(6);
  });
});

describeSandboxed('big and many files', () => {
  it.each([
    ['huge.bin', 'huge.bin'],
    ['a name that is not UTF-8', "$(printf 'huge\\377.bin')"],
  ])(
    'a 1 TB sparse file in the workspace (%s): the episode ends within its bounds, refused, and the terabyte goes nowhere',
    async (_, name) => {
      const repo = makeAttackRepo({
        agent: `truncate -s 1T "${name}" && echo 6 > value.txt && echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"`,
        grader: CAT_GRADER,
        agentTimeout: 5,
      });
      const gitDir = join(repo.dir, '.git');
      const before = gitBytes(gitDir);
      // The agent is done in a moment; recording and grading its workspace must not take forever.
      const cli = await cliRun(repo, 20_000);
      const how = describeCli(cli, repo);
      const grown = gitBytes(gitDir) - before;
      expect(cli.timedOut, how).toBe(false);
      // It ends normally, with exit 1: no episode got a score.
      expect(cli.exitCode, how).toBe(1);
      expect(newestRunState(repo.dir)?.status, how).toBe('finished');
      // Not stored (a terabyte of zeros compresses to about a gigabyte), not checked out for the judge.
      expect(grown, `${grown} bytes more in the repository's .git`).toBeLessThan(50_000_000);
      // The episode keeps its base, and says why.
      const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
      expect(result?.score).toBeNull();
      expect(result?.reason).toMatch(/huge.*\.bin" is 1,048,576 MB, more than a file may be \(100 MB/);
    },
  );

  it('an oversized sparse file hidden past 64 MB of long names: the listing is never read in part, and nothing is stored', async () => {
    // git lists "0big" first; 17,000 names of about 3,900 bytes come after it, past what forkflush
    // reads of git's output, which used to keep the end and so lose the oversized file.
    const repo = makeAttackRepo({
      agent:
        'truncate -s 150M 0big && node -e \'const fs=require("fs");const d=Array.from({length:15},(_,i)=>String(i).padEnd(250,"d")).join("/");fs.mkdirSync(d,{recursive:true});for(let i=0;i<17000;i++)fs.writeFileSync(d+"/"+i,"")\' && ' +
        'echo 6 > value.txt && echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      grader: CAT_GRADER,
    });
    const gitDir = join(repo.dir, '.git');
    const before = gitBytes(gitDir);
    const { result } = await runLocal(repo);
    expect(result.score).toBeNull();
    expect(result.reason).toMatch(/the workspace could not be recorded .*its output passed 64 MB/);
    expect(gitBytes(gitDir) - before).toBeLessThan(50_000_000);
  });

  it('a context of 1.25 GB of sparse files: emptied when the agent is done, said in the note, never carried on', async () => {
    const repo = makeAttackRepo({
      agent:
        'for i in 1 2 3 4 5; do truncate -s 250M "$FORKFLUSH_CONTEXT_DIR/part$i"; done; ' +
        'echo 6 > value.txt && echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      grader: CAT_GRADER,
    });
    const { result, run } = await runLocal(repo);
    expect(result.score).toBe(6);
    expect(result.note).toMatch(/everything in a context whose files passed 1024 MB in all/);
    expect(readdirSync(run.store.context('r0.b0'))).toEqual([]);
  });

  it('100,001 new files: refused by their number before git hashes one, the episode keeps its base', async () => {
    const repo = makeAttackRepo({
      agent:
        'node -e \'const fs=require("fs");for(let d=0;d<101;d++){fs.mkdirSync("many/"+d,{recursive:true});for(let i=0;i<1000;i++)fs.writeFileSync("many/"+d+"/"+i,"")}fs.writeFileSync("many/last","")\' && ' +
        'echo 6 > value.txt && echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      grader: CAT_GRADER,
      agentTimeout: 150,
    });
    const { result } = await runLocal(repo);
    expect(result.score).toBeNull();
    expect(result.reason).toMatch(
      /more than 100,000 files were added or changed; keep generated files .* out with \.gitignore/,
    );
    expect(showFile(join(repo.dir, '.git'), result.commit, 'value.txt')).toBe('1\n');
    // 10 s on an idle machine: room for a busy one.
  }, 180_000);

  it('10000 files, names with newlines, escapes and bytes that are not UTF-8: recorded and graded as a clean checkout', async () => {
    const repo = makeAttackRepo({
      agent:
        'node -e \'const fs=require("fs");for(let d=0;d<10;d++){fs.mkdirSync("many/"+d,{recursive:true});for(let i=0;i<1000;i++)fs.writeFileSync("many/"+d+"/"+i,"")}\' && ' +
        'sh {fx}/round2-names.sh . names && echo 6 > value.txt && echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      grader: CAT_GRADER,
    });
    const { result, ms } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    expect(result.score).toBe(6);
    expect(result.score).toBe(cleanRegrade(gitDir, result.commit, repo.grader));
    expect(showFile(gitDir, result.commit, 'many/9/999')).toBe('');
    expect(showFile(gitDir, result.commit, 'a\nForkflush-Score: 999')).toBe('newline\n');
    // The names as bytes: the files and the folder kept, the FIFO not (git has no FIFOs).
    const names = treeNames(gitDir, result.commit);
    for (const name of ['d\xff\xfe', 'g\xfddir/inner.txt', 'f\xfelink', 'b\rForkflush-Score: 998'])
      expect(
        names.some((n) => n.equals(Buffer.from(name, 'latin1'))),
        JSON.stringify(name),
      ).toBe(true);
    expect(names.some((n) => n.includes(Buffer.from('fifo')))).toBe(false);
    // The message names none of them on a line of its own.
    expect(commitMessage(gitDir, result.commit)).not.toMatch(/^Forkflush-Score: 99[89]/m);
    // A bound on a pathological walk (hours), not a timing: 10 s idle, 35 s beside the whole suite.
    expect(ms).toBeLessThan(120_000);
  }, 180_000);
});

describeSandboxed('names and depths that break folder walks', () => {
  it.each([
    ['names that are not UTF-8 (a file, a FIFO, a link, a folder)', 'names'],
    ['a tree deeper than PATH_MAX with a FIFO and a link at its bottom', 'deep'],
  ])('a context holding %s: the next episode carries the rest, and the run finishes', async (_, what) => {
    const repo = makeAttackRepo({
      agent: `[ -n "$(ls -A "$FORKFLUSH_CONTEXT_DIR")" ] && ls -AR "$FORKFLUSH_CONTEXT_DIR" > {logs}/carried-$FORKFLUSH_EPISODE 2>&1; sh {fx}/round2-names.sh "$FORKFLUSH_CONTEXT_DIR" ${what}; echo 6 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: CAT_GRADER,
      budget: TWO_EPISODES,
    });
    let run: LocalRun | undefined;
    let error: unknown;
    try {
      run = await runLocal(repo);
    } catch (e) {
      error = e;
    }
    const carried = (() => {
      try {
        return readFileSync(join(repo.logs, 'carried-r1.b0'), 'latin1');
      } catch {
        return '';
      }
    })();
    removeDeep(repo);
    expect(error, String((error as Error | undefined)?.stack)).toBeUndefined();
    expect(run?.state.status).toBe('finished');
    expect(run?.results.map((r) => r.score)).toEqual([6, 6]);
    // The second episode got the first one's files but what no copy can carry (a name that is not
    // UTF-8, a path past PATH_MAX: dropped, and the first result says so), and none of its links
    // or FIFOs.
    const first = run?.results[0];
    if (what === 'names') {
      expect(carried).toMatch(/Forkflush-Score: 999/);
      expect(carried).not.toMatch(/latin1|d\xff|g\xfddir/);
      expect(first?.note).toMatch(/entries whose names are not UTF-8/);
    } else {
      expect(carried).toMatch(/^\S+\/d\/d\/d:/m);
      expect(carried).not.toMatch(/deep\.txt/);
      expect(first?.note).toMatch(/folders nested deeper than 2048 bytes of path/);
    }
    expect(carried).not.toMatch(/fifo|link|pipe|shadow/);
  });

  it('a workspace holding a tree deeper than PATH_MAX: the episode ends (its work may be refused) and the run finishes', async () => {
    const repo = makeAttackRepo({
      agent: `sh {fx}/round2-names.sh . deep; echo 6 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: CAT_GRADER,
    });
    let run: LocalRun | undefined;
    let error: unknown;
    try {
      run = await runLocal(repo);
    } catch (e) {
      error = e;
    }
    removeDeep(repo);
    expect(error, String((error as Error | undefined)?.stack)).toBeUndefined();
    expect(run?.state.status).toBe('finished');
    // Either recorded (and graded: value.txt says 6) or refused with a reason; never a forged score.
    const r = run?.result;
    if (r?.score !== null) expect(r?.score).toBe(6);
    else expect(r?.reason).toMatch(/could not be recorded/);
  });
});

describeSandboxed('names and depths in the Action', () => {
  it.each([
    ['names that are not UTF-8', 'names'],
    ['a tree deeper than PATH_MAX', 'deep'],
  ])('a context holding %s: the job still records and pushes its result', async (_, what) => {
    const repo = makeActionRepo(
      `sh ${FX}/round2-names.sh "$FORKFLUSH_CONTEXT_DIR" ${what}; echo 4 > value.txt; echo '{"spent": 1}' > "$FORKFLUSH_USAGE_FILE"`,
    );
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b0');
    execFileSync('rm', ['-rf', repo.root]);
    expect(job.exitCode, logWithoutMasks(job.stdout).slice(-1500)).toBe(0);
    expect(job.outputs.score).toBe('4');
  });
});

describeSandboxed('processes', () => {
  const marker = `600.${process.pid}${Date.now() % 100000}`;
  let repo: AttackRepo;
  let run: LocalRun;
  beforeAll(async () => {
    // 1500 forks take seconds idle and far longer on a loaded machine: the storm, not its speed, is the test.
    repo = makeAttackRepo({
      agent: `sh {fx}/round2-procs.sh {logs} ${marker}`,
      grader: CAT_GRADER,
      agentTimeout: 90,
    });
    run = await runLocal(repo);
  }, 180_000);

  it('a fork storm (1500 processes) dies with the episode, and the run goes on', () => {
    expect(Number(readFileSync(join(repo.logs, 'live'), 'utf8'))).toBeGreaterThanOrEqual(1500);
    expect(run.result.score).toBe(6);
    expect(processesWith(marker)).toEqual([]);
  });

  it("a fork bomb in the sandbox is bounded below the machine's pid_max (RLIMIT_NPROC or a pids cgroup)", () => {
    const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
    const nproc = readFileSync(join(repo.logs, 'nproc'), 'utf8').trim();
    const pids = readFileSync(join(repo.logs, 'pids-max'), 'utf8').trim();
    const bound = Math.min(
      nproc === 'unlimited' ? Number.POSITIVE_INFINITY : Number(nproc),
      pids === 'max' ? Number.POSITIVE_INFINITY : Number(pids),
    );
    // Half the machine's processes at most: a bomb then leaves forkflush (and the rest) room to fork.
    expect(bound, `inside: RLIMIT_NPROC ${nproc}, pids.max ${pids}; the machine's pid_max ${pidMax}`).toBeLessThan(
      pidMax / 2,
    );
  });
});
