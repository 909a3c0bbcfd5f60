// Round 2: what root does to the agent's folders while the agent runs. Under root the sandbox's
// user is nobody, and before each confined command (the agent, and every grading it asks for)
// forkflush hands the workspace, context, box and /tmp over to it with `chown -R` as root. An agent
// that swaps folders and files of its workspace for links to a root-owned place outside, while it
// asks for gradings, races that chown: if the chown follows a link, the agent owns what it points
// at. The honest outcome: the place outside stays root's.
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { attackTemp, CAT_GRADER, cleanupAttackTemps, describeSandboxed, makeAttackRepo, runLocal } from './helpers.js';

afterAll(cleanupAttackTemps);

const isRoot = process.getuid?.() === 0;

describeSandboxed('the hand-over to the sandbox user', () => {
  it.skipIf(!isRoot)(
    'links raced into the workspace during 30 gradings (each a chown -R by root) leave a root-owned folder outside as it was',
    async () => {
      const root = attackTemp('task');
      const target = join(root, 'root-owned');
      mkdirSync(join(target, 'inner'), { recursive: true, mode: 0o755 });
      writeFileSync(join(target, 'file'), 'root\n', { mode: 0o644 });
      writeFileSync(join(target, 'inner', 'file'), 'root\n', { mode: 0o644 });
      const repo = makeAttackRepo({
        agent: `sh {fx}/round2-chown-race.sh ${target} {logs}`,
        grader: CAT_GRADER,
        dir: root,
      });
      const { result } = await runLocal(repo);
      expect(result.score).toBe(5);
      // It raced, and asked for its gradings.
      expect(Number(readFileSync(join(repo.logs, 'gradings'), 'utf8'))).toBe(30);
      expect(Number(readFileSync(join(repo.logs, 'swaps'), 'utf8'))).toBeGreaterThan(1000);
      for (const p of [target, join(target, 'file'), join(target, 'inner'), join(target, 'inner', 'file')]) {
        expect(statSync(p).uid, p).toBe(0);
      }
    },
  );
});
