// The agent contract, the same for every agent kind: each runs its real CLI (aider: the fake, see
// contract/aider.ts) against a scripted model on 127.0.0.1, in forkflush's sandbox. What an
// adapter must do whatever its CLI: a fresh episode has no history; a carried one continues the
// conversation and is charged only its own usage; a fork resumes a copy elsewhere and leaves the
// original alone; every bound (tokens, dollars, turns, time) ends the episode as `budget`, also
// when the overrun is faster than any watcher; a hung model ends at the deadline with nothing left
// running; a context it cannot resume is flushed with a note; an API refusal and a missing login
// are crashes that say why; no forge token reaches the agent. Each CLI's quirks live in its own
// test file; adding an agent is a harness in contract/ and two two-line files, contract/<kind>.test.ts
// and contract/<kind>.faults.test.ts (files per kind, so vitest runs them side by side: their slow
// rows mostly wait).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentKind } from '../../../src/core/config.js';
import { AGENT_TRIES } from '../../../src/core/method.js';
import { runTries } from '../../../src/worker/agent-tries.js';
import { egressPlan } from '../../../src/worker/egress.js';
import { refusedSoFar } from '../confined.js';
import {
  type AgentHarness,
  episode,
  type Fault,
  type ModelCall,
  processesIn,
  SCORE,
  snapshot,
  spoilRecord,
  type Tools,
  toolsFor,
} from './harness.js';

const FRESH = 'PROMPT-FRESH: write fresh.txt.';
const CARRIED = 'PROMPT-CARRIED: now write carried.txt.';
const FORKED = 'PROMPT-FORKED: try forked.txt instead.';
/** The contract's own prompts among a call's (a CLI may add its own, or wrap ours in its context). */
const ours = (c: ModelCall | undefined) => (c?.prompts ?? []).flatMap((p) => p.match(/PROMPT-[A-Z]+: [^\n<]*/g) ?? []);
const read = (dir: string, file: string) => readFile(join(dir, file), 'utf8').then((t) => t.trim());

type Transient = 'rate-limit' | 'overload' | 'network';
/**
 * The faults a provider passes (issue 20), each with the classes forkflush may see when the CLI
 * gives up on it: a dropped connection reaches the CLI as forkflush's proxy's 502, which the CLI
 * may quote with the reset (network) or by its status alone (overload).
 */
const FAULTS: [string, Fault, Transient[]][] = [
  [
    'a 429 with retry-after',
    { status: 429, message: 'Rate limit reached', headers: { 'retry-after': '1' } },
    ['rate-limit'],
  ],
  ['a 529', { status: 529, message: 'Overloaded', headers: { 'retry-after': '1' } }, ['overload']],
  ['a connection reset', { reset: true }, ['network', 'overload']],
];
/** The episode's time in the fault rows: the bound within which the CLI and forkflush retry. */
const FAULT_DEADLINE_MS = 150_000;
/**
 * The episode's time in a "never passes" row whose CLI keeps retrying that fault past
 * FAULT_DEADLINE_MS (its harness's `outlasts`): the row shows the deadline stops it, which takes
 * no longer to show at 30 s; what the CLI says when it gives up is in test/unit/agents/failure.test.ts.
 */
const OUTLASTED_DEADLINE_MS = 30_000;

