// A task repository in a temp folder: the test agent and grader, a config, one commit.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const FIXTURES = process.env.FORKFLUSH_FIXTURES ?? join(import.meta.dirname, '..', 'fixtures');

export interface TaskRepo {
  dir: string;
  callsLog: string;
  git(...args: string[]): string;
  calls(): {
    episode: string;
    memory: string[];
    seed: string;
    budget: number;
    unit: string;
    secrets: string[];
    promptStart: string;
    promptFileSame: boolean;
  }[];
}

export function makeTaskRepo(
  opts: {
    agent?: string;
    /** The whole agent command, instead of the test agent. */
    agentCommand?: string;
    grader?: string;
    extra?: string;
    budget?: string;
    git?: boolean;
    /** More files of the task, committed with it. */
    files?: Record<string, string>;
  } = {},
): TaskRepo {
  const dir = mkdtempSync(join(tmpdir(), 'forkflush-task-'));
  const logs = mkdtempSync(join(tmpdir(), 'forkflush-logs-'));
  // Shared with the agent, which runs as nobody when the tests run as root.
  chmodSync(logs, 0o777);
  const callsLog = join(logs, 'calls.jsonl');
  copyFileSync(join(FIXTURES, 'agent.mjs'), join(dir, 'agent.mjs'));
  copyFileSync(join(FIXTURES, 'grade.sh'), join(dir, 'grade.sh'));
  writeFileSync(join(dir, 'TASK.md'), 'Make the number in value.txt as large as you can.\n');
  writeFileSync(join(dir, 'value.txt'), '0');
  writeFileSync(join(dir, 'NOTES.md'), '# Notes\n');
  for (const [name, text] of Object.entries(opts.files ?? {})) writeFileSync(join(dir, name), text);
  mkdirSync(join(dir, '.github'));
  writeFileSync(
    join(dir, '.github', 'autoresearch.yml'),
    `grader:
  command: ${opts.grader ?? 'sh grade.sh'}
  protected: [grade.sh, agent.mjs]
  timeout: 5
agent:
  command: ${opts.agentCommand ?? `node agent.mjs ${opts.agent ?? 'improve'} ${callsLog}`}
  timeout: 20
budget:
  ${opts.budget ?? 'total: 100\n  unit: tokens\n  episode: 6'}
# The test agent logs its calls outside the repository (in the sandbox, only this is writable).
sandbox:
  write: [${JSON.stringify(logs)}]
${opts.extra ?? ''}
`,
  );
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' }).trim();
  if (opts.git !== false) {
    git('init', '-q', '--initial-branch=main');
    git('add', '-A');
    git('commit', '-qm', 'task');
  }
  return {
    dir,
    callsLog,
    git,
    calls: () => {
      let text = '';
      try {
        text = readFileSync(callsLog, 'utf8');
      } catch {}
      return text
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    },
  };
}

/** Writes FILES (paths with folders) into the task and replaces its config; one commit of it all. */
export function retask(repo: TaskRepo, files: Record<string, string>, config: string): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo.dir, name)), { recursive: true });
    writeFileSync(join(repo.dir, name), text);
  }
  writeFileSync(join(repo.dir, '.github', 'autoresearch.yml'), config);
  repo.git('add', '-A');
  repo.git('commit', '-qm', 'the task');
}
