// Egress control's pure parts: host patterns and how they match, the registries setup names, the
// refused note, sandbox.network in the config, and each agent kind's plan (which keys go behind a
// placeholder, which base URLs point at the proxy).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SPECS } from '../../src/agents/specs.js';
import { AGENT_KINDS, ConfigError, parseConfig } from '../../src/core/config.js';
import { hostPatternProblem, matchHost, refusedNote, registriesFor } from '../../src/core/egress.js';
import { allowedHosts, egressPlan } from '../../src/worker/egress.js';

describe('host patterns', () => {
  it('accept names, *.domain, *, addresses, with a port or not', () => {
    for (const ok of ['api.example.com', '*.example.com', '*', '127.0.0.1:8080', '[::1]:443', 'localhost', 'x:1']) {
      expect(hostPatternProblem(ok), ok).toBeNull();
    }
    for (const bad of [
      '',
      'http://example.com',
      'example.com/x',
      'a b',
      '*example.com',
      'ex*.com',
      'x:0',
      'x:70000',
      '::1',
    ]) {
      expect(hostPatternProblem(bad), bad).not.toBeNull();
    }
  });

  it('a name without a port allows 443 and 80; with one, that port only', () => {
    const p = ['api.example.com', 'mock.test:8080'];
    expect(matchHost(p, 'api.example.com', 443)).toBe('named');
    expect(matchHost(p, 'API.Example.com.', 80)).toBe('named');
    expect(matchHost(p, 'api.example.com', 22)).toBeNull();
    expect(matchHost(p, 'mock.test', 8080)).toBe('named');
    expect(matchHost(p, 'mock.test', 443)).toBeNull();
    expect(matchHost(p, 'evil.api.example.com', 443)).toBeNull();
  });

  it('a wildcard covers subdomains (not the domain itself) and says so; a name wins over it', () => {
    expect(matchHost(['*.example.com'], 'a.b.example.com', 443)).toBe('wildcard');
    expect(matchHost(['*.example.com'], 'example.com', 443)).toBeNull();
    expect(matchHost(['*.example.com'], 'badexample.com', 443)).toBeNull();
    expect(matchHost(['*'], '169.254.169.254', 80)).toBe('wildcard');
    expect(matchHost(['*', '127.0.0.1:80'], '127.0.0.1', 80)).toBe('named');
    expect(matchHost(['[::1]:9'], '::1', 9)).toBe('named');
  });
});

describe('what setup names', () => {
  it('allows the registries of the tools setup runs, each once', () => {
    expect(
      registriesFor(['npm ci', 'python -m pip install -r requirements.txt && ./node_modules/.bin/pnpm i']),
    ).toEqual(['registry.npmjs.org', 'registry.yarnpkg.com', 'pypi.org', 'files.pythonhosted.org']);
    expect(registriesFor(['make', 'echo npmish'])).toEqual([]);
  });
});

describe('the refused note', () => {
  it('counts, most refused first, a few by name', () => {
    expect(refusedNote(new Map())).toBeNull();
    expect(refusedNote(new Map([['a.com:443', 1]]))).toBe('the agent was refused 1 connection: a.com:443 (1)');
    const many = new Map([
      ['example.com:443', 2],
      ['10.0.0.1:80', 1],
      ['z.com:443', 5],
    ]);
    expect(refusedNote(many, 2)).toBe(
      'the agent was refused 8 connections: z.com:443 (5), example.com:443 (2), and 1 more',
    );
  });
});

const base = 'grader:\n  command: sh grade.sh\nagent:\n  command: "true"\nbudget:\n  total: 1\n';

