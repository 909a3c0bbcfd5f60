// A GitHub repository as the worker Action sees it, without GitHub: a bare repository under a
// file:// "server", holding a run's state ref, its episode branches and its context refs, made
// with the core the way the app makes them. `runAction` runs the built dist/index.js the way the
// Actions runner does: inputs and runner paths in the environment, outputs and summary in files.

import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type BuildOptions, build } from 'esbuild';
import BUNDLE_OPTIONS from '../../scripts/bundle-options.json' with { type: 'json' };
import { type Config, parseConfig } from '../../src/core/config.js';
import type { GitHubRunRecord } from '../../src/core/github-run-record.js';
import { commitMessage } from '../../src/core/journal.js';
import { episodeBranch, stateRef } from '../../src/core/names.js';
import { applyDecision, applyOpen, applyResult, decide, reconcile } from '../../src/core/reconcile.js';
import { type Episode, type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';

const ROOT = join(import.meta.dirname, '..', '..');
const FIXTURES = join(ROOT, 'test', 'fixtures');
export const ACTION = join(ROOT, 'dist', 'index.js');

export const RUN = 'issue-42';
// Made up at run time: a literal would be found in this very file by an agent that searches the
// machine, when the clone lives where it searches (/var/tmp, /tmp).
export const TOKEN = `ghs_action_token_${randomBytes(8).toString('hex')}`;
const CONFIG_PATH = '.github/autoresearch.yml';

export interface Call {
  episode: string;
  memory: string[];
  secrets: string[];
  promptStart: string;
}

export interface ActionRun {
  exitCode: number | null;
  stdout: string;
  outputs: Record<string, string>;
  summary: string;
  workspace: string;
  /** The job's RUNNER_TEMP. */
  temp: string;
}

/**
 * The Action built from src/ into a folder of its own, as scripts/bundle.mjs builds dist/index.js:
 * for tests of this source, whatever dist/ holds (dist/ changes only when the bundle is made).
 */
export async function buildActionFromSource(): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), 'forkflush-action-build-'));
  const action = join(out, 'index.js');
  await build({
    entryPoints: [join(ROOT, 'src', 'action', 'index.ts')],
    outfile: action,
    ...(BUNDLE_OPTIONS as BuildOptions),
    logLevel: 'warning',
  });
  return action;
}

export class ActionRepo {
  readonly root = mkdtempSync(join(tmpdir(), 'forkflush-action-'));
  /** The bare repository: GITHUB_SERVER_URL=file://<root>/server, GITHUB_REPOSITORY=owner/repo. */
  readonly remote = join(this.root, 'server', 'owner', 'repo.git');
  /** Where the test agent writes what it saw: the one place outside its workspace it may write. */
  readonly logs = join(this.root, 'logs');
  readonly callsLog = join(this.logs, 'calls.jsonl');
  /** The agent's environment, as `env` printed it. */
  readonly envDump = join(this.logs, 'agent-env.txt');
  readonly base: string;
  private readonly source = join(this.root, 'source');
  private attempts = 0;

  /**
   * `agent` is the agent's shell command (it goes into the states made after it is set); `{calls}`
   * and `{env}` stand for the two log files.
   */
  constructor(public agent = 'node agent.mjs improve {calls}') {
    mkdirSync(join(this.source, '.github'), { recursive: true });
    // Shared with the agent, which runs as nobody when the tests run as root (and so must pass
    // through this folder to reach it).
    chmodSync(this.root, 0o755);
    mkdirSync(this.logs, { recursive: true });
    chmodSync(this.logs, 0o777);
    copyFileSync(join(FIXTURES, 'agent.mjs'), join(this.source, 'agent.mjs'));
    copyFileSync(join(FIXTURES, 'grade.sh'), join(this.source, 'grade.sh'));
    writeFileSync(join(this.source, 'TASK.md'), 'Make the number in value.txt as large as you can.\n');
    writeFileSync(join(this.source, 'value.txt'), '0');
    writeFileSync(join(this.source, 'NOTES.md'), '# Notes\n');
    writeFileSync(join(this.source, CONFIG_PATH), this.configText());
    this.sourceGit('init', '-q', '--initial-branch=main');
    this.sourceGit('add', '-A');
    this.sourceGit('commit', '-qm', 'task');
    this.base = this.sourceGit('rev-parse', 'HEAD');
    mkdirSync(join(this.root, 'server', 'owner'), { recursive: true });
    execFileSync('git', ['clone', '-q', '--bare', this.source, this.remote]);
  }

