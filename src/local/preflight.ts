// Before a local run spends anything: is everything it needs committed (episodes start from the
// last commit), can the agent's program be found, can its CLI log in, and does the sandbox show
// the agent, the grader and setup what their commands need (sandbox-view.ts)? Each problem is
// said with what to do, and stops the run (exit 2), a dry run too.
import { readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { agentFor, cliOf } from '../agents/specs.js';
import { fileItRuns, namedPaths } from '../core/commands.js';
import type { Config } from '../core/config.js';
import { installCommand } from '../core/failure.js';
import { matchesAny } from '../core/globs.js';
import { findExecutable, isExecutable } from '../io/executables.js';
import { Git } from '../io/git.js';
import { isInside, type Sandbox } from '../io/sandbox.js';
import { expandHome } from '../worker/boundary.js';
import { allowedEnv } from '../worker/env.js';
import { hiddenInSandbox, IGNORED_FIX, ignoredByGit, SHELL_WORDS } from './sandbox-view.js';

export interface PreflightInput {
  repo: string;
  config: Config;
  /** The config file's path inside the repository (null: outside it, or the run works on a copy). */
  configPathInRepo: string | null;
  /** True when the run works on a copy of a folder that is not a repository (nothing to commit). */
  scratch: boolean;
  env: NodeJS.ProcessEnv;
  /** The sandbox episodes run in (null: none), and forkflush's places it hides (the repository, the run folders). */
  sandbox?: { sandbox: Sandbox; private: string[] } | null;
}

/** What cannot work (the run does not start), and notes (it is said, and the run goes on). */
export async function preflight(p: PreflightInput): Promise<{ problems: string[]; notes: string[] }> {
  const problems: string[] = [];
  const notes: string[] = [];
  if (!p.scratch) {
    const uncommitted = await uncommittedInputs(p);
    if (uncommitted.length > 0) {
      const list = uncommitted.slice(0, 12).map((u) => `  ${u}`);
      if (uncommitted.length > 12) list.push(`  and ${uncommitted.length - 12} more`);
      problems.push(
        `these files the run needs are not committed, and every episode starts from the last commit:\n${list.join('\n')}\n` +
          'commit them (git add, git commit), then run again',
      );
    }
  }
  problems.push(...(await homePaths(p.config)));
  const missing = await missingExecutable(p);
  if (missing) problems.push(missing);
  const grader = await missingProgram('grader.command', p.config.grader.command, p);
  if (grader) problems.push(grader);
  // A file setup makes (a build) is not there before it runs: with setup, only the first setup
  // command's own script, which nothing ran before, must be there.
  const [firstSetup] = p.config.setup.commands;
  const commands =
    firstSetup !== undefined
      ? [['setup.commands[0]', firstSetup]]
      : [
          ...(grader ? [] : [['grader.command', p.config.grader.command]]),
          ...(p.config.agent.kind === 'command' && !missing ? [['agent.command', p.config.agent.command ?? '']] : []),
        ];
  for (const [key, command] of commands) {
    const file = fileItRuns(command as string);
    if (!file || (await inLastCommit(p.repo, file))) continue;
    if (await ignoredByGit(p.repo, file))
      problems.push(
        `${key}: ${file}, the file \`${command}\` runs, is ignored by git, so no episode's checkout has it: ${IGNORED_FIX}`,
      );
    else if (!(await stat(join(p.repo, file)).catch(() => null)))
      problems.push(
        `${key}: ${file}, the file \`${command}\` runs, does not exist in the repository: write it, or correct ${key}`,
      );
  }
  notes.push(...(await unprotected(p)));
  problems.push(...(await misplacedFiles(p)));
  const task = await unwrittenTask(p);
  if (task.problem) problems.push(task.problem);
  if (task.note) notes.push(task.note);
  const submodules = await submodulesOf(p.repo);
  if (submodules.length > 0)
    notes.push(
      `the workspaces hold no submodules: ${submodules.slice(0, 5).join(', ')}${submodules.length > 5 ? ` and ${submodules.length - 5} more` : ''} ` +
        "will be empty folders in every episode's checkout and the judge's; if the task or grader.command needs their files, commit them into the repository",
    );
  const blocking = await blockingRef(p.repo);
  if (blocking) problems.push(blocking);
  const absent = async (paths: string[]) =>
    (await Promise.all(paths.map(async (x) => ((await stat(expandHome(x)).catch(() => null)) ? [] : [x])))).flat();
  if (p.sandbox) problems.push(...(await showsPrivate(p.config, p.sandbox.private)));
  const unreadable = p.sandbox && !p.scratch && process.getuid?.() === 0 ? await objectsUnreadable(p.repo) : null;
  if (unreadable) notes.push(unreadable);
  const unbindable = await absent(p.config.sandbox.write);
  for (const x of unbindable)
    problems.push(
      `sandbox.write: ${x} does not exist (the sandbox cannot bind it): create it, or correct sandbox.write`,
    );
  for (const x of await absent(p.config.sandbox.read))
    notes.push(`sandbox.read: ${x} does not exist, so it shows the agent nothing: create it, or correct sandbox.read`);
  const adapter = agentFor(p.config);
  const login = adapter.missingLogin(allowedEnv(p.env, [...adapter.passEnv, ...p.config.agent.env]));
  if (login) problems.push(login);
  if (p.sandbox && !missing && unbindable.length === 0) {
    const view = await hiddenInSandbox({
      repo: p.repo,
      config: p.config,
      env: p.env,
      sandbox: p.sandbox.sandbox,
      private: p.sandbox.private,
    });
    problems.push(...view.problems);
    notes.push(...view.notes);
  }
  return { problems, notes };
}

/**
 * Under root each sandbox is an account of its own, which reads the repository's git objects as
 * "others" do: a clone made under a hardened umask (027) keeps them from every agent's git.
 */
async function objectsUnreadable(repo: string): Promise<string | null> {
  const r = await new Git(repo).exec(['rev-parse', '--git-path', 'objects'], { check: false });
  if (r.exitCode !== 0) return null;
  const objects = resolve(repo, r.stdout.trim());
  const packs = await readdir(join(objects, 'pack')).catch(() => [] as string[]);
  const paths = [objects, join(objects, 'pack'), ...packs.map((f) => join(objects, 'pack', f))];
  for (const path of paths) {
    const s = await stat(path).catch(() => null);
    const needs = s?.isDirectory() ? 0o005 : 0o004;
    if (s && (s.mode & needs) !== needs)
      return (
        `the sandbox's accounts cannot read the repository's git objects (${path} is ${(s.mode & 0o777).toString(8)}: ` +
        `a umask like 027 made it), so the agents' git in their workspaces fails (git log, git diff): ` +
        `let them read it (chmod -R o+rX ${objects}), or run forkflush as a user other than root`
      );
  }
  return null;
}

/**
 * sandbox.read and sandbox.write entries that would show the agent forkflush's own places (the
 * repository, the runs folder: records, the seal key, every episode's workspace). The sandbox
 * hides them inside a folder it shows, but the agent's own places are in them, so a folder that
 * holds them cannot be shown whole; a folder inside the repository (a dataset) can, except its
 * .git and the runs folder.
 */
async function showsPrivate(config: Config, privatePlaces: string[]): Promise<string[]> {
  const real = (x: string) => realpath(x).catch(() => resolve(x));
  const places = await Promise.all(privatePlaces.map(real));
  // The repository's git folder: its .git, or in a worktree the main checkout's, which every worktree shares.
  const repo = places[0] as string;
  const common = (await new Git(repo).exec(['rev-parse', '--git-common-dir'], { check: false })).stdout.trim();
  const gitDirs = [join(repo, '.git'), ...(common ? [await real(resolve(repo, common))] : [])];
  const inner = [...places.slice(1), ...gitDirs];
  const problems: string[] = [];
  for (const key of ['read', 'write'] as const) {
    for (const entry of config.sandbox[key]) {
      const path = await real(expandHome(entry));
      const within = inner.find((place) => isInside(path, place));
      const held = [...places, ...gitDirs].find((place) => isInside(place, path));
      if (within)
        problems.push(
          `sandbox.${key}: ${entry} ${path === within ? 'is' : 'is inside'} ${within}, forkflush's own, which the sandbox hides from the agent: name a folder outside it`,
        );
      else if (held)
        problems.push(
          `sandbox.${key}: ${entry} holds ${held === repo ? 'the repository' : gitDirs.includes(held) ? "the repository's git folder" : "forkflush's runs folder"} ${held}, which the sandbox hides from the agent (the runs' records and seal keys, every episode's workspace): ` +
            `name the folders inside it the agent needs${held === repo ? ` (a folder of the repository is fine, such as ${join(held, 'data')})` : ''}`,
        );
    }
  }
  return problems;
}

/** The submodules of the last commit (gitlinks): forkflush checks out the commit's own files alone. */
async function submodulesOf(repo: string): Promise<string[]> {
  const git = new Git(repo);
  // A submodule comes with its .gitmodules: without one, the listing of a large tree is spared.
  if ((await git.exec(['cat-file', '-e', 'HEAD:.gitmodules'], { check: false })).exitCode !== 0) return [];
  const listed = await git.exec(['ls-tree', '-r', '-z', 'HEAD'], { check: false });
  return listed.stdout
    .split('\0')
    .filter((line) => line.startsWith('160000 commit '))
    .map((line) => line.slice(line.indexOf('\t') + 1));
}

/**
 * task: and journal: where they cannot work: a folder in the last commit (the task would be its
 * listing; the journal, written as a file, would delete the folder from the best branch), or the
 * journal at the config file, which it would turn into journal lines that are not YAML.
 */
async function misplacedFiles(p: PreflightInput): Promise<string[]> {
  const git = new Git(p.repo);
  const problems: string[] = [];
  for (const [key, path, what] of [
    ['task', p.config.task, 'the file that describes the task'],
    ['journal', p.config.journal, "a file for the agents' notes"],
  ] as const) {
    const type = (await git.exec(['cat-file', '-t', `HEAD:${path}`], { check: false })).stdout.trim();
    if (type === 'tree') problems.push(`${key}: ${path} is a folder in the repository's last commit: name ${what}`);
  }
  if (p.config.journal === p.configPathInRepo)
    problems.push(
      `journal: ${p.config.journal} is the config file, which forkflush would append the agents' notes to: name another file`,
    );
  return problems;
}

/**
 * The task file as the agents get it (from the last commit): empty, it tells them nothing, and the
 * run is refused; still holding init's line for the user to replace, it is said.
 */
async function unwrittenTask(p: PreflightInput): Promise<{ problem?: string; note?: string }> {
  const task = await new Git(p.repo).exec(['cat-file', 'blob', `HEAD:${p.config.task}`], { check: false });
  if (task.exitCode !== 0) return {};
  if (task.stdout.trim() === '')
    return {
      problem: `task: ${p.config.task} is empty in the last commit, and it is all the agents are told of the task: describe the task there, commit it, then run again`,
    };
  if (task.stdout.includes(TASK_PLACEHOLDER))
    return {
      note: `task: ${p.config.task} still has the line init wrote for you to replace ("${TASK_PLACEHOLDER}"): the agents read it as it is`,
    };
  return {};
}

/** The line `forkflush init` writes in TASK.md for the user to replace with the task. */
export const TASK_PLACEHOLDER =
  'Describe the problem here: what to build or improve, the constraints, what not to touch.';

/** A branch named `forkflush`, where forkflush's branches go (forkflush/<run>/...): git makes none under it. */
async function blockingRef(repo: string): Promise<string | null> {
  const r = await new Git(repo).exec(['show-ref', '--verify', '--quiet', 'refs/heads/forkflush'], { check: false });
  return r.exitCode === 0
    ? 'the branch forkflush blocks the branches a run makes (forkflush/<run>/...): rename it (git branch -m forkflush forkflush-old), then run again'
    : null;
}

/**
 * What grader.protected leaves open that it most likely meant to close: a glob that matches no
 * file of the commit (a misspelt name protects nothing), and the file grader.command runs when no
 * glob covers it (the agent could rewrite the grader, and the judge would run its version).
 */
async function unprotected(p: PreflightInput): Promise<string[]> {
  const notes: string[] = [];
  const git = new Git(p.repo);
  const files = async (glob: string) =>
    (await git.exec(['ls-files', '-z', '--', `:(glob)${glob}`], { check: false })).stdout.split('\0').filter(Boolean);
  for (const glob of p.config.grader.protected)
    if ((await files(glob)).length === 0)
      notes.push(
        `grader.protected: ${JSON.stringify(glob)} matches no file of the commit, so it protects nothing: correct it if you meant a file the grader reads`,
      );
  const file = fileItRuns(p.config.grader.command);
  if (file && (await files(file)).length > 0 && !matchesAny(file, p.config.grader.protected))
    notes.push(
      `grader.protected does not cover ${file}, the file grader.command runs: an agent that rewrites it gets the score it likes; add it to grader.protected`,
    );
  return notes;
}

/**
 * The run's inputs in the working tree that differ from HEAD: the config, the task, the journal,
 * the prompt templates, the protected paths, and files the grader's, the agent's or a setup
 * command names.
 */
async function uncommittedInputs(p: PreflightInput): Promise<string[]> {
  const c = p.config;
  // The journal too: the agents read it from the commit, so notes not committed never reach them.
  const literal = [p.configPathInRepo, c.task, c.journal, c.prompts.branch, c.prompts.continuation].filter(
    (x): x is string => typeof x === 'string',
  );
  const named = [
    ...namedPaths(c.grader.command),
    ...(c.agent.command ? namedPaths(c.agent.command) : []),
    ...c.setup.commands.flatMap(namedPaths),
  ];
  for (const path of named) if (await stat(join(p.repo, path)).catch(() => null)) literal.push(path);
  const specs = [...new Set(literal)].map((x) => `:(literal)${x}`);
  specs.push(...c.grader.protected.map((g) => `:(glob)${g}`));
  if (specs.length === 0) return [];
  const r = await new Git(p.repo).exec(
    ['-c', 'core.quotePath=false', 'status', '--porcelain=v1', '--untracked-files=all', '--', ...specs],
    { check: false },
  );
  if (r.exitCode !== 0) return [];
  const listed = new Map<string, string>();
  for (const l of r.stdout.split('\n').filter((x) => x.length > 3)) {
    const [code, path] = [l.slice(0, 2), l.slice(3)];
    // A file `git rm --cached` took out of the index is also untracked: one line, the first.
    if (listed.has(path)) continue;
    const what =
      code === 'D '
        ? 'removed from git, not committed'
        : code === '??'
          ? 'not in git'
          : code[0] !== ' ' && code[1] === ' '
            ? 'staged, not committed'
            : 'changed';
    listed.set(path, `${path} (${what})`);
  }
  return [...listed.values()];
}

/**
 * A `~/` path of the user's that the agent's or the grader's command names: each episode's HOME is
 * a home folder of its own, so the shell finds nothing there (the dry run, whose probe expands it
 * as the user's, passed; every episode failed "not found").
 */
async function homePaths(config: Config): Promise<string[]> {
  const problems: string[] = [];
  for (const [key, command] of [
    ['agent.command', config.agent.command ?? ''],
    ['grader.command', config.grader.command],
  ] as const) {
    for (const m of command.matchAll(/(?:^|[\s=:])(~\/[^\s'"`;|&<>()$]*)/g)) {
      const path = m[1] as string;
      if (await stat(expandHome(path)).catch(() => null))
        problems.push(
          `${key} names ${path}, but each episode's ~ is a home folder of its own, not yours: name it by its absolute path, ${expandHome(path)}`,
        );
    }
  }
  return problems;
}

const inLastCommit = async (repo: string, file: string) =>
  (await new Git(repo).exec(['cat-file', '-e', `HEAD:${file}`], { check: false })).exitCode === 0;

/** Why the program a shell command starts (its first word) cannot be found, or null. */
async function missingProgram(key: string, command: string, p: PreflightInput): Promise<string | null> {
  const first = command
    .trim()
    .split(/\s+/)
    .find((w) => !/^\w+=/.test(w));
  if (!first || SHELL_WORDS.has(first) || /[$`(]/.test(first)) return null;
  if (first.includes('/')) {
    const file = isAbsolute(first) ? first : join(p.repo, first);
    if (await isExecutable(file)) return null;
    const exists = await stat(file).then(
      () => true,
      () => false,
    );
    // A file setup builds is not there yet.
    if (!exists && !isAbsolute(first) && p.config.setup.commands.length > 0) return null;
    return exists
      ? `${key}: ${first} is not executable: chmod +x it (and commit that), or run it through its interpreter`
      : `${key}: ${first} does not exist${isAbsolute(first) ? '' : ' in the repository'}`;
  }
  return (await onPath(first, p.env.PATH ?? ''))
    ? null
    : `${key}: \`${first}\` is not found on PATH: install it, or name it with its full path`;
}

/** Why the agent's program cannot be found, or null. */
async function missingExecutable(p: PreflightInput): Promise<string | null> {
  const kind = p.config.agent.kind;
  const path = p.env.PATH ?? '';
  if (kind === 'command') return missingProgram('agent.command', p.config.agent.command ?? '', p);
  const cli = cliOf(kind);
  if (!cli) return null;
  const executable = p.config.agent.command ?? cli.executable;
  // `./tools/claude` is the repository's file (the workspace's, in an episode), not one on PATH.
  const found = isAbsolute(executable)
    ? await isExecutable(executable)
    : executable.includes('/')
      ? await isExecutable(join(p.repo, executable))
      : await onPath(executable, path);
  if (found) return null;
  return p.config.agent.command
    ? `agent.command: the ${kind} CLI \`${executable}\` is not found`
    : `the ${kind} agent runs \`${executable}\`, which is not on PATH: install it (${installCommand(cli)}), or set agent.command to where it is`;
}

async function onPath(name: string, path: string): Promise<boolean> {
  return (await findExecutable(name, path)) !== null;
}
