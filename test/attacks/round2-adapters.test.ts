// Round 2: the files the agent adapters read WHILE the agent still runs. A CLI adapter tails a
// file in the context folder (Copilot's events log, Claude Code's transcript, Codex's rollout,
// the Gemini CLI's chat file) to stop a session that overruns its allowance; the agent can write
// that folder, and forkflush reads it unconfined, as itself (root here). Each attack is played by
// a stand-in CLI (fixtures/attacks/round2-fake-cli.sh, run as agent.command by the real adapter)
// in a whole local run of the CLI built from the current sources, in a child process: so a hang,
// a crash or a memory blow-up of forkflush is seen as such, and cannot take the test runner down.
// The honest outcome: forkflush exits on its own within the episode's bounds, records the
// agent's work (score 7), stays small, and nothing of a file outside reaches the run's records.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, type ExpectStatic, it } from 'vitest';
import {
  attackTemp,
  CAT_GRADER,
  cleanRegrade,
  cleanupAttackTemps,
  commitHolds,
  currentCli,
  describeSandboxed,
  FX,
  folderText,
  killProcessesUnder,
  makeAttackRepo,
  newestRunState,
  runCli,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

const KINDS = ['copilot', 'claude-code', 'codex', 'gemini'] as const;
type Kind = (typeof KINDS)[number];

/** Keys the stand-in CLIs never use, so that each adapter starts its CLI. */
const KEYS = {
  ANTHROPIC_API_KEY: 'sk-ant-test',
  OPENAI_API_KEY: 'sk-test',
  GEMINI_API_KEY: 'gemini-test',
  COPILOT_GITHUB_TOKEN: 'github_pat_test',
};

/** The agent's timeout; the run must be over (the process gone) well within this plus slack. */
const AGENT_TIMEOUT = 8;
const DEADLINE_MS = 28_000;
/** forkflush's own peak memory, here about 90 MB: a file the agent grew must not multiply it. */
const MAX_MB = 512;

interface Played {
  root: string;
  repo: ReturnType<typeof makeAttackRepo>;
  cli: Awaited<ReturnType<typeof runCli>>;
}

/** A task whose agent is the stand-in CLI of `kind` playing `attack`, run to its end by the CLI. */
async function play(kind: Kind, attack: string, env: Record<string, string> = {}, home?: string): Promise<Played> {
  await currentCli();
  const root = attackTemp(`adapter-${kind}-${attack}`);
  const wrapper = join(root, 'fake-cli');
  const logs = join(root, 'logs');
  const vars = Object.entries(env)
    .map(([k, v]) => `${k}='${v}' `)
    .join('');
  writeFileSync(wrapper, `#!/bin/sh\n${vars}exec sh ${FX}/round2-fake-cli.sh ${kind} ${attack} ${logs} "$@"\n`);
  chmodSync(wrapper, 0o755);
  const repo = makeAttackRepo({ dir: root, agent: wrapper, grader: CAT_GRADER, agentTimeout: AGENT_TIMEOUT });
  const configFile = join(repo.dir, '.github', 'autoresearch.yml');
  writeFileSync(configFile, readFileSync(configFile, 'utf8').replace('agent:\n', `agent:\n  kind: ${kind}\n`));
  repo.git('commit', '-qam', `agent kind ${kind}`);
  try {
    const cli = await runCli(['run', repo.dir, '--seed', '1'], {
      cwd: root,
      deadlineMs: DEADLINE_MS,
      killAboveMb: 3_000,
      // A key of each CLI (the adapters refuse to start a CLI that cannot log in), or, with a
      // home of the test's, the subscription login there.
      env: {
        PATH: process.env.PATH,
        LANG: 'C.UTF-8',
        ...(home ? { HOME: home } : { HOME: process.env.HOME, ...KEYS }),
      },
    });
    return { root, repo, cli };
  } finally {
    killProcessesUnder(root);
  }
}

/** The run ended on its own, finished, with the agent's work graded as a clean checkout grades it. */
function expectHonestEnd({ repo, cli }: Played, expect: ExpectStatic) {
  const state = newestRunState(repo.dir);
  const how = `exit ${cli.exitCode}${cli.signal ? ` (${cli.signal})` : ''}${cli.timedOut ? `, still running after ${DEADLINE_MS} ms (killed)` : ''}, run ${state?.status ?? 'without a state'}, peak ${cli.peakMb} MB:\n${cli.out.slice(-1500)}`;
  expect(cli.timedOut, how).toBe(false);
  expect(cli.exitCode, how).toBe(0);
  expect(state?.status, how).toBe('finished');
  const result = state?.rounds[0]?.episodes[0]?.result;
  expect(result?.score, how).toBe(7);
  expect(result?.score).toBe(cleanRegrade(join(repo.dir, '.git'), result?.commit ?? '', repo.grader));
  expect(cli.peakMb, how).toBeLessThan(MAX_MB);
}

describeSandboxed('the files an adapter reads while its agent runs', () => {
  it.concurrent.for(KINDS)(
    '%s: the watched file raced with a FIFO (and left one) does not hang forkflush',
    async (kind, { expect }) => {
      const played = await play(kind, 'fifo');
      // The stand-in did race: thousands of swaps while the adapter polled.
      expect(Number(readFileSync(join(played.root, 'logs', `swaps-${kind}`), 'utf8'))).toBeGreaterThan(1000);
      expectHonestEnd(played, expect);
    },
  );

  it.concurrent.for(KINDS)(
    '%s: the watched file grown to 1 GB (sparse, no newline) neither crashes forkflush nor blows up its memory',
    async (kind, { expect }) => {
      expectHonestEnd(await play(kind, 'sparse', { FAKE_SIZE: '1G' }), expect);
    },
  );

  it.concurrent.for(KINDS)(
    '%s: the watched file made a link to a root-only file outside: nothing of it reaches the records',
    async (kind, { expect }) => {
      const root = attackTemp(`adapter-target-${kind}`);
      const secret = unique(`adapter-link-${kind}`).replaceAll('-', '');
      const target = join(root, 'secret.jsonl');
      // What each CLI's file holds, with the secret where an adapter takes a name or an id from
      // (Codex: the model of turn_context; Claude Code and Gemini: a message's model; Copilot:
      // an event's model), after a padding line (the adapter reads on from where it was).
      writeFileSync(
        target,
        [
          ' '.repeat(8192),
          JSON.stringify({ type: 'session_meta', payload: { id: secret, cwd: '/' } }),
          JSON.stringify({ type: 'turn_context', payload: { model: secret } }),
          JSON.stringify({
            type: 'event_msg',
            payload: {
              type: 'token_count',
              info: { total_token_usage: { input_tokens: 3, cached_input_tokens: 0, output_tokens: 3 } },
            },
          }),
          JSON.stringify({
            type: 'assistant',
            message: { model: secret, usage: { input_tokens: 3, output_tokens: 3 } },
          }),
          JSON.stringify({ type: 'assistant.usage', data: { model: secret, inputTokens: 3, outputTokens: 3 } }),
          JSON.stringify({ id: secret, type: 'gemini', model: secret, tokens: { input: 3, output: 3 } }),
          '',
        ].join('\n'),
        { mode: 0o600 },
      );
      const played = await play(kind, 'link', { FAKE_TARGET: target });
      expectHonestEnd(played, expect);
      const result = newestRunState(played.repo.dir)?.rounds[0]?.episodes[0]?.result;
      const runFolder = join(played.repo.dir, '.forkflush');
      expect(folderText(runFolder).includes(secret), 'the secret in the run folder (state, contexts, report)').toBe(
        false,
      );
      expect(commitHolds(join(played.repo.dir, '.git'), result?.commit ?? '', secret), 'the secret in the commit').toBe(
        false,
      );
    },
  );
});

/** A JWT-looking id token naming an account (the CLIs' logins carry one). */
function idToken(email: string): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256' })}.${part({ email, sub: email })}.c2ln`;
}

