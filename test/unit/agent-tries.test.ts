// One episode's agent tried again when it fails in a way that passes: the bound, the backoff (an
// injected clock and sleep: nothing waits for real), what the next try is allowed, and how each
// failure is recognised. The agent is a test double of an adapter.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentAdapter, AgentOutcome, AgentSession } from '../../src/agents/agent.js';
import type { AgentFailure } from '../../src/core/failure.js';
import { AGENT_TRIES, RETRY_FIRST_WAIT_SECONDS } from '../../src/core/method.js';
import type { RunResult } from '../../src/io/process.js';
import { runTries, type TriesInput } from '../../src/worker/agent-tries.js';

/** A run of the agent's process as io/process.ts reports it. */
const ran = (exitCode: number, stderr: string, ms = 300): RunResult => ({
  exitCode,
  signal: null,
  stdout: '',
  stderr,
  stopped: null,
  ms,
});

/** An adapter whose tries end as scripted: each runs one process (the fake spawner's) and returns its outcome. */
function scripted(steps: { run?: RunResult; outcome: Partial<AgentOutcome> }[]) {
  const sessions: AgentSession[] = [];
  const adapter: AgentAdapter = {
    kind: 'double',
    passEnv: [],
    missingLogin: () => null,
    async run(s) {
      sessions.push(s);
      const step = steps[sessions.length - 1] ?? steps.at(-1);
      if (!step) throw new Error('no step');
      if (step.run) await s.spawn('agent', [], { cwd: s.workdir, env: {} }).catch(() => {});
      return { exit: 'crash', reportedSpend: null, seconds: 0.3, ...step.outcome };
    },
  };
  return { adapter, sessions };
}

function harness(steps: Parameters<typeof scripted>[0], o: Partial<TriesInput> & { deadlineMs?: number } = {}) {
  const { adapter, sessions } = scripted(steps);
  const dir = mkdtempSync(join(tmpdir(), 'tries-'));
  let now = 0;
  const waits: number[] = [];
  const runs = steps.map((s) => s.run).filter((r): r is RunResult => r !== undefined);
  let spawned = 0;
  const interrupt = new AbortController();
  const session: AgentSession = {
    workdir: dir,
    prompt: 'p',
    promptFile: join(dir, 'prompt'),
    contextDir: dir,
    usageFile: join(dir, 'usage.json'),
    logFile: join(dir, 'log'),
    gradeCommand: 'grade',
    allowance: 24,
    unit: 'tokens',
    seed: 5,
    episodeId: 'r0.b0',
    deadlineMs: o.deadlineMs ?? 1_800_000,
    deadlineIsBudget: false,
    env: {},
    signal: interrupt.signal,
    spawn: async () => {
      now += 300;
      const r = runs[Math.min(spawned++, runs.length - 1)] as RunResult;
      return r;
    },
    confined: true,
  };
  const input: TriesInput = {
    agent: adapter,
    session,
    interrupt: interrupt.signal,
    charge: { unit: 'tokens', allowance: 24, limitSeconds: 1800 },
    evaluations: () => 0,
    clock: () => now,
    sleep: async (ms) => {
      waits.push(ms);
      now += ms;
    },
    ...o,
  };
  return { input, sessions, waits, interrupt, dir };
}

const limited: { run: RunResult; outcome: Partial<AgentOutcome> } = {
  run: ran(1, 'Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}\nretry-after: 20'),
  outcome: { reportedSpend: 2 },
};
const done: { outcome: Partial<AgentOutcome> } = {
  outcome: { exit: 'finished', reportedSpend: 10, usage: { inputTokens: 8, outputTokens: 2, costUsd: null, turns: 3 } },
};

