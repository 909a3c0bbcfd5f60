// Round 2: the environment. A config's agent.env and grader.env name what the agent and the
// grader may see of forkflush's environment, by names or prefixes (ANTHROPIC_*). The README: "Forge
// tokens never, even when listed: they are refused when the config is read, and dropped" by the
// allowlist. So a pattern that covers a forge credential (GITHUB_*, ACTIONS_*, INPUT_*, G*) must
// be refused when the config is read, and whatever a config gets through, no credential may reach
// an agent: checked here on the allowlist and in a whole run whose agent prints its environment.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/core/config.js';
import { allowedEnv } from '../../src/worker/env.js';
import {
  CONTEXT_KEY,
  cleanupAttackTemps,
  describeSandboxed,
  ID_TOKEN,
  makeAttackRepo,
  RUNTIME_TOKEN,
  runLocal,
  TOKEN,
} from './helpers.js';

afterAll(cleanupAttackTemps);

/** Every credential forkflush knows by name, as a runner, the Action or the app has them. */
const CREDENTIALS: Record<string, string> = {
  GITHUB_TOKEN: TOKEN,
  GH_TOKEN: `gh-${TOKEN}`,
  GH_ENTERPRISE_TOKEN: `ghe-${TOKEN}`,
  GITHUB_ENTERPRISE_TOKEN: `ghe2-${TOKEN}`,
  INPUT_TOKEN: `input-${TOKEN}`,
  'INPUT_CONTEXT-KEY': `input-${CONTEXT_KEY}`,
  ACTIONS_RUNTIME_TOKEN: RUNTIME_TOKEN,
  ACTIONS_ID_TOKEN_REQUEST_TOKEN: ID_TOKEN,
  ACTIONS_ID_TOKEN_REQUEST_URL: `https://token.actions.example/${ID_TOKEN}`,
  ACTIONS_RUNTIME_URL: `https://runtime.actions.example/${RUNTIME_TOKEN}`,
  ACTIONS_RESULTS_URL: `https://results.actions.example/${RUNTIME_TOKEN}`,
  ACTIONS_CACHE_URL: `https://cache.actions.example/${RUNTIME_TOKEN}`,
  FORKFLUSH_CONTEXT_KEY: CONTEXT_KEY,
  FORKFLUSH_RECORD_KEY: `record-${CONTEXT_KEY}`,
  FORKFLUSH_APP_PRIVATE_KEY: `-----BEGIN RSA PRIVATE KEY----- app ${CONTEXT_KEY}`,
  PRIVATE_KEY: `-----BEGIN RSA PRIVATE KEY----- ${CONTEXT_KEY}`,
  WEBHOOK_SECRET: `whsec-${CONTEXT_KEY}`,
};

/** Patterns a config might list, each covering at least one credential above. */
const COVERING = [
  '*',
  'G*',
  'GH*',
  'GH_*',
  'GITHUB_*',
  'GITHUB_T*',
  'A*',
  'ACTIONS_*',
  'ACTIONS_ID_TOKEN_REQUEST_*',
  'ACTIONS_RUNTIME*',
  'I*',
  'INPUT_*',
  'INPUT_T*',
  'F*',
  'FORKFLUSH_*',
  'P*',
  'PRIVATE_*',
  'W*',
  'WEBHOOK_*',
];

function configWith(list: 'agent' | 'grader', patterns: string[]) {
  return `grader:\n  command: sh grade.sh\n${list === 'grader' ? `  env: ${JSON.stringify(patterns)}\n` : ''}agent:\n  command: 'true'\n${list === 'agent' ? `  env: ${JSON.stringify(patterns)}\n` : ''}budget:\n  total: 1\n`;
}

describe('agent.env and grader.env', () => {
  it.each(['agent', 'grader'] as const)(
    '%s.env: a name or a prefix that covers a forge credential is refused when the config is read',
    (list) => {
      const accepted = COVERING.filter((p) => {
        try {
          parseConfig(configWith(list, [p]), 'autoresearch.yml');
          return true;
        } catch (e) {
          if (!(e instanceof ConfigError)) throw e;
          return false;
        }
      });
      // Each accepted one, with the credentials it covers.
      const covers = (p: string) =>
        Object.keys(CREDENTIALS).filter((n) => (p.endsWith('*') ? n.startsWith(p.slice(0, -1)) : n === p));
      expect(Object.fromEntries(accepted.map((p) => [p, covers(p)]))).toEqual({});
    },
  );

  it("passes the machine's proxy without its password, unless the config lists the variable itself", () => {
    const env = {
      HTTPS_PROXY: 'http://corp:S3CRET@proxy.corp:3128',
      all_proxy: 'socks5://u:ALLPASS@127.0.0.1:1080',
      NO_PROXY: '.corp',
    };
    expect(allowedEnv(env, [])).toEqual({
      HTTPS_PROXY: 'http://proxy.corp:3128',
      all_proxy: 'socks5://127.0.0.1:1080',
      NO_PROXY: '.corp',
    });
    expect(allowedEnv(env, ['HTTPS_PROXY']).HTTPS_PROXY).toBe(env.HTTPS_PROXY);
  });

  it('whatever a config lists, the allowlist passes no credential on', () => {
    const env = { ...CREDENTIALS, PATH: '/usr/bin', ANTHROPIC_API_KEY: 'the agent key' };
    for (const p of [...COVERING, ...Object.keys(CREDENTIALS)]) {
      const passed = allowedEnv(env, [p]);
      const leaked = Object.keys(CREDENTIALS).filter((n) => passed[n] !== undefined);
      expect(leaked, `agent.env: [${p}]`).toEqual([]);
    }
  });
});

describeSandboxed('a whole run with wide agent.env and grader.env', () => {
  const saved: Record<string, string | undefined> = {};
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('no credential of forkflush reaches the agent or the grader it runs', async () => {
    for (const [k, v] of Object.entries(CREDENTIALS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    // The widest patterns this config accepts (a refused one would stop the run before it starts).
    const wide = COVERING.filter((p) => {
      try {
        parseConfig(configWith('agent', [p]), 'autoresearch.yml');
        return true;
      } catch {
        return false;
      }
    });
    // The grader the agent runs (FORKFLUSH_GRADE) writes its environment into the workspace,
    // which the agent copies out; the judge's own copy is removed with its folder.
    const repo = makeAttackRepo({
      agent: `env > {logs}/agent-env; "$FORKFLUSH_GRADE" > /dev/null 2>&1; mv grader-env {logs}/grader-env; echo 5 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: "sh -c 'env > grader-env; cat value.txt'",
    });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    const text = readFileSync(config, 'utf8')
      .replace('agent:\n', `agent:\n  env: ${JSON.stringify(wide)}\n`)
      .replace('grader:\n', `grader:\n  env: ${JSON.stringify(wide)}\n`);
    writeFileSync(config, text);
    repo.git('commit', '-qam', 'wide env');
    const { result } = await runLocal(repo);
    expect(result.score).toBe(5);
    const seen = readFileSync(join(repo.logs, 'agent-env'), 'utf8');
    const values = Object.values(CREDENTIALS);
    for (const v of values) expect(seen.includes(v), `a credential in the agent's environment`).toBe(false);
    const graded = readFileSync(join(repo.logs, 'grader-env'), 'utf8');
    expect(graded).toMatch(/^PATH=/m);
    for (const v of values) expect(graded.includes(v), `a credential in the grader's environment`).toBe(false);
  });
});
