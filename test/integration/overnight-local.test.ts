// A local run left alone at night (`forkflush run`): what would fail every later episode stops it
// early, in words that say why; its disk does not fill; and a wait for a provider's outage keeps
// the run its process's. Whole runs through the CLI with command agents.
import { execSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, cliWith, said } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

/** The README's example budget: 400 tokens, the paper's schedule (K = 4, episodes of 24). */
const EXAMPLE_BUDGET = 'total: 400\n  unit: tokens';
const RATE_LIMITED = 'Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}';
const status = async (dir: string) => JSON.parse((await cli('status', dir, '--json')).out);
const runFolder = (dir: string) => {
  const [id] = readdirSync(join(dir, '.forkflush'));
  return join(dir, '.forkflush', id as string);
};

describe('an agent crash that quotes a Python ModuleNotFoundError', () => {
  // "ModuleNotFoundError" holds "ENOTFOUND": a broken Python install is no network outage, whose
  // waits (5 + 20 + 60 minutes) and fix ("check the network") would be wrong (core/failure.ts).
  it('is not taken for a network outage: no "could not reach its provider", no outage wait', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh broken.sh',
      budget: EXAMPLE_BUDGET,
      files: {
        'broken.sh':
          'echo "Traceback (most recent call last):" >&2\necho "ModuleNotFoundError: No module named \'litellm\'" >&2\nexit 1\n',
      },
    });
    const waits: number[] = [];
    const r = await cliWith(['run', repo.dir], { sleep: async (ms) => void waits.push(ms) });
    expect(r.err).not.toContain('could not reach its provider');
    expect(said(r.err).filter((l) => l.startsWith('forkflush: waiting'))).toEqual([]);
    expect(waits.filter((w) => w >= 60_000)).toEqual([]);
    const s = await status(repo.dir);
    const kinds = s.rounds[0].episodes.map((e: { failure: { kind: string } | null }) => e.failure?.kind ?? null);
    expect(kinds).not.toContain('network');
  }, 120_000);
});

describe('a run whose initial workspace has a score, and whose episodes never get one', () => {
  // A grader that scores the initial workspace but fails in the judge on every changed tree (a
  // module the judge lacks, here) once let a run spend 45 rounds, every episode "no score"
  // (core/stop.ts noScoreYet).
  it('stops after its opening round, having spent no more than it', async () => {
    const repo = makeTaskRepo({
      budget: EXAMPLE_BUDGET,
      agentCommand: 'sh a.sh',
      grader: 'sh g.sh',
      files: {
        'a.sh': 'echo $(( $(cat value.txt) + 1 )) > value.txt\necho \'{"spent": 5}\' > "$FORKFLUSH_USAGE_FILE"\n',
        'g.sh':
          'v=$(cat value.txt)\nif [ "$v" = 0 ]; then echo 0; else echo "ImportError: cannot import name sklearn" >&2; exit 1; fi\n',
      },
    });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(1);
    expect(said(r.err).at(-1)).toMatch(
      /^forkflush: the initial workspace got a score \(0\) but none of the 4 episodes since did \(the grader exited with code 1: ImportError: cannot import name sklearn\), so the run stopped .*: run the grader by hand on an episode's branch/,
    );
    const s = await status(repo.dir);
    expect(s.rounds.length).toBe(1);
    expect(s.budget.spent).toBeLessThanOrEqual(100);
  }, 120_000);

  // Another cause: no episode's workspace can be recorded (a 101 MB file the agent writes each time).
  it('stops after its opening round when no workspace of it could be recorded', async () => {
    const repo = makeTaskRepo({
      budget: EXAMPLE_BUDGET,
      agentCommand: 'sh big.sh',
      files: {
        'big.sh': 'truncate -s 101M weights.bin\necho 1 > value.txt\necho \'{"spent": 5}\' > "$FORKFLUSH_USAGE_FILE"\n',
      },
    });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(1);
    expect(said(r.err).at(-1)).toMatch(
      /none of the 4 episodes since did \(the workspace could not be recorded \("weights.bin" is 101 MB.*: keep what the agent makes that git cannot take/,
    );
    const s = await status(repo.dir);
    expect(s.rounds.length).toBe(1);
    expect(s.budget.spent).toBeLessThanOrEqual(100);
  }, 120_000);
});

describe('an agent that reports usage every time and never changes a file', () => {
  // A CLI left in an approval mode answers "I need your permission to edit files" and reports what
  // it spent, every time: such a run once ended with exit 0 (core/stop.ts nothingDone). It is not
  // stopped early: an agent that reports spending may have tried ideas and kept none.
  it('ends with exit 1, saying no episode changed the workspace, its words in the report', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh idle.sh',
      budget: 'total: 24\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
      files: {
        'idle.sh':
          'echo "I need your permission to edit files before I can go on."\necho \'{"spent": 5}\' > "$FORKFLUSH_USAGE_FILE"\n',
      },
    });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(1);
    expect(said(r.err).at(-1)).toMatch(
      /^forkflush: no episode did any work: none changed the workspace \(does agent.command run the agent on the task, and may it edit files there\?\)/,
    );
    expect(readFileSync(join(runFolder(repo.dir), 'report.md'), 'utf8')).toContain(
      'its final message, changing nothing: "I need your permission to edit files before I can go on."',
    );
  }, 120_000);
});

