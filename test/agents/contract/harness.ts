// What the agent contract suite (test/agents/contract/suite.ts) needs of each agent: its adapter
// against the real CLI, a scripted model behind the CLI's own API (test/agents/mock/), and a view
// of the model calls that is the same for every vendor. One file per agent in this folder
// implements it; the helpers below are shared.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, readlink, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentAdapter, AgentOutcome, AgentSession } from '../../../src/agents/agent.js';
import type { Config } from '../../../src/core/config.js';
import { confinedSession } from '../confined.js';
import { type Handler, MockModelServer, type RecordedRequest } from '../mock/server.js';

export const CLI_BIN = join(import.meta.dirname, '..', '..', '..', '.cache', 'agent-clis', 'node_modules', '.bin');

/** One model call as the contract sees it, whatever the vendor's wire format. */
export interface ModelCall {
  /** The user's prompts in the request, oldest first (the CLI's own context messages left out). */
  prompts: string[];
  /** Whether the request carries something the model said before. */
  answered: boolean;
  /** The whole request body as text, to search. */
  text: string;
  /** The credential it came with (a bearer token or an API key header). */
  credential: string | undefined;
}

/** Tokens one scripted call is counted as by the adapter. */
export interface CallTokens {
  input: number;
  output: number;
}

export interface AgentHarness {
  kind: string;
  /** Whether the CLI runs the model's shell commands (aider never does). */
  shell: boolean;
  /** Model calls one `work` episode takes. */
  workCalls: number;
  /** What one scripted call counts as. */
  perCall: CallTokens;
  start(): Promise<void>;
  stop(): Promise<void>;
  adapter(over?: Partial<Config['agent']>): AgentAdapter;
  /** The session's variables: the mock reachable and a key that authenticates. */
  env(): NodeJS.ProcessEnv;
  /** The same with no key and no login at all. */
  envWithoutLogin(): NodeJS.ProcessEnv;
  /** The folder the harness keeps its files in (made by start). */
  root(): string;
  /** What the note says when there is no login (the adapter's own check, or the CLI's). */
  missingLogin: RegExp;

  /** The scripted model behind the CLI (work, answer, hang, refuse; the calls it got). */
  model: ModelControl;
  /** Makes a context folder hold a conversation the CLI cannot resume (default: spoilRecord). */
  spoil?: (contextDir: string) => Promise<void>;
  /** The CLI retries a refused key until the deadline (so the episode is a timeout, not a failure it says). */
  retriesRefusedKey?: boolean;
  /**
   * The faults, by class, that the CLI may keep retrying until the episode's deadline (its own
   * backoff, jittered, ends near it): forkflush sees a 'timeout'. Absent: the CLI gives up before
   * the deadline, and forkflush must see the fault's class.
   */
  outlasts?: Partial<Record<'rate-limit' | 'overload' | 'network', 'timeout'>>;
  /** A CLI's own login (a file or a token of its own) in place of a key: proves it is used. */
  login?: (t: Tools) => Promise<void>;
}

/** What the suite hands the harness's login case. */
export interface Tools {
  repo(): Promise<string>;
  folder(name: string): Promise<string>;
  /** A session whose agent variables are `agentEnv` (the harness's key by default). */
  session(
    workdir: string,
    contextDir: string,
    over?: Partial<AgentSession>,
    agentEnv?: NodeJS.ProcessEnv,
  ): Promise<AgentSession>;
}

export const SCORE = '0.75';

/** A temporary root for a harness's files (its real path: the CLIs resolve theirs). */
export async function tempRoot(kind: string): Promise<string> {
  return realpath(await mkdtemp(join(tmpdir(), `ff-contract-${kind}-`)));
}

/** Folders, workspaces and sessions under one root. */
export function toolsFor(root: string, h: AgentHarness): Tools {
  let n = 0;
  const folder = async (name: string) => {
    const dir = join(root, `${name}-${++n}`);
    await mkdir(dir, { recursive: true });
    return dir;
  };
  return {
    folder,
    async repo() {
      const dir = await folder('ws');
      const git = (...args: string[]) =>
        execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, stdio: 'ignore' });
      git('init', '-q');
      await writeFile(join(dir, 'README.md'), 'test repo\n');
      git('add', '-A');
      git('commit', '-qm', 'init');
      return dir;
    },
    async session(workdir, contextDir, over = {}, agentEnv = h.env()) {
      const scratch = await folder('scratch');
      const grade = join(scratch, 'grade');
      // Where it ran, whether a forge token reached it, and the score.
      await writeFile(grade, `#!/bin/sh\necho "cwd=$(pwd) token=[$GITHUB_TOKEN$GH_TOKEN] score=${SCORE}"\n`, {
        mode: 0o755,
      });
      const prompt = over.prompt ?? 'Make the score go up.';
      await writeFile(join(scratch, 'prompt.md'), prompt);
      const env = {
        PATH: process.env.PATH,
        // A home of the session's own, as the worker gives it (the real one is hidden in the sandbox).
        HOME: await folder('home'),
        ...agentEnv,
        // The sandbox drops these whatever the session holds: the shell must not see them.
        GITHUB_TOKEN: 'repo-token-must-not-leak',
        GH_TOKEN: 'gh-token-must-not-leak',
      };
      return {
        workdir,
        prompt,
        promptFile: join(scratch, 'prompt.md'),
        contextDir,
        usageFile: join(scratch, 'usage.json'),
        logFile: join(scratch, 'agent.log'),
        gradeCommand: grade,
        allowance: 1_000_000,
        unit: 'tokens',
        seed: n,
        episodeId: `r${n}.b0`,
        deadlineMs: 60_000,
        deadlineIsBudget: false,
        signal: new AbortController().signal,
        // No network of its own: the mock through forkflush's proxy, which holds the key.
        ...(await confinedSession(root, h.kind as Config['agent']['kind'], env)),
        ...over,
      };
    },
  };
}

