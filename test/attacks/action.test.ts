// Hostile agents in the worker Action, run as a job on a runner laid out like GitHub's: the token
// input, GITHUB_TOKEN and the runtime tokens in the job's environment, file commands under
// RUNNER_TEMP, the checkout under the runner's work root, the records repository beside them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { basicCredentials } from '../../src/action/remote.js';
import { parseCommitMessage } from '../../src/core/journal.js';
import { contextRef, episodeBranch } from '../../src/core/names.js';
import { ACTION, type ActionRepo, RUN, stalledResultsService } from '../integration/action-repo.js';
import {
  CONTEXT_KEY,
  cleanRegrade,
  cleanupAttackTemps,
  commitHolds,
  describeSandboxed,
  FX,
  folderText,
  hasObject,
  ID_TOKEN,
  type JobRun,
  logWithoutMasks,
  makeActionRepo,
  onceExists,
  processesWith,
  RUNTIME_TOKEN,
  runJob,
  startGitServer,
  startListener,
  TOKEN,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

beforeAll(() => {
  if (!existsSync(ACTION)) throw new Error(`${ACTION} is missing: run \`npm run bundle\` first`);
});

const SECRETS = { TOKEN, RUNTIME_TOKEN, ID_TOKEN, CONTEXT_KEY, basic: basicCredentials(TOKEN) };
const RECORDS_CONFIG = '[core]\n\trepositoryformatversion = 0\n\tbare = true\n';

/** The branch's head on the forge, the result the job reported, its parent the episode's base. */
function expectRecorded(repo: ActionRepo, job: JobRun, episode: string) {
  expect(job.exitCode, job.stdout).toBe(0);
  const [round, branch] = episode.slice(1).split('.b').map(Number);
  const head = repo.ref(`refs/heads/${episodeBranch(RUN, round ?? 0, branch ?? 0)}`) ?? '';
  expect(head).toBe(job.outputs.commit);
  expect(repo.git(['rev-parse', `${head}^`])).toBe(repo.base);
  expect(repo.show(head, 'grade.sh')).toBe(repo.show(repo.base, 'grade.sh'));
  const recorded = parseCommitMessage(repo.message(head), head);
  expect(recorded?.result.score ?? null).toBe(job.outputs.score === '' ? null : Number(job.outputs.score));
  return head;
}

/** None of the job's secrets in the log, the agent's logs, or the commit. */
function expectNoSecrets(repo: ActionRepo, job: JobRun) {
  const logs = folderText(repo.logs);
  for (const [what, secret] of Object.entries(SECRETS)) {
    expect(logWithoutMasks(job.stdout).includes(secret), `${what} in the job's log`).toBe(false);
    expect(logs.includes(secret), `${what} in what the agent wrote`).toBe(false);
    if (job.outputs.commit)
      expect(commitHolds(repo.remote, job.outputs.commit, secret), `${what} in the commit`).toBe(false);
  }
}

describeSandboxed('forging a score in the Action', () => {
  it('an agent that marks the grader assume-unchanged and edits it gets no forged score', async () => {
    const repo = makeActionRepo('placeholder');
    repo.agent = `sh ${FX}/assume-unchanged.sh ${repo.logs}`;
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b0');
    expectRecorded(repo, job, 'r0.b0');
    expect(job.outputs.score).toBe('');
    expect(job.outputs.reason).toBe('the agent changed protected paths: grade.sh');
  });

  it('an agent that plants clean filters in every git directory it can find gets the clean score', async () => {
    const repo = makeActionRepo('placeholder');
    const job = await runJob(repo, 'r0.b1', {
      prepare: (p) => {
        repo.agent = `sh ${FX}/clean-filter.sh ${repo.logs} ${join(p.temp, 'forkflush', 'records.git')}`;
        repo.publish(repo.openingState());
      },
    });
    const head = expectRecorded(repo, job, 'r0.b1');
    expect(job.outputs.score).toBe('2');
    expect(cleanRegrade(repo.remote, head, 'sh grade.sh')).toBe(2);
    expect(readFileSync(join(job.paths.temp, 'forkflush', 'records.git', 'config'), 'utf8')).toBe(RECORDS_CONFIG);
    expect(readFileSync(join(repo.remote, 'config'), 'utf8')).not.toContain('forge');
    expect(existsSync(join(repo.logs, 'hooked'))).toBe(false);
  });

  it("fake trailers in the agent's commits, a moved branch, a push to the remote and kill -9 are not what is recorded", async () => {
    const repo = makeActionRepo('placeholder');
    repo.agent = `sh ${FX}/fake-trailers.sh ${repo.logs} ${repo.remote} ${RUN}`;
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b2');
    const head = expectRecorded(repo, job, 'r0.b2');
    const fake = readFileSync(join(repo.logs, 'fake-commit'), 'utf8').trim();
    expect(head).not.toBe(fake);
    expect(hasObject(repo.remote, fake)).toBe(false);
    expect(readFileSync(join(repo.logs, 'push.txt'), 'utf8')).not.toMatch(/^(pushed|moved)/m);
    expect(job.outputs.score).toBe('7');
    expect(cleanRegrade(repo.remote, head, 'sh grade.sh')).toBe(7);
  });
});

const SOLVER = "sh -c 'if [ -f solve.sh ]; then sh solve.sh; else cat value.txt; fi'";

describeSandboxed('forging a score in the Action, with helpers and daemons', () => {
  it('a setsid daemon that waits for the judge and swaps in a grader printing 100 has no effect and dies', async () => {
    const marker = unique('ff-daemon-swap');
    const repo = makeActionRepo('placeholder');
    const job = await runJob(repo, 'r0.b0', {
      prepare: (p) => {
        repo.agent = `sh ${FX}/daemon-swap.sh ${repo.logs} ${marker} '${join(p.temp, 'forkflush', '*', 'judge')}'`;
        repo.publish(repo.openingState());
      },
    });
    expectRecorded(repo, job, 'r0.b0');
    expect(job.outputs.score).toBe('3');
    expect(existsSync(join(repo.logs, 'heartbeat'))).toBe(true);
    expect(existsSync(join(repo.logs, 'swaps'))).toBe(false);
    expect(processesWith(marker)).toEqual([]);
  });

  it('a solver that reads helpers kept out of the commit scores as a clean checkout', async () => {
    const repo = makeActionRepo(`sh ${FX}/ignored-helper.sh`, { grader: SOLVER });
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b1');
    const head = expectRecorded(repo, job, 'r0.b1');
    expect(Number(job.outputs.score)).toBe(cleanRegrade(repo.remote, head, SOLVER));
  });

  it("a solver that reads a sibling's blob from git's object store scores as a clean checkout", async () => {
    const repo = makeActionRepo(`sh ${FX}/object-store-helper.sh`, { grader: SOLVER });
    repo.publish(repo.openingState());
    expectRecorded(repo, await runJob(repo, 'r0.b0'), 'r0.b0');
    const job = await runJob(repo, 'r0.b1');
    const head = expectRecorded(repo, job, 'r0.b1');
    expect(commitHolds(repo.remote, head, 'helper payload')).toBe(false);
    expect(Number(job.outputs.score)).toBe(cleanRegrade(repo.remote, head, SOLVER));
  });

  it("a solver that reads a helper from the parent's context (plain, in a private repository) by blob id scores as a clean checkout", async () => {
    const repo = makeActionRepo(`sh ${FX}/object-store-helper.sh`, { grader: SOLVER });
    const state = repo.carriedState('r0.b2');
    repo.publish(state);
    // The context the winner left: its memory, and the helper, as files (no FORKFLUSH_CONTEXT_KEY).
    const helper = '# helper payload, in no commit of the second branch\n500\n';
    repo.setRef(contextRef(RUN, 'r0.b2'), repo.commitFiles({ 'memory.txt': 'r0.b2', 'helper.txt': helper }));
    const job = await runJob(repo, 'r1.b0', { contextKey: null, privateRepository: true });
    expect(job.exitCode, job.stdout).toBe(0);
    const head = job.outputs.commit ?? '';
    expect(commitHolds(repo.remote, head, 'helper payload')).toBe(false);
    expect(Number(job.outputs.score)).toBe(cleanRegrade(repo.remote, head, SOLVER));
  });
});

describeSandboxed('taking over the job', () => {
  it('an agent that scans every /proc/<pid>/environ and cmdline, its fds and the job folders finds no token', async () => {
    const repo = makeActionRepo('placeholder');
    repo.agent = `sh ${FX}/proc-scan.sh ${repo.logs} ${repo.root}`;
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b0');
    expectRecorded(repo, job, 'r0.b0');
    const scan = readFileSync(join(repo.logs, 'proc-scan.txt'), 'utf8');
    expect(scan).toContain('== /proc/1');
    const names = [
      'INPUT_TOKEN',
      'GITHUB_TOKEN',
      'ACTIONS_RUNTIME_TOKEN',
      'ACTIONS_ID_TOKEN_REQUEST_TOKEN',
      'FORKFLUSH_CONTEXT_KEY',
    ];
    for (const name of names) {
      expect(scan).not.toMatch(new RegExp(`^${name}=`, 'm'));
    }
    expectNoSecrets(repo, job);
  });

  it("an agent that writes to the runner's file commands (outputs, env, path, summary, state) changes none of them", async () => {
    const repo = makeActionRepo('placeholder');
    const job = await runJob(repo, 'r0.b3', {
      prepare: (p) => {
        repo.agent = `sh ${FX}/file-commands.sh ${repo.logs} ${[p.output, p.env, p.path, p.summary, p.state].join(' ')}`;
        repo.publish(repo.openingState());
      },
    });
    expectRecorded(repo, job, 'r0.b3');
    expect(job.outputs.score).toBe('3');
    expect(job.outputs.commit).toMatch(/^[0-9a-f]{40}$/);
    for (const f of [job.paths.output, job.paths.env, job.paths.path, job.paths.summary, job.paths.state]) {
      expect(readFileSync(f, 'utf8'), f).not.toMatch(/score<<FORGED|FORGED_ENV|^forged$/m);
    }
    // The summary quotes the agent's last stderr line in its note, as code (no markdown of its
    // own), and nowhere else.
    const summary = readFileSync(job.paths.summary, 'utf8').split('\n');
    expect(
      summary.filter((l) => l.includes('1000000')).every((l) => l.startsWith('Note: `agent exited with code 1: ')),
    ).toBe(true);
    expect(readFileSync(job.paths.env, 'utf8')).toBe('');
    expect(readFileSync(job.paths.path, 'utf8')).toBe('');
    // Nor does what it printed reach the job's log as workflow commands.
    expect(logWithoutMasks(job.stdout)).not.toMatch(/^::(set-output|add-path|error::forged)/m);
    expect(existsSync(join(repo.logs, 'file-commands.txt'))).toBe(false);
  });

  it("commands of the runner's old form (##[...]) in the grader's output and the agent's stderr reach the log as text", async () => {
    const repo = makeActionRepo('placeholder');
    repo.agent = `sh ${FX}/legacy-commands.sh`;
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b2');
    expectRecorded(repo, job, 'r0.b2');
    expect(job.outputs.score).toBe('');
    const lines = job.stdout.split('\n');
    // The runner reads `##[` anywhere in a line, and `::` at its start: neither is left in the agent's words.
    expect(lines.filter((l) => l.includes('##['))).toEqual([]);
    expect(
      lines.filter((l) => /^\s*::(warning|error|stop-commands)::?forged|^\s*::stop-commands::forkflush-agent/.test(l)),
    ).toEqual([]);
    // They are still there to read, each behind a word joiner.
    expect(job.stdout).toContain('##\u2060[stop-commands]forkflush-agent-was-here');
  });

  it('git configs planted everywhere (insteadOf, proxy, helpers) never send the token to a listener, and the agent cannot push', async () => {
    const repo = makeActionRepo('placeholder');
    const forge = await startGitServer(join(repo.root, 'server'), TOKEN);
    const thief = await startListener();
    const pwned = join(repo.root, 'pwned');
    const branch = episodeBranch(RUN, 0, 1);
    try {
      const job = await runJob(repo, 'r0.b1', {
        serverUrl: forge.url,
        prepare: (p) => {
          const configs = [join(p.temp, 'forkflush', 'records.git', 'config'), join(p.home, '.gitconfig')];
          repo.agent = `sh ${FX}/plant-git-config.sh ${repo.logs} ${forge.url}/owner/repo.git ${thief.url} ${pwned} ${branch} ${configs.join(' ')}`;
          repo.publish(repo.openingState());
        },
      });
      const head = expectRecorded(repo, job, 'r0.b1');
      expect(job.outputs.score).toBe('9');
      // forkflush talked to the forge, with the token; the agent's own push was turned away.
      expect(forge.seen.some((r) => r.headers.authorization)).toBe(true);
      expect(readFileSync(join(repo.logs, 'push.txt'), 'utf8')).not.toContain('PUSHED');
      expect(repo.ref('refs/heads/agent-made')).toBeNull();
      expect(repo.message(head)).not.toContain('pushed by the agent');
      // The planted configs redirected nothing and ran nothing.
      expect(thief.seen).toEqual([]);
      expect(forge.seen.filter((r) => r.headers['x-stolen-by'])).toEqual([]);
      expect(readdirSync(repo.root).filter((f) => f.startsWith('pwned'))).toEqual([]);
      expect(readFileSync(join(job.paths.temp, 'forkflush', 'records.git', 'config'), 'utf8')).toBe(RECORDS_CONFIG);
      expect(readFileSync(join(job.paths.home, '.gitconfig'), 'utf8')).not.toContain('insteadOf');
      expectNoSecrets(repo, job);
    } finally {
      await forge.close();
      await thief.close();
    }
  });

  it('a context holding nested repositories (fsmonitor, hooks), links and a FIFO is kept without running anything', async () => {
    const repo = makeActionRepo('placeholder');
    const pwned = join(repo.root, 'pwned');
    repo.agent = `cd "$FORKFLUSH_CONTEXT_DIR" && sh ${FX}/nested-git.sh ${pwned} ${repo.remote}; ln -s /etc/shadow shadow; mkfifo pipe; echo 4 > "$OLDPWD/value.txt"`;
    repo.publish(repo.openingState());
    const job = await runJob(repo, 'r0.b2');
    expectRecorded(repo, job, 'r0.b2');
    expect(job.outputs.score).toBe('4');
    expect(readdirSync(repo.root).filter((f) => f.startsWith('pwned'))).toEqual([]);
    expectNoSecrets(repo, job);
  });
});

describeSandboxed('a job cancelled at night', () => {
  it('a job cancelled while its agent works ends red within 7.5 s, saying and outputting what the agent spent so far', async () => {
    const repo = makeActionRepo('node agent.mjs hang {calls}');
    repo.publish(repo.openingState());
    let signalled = 0;
    const job = await runJob(repo, 'r0.b1', {
      onStart: onceExists(`${repo.callsLog}.child-marker`, (child) => {
        // The agent wrote its usage (1 token) and its marker: a moment, then the runner's cancel.
        setTimeout(() => {
          signalled = Date.now();
          child.kill('SIGINT');
        }, 1000);
      }),
    });
    const took = Date.now() - signalled;
    const facts = `exit ${job.exitCode} after ${took} ms; outputs ${JSON.stringify(job.outputs)}\n${job.stdout.slice(-1500)}`;
    expect(signalled, facts).toBeGreaterThan(0);
    expect(job.exitCode, facts).toBe(1);
    expect(took, facts).toBeLessThan(7_500);
    expect(job.stdout, facts).toMatch(
      /::error::.*the job was cancelled before the episode had a result \(its agent spent 1\)/,
    );
    expect(job.outputs.spent, facts).toBe('1');
  }, 90_000);

  // The runner cancels a job whose result is pushed while its log goes up (a stalled results
  // service): the job used to say "before the episode had a result", and whoever read it re-ran
  // an episode the round already had.
  it('a job cancelled once its result is pushed says the round has the result, with its commit', async () => {
    const stalled = await stalledResultsService();
    try {
      const repo = makeActionRepo('node agent.mjs improve {calls}');
      repo.publish(repo.openingState());
      let signalled = 0;
      const job = await runJob(repo, 'r0.b1', {
        serverUrl: 'http://github.localhost',
        env: stalled.env(repo),
        onStart: (child) => {
          let out = '';
          child.stdout?.on('data', (d: Buffer) => {
            out += d.toString();
            if (!signalled && /pushed: /.test(out)) {
              signalled = Date.now();
              child.kill('SIGINT');
            }
          });
        },
      });
      const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 1)}`);
      const facts = `exit ${job.exitCode} ${Date.now() - signalled} ms after the signal\n${job.stdout.slice(-1500)}`;
      expect(signalled, facts).toBeGreaterThan(0);
      expect(head, facts).not.toBe(repo.base);
      expect(job.exitCode, facts).toBe(1);
      expect(job.stdout, facts).toMatch(
        new RegExp(
          `::error::.*the job was cancelled after the episode's result was pushed \\(commit ${head?.slice(0, 10)}, score [0-9.]+\\): the round has it`,
        ),
      );
      expect(job.stdout, facts).not.toMatch(/before the episode had a result/);
    } finally {
      stalled.close();
    }
  }, 90_000);
});
