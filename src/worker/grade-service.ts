// FORKFLUSH_GRADE: a tiny executable that asks this process, over a Unix socket, to run the
// grader. The grader then runs through the same door as every other process, evaluations are
// counted exactly, and the evaluation budget is enforced in one place. The socket lives in a
// private folder that only the episode's own sandbox has bound: no other process, and no other
// episode, can ask for this episode's gradings. What the services of sibling episodes share is
// forkflush's process: its open files (a connection each), its memory and its event loop. So a
// service holds at most GRADE_SERVICE_MAX_CONNECTIONS connections (more are closed as they come: a branch
// that opens thousands would take the files every sibling's judge and git command needs), one
// request each, and one grading's output at a time; each grading runs in the sandbox under the episode's own account.
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { GRADE_SERVICE_MAX_CONNECTIONS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import type { Confinement, Sandbox } from '../io/sandbox.js';
import { runGrader } from './grade.js';

export interface GradeService {
  /** The executable to put in FORKFLUSH_GRADE. */
  command: string;
  /** The folder holding the socket: the agent's sandbox binds it. */
  socketDir: string;
  /** Evaluations the agent ran. */
  evaluations(): number;
  close(): Promise<void>;
}

export interface GradeServiceArgs {
  config: Config;
  workdir: string;
  /** The agent's box, where the client goes. */
  box: string;
  env: NodeJS.ProcessEnv;
  /** The grader's confinement, when the run has a sandbox. */
  confine?: { sandbox: Sandbox; confinement: Confinement };
  /** Most evaluations allowed (evaluation budgets), or Infinity. */
  limit: number;
  /** Called when the agent asks for an evaluation past the limit. */
  onExhausted: () => void;
}

export async function startGradeService(args: GradeServiceArgs): Promise<GradeService> {
  // 1. The server: one grading at a time, for the client that holds the secret, within the limit.
  // Closing stops the gradings the agent asked for: each runs the agent's code in the workspace,
  // and none may outlive the agent into the snapshot and the judge.
  const closing = new AbortController();
  // The client in the box holds it: a process that finds the socket, but cannot read the box
  // (the run folder is forkflush's, mode 0700), gets nothing.
  const secret = randomBytes(24).toString('hex');
  const grading = gradingServer(args, secret, closing.signal);
  // 2. Its socket, which only the episode's sandbox reaches.
  const { socketDir, socket } = await listenInTmp(grading.server);
  // 3. The client the agent runs as FORKFLUSH_GRADE, in its box.
  const command = await writeClient(args.box, socket, secret);
  return {
    command,
    socketDir,
    evaluations: grading.count,
    close: async () => {
      closing.abort();
      await new Promise<void>((resolve) => {
        grading.server.closeAllConnections();
        grading.server.close(() => resolve());
      });
      // Every grading asked for has ended (its process group or sandbox killed) before this returns.
      await grading.queue();
      await rm(socketDir, { recursive: true, force: true });
    },
  };
}

/** The grading requests' server: each request, with the secret, queued behind the last; `count` of those run. */
function gradingServer(args: GradeServiceArgs, secret: string, closing: AbortSignal) {
  let count = 0;
  let queue: Promise<unknown> = Promise.resolve();
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/grade') {
      res.writeHead(404).end();
      return;
    }
    if (req.headers['x-forkflush-grade'] !== secret) {
      res.writeHead(403).end(JSON.stringify({ exitCode: 3, stdout: '', stderr: 'forkflush: not this episode\n' }));
      return;
    }
    // One grading at a time: graders are rarely written to run twice at once in one folder.
    const job = queue.then(async () => {
      if (closing.aborted) {
        return { exitCode: 3, stdout: '', stderr: 'forkflush: the episode has ended; no more gradings\n' };
      }
      if (count >= args.limit) {
        args.onExhausted();
        return {
          exitCode: 3,
          stdout: '',
          stderr: `forkflush: the evaluation budget of this session is used up (${args.limit})\n`,
        };
      }
      count += 1;
      const g = await runGrader(args.config, args.workdir, args.env, args.confine, closing);
      const note = g.score === null ? `forkflush: no score: ${g.reason}\n${withoutJudgeOnly(args.config)}` : '';
      return { exitCode: g.exitCode ?? 1, stdout: g.stdout, stderr: g.stderr + note };
    });
    queue = job.catch(() => {});
    job.then(
      (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
      (e: unknown) =>
        res.writeHead(500).end(JSON.stringify({ exitCode: 1, stdout: '', stderr: `forkflush: ${String(e)}\n` })),
    );
  });
  server.maxConnections = GRADE_SERVICE_MAX_CONNECTIONS;
  // The client asks once per connection; requests pipelined behind the first would each wait in
  // forkflush's memory for their turn (thousands on one connection): they are refused, and the
  // connection closed.
  server.maxRequestsPerSocket = 1;
  return { server, count: () => count, queue: () => queue };
}

/**
 * Listens on a socket in a short path (a socket's is limited to about 100 bytes, and run folders
 * can be deep) under the real /tmp whatever TMPDIR says: every sandbox has a /tmp of its own, so
 * only the sandbox that binds this folder, the episode's, can reach the socket. The folder is not
 * listable and the socket open to the sandbox's user (nobody, under root).
 */
async function listenInTmp(server: Server): Promise<{ socketDir: string; socket: string }> {
  const socketDir = await mkdtemp('/tmp/ff-grade-');
  await chmod(socketDir, 0o711);
  const socket = join(socketDir, 'grade.sock');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  await chmod(socket, 0o666);
  return { socketDir, socket };
}

/** The client script and the executable that runs it, in the agent's box; returns the executable. */
async function writeClient(box: string, socket: string, secret: string): Promise<string> {
  const client = join(box, 'grade-client.mjs');
  const command = join(box, 'grade');
  await writeFile(
    client,
    // node:http starts faster than fetch (undici), and every evaluation pays for this start-up.
    `// Asks forkflush to run the grader for this episode; prints what the grader printed.
import { request } from 'node:http';
const req = request({ socketPath: ${JSON.stringify(socket)}, path: '/grade', method: 'POST', headers: { 'x-forkflush-grade': ${JSON.stringify(secret)} } }, (res) => {
  let text = '';
  res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => {
    const body = JSON.parse(text);
    process.stdout.write(body.stdout);
    process.stderr.write(body.stderr);
    process.exitCode = body.exitCode;
  });
});
req.on('error', (e) => {
  process.stderr.write('forkflush: no answer from the grading service (' + e.message + '): it takes ${GRADE_SERVICE_MAX_CONNECTIONS} requests at once, and none once the episode has ended\\n');
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
  return command;
}

/** What a grading the agent asked for runs without, said when it fails: grader.env and grader.network are the judge's. */
function withoutJudgeOnly(config: Config): string {
  const g = config.grader;
  const lacks = [
    ...(g.env.length > 0 ? [`grader.env (${g.env.join(', ')})`] : []),
    ...(g.network ? ['the network'] : []),
  ];
  return lacks.length === 0
    ? ''
    : `forkflush: gradings asked for during the episode run without ${lacks.join(' or ')}: they run files the agent can change, the grader's too; the judge, on the committed tree with the grader's files restored, has them\n`;
}
