// The worker Action, built (dist/index.js) and run the way the Actions runner runs it, against a
// bare repository on a file:// "server". Each case is one job of a run's matrix.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { authEnv, basicCredentials } from '../../src/action/remote.js';
import { parseCommitMessage, resultFromCommit } from '../../src/core/journal.js';
import { contextRef, episodeBranch, stateRef } from '../../src/core/names.js';
import { applyResult } from '../../src/core/reconcile.js';
import { ACTION, ActionRepo, RUN, result, TOKEN } from './action-repo.js';

const VERSION = pkg.version;

beforeAll(() => {
  if (!existsSync(ACTION)) throw new Error(`${ACTION} is missing: run \`npm run bundle\` first`);
});

/** The log without the runner's mask commands (which name the secrets to mask, by design). */
function logWithoutMasks(stdout: string): string {
  return stdout
    .split('\n')
    .filter((l) => !l.startsWith('::add-mask::'))
    .join('\n');
}

describe('the worker Action', () => {
  it('runs a fresh episode of the opening round and pushes its result and its context', () => {
    const repo = new ActionRepo();
    const state = repo.openingState();
    repo.publish(state);
    const branch = episodeBranch(RUN, 0, 1);

    const job = repo.runAction({ episode: 'r0.b1' });

    expect(job.exitCode, job.stdout).toBe(0);
    const head = repo.ref(`refs/heads/${branch}`);
    expect(job.outputs).toEqual({
      score: expect.stringMatching(/^\d+$/),
      spent: '5.4',
      exit: 'finished',
      commit: head,
      reason: '',
      // The command agent reports no tokens, cost or version; its log is kept on the runner.
      tokens: '',
      cost: '',
      'agent-version': '',
      'log-file': expect.stringMatching(/forkflush-logs\/issue-42-r0\.b1\/agent\.log$/),
    });
    const recorded = parseCommitMessage(repo.message(head ?? ''), head ?? '');
    expect(recorded).toMatchObject({ runId: RUN, episode: 'r0.b1', result: { score: Number(job.outputs.score) } });
    expect(repo.git(['rev-parse', `${head}^`])).toBe(repo.base);
    expect(repo.show(head ?? '', 'value.txt')).toBe(job.outputs.score);
    // The context the agent left is the episode's record, for whoever continues it.
    expect(repo.show(contextRef(RUN, 'r0.b1'), 'memory.txt')).toBe('r0.b1');
    expect(repo.calls()).toMatchObject([
      { episode: 'r0.b1', memory: [], promptStart: expect.stringMatching(/^You are working on an open-ended/) },
    ]);
    expect(job.summary).toContain('### forkflush issue-42: episode r0.b1');
    expect(job.summary).toContain(
      `| r0.b1 (round 0, branch 1) | opening | fresh context | ${job.outputs.score} | 5.4 of 6 tokens | finished | ${head?.slice(0, 10)} |`,
    );
    // The workspace holds the branch and nothing of the run's records.
    const workspaceRefs = repo.git(['--git-dir', join(job.workspace, '.git'), 'for-each-ref', '--format=%(refname)']);
    expect(workspaceRefs).not.toContain('refs/forkflush/');
    expect(repo.git(['--git-dir', join(job.workspace, '.git'), 'symbolic-ref', 'HEAD'])).toBe(`refs/heads/${branch}`);
  });

  it('continues the context its parent left, and records the context it leaves', () => {
    const repo = new ActionRepo();
    const state = repo.carriedState('r0.b2');
    repo.publish(state);
    repo.setRef(contextRef(RUN, 'r0.b2'), repo.commitFiles({ 'memory.txt': 'r0.b2' }));
    const episode = repo.episode(state, 'r1.b0');
    expect(episode).toMatchObject({ context: 'carry', contextFrom: 'r0.b2' });

    const job = repo.runAction({ episode: 'r1.b0' });

    expect(job.exitCode, job.stdout).toBe(0);
    expect(repo.calls()).toMatchObject([
      { episode: 'r1.b0', memory: ['r0.b2'], promptStart: expect.stringMatching(/^Continue working/) },
    ]);
    expect(repo.show(contextRef(RUN, 'r1.b0'), 'memory.txt')).toBe('r0.b2\nr1.b0');
    // The parent's context is untouched, and the episode builds on the winner's workspace.
    expect(repo.show(contextRef(RUN, 'r0.b2'), 'memory.txt')).toBe('r0.b2');
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 1, 0)}`) ?? '';
    expect(repo.git(['rev-parse', `${head}^`])).toBe(episode.base);
    expect(Number(job.outputs.score)).toBeGreaterThan(5);
    expect(job.summary).toContain('| solo 1 | context carried from r0.b2 |');
  });

  it('starts with an empty context when the parent left none', () => {
    const repo = new ActionRepo();
    repo.publish(repo.carriedState('r0.b0'));

    const job = repo.runAction({ episode: 'r1.b0' });

    expect(job.exitCode, job.stdout).toBe(0);
    expect(repo.calls()).toMatchObject([{ episode: 'r1.b0', memory: [] }]);
    expect(job.stdout).toContain('r0.b0 left none');
  });

  it('keeps the token from the agent, the checkout and the log', () => {
    const repo = new ActionRepo('env > {env} && node agent.mjs improve {calls}');
    repo.publish(repo.openingState());

    const job = repo.runAction({ episode: 'r0.b0' });

    expect(job.exitCode, job.stdout).toBe(0);
    const agentEnv = readFileSync(repo.envDump, 'utf8');
    const names = agentEnv.split('\n').map((l) => l.split('=')[0]);
    // An allowlist: the basics pass, the runner's inputs and file commands do not.
    expect(names).toContain('PATH');
    for (const name of [
      'INPUT_EPISODE',
      'INPUT_TOKEN',
      'GITHUB_TOKEN',
      'ACTIONS_RUNTIME_TOKEN',
      'GITHUB_OUTPUT',
      'GITHUB_STEP_SUMMARY',
    ]) {
      expect(names).not.toContain(name);
    }
    expect(agentEnv).not.toContain(TOKEN);
    expect(repo.calls()[0]?.secrets).toEqual([]);
    const gitConfig = readFileSync(join(job.workspace, '.git', 'config'), 'utf8');
    expect(gitConfig).not.toMatch(/extraheader|remote|credential/i);
    expect(gitConfig).not.toContain(TOKEN);
    expect(job.stdout).toContain(`::add-mask::${TOKEN}`);
    expect(logWithoutMasks(job.stdout)).not.toContain(TOKEN);
    expect(logWithoutMasks(job.stdout)).not.toContain(basicCredentials(TOKEN));
  });

  describe('agent contexts on the forge', () => {
    const KEY = randomBytes(32).toString('base64');

    it('are pushed encrypted with the context key, bound to the episode, and opened by the next one', () => {
      const repo = new ActionRepo();
      repo.publish(repo.openingState());
      const first = repo.runAction({ episode: 'r0.b2', contextKey: KEY, visibility: 'public' });
      expect(first.exitCode, first.stdout).toBe(0);
      const ref = contextRef(RUN, 'r0.b2');
      // One sealed file: nothing of the transcript can be read from the repository.
      expect(repo.git(['ls-tree', '--name-only', ref])).toBe('context.ffc');
      expect(repo.git(['cat-file', '-p', `${ref}:context.ffc`])).not.toContain('r0.b2');
      expect(
        parseCommitMessage(repo.message(repo.ref(`refs/heads/${episodeBranch(RUN, 0, 2)}`) ?? ''), ''),
      ).toMatchObject({
        result: { contextStore: 'encrypted' },
      });

      // The next episode carries it on: the agent finds its memory, decrypted.
      const next = new ActionRepo();
      next.publish(next.carriedState('r0.b2'));
      next.git(['fetch', '-q', repo.remote, `${ref}:${ref}`]);
      const job = next.runAction({ episode: 'r1.b0', contextKey: KEY, visibility: 'public' });
      expect(job.exitCode, job.stdout).toBe(0);
      expect(next.calls()).toMatchObject([{ episode: 'r1.b0', memory: ['r0.b2'] }]);
    });

    it('sealed for one episode, or with another key, cannot be opened: the episode starts empty and says why', () => {
      const repo = new ActionRepo();
      repo.publish(repo.openingState());
      expect(repo.runAction({ episode: 'r0.b2', contextKey: KEY }).exitCode).toBe(0);
      const sealed = repo.git(['rev-parse', contextRef(RUN, 'r0.b2')]);
      const other = randomBytes(32).toString('base64');

      const next = new ActionRepo();
      next.publish(next.carriedState('r0.b2'));
      next.git(['fetch', '-q', repo.remote, `${contextRef(RUN, 'r0.b2')}:${contextRef(RUN, 'r0.b2')}`]);
      expect(next.ref(contextRef(RUN, 'r0.b2'))).toBe(sealed);
      const job = next.runAction({ episode: 'r1.b0', contextKey: other });
      expect(job.exitCode, job.stdout).toBe(0);
      expect(next.calls()).toMatchObject([{ episode: 'r1.b0', memory: [] }]);
      const head = next.ref(`refs/heads/${episodeBranch(RUN, 1, 0)}`) ?? '';
      expect(parseCommitMessage(next.message(head), head)?.result.note).toContain(
        "r0.b2's context cannot be opened with this FORKFLUSH_CONTEXT_KEY (was the key changed?): this episode started with an empty context",
      );
    });

    it('are kept as files in a private repository without a key, and not at all in a public one', () => {
      const privateRepo = new ActionRepo();
      privateRepo.publish(privateRepo.openingState());
      expect(privateRepo.runAction({ episode: 'r0.b1', visibility: 'private' }).exitCode).toBe(0);
      expect(privateRepo.show(contextRef(RUN, 'r0.b1'), 'memory.txt')).toBe('r0.b1');

      const publicRepo = new ActionRepo();
      publicRepo.publish(publicRepo.openingState());
      const job = publicRepo.runAction({ episode: 'r0.b1', visibility: 'public' });
      expect(job.exitCode, job.stdout).toBe(0);
      expect(publicRepo.ref(contextRef(RUN, 'r0.b1'))).toBeNull();
      expect(job.stdout).toContain('not pushed (a public repository without FORKFLUSH_CONTEXT_KEY)');

      // So the leader's next episode cannot carry it on, and its result says so.
      publicRepo.publish(publicRepo.carriedState('r0.b1'));
      const carried = publicRepo.runAction({ episode: 'r1.b0', visibility: 'public' });
      expect(carried.exitCode, carried.stdout).toBe(0);
      const head = publicRepo.ref(`refs/heads/${episodeBranch(RUN, 1, 0)}`) ?? '';
      expect(parseCommitMessage(publicRepo.message(head), head)?.result).toMatchObject({
        contextStore: 'none',
        note: expect.stringContaining(
          "r0.b1's context was not kept (a public repository without FORKFLUSH_CONTEXT_KEY): this episode started with an empty context",
        ),
      });
    });

    it('a context key that is not 32 bytes stops the job with the fix', () => {
      const repo = new ActionRepo();
      repo.publish(repo.openingState());
      const job = repo.runAction({ episode: 'r0.b0', contextKey: 'hunter2' });
      expect(job.exitCode).toBe(1);
      expect(job.stdout).toContain('FORKFLUSH_CONTEXT_KEY must be 32 random bytes in base64 or hex');
      expect(logWithoutMasks(job.stdout)).not.toContain('hunter2');
      expect(repo.calls()).toEqual([]);
    });
  });

  it("authenticates https remotes with a header in git's environment, for the forge's URLs only", () => {
    const header = `AUTHORIZATION: basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    expect(authEnv('https://github.com/owner/repo.git', TOKEN)).toEqual({
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'http.https://github.com/.extraheader',
      GIT_CONFIG_VALUE_0: header,
    });
    expect(authEnv('file:///srv/owner/repo.git', TOKEN)).toEqual({ GIT_CONFIG_GLOBAL: '/dev/null' });
    expect(authEnv('https://github.com/owner/repo.git', '')).toEqual({ GIT_CONFIG_GLOBAL: '/dev/null' });
    // Plain http only to this machine: a token never crosses a network in clear.
    expect(authEnv('http://127.0.0.1:8080/owner/repo.git', TOKEN).GIT_CONFIG_KEY_0).toBe(
      'http.http://127.0.0.1:8080/.extraheader',
    );
    expect(authEnv('http://localhost/owner/repo.git', TOKEN).GIT_CONFIG_VALUE_0).toBe(header);
    expect(authEnv('http://github.example.com/owner/repo.git', TOKEN).GIT_CONFIG_COUNT).toBeUndefined();
    expect(authEnv('http://127.0.0.1.evil.example/owner/repo.git', TOKEN).GIT_CONFIG_COUNT).toBeUndefined();
  });

  it('restores the protected files, the config and the workflows: no score is a result, not a failure', () => {
    const repo = new ActionRepo(
      'node agent.mjs protected {calls} && echo "agent: {}" >> .github/autoresearch.yml && ' +
        'mkdir -p .github/workflows && echo "on: push" > .github/workflows/mine.yml',
    );
    repo.publish(repo.openingState());

    const job = repo.runAction({ episode: 'r0.b3' });

    expect(job.exitCode, job.stdout).toBe(0);
    expect(job.outputs.score).toBe('');
    expect(job.outputs.reason).toBe(
      'the agent changed protected paths: .github/autoresearch.yml, .github/workflows/mine.yml, grade.sh',
    );
    const head = job.outputs.commit ?? '';
    expect(repo.ref(`refs/heads/${episodeBranch(RUN, 0, 3)}`)).toBe(head);
    expect(repo.show(head, 'grade.sh')).toBe(repo.show(repo.base, 'grade.sh'));
    expect(repo.show(head, '.github/autoresearch.yml')).toBe(repo.show(repo.base, '.github/autoresearch.yml'));
    expect(repo.git(['ls-tree', '-r', '--name-only', head])).not.toContain('.github/workflows');
    expect(repo.show(head, 'value.txt')).toBe('1');
    expect(job.summary).toContain('| no score: `the agent changed protected paths:');
  });

  it('does not run an episode again once its result is on its branch', () => {
    const repo = new ActionRepo();
    repo.publish(repo.openingState());
    const first = repo.runAction({ episode: 'r0.b0' });
    expect(first.exitCode, first.stdout).toBe(0);
    const contextBefore = repo.ref(contextRef(RUN, 'r0.b0'));

    const again = repo.runAction({ episode: 'r0.b0' });

    expect(again.exitCode, again.stdout).toBe(0);
    expect(repo.calls()).toHaveLength(1);
    // The same result; no agent ran, so there is no log this time.
    const { 'log-file': firstLog, ...firstRest } = first.outputs;
    expect(firstLog).not.toBe('');
    expect(again.outputs).toEqual({ ...firstRest, 'log-file': '' });
    expect(again.stdout).toMatch(/::notice::episode r0\.b0 of run issue-42 already has its result on its branch/);
    expect(repo.ref(contextRef(RUN, 'r0.b0'))).toBe(contextBefore);
  });

  it('leaves the branch to another attempt that pushed first, and pushes no context over it', () => {
    const repo = new ActionRepo();
    const episode = repo.episode(repo.openingState(), 'r0.b2');
    const winner = repo.resultCommit(repo.openingState(), episode, 99);
    // The other attempt, outside the sandbox: once this attempt's agent has started, its result
    // lands on the branch; the agent waits for it, so this attempt pushes after it.
    const ref = `refs/heads/${episodeBranch(RUN, 0, 2)}`;
    const moved = join(repo.logs, 'moved');
    repo.agent = `node agent.mjs improve {calls} && while [ ! -f ${moved} ]; do sleep 0.05; done`;
    repo.publish(repo.openingState());
    const other = spawn(
      'sh',
      [
        '-c',
        `while [ ! -s ${repo.callsLog} ]; do sleep 0.05; done; git --git-dir=${repo.remote} update-ref ${ref} ${winner} && touch ${moved}`,
      ],
      { stdio: 'ignore' },
    );

    const job = repo.runAction({ episode: 'r0.b2' });
    other.kill();

    expect(job.exitCode, job.stdout).toBe(0);
    expect(repo.calls()).toHaveLength(1);
    expect(repo.ref(ref)).toBe(winner);
    expect(job.outputs).toMatchObject({ score: '99', commit: winner, spent: '2' });
    expect(job.stdout).toMatch(/::notice::another attempt at episode r0\.b2 of run issue-42 pushed its result first/);
    expect(repo.ref(contextRef(RUN, 'r0.b2'))).toBeNull();
  });

  it('fails with one clear line when the run, the episode or its branch is not there', () => {
    const repo = new ActionRepo();
    const state = repo.openingState();

    const noState = repo.runAction({ episode: 'r0.b0' });
    expect(noState.exitCode).toBe(1);
    expect(noState.stdout).toContain(
      `::error::forkflush issue-42 r0.b0: run issue-42 has no state in this repository (no ref ${stateRef(RUN)})`,
    );

    repo.publish(state);
    const unknown = repo.runAction({ episode: 'r4.b0' });
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stdout).toContain(
      '::error::forkflush issue-42 r4.b0: run issue-42 has no episode r4.b0; its open round has r0.b0, r0.b1, r0.b2, r0.b3',
    );

    const badInput = repo.runAction({ episode: 'b1' });
    expect(badInput.exitCode).toBe(1);
    expect(badInput.stdout).toContain('::error::forkflush issue-42 b1: input episode: "b1" is not an episode id');

    repo.git(['update-ref', '-d', `refs/heads/${episodeBranch(RUN, 0, 1)}`]);
    const noBranch = repo.runAction({ episode: 'r0.b1' });
    expect(noBranch.exitCode).toBe(1);
    expect(noBranch.stdout).toContain(
      `::error::forkflush issue-42 r0.b1: the branch ${episodeBranch(RUN, 0, 1)} is not in the repository`,
    );
    expect(repo.calls()).toEqual([]);
  });

  it("a record saved by a newer app: a setup result that spent nothing, and the job names the app's release", () => {
    const repo = new ActionRepo();
    const state = repo.openingState();
    repo.publish(state, (r) => {
      r.state.config.sandbox.egress = 'proxy'; // a key a later release added
      r.facts.writtenBy = '9.0.0';
    });
    const branch = episodeBranch(RUN, 0, 1);

    const job = repo.runAction({ episode: 'r0.b1' });

    expect(job.exitCode).toBe(1);
    expect(job.stdout).toContain(
      `::error::forkflush issue-42 r0.b1: this worker Action cannot read the run's record: it is forkflush ${VERSION}, older than the app (forkflush 9.0.0) that wrote it (`,
    );
    expect(job.stdout).toContain(
      'state.json: config.sandbox: unknown key "egress" (written by a newer forkflush, or edited by hand: upgrade forkflush to go on))',
    );
    expect(job.stdout).toContain('uses: …/forkflush@v9.0.0 in the worker workflow');
    expect(repo.calls()).toEqual([]);
    const head = repo.ref(`refs/heads/${branch}`) as string;
    expect(repo.git(['rev-parse', `${head}^`])).toBe(repo.base);
    expect(repo.git(['rev-parse', `${head}^{tree}`])).toBe(repo.git(['rev-parse', `${repo.base}^{tree}`]));
    const recorded = resultFromCommit(RUN, repo.episode(state, 'r0.b1'), {
      sha: head,
      message: repo.message(head),
      parents: repo.git(['log', '-1', '--format=%P', head]).split(' '),
    });
    expect(recorded).toMatchObject({ result: { exit: 'setup', score: null, spent: 0 } });
    expect('result' in recorded && recorded.result.reason).toMatch(
      /^this worker Action cannot read the run's record: it is forkflush .* older than the app/,
    );

    // Another attempt leaves the recorded result as it is.
    expect(repo.runAction({ episode: 'r0.b1' }).exitCode).toBe(1);
    expect(repo.ref(`refs/heads/${branch}`)).toBe(head);
  });

  it('a record of its own release it cannot read: the reason, without blaming a release', () => {
    const repo = new ActionRepo();
    repo.publish(repo.openingState(), (r) => {
      r.state.config.budget.total = -1;
      r.facts.writtenBy = VERSION;
    });
    const job = repo.runAction({ episode: 'r0.b0' });
    expect(job.exitCode).toBe(1);
    expect(job.stdout).toContain(
      `::error::forkflush issue-42 r0.b0: this worker Action cannot read the run's record (forkflush ${VERSION}): refs/forkflush/issue-42/state:state.json: config.budget.total`,
    );
  });

  it('runs only in the workflow run the app dispatched for the round, not in a re-run of an earlier one', () => {
    const repo = new ActionRepo();
    repo.publish(repo.openingState(), (r) => {
      r.facts.dispatched['0'].runId = 5002;
    });
    const earlier = repo.runAction({ episode: 'r0.b0', env: { GITHUB_RUN_ID: '5001', GITHUB_RUN_ATTEMPT: '2' } });
    expect(earlier.exitCode).toBe(1);
    expect(earlier.stdout).toContain(
      '::error::forkflush issue-42 r0.b0: round 0 of run issue-42 runs in workflow run 5002, not in this one (5001)',
    );
    expect(repo.calls()).toEqual([]);
    expect(repo.ref(`refs/heads/${episodeBranch(RUN, 0, 0)}`)).toBe(repo.base);
    // The dispatched run itself, a re-run of it included, runs the episode. The attempt before it
    // may have run the agent and pushed nothing (a lost runner): it is charged its whole allowance.
    const own = repo.runAction({ episode: 'r0.b0', env: { GITHUB_RUN_ID: '5002', GITHUB_RUN_ATTEMPT: '2' } });
    expect(own.exitCode, own.stdout).toBe(0);
    expect(repo.calls()).toHaveLength(1);
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 0)}`) ?? '';
    const { allowance } = repo.episode(repo.openingState(), 'r0.b0');
    const recorded = parseCommitMessage(repo.message(head), head)?.result;
    expect(recorded?.earlierSpent).toBe(allowance);
    expect(recorded?.note).toContain(
      'a re-run (attempt 2 of its workflow run): the attempt before it may have run the agent with no result recorded, charged its whole allowance',
    );
  });

  it("fails when the state already holds the episode's result", () => {
    const repo = new ActionRepo();
    const opening = repo.openingState();
    const commit = repo.resultCommit(opening, repo.episode(opening, 'r0.b0'), 3);
    repo.publish(applyResult(opening, 'r0.b0', { ...result(commit, 3) }));

    const job = repo.runAction({ episode: 'r0.b0' });

    expect(job.exitCode).toBe(1);
    expect(job.stdout).toContain(
      `::error::forkflush issue-42 r0.b0: episode r0.b0 of run issue-42 already has a result (score 3, spent 5 tokens, ended: finished, commit ${commit.slice(0, 10)}): nothing to run`,
    );
    expect(repo.calls()).toEqual([]);
  });
});

/**
 * A `git` first on the job's PATH that fails forkflush's pushes as GitHub's smart HTTP does when an
 * upload breaks (HTTP 500, a dropped connection): no ref line, exit 128, while `when` (a shell
 * condition over "$args" and "$marker", a file it may make) holds. All else goes to the real git.
 */
function gitFailingPushes(repo: ActionRepo, name: string, when: string): string {
  const bin = join(repo.root, `bin-${name}`);
  mkdirSync(bin, { recursive: true });
  const real = ['/usr/bin/git', '/usr/local/bin/git', '/bin/git'].find((p) => existsSync(p)) ?? 'git';
  writeFileSync(
    join(bin, 'git'),
    `#!/bin/sh