/** A subscription login of `who`, as each CLI keeps it in the user's home (file: content). */
function logins(kind: Kind, who: string): Record<string, string> {
  const email = `${who}@example.com`;
  if (kind === 'claude-code')
    return {
      '.claude/.credentials.json': JSON.stringify({
        claudeAiOauth: {
          accessToken: `sk-ant-oat01-${who}`,
          refreshToken: `sk-ant-ort01-${who}`,
          expiresAt: 1_893_456_000_000,
          scopes: ['user:inference', 'user:profile'],
          subscriptionType: 'max',
        },
      }),
    };
  if (kind === 'codex')
    return {
      '.codex/auth.json': JSON.stringify({
        OPENAI_API_KEY: null,
        tokens: {
          id_token: idToken(email),
          access_token: `at-${who}`,
          refresh_token: `rt-${who}`,
          account_id: `acct-${who}`,
        },
        last_refresh: '2026-11-30T00:00:00Z',
      }),
    };
  return {
    '.gemini/oauth_creds.json': JSON.stringify({
      access_token: `ya29.${who}`,
      refresh_token: `1//${who}`,
      scope: 'https://www.googleapis.com/auth/cloud-platform openid email',
      token_type: 'Bearer',
      id_token: idToken(email),
      expiry_date: 1_893_456_000_000,
    }),
    '.gemini/google_accounts.json': JSON.stringify({ active: email, old: [] }),
  };
}

describeSandboxed("the user's subscription login, copied into the episode", () => {
  it.concurrent.for(['claude-code', 'codex', 'gemini'] as const)(
    "%s: an agent that swaps the copied login for another account's (same shape) does not get it into the user's home",
    async (kind, { expect }) => {
      const home = attackTemp(`login-home-${kind}`);
      const mine = logins(kind, 'user');
      for (const [file, text] of Object.entries(mine)) {
        mkdirSync(join(home, file, '..'), { recursive: true, mode: 0o700 });
        writeFileSync(join(home, file), text, { mode: 0o600 });
      }
      // The attacker's login, readable by the agent (it brings its own).
      const theirs = logins(kind, 'attacker');
      const loot = attackTemp(`login-attacker-${kind}`);
      const [login, accounts] = Object.entries(theirs).map(([file, text]) => {
        const path = join(loot, file.split('/').at(-1) as string);
        writeFileSync(path, text, { mode: 0o644 });
        return path;
      });
      const played = await play(
        kind,
        'login',
        { FAKE_LOGIN: login as string, ...(accounts ? { FAKE_ACCOUNTS: accounts } : {}) },
        home,
      );
      expectHonestEnd(played, expect);
      // The login was copied in (the CLI had it), and the agent did replace it...
      expect(readFileSync(join(played.root, 'logs', `login-${kind}`), 'utf8')).toMatch(/\S/);
      // ...and the user's home still holds the user's own.
      for (const [file, text] of Object.entries(mine)) {
        expect(readFileSync(join(home, file), 'utf8'), `~/${file}`).toBe(text);
      }
    },
  );
});