/** The contract for one agent kind, as `<kind>: the agent contract`. */
export function agentContract(h: AgentHarness): void {
  describe(`${h.kind}: the agent contract`, () => {
    let t: Tools;
    const perCallTotal = h.perCall.input + h.perCall.output;
    const usageOf = (calls: number) => ({
      inputTokens: calls * h.perCall.input,
      outputTokens: calls * h.perCall.output,
    });

    beforeAll(async () => {
      await h.start();
      t = toolsFor(h.root(), h);
    });
    afterAll(() => h.stop());

    let trunk = '';
    let freshCtx = '';
    let carriedCtx = '';

    it('fresh: no history, the work done, its own usage and spend, no forge token in the shell', async () => {
      trunk = await t.repo();
      freshCtx = await t.folder('ctx');
      h.model.work('fresh.txt', '7');
      const from = h.model.server.requests.length;
      const { out, calls } = await episode(h, await t.session(trunk, freshCtx, { prompt: FRESH }));

      expect(out.exit, out.note).toBe('finished');
      expect(out.note).toBeUndefined();
      // Every host it asked for is one its kind allows (spec egress.hosts): a refused one fails episodes.
      expect(refusedSoFar()).toBeNull();
      expect(calls).toHaveLength(h.workCalls);
      expect(calls[0]?.answered).toBe(false);
      expect(ours(calls[0])).toEqual([FRESH]);
      expect(await read(trunk, 'fresh.txt')).toBe('7');
      // Nothing of the CLI's own in the workspace, which forkflush commits whole (the workspace is
      // the sandbox user's, nobody's when the tests run as root: hence safe.directory).
      const status = execFileSync('git', ['-c', 'safe.directory=*', 'status', '--porcelain', '--untracked-files=all'], {
        cwd: trunk,
        encoding: 'utf8',
      });
      expect(status.trim()).toBe('?? fresh.txt');
      // The grader ran in the workspace from the agent's shell, without the forge tokens the session held.
      if (h.shell) expect(calls.at(-1)?.text).toContain(`cwd=${trunk} token=[] score=${SCORE}`);
      expect(out.usage).toMatchObject(usageOf(h.workCalls));
      expect(out.reportedSpend).toBe(h.workCalls * perCallTotal);
      expect(out.usage?.costUsd).toBeGreaterThan(0);
      // Its model calls came through forkflush's proxy, which put the key in where the agent held a placeholder.
      const sent = h.model.server.requests.slice(from).map((r) => JSON.stringify(r.headers));
      expect(sent.join('\n')).not.toContain('forkflush-placeholder-');
      const keys = egressPlan(h.kind as AgentKind, h.env()).routes.flatMap((r) => r.keys.map((k) => k.value));
      for (const key of keys)
        expect(
          sent.some((x) => x.includes(key)),
          `${h.kind}'s key at the model`,
        ).toBe(true);
    });

    it('carried: the next episode continues the conversation and is charged only its own usage', async () => {
      // forkflush carries a copy of the context into the next episode's folder.
      carriedCtx = await t.folder('ctx');
      await cp(freshCtx, carriedCtx, { recursive: true });
      h.model.work('carried.txt', '8');
      const { out, calls } = await episode(h, await t.session(trunk, carriedCtx, { prompt: CARRIED }));

      expect(out.exit, out.note).toBe('finished');
      expect(out.note).toBeUndefined();
      expect(calls[0]?.answered).toBe(true);
      expect(ours(calls[0])).toEqual([FRESH, CARRIED]);
      expect(calls[0]?.text).toContain('fresh.txt');
      expect(await read(trunk, 'carried.txt')).toBe('8');
      expect(out.usage).toMatchObject(usageOf(h.workCalls));
      expect(out.reportedSpend).toBe(h.workCalls * perCallTotal);
    });

    it('forked: a copy of the context resumes in another workspace, and the original stays as it was', async () => {
      const before = await snapshot(carriedCtx);
      const fork = await t.folder('fork');
      await cp(carriedCtx, fork, { recursive: true });
      const branch = await t.repo();
      h.model.work('forked.txt', '9');
      const { out, calls } = await episode(h, await t.session(branch, fork, { prompt: FORKED }));

      expect(out.exit, out.note).toBe('finished');
      expect(ours(calls[0])).toEqual([FRESH, CARRIED, FORKED]);
      expect(await read(branch, 'forked.txt')).toBe('9');
      expect(existsSync(join(trunk, 'forked.txt'))).toBe(false);
      if (h.shell) expect(calls.at(-1)?.text).toContain(`cwd=${branch} token=[]`);
      expect(await snapshot(carriedCtx)).toEqual(before);
      expect(out.usage).toMatchObject(usageOf(h.workCalls));
    });

    it('an overrun in tokens is stopped while the CLI runs: exit budget, long before the deadline', async () => {
      // The first call passes the allowance; the model then never answers: only the watcher ends it.
      h.model.workThenHang('tokens.txt', '1', 1);
      // Ended at the deadline it would be a timeout; the time bound leaves a busy machine room (opencode
      // took 40 s beside other work, its every start 5 s of CPU).
      const deadlineMs = 120_000;
      const allowance = Math.floor(perCallTotal / 2);
      const { out } = await episode(
        h,
        await t.session(await t.repo(), await t.folder('ctx'), { allowance, unit: 'tokens', deadlineMs }),
      );
      expect(out.exit, out.note).toBe('budget');
      expect(out.note).toMatch(/allowance|tokens/);
      expect(out.seconds).toBeLessThan(deadlineMs / 1000 - 10);
      expect(out.reportedSpend).toBeGreaterThanOrEqual(perCallTotal);
    });

    it('an overrun faster than any watcher is an overrun all the same (found when the session ends)', async () => {
      h.model.answer('Done at once.', 20);
      const allowance = 5 * perCallTotal;
      const { out, calls } = await episode(
        h,
        await t.session(await t.repo(), await t.folder('ctx'), { allowance, unit: 'tokens' }),
      );
      expect(calls).toHaveLength(1);
      expect(out.exit, out.note).toBe('budget');
      expect(out.reportedSpend).toBe(20 * perCallTotal);
    });

    it('an overrun in dollars: exit budget, the cost charged', async () => {
      h.model.work('usd.txt', '2');
      const { out } = await episode(
        h,
        await t.session(await t.repo(), await t.folder('ctx'), { allowance: 1e-7, unit: 'usd' }),
      );
      expect(out.exit, out.note).toBe('budget');
      expect(out.reportedSpend).toBeGreaterThan(1e-7);
      expect(out.reportedSpend).toBe(out.usage?.costUsd);
    });

    it('agent.max_turns: a model that never ends its turn is stopped at the limit, exit budget', async () => {
      h.model.busy();
      const { out, calls } = await episode(h, await t.session(await t.repo(), await t.folder('ctx')), {
        max_turns: 1,
      });
      expect(out.exit, out.note).toBe('budget');
      expect(out.note).toMatch(/max_turns|turn limit/);
      // Stopped at the limit, or on the call that passed it: never left to run on.
      expect(out.usage?.turns).toBeLessThanOrEqual(2);
      expect(calls.length).toBeLessThanOrEqual(3);
    });

    it('time: a hung model ends at the deadline as a timeout, nothing left running; with a time budget, as budget', async () => {
      h.model.hang();
      const ws = await t.repo();
      const hung = await episode(h, await t.session(ws, await t.folder('ctx'), { deadlineMs: 4000 }));
      expect(hung.out.exit, hung.out.note).toBe('timeout');
      expect(hung.out.seconds).toBeGreaterThanOrEqual(4);
      // The stop itself takes a few seconds at most, however busy the machine.
      expect(hung.out.seconds).toBeLessThan(15);
      expect(await processesIn(ws)).toEqual([]);

      h.model.hang();
      const timed = await episode(
        h,
        await t.session(ws, await t.folder('ctx'), { deadlineMs: 3000, deadlineIsBudget: true, unit: 'minutes' }),
      );
      expect(timed.out.exit, timed.out.note).toBe('budget');
      expect(timed.out.reportedSpend).toBeNull();
    });

    it('a carried context it cannot resume: a note, and a fresh conversation', async () => {
      const ctx = await t.folder('ctx');
      await (h.spoil ?? spoilRecord)(ctx);
      h.model.answer('Starting afresh.');
      const { out, calls } = await episode(h, await t.session(await t.repo(), ctx, { prompt: FRESH }));
      expect(out.exit, out.note).toBe('finished');
      expect(out.note).toMatch(/^could not resume the carried .+ conversation \(.+\); started a fresh conversation/);
      expect(calls[0]?.answered).toBe(false);
      expect(ours(calls[0])).toEqual([FRESH]);
    });

    it("an API refusal: a crash with the API's message, nothing charged", async () => {
      h.model.refuse(400, 'the mock refuses this request');
      const { out } = await episode(h, await t.session(await t.repo(), await t.folder('ctx')));
      expect(out.exit).toBe('crash');
      expect(out.note).toContain('the mock refuses this request');
      expect(out.reportedSpend ?? 0).toBe(0);
    });

    it.skipIf(h.retriesRefusedKey)(
      "a refused key: a failure of kind auth, in the CLI's own words, and how to fix it",
      async () => {
        h.model.refuse(401, 'invalid x-api-key');
        const { out } = await episode(h, await t.session(await t.repo(), await t.folder('ctx')));
        expect(out.exit).toBe('crash');
        expect(out.failure, out.note).toMatchObject({ kind: 'auth', fix: expect.stringMatching(/^set |key/) });
      },
    );

    // Anthropic's words for a 403 and OpenAI's for a 404, as each mock vendor wraps them. Claude Code
    // retries a refused key until the deadline (the row above); a 404 it does not retry.
    const refusals = [
      ...(h.retriesRefusedKey
        ? []
        : [[403, 'auth', 'Your API key does not have permission to use the specified resource.'] as const]),
      [404, 'model', 'The model `no-such-model` does not exist or you do not have access to it.'] as const,
    ];
    it.each(refusals)(
      'a refusal with status %i: a failure of kind %s, nothing charged',
      async (status, kind, message) => {
        h.model.refuse(status, message);
        const { out } = await episode(h, await t.session(await t.repo(), await t.folder('ctx')));
        expect(out.exit, out.note).toBe('crash');
        expect(out.failure, out.note).toMatchObject({ kind });
        expect(out.reportedSpend ?? 0).toBe(0);
      },
    );

    // A fault that passes: the CLI's own retries or forkflush's (worker/agent-tries.ts, its waits
    // skipped here) get the work done. A fault that never passes: agentFaults, below.
    it.each(FAULTS)(
      '%s that passes: recovered, the work done',
      async (_name, fault) => {
        const ws = await t.repo();
        h.model.work('recovered.txt', '3');
        h.model.fault(fault, 1);
        const tried = await triesOf(h, await t.session(ws, await t.folder('ctx'), { deadlineMs: FAULT_DEADLINE_MS }));
        expect(tried.outcome.exit, tried.outcome.note).toBe('finished');
        expect(await read(ws, 'recovered.txt')).toBe('3');
        expect(tried.tries.length).toBeLessThanOrEqual(2);
      },
      FAULT_DEADLINE_MS + 90_000,
    );

    it('a missing login: a crash that says how to log in, nothing charged', async () => {
      h.model.work('login.txt', '1');
      const { out } = await episode(h, await t.session(await t.repo(), await t.folder('ctx'), {}, h.envWithoutLogin()));
      expect(out.exit).toBe('crash');
      expect(out.note).toMatch(h.missingLogin);
      expect(out.reportedSpend ?? 0).toBe(0);
    });

    it.runIf(h.login)("the CLI's own login in place of a key", () =>
      (h.login as NonNullable<AgentHarness['login']>)(t),
    );
  });
}

