// A broken agent stops the run, says why in one line and exits non-zero; only what was spent is
// charged; a path the sandbox hides is caught before any agent starts (issue 20). Whole runs
// through the CLI, with command agents that fail the way real ones do.
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolationFor } from '../../src/worker/boundary.js';
import { cli, cliWith, plainEnv, said } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
/** The README's example budget: 400 tokens, the paper's schedule (K = 4, episodes of 24). */
const EXAMPLE_BUDGET = 'total: 400\n  unit: tokens';
const REFUSED = 'Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}';

const runsOf = (dir: string) => (existsSync(join(dir, '.forkflush')) ? readdirSync(join(dir, '.forkflush')) : []);
const status = async (dir: string) => JSON.parse((await cli('status', dir, '--json')).out);

/**
 * An agent whose key is refused until its "key" (a file in the shared logs folder) exists, as an
 * expired ANTHROPIC_API_KEY is until it is set again; then the test agent, which improves.
 */
function keyedAgent(o: { budget?: string; extra?: string } = {}): TaskRepo & { fixKey(): void } {
  const repo = makeTaskRepo({
    agentCommand: 'sh keyed.sh',
    budget: o.budget ?? EXAMPLE_BUDGET,
    extra: o.extra ?? '',
    files: { 'keyed.sh': '' },
  });
  const logs = dirname(repo.callsLog);
  writeFileSync(
    join(repo.dir, 'keyed.sh'),
    `if [ -f ${logs}/key ]; then exec node agent.mjs improve ${repo.callsLog}; fi\necho '${REFUSED}' >&2\nexit 1\n`,
  );
  repo.git('commit', '-qam', 'the agent');
  return { ...repo, fixKey: () => writeFileSync(join(logs, 'key'), 'sk-good') };
}

describe('an agent whose key is refused', () => {
  it('stops a fork-and-flush run at once, exit 2, quoting its error in one line, having spent under a quarter', async () => {
    const repo = keyedAgent();
    const started = Date.now();
    const r = await cli('run', repo.dir);
    const ms = Date.now() - started;
    expect(r.code).toBe(2);
    const [id] = runsOf(repo.dir) as [string];
    const line = said(r.err);
    expect(line).toHaveLength(1);
    expect(line[0]).toMatch(
      /^forkflush: the agent failed in r0\.b\d: its key or login was refused \(Error: 401 .*"invalid x-api-key"}}\), so every episode would fail the same way and the run stopped: check the key or login the agent uses/,
    );
    expect(line[0]).toContain(`; after the fix: forkflush resume ${repo.dir} --run ${id}`);
    const s = await status(repo.dir);
    expect(s).toMatchObject({
      status: 'stopped',
      stopped: { code: 2 },
      resume: `forkflush resume ${repo.dir} --run ${id}`,
    });
    expect(s.budget.spent).toBeLessThanOrEqual(100);
    // A refused key in its first second spent nothing, and is charged nothing, said so.
    const failed = s.rounds[0].episodes.filter((e: { failure: unknown }) => e.failure);
    expect(failed[0]).toMatchObject({ spent: 0, spentBasis: 'none', failure: { kind: 'auth' } });
    // A sibling still starting when the stop came (a busy machine) was stopped: charged the share
    // of its 20 s it ran, as an estimate; none of them can have run longer than the whole run.
    const episodes = s.rounds[0].episodes as { spent: number | null; interruptedSpent?: number }[];
    for (const e of episodes) expect(e.interruptedSpent ?? 0).toBeLessThanOrEqual((24 * ms) / 1000 / 20);
    expect(s.budget.spent).toBeCloseTo(
      episodes.reduce((sum, e) => sum + (e.spent ?? 0) + (e.interruptedSpent ?? 0), 0),
      6,
    );
    expect(s.rounds).toHaveLength(1);
    // Its round was never decided: no episode of it is "running" in a run that stopped.
    expect(new Set(s.rounds[0].episodes.map((e: { outcome: string }) => e.outcome))).toEqual(new Set(['undecided']));
    expect(ms).toBeLessThan(60_000);
    console.log(`a refused key: stopped after ${ms} ms, spent ${s.budget.spent} of 400 tokens`);
  });

  it('runs again on resume once the key is fixed, and the run finishes', async () => {
    const repo = keyedAgent({ budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    const first = await cli('run', repo.dir);
    expect(first.code).toBe(2);
    expect(repo.calls()).toEqual([]);
    repo.fixKey();
    const again = await cli('resume', repo.dir);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain('round 0: r0.b0 stopped the run last time; running it again');
    const s = await status(repo.dir);
    expect(s.status).toBe('finished');
    expect(s.rounds[0].episodes[0]).toMatchObject({ exit: 'finished', failure: null, spentBasis: 'measured' });
    expect(repo.calls().map((c) => c.episode)).toContain('r0.b0');
  });
});

