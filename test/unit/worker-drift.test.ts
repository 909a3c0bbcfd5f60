// The worker workflow against the one `init --github` of the app's release writes (src/core/worker-drift.ts).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { GITHUB_WORKFLOWS, workflowText } from '../../src/cli/init.js';
import { AGENT_KINDS } from '../../src/core/config-sections.js';
import { ACTION_INPUTS, workerDrift, workerDriftText } from '../../src/core/worker-drift.js';

const written = (agent = 'claude-code', action = 'acme/forkflush@v0.1.0') =>
  workflowText('forkflush.yml', agent, action);

describe('the worker workflow init writes', () => {
  it('differs in nothing, for every agent kind, pinned to a tag or to a commit with its version', async () => {
    expect(GITHUB_WORKFLOWS).toContain('forkflush.yml');
    for (const agent of AGENT_KINDS) {
      expect(workerDrift(await written(agent), '0.1.0'), agent).toEqual({ stop: [], differ: [] });
      const sha = 'a'.repeat(40);
      const pinned = await workflowText('forkflush.yml', agent, `acme/forkflush@${sha}`, 'v0.1.0');
      expect(workerDrift(pinned, '0.1.0'), agent).toEqual({ stop: [], differ: [] });
      // The same commit without the comment naming its version names no release.
      expect(workerDrift(pinned.replace(' # v0.1.0', ''), '0.1.0').differ, agent).toHaveLength(1);
    }
  });

  it("names the Action's inputs as action.yml does", () => {
    const inputs = Object.keys(parse(readFileSync('action.yml', 'utf8')).inputs);
    expect([...ACTION_INPUTS.required, ...ACTION_INPUTS.optional].sort()).toEqual(inputs.sort());
  });
});

describe('an outdated worker workflow', () => {
  it('that could still run its jobs goes on, and is told what differs and how to fix it', async () => {
    let text = (await written()).replaceAll('acme/forkflush@v0.1.0', 'acme/forkflush@v0.0.9');
    text = text.replace(/^ {10}context-key: [^\n]*\n/m, '          colour: red\n');
    text = text.replace(/^permissions:\n {2}contents: write\n/m, '');
    const drift = workerDrift(text, '0.1.0');
    expect(drift.stop).toEqual([]);
    expect(drift.differ).toEqual([
      'it uses the forkflush Action at `v0.0.9`, and the app is `v0.1.0`',
      'its forkflush step sets `colour`, which the Action does not take (it takes `run`, `episode`, `token`, `context-key`)',
      'its forkflush step sets no `context-key`, so the agents’ contexts are kept unencrypted in a private repository and not at all in a public one',
      'it sets no `permissions:`, so its jobs get the repository’s default token permissions, which push only when they are "Read and write" (init writes `contents: write`)',
    ]);
    expect(workerDriftText(drift, 'main')).toMatch(
      /^`\.github\/workflows\/forkflush\.yml` on `main` differs from the worker workflow this forkflush release writes; the run goes on with it:\n\n- it uses .*\n\nThe fix: in a clone of this repository, delete `\.github\/workflows\/forkflush\.yml`, run `forkflush init --github`/s,
    );
  });

  it('a reference that names no release (a branch, a commit without its version) is said; a major tag of the release is not', async () => {
    const on = async (ref: string) => workerDrift((await written()).replaceAll('v0.1.0', ref), '0.1.0');
    expect((await on('main')).differ[0]).toMatch(/^it uses `acme\/forkflush@main`, which names no release/);
    expect((await on('b'.repeat(40))).differ[0]).toMatch(/which names no release/);
    expect(await on('v0')).toEqual({ stop: [], differ: [] });
    // An app built without a release compares no reference.
    expect(workerDrift((await written()).replaceAll('v0.1.0', 'main'), null)).toEqual({ stop: [], differ: [] });
  });

  it('whose jobs could not work stops the run before it spends, naming each reason', async () => {
    const base = await written();
    const cases: [string, RegExp][] = [
      [base.replaceAll('acme/forkflush@v0.1.0', 'acme/forkflush@v1.0.0'), /another major release than the app's/],
      [
        base.replaceAll('acme/forkflush@v0.1.0', 'your-org/forkflush@v0.1.0'),
        /still names `your-org\/forkflush@v0\.1\.0`/,
      ],
      [base.replace(/^ {6}episodes:\n(?: {8}[^\n]*\n)+/m, ''), /has no input `episodes`, so GitHub would refuse/],
      [base.replace('contents: write', 'contents: read'), /the job `episode` has no `contents: write` permission/],
      [base.replace(/^ {10}episode: \$\{\{ matrix\.episode \}\}\n/m, ''), /sets no `episode`, so no job would know/],
      [
        base.replace(/^ {6}- uses: acme\/forkflush@v0\.1\.0\n/m, '      - run: echo\n'),
        /no step uses the forkflush Action/,
      ],
      ['on: [push\n', /is not YAML that GitHub can read/],
      ['on: push\njobs: {}\n', /has no `on: workflow_dispatch`/],
    ];
    for (const [text, reason] of cases) {
      const drift = workerDrift(text, '0.1.0');
      expect(drift.stop.join('\n'), reason.source).toMatch(reason);
      expect(workerDriftText(drift, 'main')).toMatch(/so no run started:\n\n- .*Then label the issue again\.$/s);
    }
    // A job's own permissions win over the workflow's.
    const own = base.replace(/^( {4}runs-on: [^\n]+\n)/m, '$1    permissions: read-all\n');
    expect(workerDrift(own, '0.1.0').stop).toEqual([
      "the job `episode` has no `contents: write` permission, so it could not push its episode's result",
    ]);
  });
});