  configText(): string {
    const agent = this.agent.replaceAll('{calls}', this.callsLog).replaceAll('{env}', this.envDump);
    return `grader:
  command: sh grade.sh
  protected: [grade.sh, agent.mjs]
  timeout: 5
agent:
  command: ${JSON.stringify(agent)}
  timeout: 20
budget:
  total: 100
  unit: tokens
  episode: 6
sandbox:
  write: [${JSON.stringify(this.logs)}]
`;
  }

  config(): Config {
    return parseConfig(this.configText(), CONFIG_PATH);
  }

  /** A new run with its opening round open, as the app records it. */
  openingState(): RunState {
    const state = newRunState({ id: RUN, seed: 7, config: this.config(), baseCommit: this.base, baseScore: 0 });
    return this.openNext(state);
  }

  /**
   * A run whose opening round was won by `winner` (its workspace scores 5), with the next round
   * (a serial round that carries the winner's context) open.
   */
  carriedState(winner = 'r0.b2'): RunState {
    let state = this.openingState();
    const round = state.rounds[0];
    if (!round) throw new Error('no opening round');
    for (const e of round.episodes) {
      const won = e.id === winner;
      const commit = won ? this.commitOnBase({ 'value.txt': '5' }, 'the winner') : this.base;
      state = applyResult(state, e.id, result(commit, won ? 5 : 1));
      if (won) this.setRef(`refs/heads/${episodeBranch(RUN, e.round, e.branch)}`, commit);
    }
    const decided = state.rounds[0];
    if (!decided) throw new Error('no opening round');
    state = applyDecision(state, 0, decide(state, decided));
    return this.openNext(state);
  }

  openNext(state: RunState): RunState {
    const [open] = reconcile(state);
    if (open?.type !== 'open') throw new Error(`expected a round to open, got ${open?.type}`);
    return applyOpen(state, open.round);
  }

  episode(state: RunState, id: string): Episode {
    const e = state.rounds.flatMap((r) => r.episodes).find((x) => x.id === id);
    if (!e) throw new Error(`no episode ${id}`);
    return e;
  }

  /**
   * Writes the state ref, and makes the branches of the open round's episodes at their bases.
   * `edit` changes the two records as JSON before they are written (a newer app's record, say).
   */
  publish(state: RunState, edit?: (records: { state: any; facts: any }) => void): void {
    // run.json as the app writes it: the worker reads the task, templates and config path.
    const facts: GitHubRunRecord = {
      task: 'Make the number in value.txt as large as you can.\n',
      templates: {},
      configPath: CONFIG_PATH,
      defaultBranch: 'main',
      issue: 42,
      commentId: null,
      stopped: false,
      dispatched: {
        [String(state.rounds.length - 1)]: { at: '2026-12-01T00:00:00Z', deadline: '2026-12-01T02:00:00Z' },
      },
      published: {},
      settled: [],
      finalPr: null,
      bestCommit: null,
      lastNightly: null,
      claims: {},
    };
    const records = { state: JSON.parse(JSON.stringify(state)), facts: JSON.parse(JSON.stringify(facts)) };
    edit?.(records);
    const commit = this.commitFiles({
      'state.json': JSON.stringify(records.state),
      'run.json': JSON.stringify(records.facts),
    });
    this.setRef(stateRef(RUN), commit);
    for (const e of state.rounds.find((r) => !r.decision)?.episodes ?? []) {
      this.setRef(`refs/heads/${episodeBranch(RUN, e.round, e.branch)}`, e.base);
    }
  }