describe("an agent whose provider is down for a while (the night's outage)", () => {
  it('waits it out and goes on by itself: the run finishes, exit 0', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh limited.sh',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
      files: { 'limited.sh': '' },
    });
    const logs = dirname(repo.callsLog);
    const LIMITED = 'Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}';
    writeFileSync(
      join(repo.dir, 'limited.sh'),
      `if [ -f ${logs}/up ]; then exec node agent.mjs improve ${repo.callsLog}; fi\necho '${LIMITED}' >&2\nexit 1\n`,
    );
    repo.git('commit', '-qam', 'the agent');
    const waits: number[] = [];
    const r = await cliWith(['run', repo.dir], {
      // No real waiting: the retries' waits pass at once; the second outage wait finds the provider back.
      sleep: async (ms) => {
        waits.push(ms);
        if (waits.filter((w) => w >= 60_000).length === 2) writeFileSync(join(logs, 'up'), '');
      },
    });
    expect(r.code, r.err).toBe(0);
    expect(said(r.err).filter((l) => l.startsWith('forkflush: waiting'))).toEqual([
      'forkflush: waiting 5 min, then trying again by itself (Ctrl-C to stop now)',
      'forkflush: waiting 20 min, then trying again by itself (Ctrl-C to stop now)',
    ]);
    expect(waits.filter((w) => w >= 60_000)).toEqual([300_000, 1_200_000]);
    const s = await status(repo.dir);
    expect(s.status).toBe('finished');
    expect(repo.calls().map((c) => c.episode)).toContain('r0.b0');
  });

  it('a permanent failure is not waited for', async () => {
    const repo = keyedAgent({ budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    const waits: number[] = [];
    const r = await cliWith(['run', repo.dir], { sleep: async (ms) => void waits.push(ms) });
    expect(r.code).toBe(2);
    expect(waits).toEqual([]);
    expect(r.err).not.toContain('forkflush: waiting');
  });
});

describe('an agent that crashes for a reason nobody recognises', () => {
  it('stops after the first fork round in which every branch crashed without changing anything', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh crash.sh',
      budget: EXAMPLE_BUDGET,
      files: { 'crash.sh': 'echo "TypeError: boom" >&2\nexit 1\n' },
    });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(said(r.err)[0]).toMatch(
      /^forkflush: the agent crashed without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\), the last with exit 1: TypeError: boom, so the run stopped/,
    );
    const s = await status(repo.dir);
    expect(s.rounds).toHaveLength(1);
    expect(s.budget.spent).toBe(0);
  });
});

describe('an agent that hangs until its time limit, reporting next to no spend', () => {
  it('stops after the first fork round in which every branch ran out of time without changing anything', async () => {
    // As a CLI waiting on a question or a refused host does: its tiny spend would never end the run,
    // and each further episode would cost agent.timeout of the night.
    const repo = makeTaskRepo({
      agentCommand: 'sh hang.sh',
      budget: EXAMPLE_BUDGET,
      files: {
        'hang.sh': 'echo \'{"spent": 0.01}\' > "$FORKFLUSH_USAGE_FILE"\necho waiting for an answer\nsleep 600\n',
      },
    });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('timeout: 20', 'timeout: 4'));
    repo.git('commit', '-qam', 'a short agent.timeout');
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(said(r.err)[0]).toMatch(
      /^forkflush: the agent ran until its time limit \(agent\.timeout: 4 s\) without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\), .*agent\.log/,
    );
    const s = await status(repo.dir);
    expect(s.rounds).toHaveLength(1);
    expect(s.budget.spent).toBeCloseTo(0.04, 6);
  });
});