describe('sandbox.network in the config', () => {
  it('is left out unless set; none, or a mapping with allow', () => {
    expect(parseConfig(base, 'a.yml').sandbox.network).toBeUndefined();
    expect(parseConfig(`${base}sandbox:\n  network: none\n`, 'a.yml').sandbox.network).toBe('none');
    expect(
      parseConfig(`${base}sandbox:\n  network:\n    allow: ['*.example.com', '127.0.0.1:9']\n`, 'a.yml').sandbox
        .network,
    ).toEqual({
      allow: ['*.example.com', '127.0.0.1:9'],
    });
  });

  it('says where a bad value is and what would do', () => {
    const problems = (text: string) => {
      try {
        parseConfig(text, 'a.yml');
        return [];
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        return e.problems;
      }
    };
    expect(problems(`${base}sandbox:\n  network: open\n`)).toEqual([
      'a.yml:8:12: sandbox.network must be "none", or a mapping with allow (a list of hosts), got "open"',
    ]);
    expect(problems(`${base}sandbox:\n  network:\n    allow: [ok.com, 'http://x.com']\n`)).toEqual([
      'a.yml:9:21: sandbox.network.allow[1] must be a host name, *.domain, * or an address, with :port or not (api.example.com, *.example.com, 127.0.0.1:8080), got "http://x.com"',
    ]);
    expect(problems(`${base}sandbox:\n  network:\n    alow: []\n`)[0]).toMatch(
      /unknown key "sandbox.network.alow"; did you mean "allow"\?/,
    );
  });

  it("allows the kind's hosts, setup's registries and the config's; none allows nothing", () => {
    const config = parseConfig(`${base}setup: npm ci\nsandbox:\n  network:\n    allow: [mock.test:9]\n`, 'a.yml');
    expect(allowedHosts(config, ['api.x.com'])).toEqual([
      'api.x.com',
      'registry.npmjs.org',
      'registry.yarnpkg.com',
      'mock.test:9',
    ]);
    expect(allowedHosts({ ...config, sandbox: { ...config.sandbox, network: 'none' } }, ['api.x.com'])).toEqual([]);
  });
});