/** Runs one episode and returns its outcome with the model calls it made. */
export async function episode(
  h: AgentHarness,
  s: AgentSession,
  over: Partial<Config['agent']> = {},
): Promise<{ out: AgentOutcome; calls: ModelCall[] }> {
  const from = h.model.calls().length;
  const out = await h.adapter(over).run(s);
  return { out, calls: h.model.calls().slice(from) };
}

/** Every file under a folder with a digest of its content. */
export async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    out[p.slice(dir.length)] = createHash('sha256')
      .update(await readFile(p))
      .digest('hex');
  }
  return out;
}

/** Processes whose working directory is inside a folder. */
export async function processesIn(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => null);
    if (cwd !== null && (cwd === dir || cwd.startsWith(`${dir}/`))) found.push(pid);
  }
  return found;
}

/** Fails the suite at once where a CLI is missing (the suite installs them first). */
export function requireCli(path: string): void {
  if (!existsSync(path)) throw new Error(`no CLI at ${path}: run node scripts/install-agent-clis.mjs`);
}

/** A provider's fault: a status with its error body (and headers, a retry-after), or a connection dropped unanswered. */
export type Fault = { status: number; message: string; headers?: Record<string, string> } | { reset: true };

/** What the scripted model does with every prompt, until told otherwise. */
export type Plan =
  | { work: { file: string; value: string } }
  | { answer: string; scale: number }
  /** Never ends its turn: one command after another (aider: one failing edit after another). */
  | { busy: true };

/** The shell command a working model runs: the file written, then the grader. */
export const workCommand = (file: string, value: string) => `printf '%s' '${value}' > '${file}' && "$FORKFLUSH_GRADE"`;

/** What a model that runs shell commands does at `round` (its tool calls since the prompt). */
export function shellTurn(p: Plan, round: number): { shell: string } | { text: string } {
  if ('busy' in p) return { shell: 'sleep 0.2' };
  if ('work' in p)
    return round === 0
      ? { shell: workCommand(p.work.file, p.work.value) }
      : { text: `Done: ${p.work.file} holds ${p.work.value}.` };
  return { text: p.answer };
}

/** How many times the usual usage a call reports. */
export const scaleOf = (p: Plan): number => ('answer' in p ? p.scale : 1);

/** How long a busy model takes to answer a call. */
const BUSY_CALL_MS = 1000;

export interface Vendor {
  /** Whether a request is a model call (not a token count, a model list, a helper call). */
  isModelCall(req: RecordedRequest): boolean;
  view(req: RecordedRequest): ModelCall;
  /** The vendor's error response body for a refusal. */
  errorBody(status: number, message: string): unknown;
}

/**
 * The scripted model behind one harness: the vendor's mock (made with this control, so that its
 * script reads `plan`) wrapped with what every harness does the same way: refusals, holding calls,
 * and the contract's view of the calls.
 */
export class ModelControl {
  plan: Plan = { answer: 'Nothing to do.', scale: 1 };
  readonly server: MockModelServer;
  /** The fault the next model calls get, and how many more get it. */
  private faults: { fault: Fault; left: number } | null = null;

  constructor(
    private readonly vendor: Vendor,
    makeHandler: (control: ModelControl) => Handler,
  ) {
    const handler = makeHandler(this);
    this.server = new MockModelServer((req, res, server) => {
      if (this.faults && this.faults.left > 0 && vendor.isModelCall(req)) {
        this.faults.left--;
        const f = this.faults.fault;
        if ('reset' in f) res.socket?.resetAndDestroy();
        else
          res
            .writeHead(f.status, { 'content-type': 'application/json', ...f.headers })
            .end(JSON.stringify(vendor.errorBody(f.status, f.message)));
        return;
      }
      // A busy model takes its time, as a real one does: the watcher gets to see each call.
      if ('busy' in this.plan && vendor.isModelCall(req))
        return new Promise<void>((done) => setTimeout(done, BUSY_CALL_MS)).then(() => handler(req, res, server));
      return handler(req, res, server);
    });
  }

  private reset(): void {
    this.server.hang = false;
    this.server.holdIf = null;
    this.faults = null;
  }

  work(file: string, value: string): void {
    this.reset();
    this.plan = { work: { file, value } };
  }

  busy(): void {
    this.reset();
    this.plan = { busy: true };
  }

  answer(text: string, scale = 1): void {
    this.reset();
    this.plan = { answer: text, scale };
  }

  workThenHang(file: string, value: string, calls: number): void {
    this.work(file, value);
    const from = this.modelCalls().length;
    this.server.holdIf = (req) => this.vendor.isModelCall(req) && this.modelCalls().indexOf(req) >= from + calls;
  }

  hang(): void {
    this.reset();
    this.server.hang = true;
  }

  refuse(status: number, message: string): void {
    this.reset();
    this.fault({ status, message });
  }

  /** The next `times` model calls get the fault (every one by default); the plan stands for the others. */
  fault(fault: Fault, times = Number.POSITIVE_INFINITY): void {
    this.faults = { fault, left: times };
  }

  calls(): ModelCall[] {
    return this.modelCalls().map((r) => this.vendor.view(r));
  }

  private modelCalls(): RecordedRequest[] {
    return this.server.requests.filter((r) => this.vendor.isModelCall(r));
  }
}

/** The default unusable context: a session record that is not JSON. */
export async function spoilRecord(contextDir: string): Promise<void> {
  await mkdir(contextDir, { recursive: true });
  await writeFile(join(contextDir, 'session.json'), '{not json');
}