describe('setup.cache over a night of rounds', () => {
  // An entry is a copy of setup's output (node_modules, a venv) for one base: one a round, were
  // none ever removed (worker/setup.ts SetupCache.prune).
  it("keeps only the last round's entry once the run has finished", async () => {
    const repo = makeTaskRepo({
      budget: EXAMPLE_BUDGET,
      extra: 'setup:\n  commands: ["mkdir -p deps && head -c 200000 /dev/urandom > deps/blob"]\n  cache: true\n',
      files: { '.gitignore': 'deps/\n' },
    });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(0);
    const s = await status(repo.dir);
    expect(s.rounds.length).toBeGreaterThan(3);
    const cache = join(runFolder(repo.dir), 'setup-cache');
    const entries = existsSync(cache) ? readdirSync(cache) : [];
    expect(entries.length).toBeLessThanOrEqual(1);
  }, 120_000);
});

describe('a journal that grew over many nights', () => {
  it('past 16 MiB, keeps every earlier note: forkflush leaves its own line out and says so', async () => {
    // Before: the result's commit read the journal capped at 16 MiB, got nothing for a larger one,
    // and wrote "# Journal" and its one line in its place: every earlier night's note was gone
    // from the lineage, and the run ended green (found by the long-run review).
    const earlier = Array.from(
      { length: 360_000 },
      (_, i) => `- night ${i}: tried tabu tenure ${i % 97}, score ${i % 1000}\n`,
    );
    const journal = `# Notes\n${earlier.join('')}`;
    expect(Buffer.byteLength(journal)).toBeGreaterThan(16 * 2 ** 20);
    const repo = makeTaskRepo({
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
      files: { 'NOTES.md': journal },
    });
    const r = await cli('run', repo.dir);
    expect(r.code, r.out + r.err).toBe(0);
    const lineage = repo.git('branch', '--list', '--format=%(refname:short)', 'forkflush/*/lineage');
    expect(Number(repo.git('cat-file', '-s', `${lineage}:NOTES.md`))).toBeGreaterThanOrEqual(
      Buffer.byteLength(journal),
    );
    expect(execSync(`git show ${lineage}:NOTES.md | head -c 40`, { cwd: repo.dir, encoding: 'utf8' })).toBe(
      journal.slice(0, 40),
    );
    const [result] = JSON.parse((await cli('status', repo.dir, '--json')).out).episodes ?? [];
    expect(JSON.stringify(result ?? readFileSync(join(runFolder(repo.dir), 'state.json'), 'utf8'))).toContain(
      "forkflush's line was not added to NOTES.md: it is larger than 16 MiB",
    );
  }, 240_000);
});

describe("forkflush status while a run waits out its provider's outage", () => {
  // The waits (5, 20, 60 min) come between two drives: the run's lock is held across them (cli/drive.ts).
  const limited = () =>
    makeTaskRepo({
      agentCommand: 'sh limited.sh',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
      files: { 'limited.sh': `echo '${RATE_LIMITED}' >&2\nexit 1\n` },
    });
  /** What `forkflush status ARGS` says during the first outage wait of a run of `repo`. */
  const duringWait = async (dir: string, ...args: string[]) => {
    let during = '';
    const stop = new AbortController();
    const r = await cliWith(['run', dir], {
      signal: stop.signal,
      sleep: async (ms) => {
        if (ms < 60_000) return;
        during = (await cli('status', dir, ...args)).out;
        stop.abort('interrupted');
      },
    });
    expect(r.err).toContain('forkflush: waiting 5 min');
    return during;
  };

  it('says the run is being driven by its live process, with no resume command', async () => {
    const repo = limited();
    const json = JSON.parse(await duringWait(repo.dir, '--json'));
    expect(json).toMatchObject({ status: 'running', pid: process.pid, resume: null });
  }, 120_000);

  it("says so in words: running, waiting out its provider's outage", async () => {
    const repo = limited();
    const text = await duringWait(repo.dir);
    expect(text).toContain(`, running in process ${process.pid}, waiting out its provider's outage to try again\n`);
    expect(text).not.toContain('forkflush resume');
  }, 120_000);
});

