// The agent's CLI on a runner. A hosted runner has none, and the job's own steps cannot install
// one for forkflush (the Action empties the workspace and checks the episode out itself), so the
// Action installs the CLI the run's config names, at the version forkflush was tested with (the
// `cli` of its spec in src/agents/), unless agent.command points at one of the user's. npm CLIs are
// installed with `npm install --global --prefix <dir>` (packages in <dir>/lib/node_modules, executables in
// <dir>/bin: npm's "folders" documentation), aider in a virtual environment (`python3 -m venv`,
// then its pip). No sudo, nothing outside <dir>.
//
// Where: RUNNER_TOOL_CACHE/forkflush-agents/<package>@<version> (else RUNNER_TEMP, else the
// system's temp folder). The tool cache is the runner's own place for tools: a self-hosted runner
// keeps it between jobs, so the install is done once per version; a GitHub-hosted runner starts
// empty every job, so each job installs it (tens of seconds). Not in the Actions cache: its
// service token is forgotten before the episode starts (action/env.ts), the token would let
// anyone who reads it (an agent on a runner without the sandbox) write the entry every later job
// runs, and the Action's bundle has no cache client.
//
// The bin folder goes first on the PATH the episode gets (the agent's allowlist keeps PATH); the
// sandbox shows what PATH names even inside hidden places (worker/boundary.ts).
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import type { CliFacts } from '../agents/spec.js';
import { cliOf } from '../agents/specs.js';
import { FAILURE_LINE_MAX_CHARS, INSTALL_OUTPUT_MAX_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { AGENT_INSTALL_TIMEOUT_SECONDS } from '../core/method.js';
import { isForgeSecret } from '../core/secrets.js';
import { failureLine, plainText } from '../core/text.js';
import { removeTree } from '../io/agent-files.js';
import { type RunOptions, type RunResult, runProcess } from '../io/process.js';

/** A CLI to install: its package, the pinned version, how, and the executable it brings. */
export interface CliPin {
  package: string;
  version: string;
  installer: CliFacts['installer'];
  executable: string;
}

export interface AgentInstall {
  /** The episode's environment: PATH starts with the CLI's bin folder when one was installed. */
  env: NodeJS.ProcessEnv;
  /** Why the CLI could not be installed: the episode then ends as a setup result, its agent never started. */
  problem?: string;
  /** The folder the CLI's executable is in, when forkflush installed one. */
  bin?: string;
}

export interface InstallOptions {
  /** The job's environment (forge credentials are never passed on to the installer). */
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
  /** Runs the installer (default: a child process, unconfined: it is forkflush's, not the agent's). */
  run?: (file: string, args: string[], options: RunOptions) => Promise<RunResult>;
  /** What npm or pip installs instead of `<package>@<version>` (a tarball, in tests). */
  source?: string;
}

/** Installs the CLI `agent.kind` runs, unless agent.command names one or the kind is `command`. */
export async function installAgentCli(agent: Config['agent'], o: InstallOptions): Promise<AgentInstall> {
  if (agent.kind === 'command') return { env: o.env };
  if (agent.command !== undefined) {
    o.log(`agent CLI: agent.command names it (${agent.command}): forkflush installs none`);
    return { env: o.env };
  }
  const cli = cliOf(agent.kind);
  return cli ? installCli(cli, o) : { env: o.env };
}

/** The folder a pinned CLI is installed in on this runner. */
export function cliFolder(pin: CliPin, env: NodeJS.ProcessEnv): string {
  const root = env.RUNNER_TOOL_CACHE || env.RUNNER_TEMP || tmpdir();
  return join(root, 'forkflush-agents', `${pin.package.replace(/^@/, '').replace(/\//g, '+')}@${pin.version}`);
}

/** The installed marker: written last, so a folder without it is a broken install and is redone. */
const MARKER = '.forkflush-installed';

export async function installCli(pin: CliPin, o: InstallOptions): Promise<AgentInstall> {
  const spec = `${pin.package}@${pin.version}`;
  const dir = cliFolder(pin, o.env);
  try {
    return await install(pin, spec, dir, o);
  } catch (e) {
    // A tool cache forkflush cannot write (a self-hosted runner's, read-only) is the episode's
    // setup result like a failed download, not a failed job charged its whole allowance.
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code !== 'string' || !err.syscall) throw e;
    const where = err.path ?? dir;
    return {
      env: o.env,
      problem: plainText(
        `the agent's CLI ${spec} could not be installed: ${where} cannot be written (${err.code}); ` +
          'make RUNNER_TOOL_CACHE a folder the runner can write, or point agent.command at an installed CLI',
      ),
    };
  }
}

async function install(pin: CliPin, spec: string, dir: string, o: InstallOptions): Promise<AgentInstall> {
  const bin = join(dir, 'bin');
  const executable = join(bin, pin.executable);
  const withPath = { ...o.env, PATH: [bin, o.env.PATH].filter(Boolean).join(delimiter) };
  const marker = join(dir, MARKER);
  if (existsSync(executable) && (await readFile(marker, 'utf8').catch(() => '')) === `${spec}\n`) {
    o.log(`agent CLI: ${spec}, installed before in ${dir}`);
    return { env: withPath, bin };
  }
  const run = o.run ?? runProcess;
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(o.env)) if (!isForgeSecret(k)) env[k] = v;
  await removeTree(dir);
  await mkdir(dirname(dir), { recursive: true });
  const started = performance.now();
  const steps: [string, string[]][] =
    pin.installer === 'npm'
      ? [
          [
            'npm',
            [
              'install',
              '--global',
              '--prefix',
              dir,
              '--no-audit',
              '--no-fund',
              '--no-update-notifier',
              o.source ?? spec,
            ],
          ],
        ]
      : [
          ['python3', ['-m', 'venv', dir]],
          [
            join(bin, 'python'),
            [
              '-m',
              'pip',
              'install',
              '--no-input',
              '--disable-pip-version-check',
              o.source ?? `${pin.package}==${pin.version}`,
            ],
          ],
        ];
  for (const [file, args] of steps) {
    o.log(`agent CLI: ${file} ${args.join(' ')}`);
    const r = await run(file, args, {
      cwd: dirname(dir),
      env,
      timeoutMs: AGENT_INSTALL_TIMEOUT_SECONDS * 1000,
      maxOutput: INSTALL_OUTPUT_MAX_CHARS,
      track: true,
    });
    const failed =
      r.stopped === 'timeout'
        ? `it took longer than ${AGENT_INSTALL_TIMEOUT_SECONDS} s`
        : r.spawnError
          ? `${file} could not start (${r.spawnError})${file === 'npm' ? ': add actions/setup-node before the forkflush step' : ''}`
          : r.exitCode !== 0
            ? `${file} exited with code ${r.exitCode}: ${failureLine(r.stderr.trim() ? r.stderr : r.stdout, FAILURE_LINE_MAX_CHARS) || 'no output'}`
            : null;
    if (failed) {
      await removeTree(dir);
      return { env: o.env, problem: plainText(`the agent's CLI ${spec} could not be installed: ${failed}`) };
    }
  }
  if (!existsSync(executable)) {
    await removeTree(dir);
    return {
      env: o.env,
      problem: `the agent's CLI ${spec} was installed but brought no ${pin.executable} in ${bin}`,
    };
  }
  await writeFile(marker, `${spec}\n`);
  o.log(`agent CLI: ${spec} installed in ${dir} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { env: withPath, bin };
}