  /** A commit with only these files, e.g. a context. */
  commitFiles(files: Record<string, string>, parent?: string): string {
    const entries = Object.entries(files)
      .map(([name, text]) => `100644 blob ${this.git(['hash-object', '-w', '--stdin'], text)}\t${name}\n`)
      .join('');
    const tree = this.git(['mktree'], entries);
    return this.git(['commit-tree', tree, ...(parent ? ['-p', parent] : []), '-m', 'fixture']);
  }

  /** A commit on the base with some files changed, as an episode's result would be. */
  commitOnBase(files: Record<string, string>, message: string): string {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(this.source, name), text);
    this.sourceGit('checkout', '-q', '--detach', this.base);
    this.sourceGit('commit', '-qam', message);
    const commit = this.sourceGit('rev-parse', 'HEAD');
    this.sourceGit('push', '-q', this.remote, `${commit}:refs/forkflush-fixture/${commit}`);
    this.sourceGit('checkout', '-q', '-f', 'main');
    return commit;
  }

  /** A result commit on the episode's base, with the trailers the worker writes. */
  resultCommit(state: RunState, e: Episode, score: number): string {
    const r = { ...result('', score), spent: 2 };
    const tree = this.git(['rev-parse', `${e.base}^{tree}`]);
    return this.git(['commit-tree', tree, '-p', e.base], commitMessage(RUN, state.config.budget.unit, e, r));
  }

  setRef(ref: string, commit: string): void {
    this.git(['update-ref', ref, commit]);
  }

  ref(ref: string): string | null {
    try {
      return this.git(['rev-parse', '--verify', '--quiet', ref]);
    } catch {
      return null;
    }
  }

  show(rev: string, path: string): string {
    return this.git(['show', `${rev}:${path}`]);
  }

  message(commit: string): string {
    return this.git(['log', '-1', '--format=%B', commit]);
  }

  calls(): Call[] {
    if (!existsSync(this.callsLog)) return [];
    return readFileSync(this.callsLog, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Call);
  }

  /**
   * One job: runs the Action (dist/index.js, or `action`, one built by buildActionFromSource) as
   * the runner does, each attempt with its own workspace, temp folder and tool cache. The
   * repository is private unless `visibility` says otherwise (the runner's event payload tells);
   * `contextKey` is the `context-key` input; `env` adds to or replaces the runner's environment,
   * and `pathFirst` goes first on its PATH.
   */
  runAction(inputs: {
    run?: string;
    episode: string;
    contextKey?: string;
    visibility?: 'private' | 'public';
    env?: Record<string, string>;
    pathFirst?: string;
    action?: string;
    /** How long the job may take (a map job asks a judge many times): default 60 s. */
    timeoutMs?: number;
  }): ActionRun {
    const job = join(this.root, `job-${++this.attempts}`);
    const workspace = join(job, 'workspace');
    const temp = join(job, 'temp');
    const toolCache = join(job, 'tool-cache');
    mkdirSync(temp, { recursive: true });
    mkdirSync(toolCache, { recursive: true });
    const event = join(job, 'event.json');
    writeFileSync(event, JSON.stringify({ repository: { private: (inputs.visibility ?? 'private') === 'private' } }));
    const outputFile = join(job, 'output.txt');
    const summaryFile = join(job, 'summary.md');
    writeFileSync(outputFile, '');
    writeFileSync(summaryFile, '');
    const r = spawnSync(process.execPath, [inputs.action ?? ACTION], {
      encoding: 'utf8',
      timeout: inputs.timeoutMs ?? 60_000,
      env: {
        PATH: inputs.pathFirst ? `${inputs.pathFirst}${delimiter}${process.env.PATH}` : process.env.PATH,
        HOME: process.env.HOME,
        INPUT_RUN: inputs.run ?? RUN,
        INPUT_EPISODE: inputs.episode,
        INPUT_TOKEN: TOKEN,
        GITHUB_TOKEN: TOKEN,
        ACTIONS_RUNTIME_TOKEN: 'runtime-token-value',
        GITHUB_SERVER_URL: `file://${join(this.root, 'server')}`,
        GITHUB_REPOSITORY: 'owner/repo',
        GITHUB_WORKSPACE: workspace,
        RUNNER_TEMP: temp,
        RUNNER_TOOL_CACHE: toolCache,
        GITHUB_OUTPUT: outputFile,
        GITHUB_STEP_SUMMARY: summaryFile,
        GITHUB_EVENT_PATH: event,
        ...(inputs.contextKey !== undefined ? { 'INPUT_CONTEXT-KEY': inputs.contextKey } : {}),
        ...inputs.env,
      },
    });
    return {
      exitCode: r.status,
      stdout: r.stdout + r.stderr,
      outputs: parseOutputs(readFileSync(outputFile, 'utf8')),
      summary: readFileSync(summaryFile, 'utf8'),
      workspace,
      temp,
    };
  }

  /** git in the bare remote. */
  git(args: string[], input?: string): string {
    return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
      cwd: this.remote,
      encoding: 'utf8',
      ...(input !== undefined ? { input } : {}),
    }).trim();
  }

  private sourceGit(...args: string[]): string {
    return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
      cwd: this.source,
      encoding: 'utf8',
    }).trim();
  }
}

