// The worker Action left alone overnight on a GitHub-hosted runner: a stalled artifact service does
// not hold the job, and a context GitHub refuses does not take the result down with it.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACT_UPLOAD_TIMEOUT_MS } from '../../src/core/bounds.js';
import { contextRef, episodeBranch } from '../../src/core/names.js';
import { ACTION, ActionRepo, RUN, type StalledService, stalledResultsService } from './action-repo.js';

beforeAll(() => {
  if (!existsSync(ACTION)) throw new Error(`${ACTION} is missing: run \`npm run bundle\` first`);
});

/**
 * GitHub's own rule on every push (GH001): a blob over 100 MiB is refused, and with it the whole
 * push. A pre-receive hook in the bare repository does the same here.
 */
function refuseLargeFiles(repo: ActionRepo): void {
  const hook = join(repo.remote, 'hooks', 'pre-receive');
  writeFileSync(
    hook,
    `#!/bin/sh
z=0000000000000000000000000000000000000000
while read old new ref; do
  [ "$new" = "$z" ] && continue
  if [ "$old" = "$z" ]; then range="$new"; else range="$old..$new"; fi
  big=$(git rev-list --objects "$range" | git cat-file --batch-check='%(objecttype) %(objectsize) %(rest)' | awk '$1 == "blob" && $2 > 104857600')
  if [ -n "$big" ]; then
    echo "remote: error: GH001: Large files detected. You may want to try Git Large File Storage. $big" >&2
    exit 1
  fi
done
exit 0
`,
  );
  chmodSync(hook, 0o755);
}

describe('the worker Action, overnight on a hosted runner', () => {
  // An Actions results service that takes the connection and never answers (a stalled upload).
  let stalled: StalledService;
  beforeAll(async () => {
    stalled = await stalledResultsService();
  });
  afterAll(() => stalled.close());

  // src/action/artifact.ts gives up on the upload after ARTIFACT_UPLOAD_TIMEOUT_MS, but its request
  // (3 min socket timeout, 5 attempts) lived on and kept Node running ~16 minutes after the result
  // was pushed, the job "in progress" all that time (src/action/index.ts exits; found by a review).
  it(
    'ends soon after the artifact upload is given up, its result pushed, when the results service stalls',
    () => {
      const repo = new ActionRepo();
      repo.publish(repo.openingState());
      // The server as github.com-like (*.localhost is not GHES to @actions/artifact); git is sent to the bare repository.
      const started = Date.now();
      const job = repo.runAction({
        episode: 'r0.b1',
        env: stalled.env(repo),
        timeoutMs: ARTIFACT_UPLOAD_TIMEOUT_MS + 60_000,
      });
      const took = Date.now() - started;
      // The episode itself went through: its result is on its branch.
      expect(repo.ref(`refs/heads/${episodeBranch(RUN, 0, 1)}`)).not.toBe(repo.base);
      expect(job.stdout).toMatch(/pushed: /);
      // The job ends once the upload is given up, not when the abandoned request does.
      expect(job.exitCode, `still running after ${took} ms:\n${job.stdout.slice(-1500)}`).toBe(0);
    },
    ARTIFACT_UPLOAD_TIMEOUT_MS + 120_000,
  );
});

describe('the worker Action and GitHub push limits', () => {
  // A sealed context is one file, and the worker lets a context be 1 GiB (CONTEXT_MAX_BYTES), but
  // GitHub refuses any blob over 100 MiB, and with it the whole atomic push: the graded result was
  // lost with the context, every episode of a lineage once its context passed 100 MiB
  // (src/action/episode-job.ts pushResult; found by a review).
  it('pushes the graded result even when the context the agent left is larger than GitHub takes in one file', () => {
    const repo = new ActionRepo(
      'node agent.mjs improve {calls} && head -c 110000000 /dev/urandom > "$FORKFLUSH_CONTEXT_DIR/scratch.bin"',
    );
    repo.publish(repo.openingState());
    refuseLargeFiles(repo);
    const key = randomBytes(32).toString('base64');

    const job = repo.runAction({ episode: 'r0.b1', contextKey: key, timeoutMs: 120_000 });

    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 1)}`);
    expect(job.stdout).not.toMatch(/GH001|the push was refused/);
    expect(job.exitCode, job.stdout.slice(-2000)).toBe(0);
    expect(head).not.toBe(repo.base);
    expect(job.outputs.commit).toBe(head);
    expect(job.stdout).toMatch(
      /the context was not pushed \(.*\): the result is pushed alone, and the lineage's next episode starts with an empty context/,
    );
    // Whatever becomes of the oversized context, no blob GitHub refuses is on the context ref.
    const ctx = repo.ref(contextRef(RUN, 'r0.b1'));
    if (ctx) {
      for (const line of repo.git(['ls-tree', '-r', '-l', ctx]).split('\n').filter(Boolean)) {
        expect(Number(line.split(/\s+/)[3])).toBeLessThanOrEqual(100 * 1024 * 1024);
      }
    }
  }, 180_000);
});