describe("each kind's plan", () => {
  it("every kind's spec declares its egress, with valid host patterns and routes of distinct names", () => {
    expect(Object.keys(SPECS).sort()).toEqual([...AGENT_KINDS].sort());
    for (const spec of Object.values(SPECS)) {
      for (const h of spec.egress.hosts) expect(hostPatternProblem(h), `${spec.kind}: ${h}`).toBeNull();
      const names = spec.egress.routes.map((r) => r.name);
      expect(new Set(names).size, spec.kind).toBe(names.length);
      expect(names, spec.kind).not.toContain('proxy');
      for (const r of spec.egress.routes) expect(r.name, spec.kind).toMatch(/^[a-z0-9-]+$/);
      expect(spec.egress.notProxied, spec.kind).not.toBe('');
    }
  });

  it("README's Safety table has a row per kind naming every key its proxy can hold", () => {
    const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
    const table = /^\| kind +\| the proxy holds.*\n(\|.*\n)+/m.exec(readme)?.[0] ?? '';
    expect(table, "the table of what the proxy holds, in README's Safety").not.toBe('');
    for (const spec of Object.values(SPECS)) {
      const row = table.split('\n').find((l) => l.startsWith(`| \`${spec.kind}\``));
      expect(row, `a row for ${spec.kind}`).toBeDefined();
      for (const r of spec.egress.routes) for (const k of r.keys) expect(row, spec.kind).toContain(`\`${k.name}\``);
    }
  });

  it('claude-code: the key behind a placeholder, the base URL at the proxy, the upstream the default', () => {
    const plan = egressPlan('claude-code', { ANTHROPIC_API_KEY: 'sk-real', PATH: '/bin' });
    expect(plan.routes).toHaveLength(1);
    const [route] = plan.routes;
    expect(route?.upstream).toBe('https://api.anthropic.com');
    expect(route?.keys).toEqual([
      { placeholder: expect.stringMatching(/^forkflush-placeholder-/), value: 'sk-real', headers: ['x-api-key'] },
    ]);
    const env = plan.agentEnv({ anthropic: 'http://127.0.0.1:18081' });
    expect(env).toEqual({
      PATH: '/bin',
      ANTHROPIC_API_KEY: route?.keys[0]?.placeholder,
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:18081',
    });
  });

  it("a login with the user's own base URL passes through it; a login without one needs no route", () => {
    const gateway = egressPlan('claude-code', { ANTHROPIC_BASE_URL: 'http://gw.test/x' });
    expect(gateway.routes).toEqual([{ name: 'anthropic', upstream: 'http://gw.test/x', keys: [] }]);
    expect(egressPlan('claude-code', {}).routes).toEqual([]);
    // Bedrock is another API: nothing of Anthropic's is routed.
    expect(egressPlan('claude-code', { ANTHROPIC_API_KEY: 'k', CLAUDE_CODE_USE_BEDROCK: '1' }).routes).toEqual([]);
  });

  it('codex: CODEX_API_KEY alone goes behind a placeholder in OPENAI_API_KEY, and leaves the environment', () => {
    const plan = egressPlan('codex', { CODEX_API_KEY: 'sk-codex' });
    const env = plan.agentEnv({ openai: 'http://127.0.0.1:18081' });
    expect(env.CODEX_API_KEY).toBeUndefined();
    expect(env.OPENAI_API_KEY).toBe(plan.routes[0]?.keys[0]?.placeholder);
    expect(env.OPENAI_BASE_URL).toBe('http://127.0.0.1:18081');
    expect(plan.routes[0]?.keys[0]?.value).toBe('sk-codex');
    // Both: OPENAI_API_KEY is the one Codex's provider reads; neither stays.
    const both = egressPlan('codex', { CODEX_API_KEY: 'a', OPENAI_API_KEY: 'b' });
    expect(both.routes[0]?.keys.map((k) => k.value)).toEqual(['b']);
    expect(Object.values(both.agentEnv({ openai: 'u' }))).not.toContain('a');
  });

  it("qwen-code: its OpenAI-compatible endpoint (DashScope's) through the proxy, the key behind a placeholder", () => {
    const dashscope = 'https://dashscope-intl.aliyuncs.com/compatible-mode/v1';
    const plan = egressPlan('qwen-code', {
      OPENAI_API_KEY: 'sk-dash',
      OPENAI_BASE_URL: dashscope,
      OPENAI_MODEL: 'qwen3-coder-plus',
    });
    expect(plan.routes.map((r) => [r.name, r.upstream, r.keys.map((k) => [k.value, k.headers])])).toEqual([
      ['openai', dashscope, [['sk-dash', ['authorization']]]],
    ]);
    const env = plan.agentEnv({ openai: 'http://127.0.0.1:18081' });
    expect(env).toEqual({
      OPENAI_API_KEY: plan.routes[0]?.keys[0]?.placeholder,
      OPENAI_BASE_URL: 'http://127.0.0.1:18081',
      OPENAI_MODEL: 'qwen3-coder-plus',
    });
    expect(plan.hosts).toContain('dashscope-intl.aliyuncs.com');
    expect(matchHost(plan.hosts, 'token-plan.cn-beijing.maas.aliyuncs.com', 443)).toBe('wildcard');
    // Its other auth types: Anthropic's key goes behind a placeholder too, at Anthropic's own API.
    const anthropic = egressPlan('qwen-code', { ANTHROPIC_API_KEY: 'sk-ant' });
    expect(anthropic.routes.map((r) => [r.name, r.upstream])).toEqual([['anthropic', 'https://api.anthropic.com']]);
    expect(Object.values(anthropic.agentEnv({ anthropic: 'u' }))).not.toContain('sk-ant');
  });

  it('opencode: a provider of its inline config is routed, its literal key behind a placeholder', () => {
    const config = {
      provider: {
        mock: { options: { baseURL: 'http://127.0.0.1:9/v1', apiKey: 'sk-literal' } },
        other: { options: { apiKey: '{env:OTHER_KEY}', baseURL: 'https://o.test' } },
        plain: { name: 'no options' },
      },
    };
    const plan = egressPlan('opencode', { OPENCODE_CONFIG_CONTENT: JSON.stringify(config) });
    expect(plan.routes.map((r) => [r.name, r.upstream, r.keys.map((k) => k.value)])).toEqual([
      ['opencode-0', 'http://127.0.0.1:9/v1', ['sk-literal']],
      ['opencode-1', 'https://o.test', []],
    ]);
    const env = plan.agentEnv({ 'opencode-0': 'http://127.0.0.1:18081', 'opencode-1': 'http://127.0.0.1:18082' });
    expect(env.OPENCODE_CONFIG_CONTENT).not.toContain('sk-literal');
    expect(JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? '').provider.mock.options).toEqual({
      baseURL: 'http://127.0.0.1:18081',
      apiKey: plan.routes[0]?.keys[0]?.placeholder,
    });
  });
});