export function result(commit: string, score: number | null): EpisodeResult {
  return {
    commit,
    score,
    spent: 5,
    exit: 'finished',
    protectedChanged: [],
    agentSeconds: 1,
    graderSeconds: 0,
    wallSeconds: 1,
  };
}

/** The runner's GITHUB_OUTPUT file: `name<<delimiter`, the value's lines, the delimiter. */
export function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^([^<]+)<<(.+)$/.exec(lines[i] as string);
    if (!m) continue;
    const end = lines.indexOf(m[2] as string, i + 1);
    if (end < 0) throw new Error(`output ${m[1]}: no closing delimiter`);
    out[m[1] as string] = lines.slice(i + 1, end).join('\n');
    i = end;
  }
  return out;
}

/** An Actions results service that takes the connection and never answers (a stalled artifact upload). */
export interface StalledService {
  /** The runner's environment that sends the job's artifact to it, and its git to the repository's bare remote. */
  env(repo: ActionRepo): Record<string, string>;
  close(): void;
}

export async function stalledResultsService(): Promise<StalledService> {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const a = server.address();
  const url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}/`;
  return {
    env(repo) {
      // The server as github.com-like (*.localhost is not GHES to @actions/artifact); git is sent to the bare repository.
      const gitconfig = join(repo.root, 'system.gitconfig');
      writeFileSync(
        gitconfig,
        `[url "file://${join(repo.root, 'server')}/"]\n\tinsteadOf = http://github.localhost/\n`,
      );
      return {
        GITHUB_SERVER_URL: 'http://github.localhost',
        GIT_CONFIG_SYSTEM: gitconfig,
        ACTIONS_RUNTIME_TOKEN: runtimeJwt(),
        ACTIONS_RESULTS_URL: url,
      };
    },
    close: () => server.close(),
  };
}

/** A JWT as the runner's ACTIONS_RUNTIME_TOKEN is: @actions/artifact reads its backend ids from `scp`. */
function runtimeJwt(): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const scp =
    'Actions.GenericRead:00000000-0000-0000-0000-000000000000 Actions.Results:ce7f54c7-61c7-4aae-887f-30da475f5f1a:ca395085-040a-526b-2ce8-bdc85f692774';
  return `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64({ scp })}.c2ln`;
}