describe('an agent.command that never works on the task', () => {
  it('stops after the first fork round, exit 2, rather than charge the whole budget and end green', async () => {
    // As `claude --help` would: it prints and exits 0 at once, with no usage, every time.
    const repo = makeTaskRepo({ agentCommand: 'echo usage agent OPTIONS', budget: EXAMPLE_BUDGET });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(said(r.err)[0]).toMatch(
      /^forkflush: the agent ended without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\), and no episode of the run has changed it, .*run the agent by hand/,
    );
    const s = await status(repo.dir);
    expect(s.rounds).toHaveLength(1);
    expect(s.budget.spent).toBeLessThanOrEqual(100);
  });
});

describe('a path the sandbox hides', async () => {
  const sandboxed = (await isolationFor('auto')).sandbox !== null;
  if (!sandboxed) console.warn('\n!!!!!!!! HIDDEN-PATH TESTS SKIPPED: no sandbox here. !!!!!!!!\n');
  const maybe = sandboxed ? it : it.skip;

  /** The test agent in a folder outside the repository, under /tmp: the sandbox's /tmp is its own. */
  function outsideAgent(): { repo: TaskRepo; folder: string } {
    const folder = mkdtempSync(join(tmpdir(), 'agents-elsewhere-'));
    // Readable by the agent, which runs as nobody when the tests run as root.
    chmodSync(folder, 0o755);
    copyFileSync(join(FIXTURES, 'agent.mjs'), join(folder, 'agent.mjs'));
    const repo = makeTaskRepo({ agentCommand: 'the-agent' });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    const command = `node ${join(folder, 'agent.mjs')} improve ${repo.callsLog}`;
    writeFileSync(config, readFileSync(config, 'utf8').replace('command: the-agent', `command: ${command}`));
    repo.git('commit', '-qam', 'the agent, outside the repository');
    return { repo, folder };
  }

  maybe(
    'is caught by run --dry-run, which names the folder and the sandbox.read line, and run starts no agent',
    async () => {
      const { repo, folder } = outsideAgent();
      const dry = await cli('run', repo.dir, '--dry-run');
      expect(dry.code).toBe(2);
      expect(dry.err).toContain(
        `agent.command needs ${join(folder, 'agent.mjs')}, which the sandbox hides from it (the sandbox has a /tmp of its own, and hides your home folder): add its folder to the config, sandbox: {read: [${JSON.stringify(folder)}]}`,
      );
      const run = await cli('run', repo.dir);
      expect(run.code).toBe(2);
      expect(run.err).toContain(`sandbox: {read: [${JSON.stringify(folder)}]}`);
      expect(repo.calls()).toEqual([]);
      expect(runsOf(repo.dir)).toEqual([]);
      // The line it gives shows the folder: the dry run passes with it.
      const config = join(repo.dir, '.github', 'autoresearch.yml');
      writeFileSync(
        config,
        readFileSync(config, 'utf8').replace(
          'sandbox:\n  write:',
          `sandbox:\n  read: [${JSON.stringify(folder)}]\n  write:`,
        ),
      );
      repo.git('commit', '-qam', 'show the folder');
      const fixed = await cli('run', repo.dir, '--dry-run');
      expect(fixed.code, fixed.err).toBe(0);
      if (process.getuid?.() === 0) {
        // Under root the agent runs as a uid of its own (nobody where none can be had): a folder
        // shown but closed to others is said too.
        chmodSync(folder, 0o700);
        const closed = await cli('run', repo.dir, '--dry-run');
        expect(closed.code).toBe(2);
        const user =
          (await isolationFor('auto')).sandbox?.accounts === 'uid'
            ? 'a uid of its own, no account of this machine'
            : 'nobody';
        expect(closed.err).toContain(`and open ${folder} to the sandbox's user, ${user} (chmod o+rX ${folder})`);
      }
    },
  );

  // Under root the sandbox's user is not the folders' owner: a task folder made by `mktemp -d`
  // (0700) outside /tmp and the home folder kept it from every episode's workspace, and each
  // episode crashed with "Cannot find module", blamed on the agent (a dry run, in /tmp, passed).
  maybe(
    'above the run folder or a sandbox.write folder, closed to others, is refused under root by run and --dry-run, naming it',
    async () => {
      const repo = makeTaskRepo({
        git: false,
        budget: 'total: 12\n  unit: tokens\n  episode: 6',
        extra: 'strategy: single-run',
      });
      const closed = mkdtempSync(join('/var/tmp', 'forkflush-closed-'));
      try {
        cpSync(repo.dir, closed, { recursive: true });
        const dry = await cli('run', closed, '--dry-run');
        if (process.getuid?.() !== 0) {
          // As an ordinary user the sandbox runs as that user, the folders' owner.
          expect(dry.code, dry.err).toBe(0);
          return;
        }
        const said = `may not pass through ${closed}, which is closed to others: open it (chmod o+x ${closed})`;
        expect(dry.code, dry.err).toBe(2);
        expect(dry.err).toContain(said);
        const run = await cli('run', closed);
        expect(run.code, run.err).toBe(2);
        expect(run.err).toContain(said);
        expect(repo.calls()).toEqual([]);
        chmodSync(closed, 0o711);
        const opened = await cli('run', closed);
        expect(opened.code, opened.err).toBe(0);
        expect(repo.calls().length).toBeGreaterThan(0);
        // A sandbox.write folder the same way.
        const shut = join(closed, 'shut');
        mkdirSync(join(shut, 'cache'), { recursive: true, mode: 0o700 });
        const config = join(closed, '.github', 'autoresearch.yml');
        writeFileSync(
          config,
          readFileSync(config, 'utf8').replace('  write: [', `  write: [${JSON.stringify(join(shut, 'cache'))}, `),
        );
        const write = await cli('run', closed, '--dry-run');
        expect(write.code, write.err).toBe(2);
        expect(write.err).toContain(`sandbox.write: ${join(shut, 'cache')} is shared with the agent, and`);
        expect(write.err).toContain(`may not pass through ${shut}, which is closed to others`);
      } finally {
        rmSync(closed, { recursive: true, force: true });
      }
    },
  );

  maybe('holding an agent CLI on PATH is named with its folder, not blamed on agent.command', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'fake-bin-'));
    chmodSync(bin, 0o755);
    writeFileSync(join(bin, 'claude'), '#!/bin/sh\necho 2.1.332\n', { mode: 0o755 });
    const repo = makeTaskRepo({ agentCommand: 'the-agent' });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('  command: the-agent\n', '  kind: claude-code\n'));
    repo.git('commit', '-qam', 'claude-code');
    const env = { ...plainEnv(), PATH: `${bin}:${process.env.PATH}`, ANTHROPIC_API_KEY: 'sk-ant-test' };
    const dry = await cliWith(['run', repo.dir, '--dry-run'], { env });
    expect(dry.code).toBe(2);
    expect(dry.err).toContain(
      `agent.command needs \`claude\` (${join(bin, 'claude')}), which the sandbox hides from it (the sandbox has a /tmp of its own, and hides your home folder): add its folder to the config, sandbox: {read: [${JSON.stringify(bin)}]}`,
    );
    expect(dry.err).not.toContain('is not found');
  });

  maybe(
    'that only the agent names, once it runs, stops the run naming the folder (no "not found" blamed on agent.command)',
    async () => {
      const folder = mkdtempSync(join(tmpdir(), 'tools-elsewhere-'));
      chmodSync(folder, 0o755);
      writeFileSync(join(folder, 'helper.mjs'), 'console.log("helping")\n');
      const repo = makeTaskRepo({
        agentCommand: 'sh helper.sh',
        budget: 'total: 12\n  unit: tokens\n  episode: 6',
        extra: 'strategy: single-run',
        files: { 'helper.sh': `node ${join(folder, 'helper.mjs')}\n` },
      });
      const r = await cli('run', repo.dir);
      expect(r.code).toBe(2);
      expect(said(r.err)[0]).toContain(
        `the agent failed in r0.b0: it needs a path the sandbox hides (Error: Cannot find module '${join(folder, 'helper.mjs')}')`,
      );
      expect(said(r.err)[0]).toContain(`add it to the config (sandbox: {read: [${JSON.stringify(folder)}]})`);
      expect(r.err).not.toContain('check agent.command');
    },
  );
});