args="$*"
marker=${JSON.stringify(join(repo.root, `marker-${name}`))}
case " $args " in
  *" push --porcelain "*)
    if ${when}; then
      echo "error: RPC failed; HTTP 500 curl 22 The requested URL returned error: 500" >&2
      echo "fatal: the remote end hung up unexpectedly" >&2
      exit 128
    fi;;
esac
exec ${real} "$@"
`,
  );
  chmodSync(join(bin, 'git'), 0o755);
  chmodSync(repo.root, 0o755);
  return bin;
}

/** The episode's result is on its branch: the job ran the agent, and its paid result landed. */
function expectResultOn(repo: ActionRepo, job: { exitCode: number | null; stdout: string }, episode: string) {
  expect(repo.calls()).toHaveLength(1);
  expect(job.exitCode, job.stdout).toBe(0);
  const [round, branch] = episode.slice(1).split('.b').map(Number) as [number, number];
  const head = repo.ref(`refs/heads/${episodeBranch(RUN, round, branch)}`) ?? '';
  expect(head).not.toBe(repo.base);
  expect(parseCommitMessage(repo.message(head), head)).toMatchObject({ episode });
}

// Found by a review: each of these lost a result the agent had been paid for, or made a settled
// round's ref again, with nobody told.
describe('the worker Action: the paid result lands, or the job says why not', () => {
  it('a push that breaks in transport while it carries the context lands the result alone', () => {
    // A context of up to 1 GiB (encrypted, it does not compress) can break the upload with a 5xx:
    // the whole push failed, and only a refused ref had the result pushed alone.
    const repo = new ActionRepo();
    repo.publish(repo.openingState());
    const bin = gitFailingPushes(repo, 'ctx', 'case "$args" in *"/contexts/"*) true;; *) false;; esac');
    const job = repo.runAction({ episode: 'r0.b1', pathFirst: bin });
    expectResultOn(repo, job, 'r0.b1');
    expect(job.stdout).toMatch(
      /the context was not pushed \(git push .* hung up unexpectedly\): the result is pushed alone/,
    );
  });

  it('a push that fails once in transport is tried again', () => {
    // One passing 5xx of GitHub's git endpoint lost the result: the push had no second try.
    const repo = new ActionRepo();
    repo.publish(repo.openingState());
    const bin = gitFailingPushes(repo, 'once', '[ ! -e "$marker" ] && touch "$marker"');
    // Public without a key: no context, so the push is the result alone.
    const job = repo.runAction({ episode: 'r0.b2', pathFirst: bin, visibility: 'public' });
    expectResultOn(repo, job, 'r0.b2');
    expect(job.stdout).toMatch(/the push failed \(.*\): trying again in 2 s/);
  });

  it('a context git refuses to commit is left behind, and the result lands', () => {
    // git refuses names such as `.git.` (core.protectNTFS, on by default): the context's commit
    // threw before the push, and the result, already committed, was never pushed.
    const repo = new ActionRepo('node agent.mjs improve {calls} && printf x > "$FORKFLUSH_CONTEXT_DIR/.git."');
    repo.publish(repo.openingState());
    const job = repo.runAction({ episode: 'r0.b3', visibility: 'private' });
    expectResultOn(repo, job, 'r0.b3');
    expect(job.stdout).toMatch(/the context was not pushed \(.*\.git\..*\): the result is pushed alone/);
  });

  it("does not make again an episode's ref deleted while the job ran (its round decided), and says so", () => {
    // The push named no expected place, so git made the ref again: the job ended green with a
    // score nobody would read (the round was settled), and the ref stayed for good.
    const repo = new ActionRepo();
    const ref = `refs/heads/${episodeBranch(RUN, 0, 0)}`;
    const settled = join(repo.logs, 'settled');
    repo.agent = `node agent.mjs improve {calls} && while [ ! -f ${settled} ]; do sleep 0.05; done`;
    repo.publish(repo.openingState());
    // The app's settleRound, once this job's agent has started.
    const app = spawn(
      'sh',
      [
        '-c',
        `while [ ! -s ${repo.callsLog} ]; do sleep 0.05; done; git --git-dir=${repo.remote} update-ref -d ${ref} && touch ${settled}`,
      ],
      { stdio: 'ignore' },
    );
    const job = repo.runAction({ episode: 'r0.b0' });
    app.kill();
    expect(repo.calls()).toHaveLength(1);
    expect(repo.ref(ref)).toBeNull();
    expect(repo.ref(contextRef(RUN, 'r0.b0'))).toBeNull();
    expect(job.exitCode).not.toBe(0);
    expect(job.stdout).toContain(
      `the episode's ref ${episodeBranch(RUN, 0, 0)} was deleted while the episode ran (its round was decided without this result`,
    );
  });
});
