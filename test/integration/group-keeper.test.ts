// The group keeper (io/group-keeper.ts) of a long command outside the sandbox (an agent, a grader or
// setup with `sandbox: off`), for a forkflush killed (kill -9, the OOM killer) with no time to stop it.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import BUNDLE_OPTIONS from '../../scripts/bundle-options.json' with { type: 'json' };
import { stateOf, until } from './cli-child.js';

const pids: number[] = [];
afterAll(() => {
  for (const pid of pids)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
});

// forkflush told the keeper a command's group after spawning it: a forkflush killed in between (a
// busy machine can leave it unscheduled for a while right after the spawn; CI: round2-resume.test.ts,
// 1 run in 13 at load 10) left the command running, an agent spending on its provider. Here the
// kill lands exactly there: forkflush's own "+<group>" line is never written. Before: the command
// still ran 20 s after forkflush's death. Now a long command tells the keeper its group itself,
// before it runs.
it('a long command outside the sandbox is stopped though forkflush died before it told the keeper of it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ff-keeper-'));
  const { build } = await import('esbuild');
  const entry = join(dir, 'entry.ts');
  const src = join(import.meta.dirname, '..', '..', 'src', 'io', 'process.ts');
  writeFileSync(
    entry,
    `import { Socket } from 'node:net';
import { runProcess } from ${JSON.stringify(src)};
// forkflush killed between the spawn and its line to the keeper: the line is never written.
const write = Socket.prototype.write;
Socket.prototype.write = function (chunk, ...rest) {
  return typeof chunk === 'string' && /^\\+\\d+\\n$/.test(chunk) ? true : write.call(this, chunk, ...rest);
};
const [pidFile, fdFile] = [process.argv[2], process.argv[2] + '.fds'];
void runProcess('/bin/sh', ['-c', 'ls /proc/$$/fd > ' + fdFile + '; echo $$ > ' + pidFile + '; exec sleep 600'], { cwd: '/', track: true });
setInterval(() => {}, 1000);
`,
  );
  await build({ entryPoints: [entry], outfile: join(dir, 'entry.mjs'), ...BUNDLE_OPTIONS, logLevel: 'error' } as never);
  const pidFile = join(dir, 'cmd');
  const node = spawn(process.execPath, [join(dir, 'entry.mjs'), pidFile], { stdio: 'ignore', detached: true });
  pids.push(node.pid as number);
  expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 30_000)).toBe(true);
  const cmd = Number(readFileSync(pidFile, 'utf8').trim());
  // The keeper's input is not the command's: it could forget its own group ("-<group>").
  expect(readFileSync(`${pidFile}.fds`, 'utf8').split('\n')).not.toContain('3');
  pids.push(cmd);
  process.kill(node.pid as number, 'SIGKILL');
  // The keeper's TERM, a second, then KILL: generous on a busy machine.
  expect(await until(() => ['', 'Z'].includes(stateOf(cmd)), 20_000)).toBe(true);
}, 90_000);