describe('an agent CLI of the repository', () => {
  it('named as ./tools/claude is found in the repository, not looked for on PATH', async () => {
    const repo = makeTaskRepo({ agentCommand: 'the-agent', files: { 'claude.sh': '#!/bin/sh\necho 2.1.332\n' } });
    repo.git('mv', 'claude.sh', 'claude');
    mkdirSync(join(repo.dir, 'tools'));
    renameSync(join(repo.dir, 'claude'), join(repo.dir, 'tools', 'claude'));
    chmodSync(join(repo.dir, 'tools', 'claude'), 0o755);
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        '  command: the-agent\n',
        '  kind: claude-code\n  command: ./tools/claude\n',
      ),
    );
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'a Claude Code of its own');
    const dry = await cliWith(['run', repo.dir, '--dry-run'], {
      env: { ...plainEnv(), ANTHROPIC_API_KEY: 'sk-ant-test' },
    });
    expect(dry.err).not.toContain('is not found');
    expect(dry.code, dry.err).toBe(0);
  });
});

describe('Ctrl-C', () => {
  it('after under a second charges what was spent, not the whole allowance', async () => {
    const repo = makeTaskRepo({ agentCommand: 'sleep 30', budget: EXAMPLE_BUDGET });
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort('interrupted'), 800);
    const started = Date.now();
    const r = await cliWith(['run', repo.dir], { env: plainEnv(), signal: stop.signal });
    const ms = Date.now() - started;
    clearTimeout(timer);
    expect(r.code).toBe(130);
    const s = await status(repo.dir);
    const charged = s.rounds[0].episodes.map((e: { interruptedSpent: number }) => e.interruptedSpent);
    // Four branches of 24 tokens, each stopped within seconds of its 20 (agent.timeout): the share
    // of it each ran, an estimate, and none ran longer than the whole run (however busy the machine).
    const most = (24 * ms) / 1000 / 20;
    for (const c of charged) expect(c).toBeLessThanOrEqual(most);
    expect(s.budget.spent).toBeLessThanOrEqual(4 * most);
    expect(s.budget.spent).toBeLessThan(24);
    expect(s.rounds[0].episodes[0].interruptedBasis).toBe(
      s.rounds[0].episodes[0].interruptedSpent > 0 ? 'estimated' : 'measured',
    );
  });
});

describe('an agent that reports a spend no number can hold', () => {
  it('is charged its allowance as an estimate, said in its note, and the run stays readable', async () => {
    // 1e303 rounded to six decimals overflowed to Infinity, which state.json held as null: status
    // and resume then refused the run.
    const repo = makeTaskRepo({
      agentCommand: 'sh huge.sh',
      files: { 'huge.sh': 'echo 7 > value.txt\necho \'{"spent": 1e303}\' > "$FORKFLUSH_USAGE_FILE"\n' },
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
    });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(0);
    expect(r.err).not.toContain('Infinity');
    const s = await status(repo.dir);
    const [first] = s.rounds[0].episodes;
    expect(first.spent).toBe(6);
    expect(first.spentBasis).toBe('estimated');
    expect(first.note).toContain('the agent reported a spend of 1e+303, which cannot be: not taken');
    expect(s.budget.spent).toBe(12);
    const again = await cli('resume', repo.dir);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain('is already finished');
  });
});