describe('a resume started while the run waits out an outage', () => {
  // Two processes would drive the run at once (they reset each other's worktrees), and the waiting
  // one once wrote its stale stop over the run the other had finished.
  it('is refused, naming the waiting process, which goes on by itself after the wait and finishes', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh limited.sh',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
      files: { 'limited.sh': '' },
    });
    const logs = join(repo.callsLog, '..');
    writeFileSync(
      join(repo.dir, 'limited.sh'),
      `if [ -f ${logs}/up ]; then exec node agent.mjs improve ${repo.callsLog}; fi\necho '${RATE_LIMITED}' >&2\nexit 1\n`,
    );
    repo.git('commit', '-qam', 'the agent');
    let resumed: { code: number; err: string } | undefined;
    const r = await cliWith(['run', repo.dir], {
      sleep: async (ms) => {
        if (ms < 60_000 || resumed) return;
        // The user resumes it by hand; meanwhile the provider is back.
        writeFileSync(join(logs, 'up'), '');
        resumed = await cliWith(['resume', repo.dir], { sleep: async () => {} });
      },
    });
    expect(resumed?.code).toBe(2);
    expect(resumed?.err).toContain(`is being driven by process ${process.pid}: stop it first, or wait for it to end`);
    expect(r.code, r.err).toBe(0);
    expect((await status(repo.dir)).status).toBe('finished');
    expect(readFileSync(join(runFolder(repo.dir), 'report.md'), 'utf8')).not.toContain('rate limit');
  }, 120_000);
});

const IDLE_BUDGET = 'total: 12\n  unit: tokens\n  episode: 6';
const folderOf = (out: string) => (/results: (.*)\/results\.json/.exec(out)?.[1] ?? '') as string;
const jsonFile = (file: string) => JSON.parse(readFileSync(file, 'utf8'));

// An agent that reports honest usage and never edits a file: a CLI waiting for edit approval, a
// wrapper that only "plans", a model on a read-only tool set. `forkflush run` ends such a run with
// exit 1 ("no episode did any work", core/stop.ts nothingDone).
const IDLE_AGENT = {
  agentCommand: 'node idle.mjs',
  files: {
    'idle.mjs':
      "import { readFileSync, writeFileSync } from 'node:fs';\n" +
      'readFileSync(0, "utf8");\n' +
      'writeFileSync(process.env.FORKFLUSH_USAGE_FILE, JSON.stringify({ spent: Number(process.env.FORKFLUSH_BUDGET) * 0.9 }));\n',
  },
};

// Found by a helper's review: each ended green (exit 0), probe advising twice the budget next.
describe('compare left overnight', () => {
  it('ends non-zero when no run of the compare did any work (an agent that never edits), as `run` does', async () => {
    const t = makeTaskRepo({ budget: IDLE_BUDGET, ...IDLE_AGENT });
    // The control: the same agent under `forkflush run` is not a success.
    const single = await cliWith(['run', t.dir, '--strategy', 'single-run', '--seed', '1']);
    expect(single.code, `${single.out}${single.err}`).toBe(1);
    expect(single.err).toContain('no episode did any work');

    const r = await cliWith(['compare', t.dir, '--strategies', 'single-run,flush-only', '--seeds', '1', '--seed', '1']);
    const folder = folderOf(r.out);
    const results = jsonFile(join(folder, 'results.json'));
    // Every run finished, spent its budget, changed nothing: idle, with no score of its own (its
    // best would only be the initial workspace's).
    expect(results.runs.every((x: { status: string; best: number }) => x.status === 'idle' && x.best === null)).toBe(
      true,
    );
    expect(r.code, `${r.out}${r.err}`).not.toBe(0);
    expect(r.err).toMatch(/did any work|no run .*(work|score)/);
  }, 120_000);
});

describe('probe left overnight', () => {
  it('does not end green, nor advise a probe at twice the budget, when the agent never changed anything', async () => {
    const t = makeTaskRepo({ budget: 'total: 60\n  unit: tokens\n  episode: 6', ...IDLE_AGENT });
    const r = await cliWith(['probe', t.dir, '--runs', '2', '--seed', '1', '--json']);
    const out = JSON.parse(r.out);
    expect(out.runs.every((x: { status: string }) => x.status === 'idle')).toBe(true);
    // Today: exit 0, "too hard at this budget", next: probe again with twice --budget-each.
    expect(r.code, `${r.err}\n${JSON.stringify(out.probe)}`).not.toBe(0);
    expect(out.probe.next ?? '').not.toMatch(/--budget-each/);
  }, 120_000);
});
