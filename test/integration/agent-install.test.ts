// The Action's install of the agent CLI (src/action/agent-install.ts). The registry install of a
// real CLI takes minutes, so most cases run a FAKE npm (and python3) first on PATH: a script that
// records its arguments and makes what the real one makes, as npm's documentation of global
// installs says ("folders": with --global, packages go to {prefix}/lib/node_modules and
// executables are linked into {prefix}/bin) and as `python3 -m venv DIR` lays out a virtual
// environment (DIR/bin/python, then pip installs the package's scripts into DIR/bin). One case
// runs the real npm on a package packed here (no registry), to hold the layout to the real thing.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliFolder, installAgentCli, installCli } from '../../src/action/agent-install.js';
import type { CliFacts } from '../../src/agents/spec.js';
import { cliOf } from '../../src/agents/specs.js';
import type { AgentKind } from '../../src/core/config.js';

const pin = (kind: AgentKind) => cliOf(kind) as CliFacts;

import { parseConfig } from '../../src/core/config.js';

function temp(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `forkflush-${prefix}-`));
}

/** A fake npm / python3 on PATH: each call appends its argv (JSON) to calls.jsonl. */
function fakeTools(o: { npmFails?: boolean; noBin?: boolean } = {}) {
  const bin = temp('fake-tools');
  const calls = join(bin, 'calls.jsonl');
  const record = `node -e 'require("fs").appendFileSync(process.argv[1], JSON.stringify(process.argv.slice(2)) + "\\n")' ${calls} "$(basename "$0")" "$@"`;
  writeFileSync(
    join(bin, 'npm'),
    `#!/bin/sh
${record}
${o.npmFails ? 'echo "npm error code E404" >&2; echo "npm error 404 Not Found - GET https://registry.npmjs.org/x" >&2; exit 1' : ''}
# npm install --global --prefix DIR ... PKG@VERSION: the package in DIR/lib/node_modules, its bin linked in DIR/bin.
while [ $# -gt 0 ]; do [ "$1" = --prefix ] && prefix=$2; shift; done
mkdir -p "$prefix/lib/node_modules/pkg" "$prefix/bin"
${o.noBin ? '' : 'printf "#!/bin/sh\\necho fake-cli 1.0\\n" > "$prefix/lib/node_modules/pkg/cli.js"; chmod +x "$prefix/lib/node_modules/pkg/cli.js"; for exe in claude codex copilot gemini opencode; do ln -s ../lib/node_modules/pkg/cli.js "$prefix/bin/$exe"; done'}
`,
  );
  writeFileSync(
    join(bin, 'python3'),
    `#!/bin/sh
${record}
# python3 -m venv DIR: DIR/bin/python, whose "-m pip install" puts the package's scripts in DIR/bin.
dir=$3
mkdir -p "$dir/bin"
printf '#!/bin/sh\\n%s\\nprintf "#!/bin/sh\\\\necho aider 0\\\\n" > "$(dirname "$0")/aider"; chmod +x "$(dirname "$0")/aider"\\n' '${record.replaceAll("'", "'\\''")}' > "$dir/bin/python"
chmod +x "$dir/bin/python"
`,
  );
  for (const f of ['npm', 'python3']) chmodSync(join(bin, f), 0o755);
  const env = {
    PATH: `${bin}${delimiter}${process.env.PATH}`,
    RUNNER_TOOL_CACHE: temp('tool-cache'),
    HOME: temp('home'),
  };
  return {
    env,
    calls: (): string[][] =>
      existsSync(calls)
        ? readFileSync(calls, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l))
        : [],
  };
}

const agentOf = (yaml: string) =>
  parseConfig(`grader: {command: g}\nagent: ${yaml}\nbudget: {total: 10}\n`, 'x.yml').agent;