describe('runTries', () => {
  it('stops a try that reaches no allowed host for long enough as a network failure, and tries again', async () => {
    const traffic = { reached: 0, failed: 0 };
    // Each try asks the proxy again and again, as a CLI offline does, until it is stopped.
    const offline: { outcome: Partial<AgentOutcome> } = { outcome: {} };
    const h = harness([offline, done], {
      offline: {
        traffic: () => ({ ...traffic }),
        note: () => 'could not reach api.example:443',
        stopAfterMs: 40,
        checkMs: 5,
      },
    });
    const tries: string[] = [];
    h.input.agent = {
      ...h.input.agent,
      async run(s) {
        if (tries.push(s.episodeId) === 2) return { exit: 'finished', reportedSpend: 1, seconds: 0.1 };
        const asking = setInterval(() => traffic.failed++, 2);
        await new Promise((r) => s.signal.addEventListener('abort', r, { once: true }));
        clearInterval(asking);
        return { exit: 'crash', reportedSpend: null, seconds: 0.1 };
      },
    };
    const t = await runTries(h.input);
    expect(tries).toHaveLength(2);
    expect(t.retries).toEqual([
      { kind: 'network', quote: 'could not reach api.example:443', waitedSeconds: expect.any(Number) },
    ]);
    expect(t.failure).toBeNull();
  });

  it('leaves a try alone once it reached an allowed host, failures or not', async () => {
    const traffic = { reached: 0, failed: 0 };
    const h = harness([done], {
      offline: { traffic: () => ({ ...traffic }), note: () => 'x', stopAfterMs: 20, checkMs: 5 },
    });
    h.input.agent = {
      ...h.input.agent,
      async run(s) {
        traffic.reached++;
        const asking = setInterval(() => traffic.failed++, 2);
        await new Promise((r) => setTimeout(r, 80));
        clearInterval(asking);
        return { exit: s.signal.aborted ? 'crash' : 'finished', reportedSpend: 1, seconds: 0.1 };
      },
    };
    const t = await runTries(h.input);
    expect(t.outcome.exit).toBe('finished');
    expect(t.retries).toEqual([]);
  });

  it('tries again after a rate limit, waiting what the provider asked, with what the failed try left', async () => {
    const h = harness([
      {
        ...limited,
        outcome: { ...limited.outcome, usage: { inputTokens: 1, outputTokens: 1, costUsd: null, turns: 1 } },
      },
      done,
    ]);
    const t = await runTries(h.input);
    expect(t.failure).toBeNull();
    expect(t.outcome).toMatchObject({ exit: 'finished', seconds: 0.6 });
    // Usage over both tries.
    expect(t.outcome.usage).toEqual({ inputTokens: 9, outputTokens: 3, costUsd: null, turns: 4 });
    expect(h.waits).toEqual([20_000]);
    expect(t.retries).toEqual([{ kind: 'rate-limit', quote: expect.stringContaining('429'), waitedSeconds: 20 }]);
    // The second try: the allowance less what the first reported, the time less what it and the wait took.
    expect(h.sessions.map((s) => s.allowance)).toEqual([24, 22]);
    expect(h.sessions[1]?.deadlineMs).toBe(1_800_000 - 300 - 20_000);
    expect(t.tries.map((x) => x.reportedSpend)).toEqual([2, 10]);
  });

  it(`gives up after ${AGENT_TRIES} tries, backing off, and keeps the passing failure as the one that stops the run`, async () => {
    const overloaded = {
      run: ran(1, 'Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
      outcome: {},
    };
    const h = harness([overloaded]);
    const t = await runTries(h.input);
    expect(t.tries).toHaveLength(AGENT_TRIES);
    expect(h.waits).toHaveLength(AGENT_TRIES - 1);
    expect(h.waits[0]).toBeGreaterThanOrEqual(RETRY_FIRST_WAIT_SECONDS * 1000);
    expect(h.waits[1]).toBeGreaterThanOrEqual(3 * RETRY_FIRST_WAIT_SECONDS * 1000);
    expect(t.failure?.kind).toBe('overload');
    expect(t.gaveUp).toBe(`${AGENT_TRIES} tries failed (at most ${AGENT_TRIES})`);
    expect(t.retries.map((r) => r.kind)).toEqual(['overload', 'overload']);
  });

  it("gives each try its share of what the proxy's answers stated, where they state more tokens than the agent reported", async () => {
    const m = (input: number, output: number) => ({
      m: { input, cached: 0, written: 0, output, calls: 1, costUsd: null },
    });
    // The proxy's running total: 10 tokens during the failed try, 10 more (what the CLI reported) then 30 during the last.
    const totals = [m(0, 0), m(6, 4), m(6, 4), m(30, 20)];
    let read = 0;
    const h = harness([limited, done], { metered: () => totals[Math.min(read++, totals.length - 1)] ?? {} });
    const tried = await runTries(h.input);
    expect(tried.tries.map((t) => t.meteredSpend)).toEqual([10, 40]);
    // The same tokens as the agent reported: its own figure stands (its price, in usd, over forkflush's table).
    let asked = 0;
    const same = harness([done], { metered: () => (asked++ === 0 ? {} : m(8, 2)) });
    expect((await runTries(same.input)).tries[0]?.meteredSpend).toBeUndefined();
  });

  it('does not wait when no time would be left for another try', async () => {
    const h = harness([limited, done], { deadlineMs: 40_000 });
    const t = await runTries(h.input);
    expect(h.waits).toEqual([]);
    expect(t.tries).toHaveLength(1);
    expect(t.gaveUp).toMatch(/^too little of the episode's time is left for another try after a 20 s wait/);
  });

  it('does not try again when the failed tries spent the allowance', async () => {
    const h = harness([{ ...limited, outcome: { reportedSpend: 24 } }, done]);
    const t = await runTries(h.input);
    expect(t.tries).toHaveLength(1);
    expect(t.gaveUp).toBe('the tries spent the allowance');
  });

  it('never tries again after a permanent failure, or a crash nobody recognises', async () => {
    const key = await runTries(harness([{ run: ran(1, 'Error: 401 invalid x-api-key'), outcome: {} }, done]).input);
    expect(key.tries).toHaveLength(1);
    expect(key.failure).toMatchObject({ kind: 'auth', quote: 'Error: 401 invalid x-api-key' });
    const odd = await runTries(
      harness([{ run: ran(3, 'TypeError: x is undefined\n    at main (a.mjs:1:1)'), outcome: {} }, done]).input,
    );
    expect(odd.tries).toHaveLength(1);
    expect(odd.failure).toEqual({ kind: 'crash', quote: 'exit 3: TypeError: x is undefined' });
  });

  it("takes the spec's word first, and a spec's passing failure is retried too", async () => {
    const spec: AgentFailure = { kind: 'network', quote: 'stream disconnected', retryAfterMs: 1000 };
    const h = harness([{ outcome: { failure: spec } }, done]);
    const t = await runTries(h.input);
    expect(t.tries).toHaveLength(2);
    expect(h.waits[0]).toBeGreaterThanOrEqual(RETRY_FIRST_WAIT_SECONDS * 1000);
    expect(t.retries[0]).toMatchObject({ kind: 'network', quote: 'stream disconnected' });
  });

  it('says a program that could not start is the cli failure, unless the sandbox hides it', async () => {
    const notFound = { run: ran(127, 'sh: 1: claude: not found', 20), outcome: {} };
    expect((await runTries(harness([notFound]).input)).failure).toMatchObject({
      kind: 'cli',
      quote: 'exit 127: sh: 1: claude: not found',
    });
    const hidden: AgentFailure = { kind: 'hidden-path', quote: 'sh: 1: claude: not found', fix: 'sandbox.read' };
    const h = harness([notFound], { hiddenCause: async (missing) => (missing.includes('claude') ? hidden : null) });
    expect((await runTries(h.input)).failure).toEqual(hidden);
    // Also when the spec says the program could not start: the sandbox hid it.
    const said = { ...notFound, outcome: { failure: { kind: 'cli' as const, quote: 'exit 127' } } };
    const spec = harness([said], { hiddenCause: async () => hidden });
    expect((await runTries(spec.input)).failure).toEqual(hidden);
    expect((await runTries(harness([said]).input)).failure).toEqual({ kind: 'cli', quote: 'exit 127' });
  });

  it("says a failure that reads as the proxy's refusal, in a try the proxy refused, is the host (not the key)", async () => {
    const tunnel = "ProxyError('Unable to connect to proxy', OSError('Tunnel connection failed: 403 Forbidden'))";
    let count = 0;
    const refused = { count: () => count, note: () => 'the agent was refused 1 connection: api.deepseek.com:443 (1)' };
    const refusedIn = (stderr: string) => {
      const h = harness([{ run: ran(1, stderr), outcome: {} }, done], { refused });
      const spawn = h.input.session.spawn;
      h.input.session.spawn = async (...a) => {
        count++;
        return spawn(...a);
      };
      return runTries(h.input);
    };
    const t = await refusedIn(tunnel);
    expect(t.tries).toHaveLength(1);
    expect(t.failure).toEqual({
      kind: 'egress',
      quote: tunnel,
      fix: 'the agent was refused 1 connection: api.deepseek.com:443 (1): if the agent needs the host, allow it in the config (sandbox: {network: {allow: [host]}}), then start a new run',
    });
    // A refused key is still the key, refusals or not; a 403 with nothing refused is the key too.
    expect((await refusedIn('Error: 401 invalid x-api-key')).failure).toMatchObject({ kind: 'auth' });
    const quiet = await runTries(
      harness([{ run: ran(1, tunnel), outcome: {} }], { refused: { ...refused, count: () => 0 } }).input,
    );
    expect(quiet.failure).toMatchObject({ kind: 'auth' });
  });

  it('says a CLI with no key or login, which never ran a process, is an auth failure', async () => {
    const h = harness([{ outcome: { note: 'no ANTHROPIC_API_KEY', seconds: 0 } }]);
    h.input.agent = { ...h.input.agent, missingLogin: () => 'claude-code has no key or login: set ANTHROPIC_API_KEY' };
    expect((await runTries(h.input)).failure).toMatchObject({
      kind: 'auth',
      quote: 'claude-code has no key or login: set ANTHROPIC_API_KEY',
    });
  });

  it("leaves no try's usage file for the next, and stops at an interruption during the wait", async () => {
    const h = harness([limited, done]);
    writeFileSync(h.input.session.usageFile, '{"spent": 2}');
    h.input.sleep = async () => h.interrupt.abort('interrupted');
    const t = await runTries(h.input);
    expect(existsSync(h.input.session.usageFile)).toBe(false);
    expect(h.sessions).toHaveLength(1);
    expect(t.tries.at(-1)).toMatchObject({ interrupted: true });
  });
});