/** The episode run as forkflush runs it, with its tries (worker/agent-tries.ts), forkflush's waits skipped. */
function triesOf(h: AgentHarness, s: Parameters<typeof runTries>[0]['session']) {
  return runTries({
    agent: h.adapter(),
    session: s,
    interrupt: new AbortController().signal,
    charge: { unit: s.unit, allowance: s.allowance, limitSeconds: s.deadlineMs / 1000 },
    evaluations: () => 0,
    sleep: async () => {},
  });
}

/**
 * The faults that never pass, as `<kind>: faults that never pass` (contract/<kind>.faults.test.ts):
 * each ends, within the episode's time, as a failure of its class that forkflush retried up to its
 * bound (or, for a CLI that retries it until the deadline, as a timeout). A file of their own: they
 * wait on the CLI's backoff, not the CPU, so `npm run test:agents` runs them beside the whole runs.
 */
export function agentFaults(h: AgentHarness): void {
  describe(`${h.kind}: faults that never pass`, () => {
    let t: Tools;
    beforeAll(async () => {
      await h.start();
      t = toolsFor(h.root(), h);
    });
    afterAll(() => h.stop());

    it.each(FAULTS)(
      '%s that never passes: classed transient, retried by forkflush within the bound',
      async (_name, fault, kinds) => {
        h.model.answer('Never reached.');
        h.model.fault(fault);
        const outlasting = kinds.some((k) => h.outlasts?.[k] === 'timeout');
        const deadlineMs = outlasting ? OUTLASTED_DEADLINE_MS : FAULT_DEADLINE_MS;
        const tried = await triesOf(h, await t.session(await t.repo(), await t.folder('ctx'), { deadlineMs }));
        const note = tried.outcome.note;
        expect(tried.outcome.seconds).toBeLessThan(deadlineMs / 1000 + 20);
        expect(tried.outcome.reportedSpend ?? 0).toBe(0);
        if (tried.outcome.exit === 'timeout' && tried.retries.length === 0) {
          // The CLI was still retrying at the deadline: only a kind whose CLI may do so.
          expect(
            outlasting,
            `${h.kind} kept retrying ${kinds.join('/')} past the deadline: say so in its harness's outlasts`,
          ).toBe(true);
          return;
        }
        // Each try's failure was of the fault's class; forkflush retried it up to its bound, or
        // said why not (too little of the episode's time left after the CLI's own retries), or the
        // deadline stopped a later try.
        const classes = [...tried.retries.map((r) => r.kind), ...(tried.failure ? [tried.failure.kind] : [])];
        expect(classes.length, note).toBeGreaterThanOrEqual(1);
        for (const k of classes) expect(kinds, note).toContain(k);
        if (tried.outcome.exit === 'timeout') return;
        expect(tried.outcome.exit, note).toBe('crash');
        expect(tried.tries.length === AGENT_TRIES || tried.gaveUp !== undefined, tried.gaveUp).toBe(true);
      },
      FAULT_DEADLINE_MS + 90_000,
    );
  });
}