describe("the Action's install of the agent CLI", () => {
  it('installs the pinned version with npm under the tool cache, and puts its bin first on PATH', async () => {
    const tools = fakeTools();
    const lines: string[] = [];
    const claude = pin('claude-code');
    const install = await installAgentCli(agentOf('{kind: claude-code}'), {
      env: { ...tools.env, GITHUB_TOKEN: 'ghs_x', ACTIONS_RUNTIME_TOKEN: 'rt' },
      log: (l) => lines.push(l),
    });
    const dir = join(tools.env.RUNNER_TOOL_CACHE, 'forkflush-agents', `anthropic-ai+claude-code@${claude.version}`);
    expect(install.problem).toBeUndefined();
    expect(install.bin).toBe(join(dir, 'bin'));
    expect(install.env.PATH?.split(delimiter)[0]).toBe(join(dir, 'bin'));
    expect(tools.calls()).toEqual([
      [
        'npm',
        'install',
        '--global',
        '--prefix',
        dir,
        '--no-audit',
        '--no-fund',
        '--no-update-notifier',
        `@anthropic-ai/claude-code@${claude.version}`,
      ],
    ]);
    // The installed CLI runs from the PATH the episode gets.
    expect(execFileSync('claude', { env: install.env, encoding: 'utf8' }).trim()).toBe('fake-cli 1.0');
    expect(lines.at(-1)).toMatch(new RegExp(`^agent CLI: @anthropic-ai/claude-code@${claude.version} installed in `));
    // Installed once: the next job on this runner uses it as it is.
    const again = await installAgentCli(agentOf('{kind: claude-code}'), { env: tools.env, log: (l) => lines.push(l) });
    expect(again.bin).toBe(join(dir, 'bin'));
    expect(tools.calls()).toHaveLength(1);
    expect(lines.at(-1)).toBe(`agent CLI: @anthropic-ai/claude-code@${claude.version}, installed before in ${dir}`);
  });

  it('never hands the installer a forge credential', async () => {
    const tools = fakeTools();
    writeFileSync(
      join(tools.env.PATH.split(delimiter)[0] as string, 'npm'),
      `#!/bin/sh\nenv > "${join(tools.env.HOME, 'npm-env')}"\nexit 1\n`,
    );
    const install = await installCli(pin('codex'), {
      env: {
        ...tools.env,
        GITHUB_TOKEN: 'ghs_secret_1',
        GH_TOKEN: 'gh_secret_2',
        ACTIONS_RUNTIME_TOKEN: 'runtime_secret_3',
        INPUT_TOKEN: 'input_secret_4',
      },
      log: () => {},
    });
    expect(install.problem).toMatch(
      /^the agent's CLI @openai\/codex@0\.171\.0 could not be installed: npm exited with code 1/,
    );
    const seen = readFileSync(join(tools.env.HOME, 'npm-env'), 'utf8');
    for (const v of ['secret_1', 'secret_2', 'secret_3', 'secret_4']) expect(seen).not.toContain(v);
    expect(seen).toContain('RUNNER_TOOL_CACHE=');
  });

  it('a failed install is a problem the episode reports (its agent never starts), and leaves nothing half-made', async () => {
    const tools = fakeTools({ npmFails: true });
    const install = await installAgentCli(agentOf('{kind: gemini}'), { env: tools.env, log: () => {} });
    expect(install.problem).toBe(
      `the agent's CLI @google/gemini-cli@${pin('gemini').version} could not be installed: npm exited with code 1: npm error 404 Not Found - GET https://registry.npmjs.org/x`,
    );
    expect(install.env).toEqual(tools.env);
    expect(existsSync(cliFolder(pin('gemini'), tools.env))).toBe(false);
    const noBin = fakeTools({ noBin: true });
    const empty = await installAgentCli(agentOf('{kind: opencode}'), { env: noBin.env, log: () => {} });
    expect(empty.problem).toMatch(/was installed but brought no opencode in /);
  });

  it('a tool cache that cannot be written is a problem the episode reports, not a failed job', async () => {
    const tools = fakeTools();
    // A file where the folder would be: no user, root included, can make a folder inside it.
    const blocked = join(tools.env.RUNNER_TOOL_CACHE, 'forkflush-agents');
    writeFileSync(blocked, '');
    const install = await installAgentCli(agentOf('{kind: codex}'), { env: tools.env, log: () => {} });
    expect(install.problem).toBe(
      `the agent's CLI @openai/codex@${pin('codex').version} could not be installed: ${blocked} cannot be written (EEXIST); ` +
        'make RUNNER_TOOL_CACHE a folder the runner can write, or point agent.command at an installed CLI',
    );
    expect(install.env).toEqual(tools.env);
    expect(tools.calls()).toEqual([]);
  });

  it('installs aider in a virtual environment with its pip, at the pinned version', async () => {
    const tools = fakeTools();
    const install = await installAgentCli(agentOf('{kind: aider}'), { env: tools.env, log: () => {} });
    const dir = cliFolder(pin('aider'), tools.env);
    expect(install.problem).toBeUndefined();
    expect(tools.calls()).toEqual([
      ['python3', '-m', 'venv', dir],
      [
        'python',
        '-m',
        'pip',
        'install',
        '--no-input',
        '--disable-pip-version-check',
        `aider-chat==${pin('aider').version}`,
      ],
    ]);
    expect(execFileSync('aider', { env: install.env, encoding: 'utf8' }).trim()).toBe('aider 0');
  });

  it('installs nothing for a command agent, or when agent.command names the CLI', async () => {
    const tools = fakeTools();
    const lines: string[] = [];
    const log = (l: string) => lines.push(l);
    expect(await installAgentCli(agentOf('{command: node a.mjs}'), { env: tools.env, log })).toEqual({
      env: tools.env,
    });
    expect(
      await installAgentCli(agentOf('{kind: codex, command: /opt/codex/bin/codex}'), { env: tools.env, log }),
    ).toEqual({ env: tools.env });
    expect(tools.calls()).toEqual([]);
    expect(lines).toEqual(['agent CLI: agent.command names it (/opt/codex/bin/codex): forkflush installs none']);
  });

  it('with the real npm, a packed CLI lands where the install says (prefix/bin on PATH)', async () => {
    const pkg = temp('pkg');
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({ name: 'forkflush-fake-cli', version: '1.2.3', bin: { 'forkflush-fake-cli': 'cli.js' } }),
    );
    writeFileSync(join(pkg, 'cli.js'), '#!/usr/bin/env node\nconsole.log("real npm layout");\n');
    const packed = temp('packed');
    const file = execFileSync('npm', ['pack', '--silent', '--pack-destination', packed], {
      cwd: pkg,
      encoding: 'utf8',
    }).trim();
    const cache = temp('tool-cache');
    mkdirSync(join(cache, 'npm-cache'));
    const env = {
      PATH: process.env.PATH,
      HOME: temp('home'),
      RUNNER_TOOL_CACHE: cache,
      npm_config_cache: join(cache, 'npm-cache'),
      npm_config_offline: 'true',
    };
    const install = await installCli(
      { package: 'forkflush-fake-cli', version: '1.2.3', installer: 'npm', executable: 'forkflush-fake-cli' },
      { env, log: () => {}, source: join(packed, file) },
    );
    expect(install.problem).toBeUndefined();
    expect(install.bin).toBe(join(cache, 'forkflush-agents', 'forkflush-fake-cli@1.2.3', 'bin'));
    expect(execFileSync('forkflush-fake-cli', { env: install.env, encoding: 'utf8' }).trim()).toBe('real npm layout');
  });
});
