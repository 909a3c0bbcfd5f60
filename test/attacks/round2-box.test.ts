// Round 2, GitHub in a box (test/github/box.ts): the real app, and real jobs of the built worker
// Action (dist/index.js) against a fake GitHub over HTTP on loopback, which the agent can reach
// (its network is the machine's). The box lives under /var/tmp, readable (its repositories too),
// so that nothing is hidden by the sandbox's private /tmp for free. A hostile agent looks for any
// token the box issued, finds the forge, and tries to push a result of its own to its branch and
// over the run's state ref, to write the forge's repository on disk, and to send the app a
// webhook. The honest outcome: it finds no token, every attempt fails, and the run ends with the
// agent's honest work (3) recorded.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ACTION_MAIN } from '../github/fake-actions.js';
import { Harness } from '../github/harness.js';
import { useGitHubInABox } from '../github/use-box.js';
import {
  attackTemp,
  cleanupAttackTemps,
  describeSandboxed,
  FX,
  folderText,
  hasObject,
  logWithoutMasks,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(() => {
  readFileSync(ACTION_MAIN); // the built Action: `npm run bundle` makes it
});
useGitHubInABox();

const RUN = 'issue-7';

interface Report {
  tokens: string[];
  ports: number[];
  forges: { port: number; api: number }[];
  repositories: string[];
  forged: string;
  pushes: { port: number; name: string; token: string | null; ref: string; exit: number | null; stderr: string }[];
  writes: { repo: string; exit: number | null }[];
  webhooks: { port: number; status: number }[];
}

describeSandboxed('GitHub in a box: a hostile agent in a real job', () => {
  it('finds no token, pushes nothing, rewrites no state, and the run ends with its honest result', async () => {
    const root = attackTemp('box');
    const saved = process.env.TMPDIR;
    // The box's repositories and job folders go under /var/tmp (os.tmpdir() reads TMPDIR).
    process.env.TMPDIR = root;
    try {
      const logs = join(root, 'logs');
      mkdirSync(logs);
      chmodSync(logs, 0o777);
      const files = {
        '.github/autoresearch.yml': `grader:
  command: sh grade.sh
  protected: [grade.sh]
agent:
  command: ${JSON.stringify(`node ${FX}/round2-box-thief.mjs ${logs}`)}
  timeout: 60
budget:
  total: 10
  unit: tokens
  episode: 10
strategy: single-run
sandbox:
  mode: required
  write: [${JSON.stringify(logs)}]
`,
        'grade.sh': 'cat value.txt\n',
        'value.txt': '1\n',
        'NOTES.md': '# Notes\n',
      };
      const h = await new Harness(files).load();
      // The ports the agent may talk to: the box's and the app's (it finds them itself).
      const ports = [h.box.serverUrl, h.box.webhookUrl ?? ''].map((u) => new URL(u).port);
      writeFileSync(join(logs, 'ports'), ports.join(' '));
      // Readable to all, as a forge's data could be: the attack must not fail for want of a path.
      chmodSync(h.gh.store.root, 0o755);
      const contextKey = randomBytes(32).toString('base64');
      h.box.secrets.FORKFLUSH_CONTEXT_KEY = contextKey;
      await h.label(7);
      const jobs = [];
      for (let i = 0; i < 5; i++) {
        const ran = await h.box.runQueued();
        if (ran.length === 0) break;
        jobs.push(...ran);
      }
      // The episode's job, and the one that grades the initial workspace (no agent runs there).
      expect(jobs.map((j) => j.name).sort()).toEqual([`forkflush ${RUN} base`, `forkflush ${RUN} r0.b0`]);
      for (const j of jobs) expect(j.conclusion, j.log).toBe('success');

      const report = JSON.parse(readFileSync(join(logs, 'thief.json'), 'utf8')) as Report;
      // The attack was real: it found the forge, the repository on disk, and made its commit.
      for (const port of ports) expect(report.ports, 'the ports it found listening').toContain(Number(port));
      expect(report.forges.length, JSON.stringify(report.ports)).toBe(2);
      expect(report.repositories).toContain(h.gh.store.gitDir);
      expect(report.forged).toMatch(/^[0-9a-f]{40}$/);
      expect(report.pushes.length).toBeGreaterThan(0);

      // No token the box issued, nor the app's secrets, anywhere it looked or wrote.
      const secrets = [...h.box.auth.issued(), h.box.webhookSecret, contextKey];
      const written = folderText(logs);
      for (const s of secrets) {
        expect(report.tokens.includes(s), 'a token the box issued, found by the agent').toBe(false);
        expect(written.includes(s), 'a secret in what the agent wrote').toBe(false);
        for (const j of jobs)
          expect(logWithoutMasks(j.log).includes(s), `a secret in the log of ${j.name}`).toBe(false);
      }
      // Every push and write failed; no forged webhook was taken.
      expect(report.pushes.filter((p) => p.exit === 0)).toEqual([]);
      expect(report.writes.filter((w) => w.exit === 0)).toEqual([]);
      expect(report.webhooks.filter((w) => w.status >= 200 && w.status < 300)).toEqual([]);
      expect(hasObject(h.gh.store.gitDir, report.forged), 'the forged commit reached the forge').toBe(false);

      // The run's record is the app's, and holds the honest result.
      const state = h.state(RUN);
      expect(state.status).toBe('finished');
      const e = state.rounds[0]?.episodes[0];
      expect(e?.result?.score).toBe(3);
      expect(e?.result?.commit).not.toBe(report.forged);
      expect(h.gh.commits.get(e?.result?.commit ?? '')?.parents).toEqual([e?.base]);
      expect(h.gh.commits.get(e?.result?.commit ?? '')?.files['value.txt']).toBe('3\n');
      expect(state.best?.score).toBe(3);
      expect(state.base.score).toBe(1);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
});
