// FORKFLUSH_GRADE: a tiny executable that asks this process, over loopback HTTP, to run the
// grader. The grader then runs through the same door as every other process, evaluations are
// counted exactly, and the evaluation budget is enforced in one place.
import { chmod, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Config } from '../core/config.js';
import { runGrader } from './grade.js';

export interface GradeService {
  /** The executable to put in FORKFLUSH_GRADE. */
  command: string;
  /** Evaluations the agent ran. */
  evaluations(): number;
  close(): Promise<void>;
}

export async function startGradeService(args: {
  config: Config;
  workdir: string;
  scratchDir: string;
  env: NodeJS.ProcessEnv;
  /** Most evaluations allowed (evaluation budgets), or Infinity. */
  limit: number;
  /** Called when the agent asks for an evaluation past the limit. */
  onExhausted: () => void;
}): Promise<GradeService> {
  let count = 0;
  let queue: Promise<unknown> = Promise.resolve();
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/grade') {
      res.writeHead(404).end();
      return;
    }
    // One grading at a time: graders are rarely written to run twice at once in one folder.
    const job = queue.then(async () => {
      if (count >= args.limit) {
        args.onExhausted();
        return {
          exitCode: 3,
          stdout: '',
          stderr: `forkflush: the evaluation budget of this session is used up (${args.limit})\n`,
        };
      }
      count += 1;
      const g = await runGrader(args.config, args.workdir, args.env);
      const note = g.score === null ? `forkflush: no score: ${g.reason}\n` : '';
      return { exitCode: g.exitCode ?? 1, stdout: g.stdout, stderr: g.stderr + note };
    });
    queue = job.catch(() => {});
    job.then(
      (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
      (e: unknown) =>
        res.writeHead(500).end(JSON.stringify({ exitCode: 1, stdout: '', stderr: `forkflush: ${String(e)}\n` })),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const client = join(args.scratchDir, 'grade-client.mjs');
  const command = join(args.scratchDir, 'grade');
  await writeFile(
    client,
    // node:http starts faster than fetch (undici), and every evaluation pays for this start-up.
    `// Asks forkflush to run the grader for this episode; prints what the grader printed.
import { request } from 'node:http';
const req = request({ host: '127.0.0.1', port: ${port}, path: '/grade', method: 'POST' }, (res) => {
  let text = '';
  res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => {
    const body = JSON.parse(text);
    process.stdout.write(body.stdout);
    process.stderr.write(body.stderr);
    process.exitCode = body.exitCode;
  });
});
req.on('error', (e) => {
  process.stderr.write('forkflush: the grading service is gone (' + e.message + '); the episode has ended\\n');
  process.exitCode = 3;
});
req.end();
`,
  );
  await writeFile(
    command,
    `#!/bin/sh\nexec '${process.execPath.replace(/'/g, `'\\''`)}' '${client.replace(/'/g, `'\\''`)}'\n`,
  );
  await chmod(command, 0o755);
  return {
    command,
    evaluations: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
