// `forkflush init [DIR]`: a task set up the way the practitioner's guide suggests. It asks (on a
// terminal) or takes from flags: what the score measures, the command that prints it, its
// direction, the check that must pass first, the agent, the budget, the protected paths. It writes
// the config (with its JSON Schema beside it), TASK.md and NOTES.md if missing, and with --github
// the two workflows; it grades the workspace once, says what cannot run yet (a grader or agent file
// that is missing, a program not found) and what to do next. It never overwrites a file without
// --force, and makes nothing when an answer is wrong.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { fileURLToPath } from 'node:url';
import { specOfName } from '../agents/specs.js';
import { GRADER_OUTPUT_MAX_CHARS, INIT_GRADER_TIMEOUT_SECONDS } from '../core/bounds.js';
import { fileItRuns, namedPaths } from '../core/commands.js';
import { AGENT_KINDS, CONFIG_PATH, ConfigError, configJsonSchema, parseConfig, UNITS } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { AGENT_TIMEOUT_SECONDS } from '../core/method.js';
import { parseScore } from '../core/score.js';
import { failureLine, shellQuote } from '../core/text.js';
import { Git } from '../io/git.js';
import { runShell } from '../io/process.js';
import { untrackedFiles, whileWatchingReads } from '../local/grader-reads.js';
import { TASK_PLACEHOLDER } from '../local/preflight.js';
import { pinAction } from './action-pin.js';
import type { Parsed } from './args.js';
import type { Io } from './io.js';

// The Action as the example workflows name it: a stand-in repository at the release they are for.
const ACTION_PLACEHOLDER = /your-org\/forkflush@[\w.-]+/g;

interface Answers {
  metric: string;
  grader: string;
  direction: 'maximize' | 'minimize';
  check: string;
  agent: string;
  agentCommand: string;
  budget: number;
  unit: string;
  protected: string[];
}

/** The first of `dir` and the folders above it that is there and is not a folder (a file: mkdir fails there), or null. */
async function notAFolder(dir: string): Promise<string | null> {
  for (let d = dir; ; d = dirname(d)) {
    const s = await stat(d).catch(() => null);
    if (s) return s.isDirectory() ? null : d;
    if (dirname(d) === d) return null;
  }
}

export async function initTask(dir: string, v: Parsed['values'], io: Io): Promise<number> {
  const root = resolve(dir);
  const notFolder = await notAFolder(root);
  if (notFolder)
    throw new UserError(`${notFolder} is not a folder: name the task's folder (init makes it if it is not there)`);
  // Every answer, and the config made of them, is checked before anything is made: a wrong one
  // leaves no folder behind.
  const answers = await ask(root, v, io);
  const config = configText(answers);
  // The file must parse as forkflush reads it; what it refuses (a budget too small for the plan) is
  // said of the answers, as nothing has been written yet.
  try {
    parseConfig(config, CONFIG_PATH);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const problems = e.problems.map((p) => p.replace(/^[^\n]*?:\d+:\d+: /, ''));
    throw new UserError(
      `these answers make a config forkflush would refuse, so nothing was written:\n  ${problems.join('\n  ')}\n` +
        'Answer again (--budget, --unit and the others; or without --yes, at the questions)',
    );
  }
  const force = v.force === true;
  const written: string[] = [];
  const kept: string[] = [];
  const put = async (path: string, text: string) => {
    const file = join(root, path);
    if (existsSync(file) && !force) {
      kept.push(path);
      return;
    }
    const blocking = await notAFolder(dirname(file));
    if (blocking)
      throw new UserError(
        `${blocking} is a file where init would make a folder for ${path}: move it away, then run init again`,
      );
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text);
    written.push(path);
  };
  // --action REPO@TAG is pinned to the tag's commit, with a comment naming the tag (action-pin.ts).
  const pinned =
    v.github === true && typeof v.action === 'string' ? await pinAction(v.action, io.env ?? process.env) : null;
  // The Action the workflows still name for the user to replace (none with --action).
  let placeholder: string | undefined;
  // The first folder init made (undefined: DIR was there): removed again if writing fails half-way.
  const made = await mkdir(root, { recursive: true });
  try {
    await put(CONFIG_PATH, config);
    await put('.github/autoresearch.schema.json', `${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    if (!existsSync(join(root, 'TASK.md'))) await put('TASK.md', taskText(answers));
    if (!existsSync(join(root, 'NOTES.md'))) await put('NOTES.md', notesText());
    if (v.github === true) {
      for (const name of GITHUB_WORKFLOWS) {
        const text = await workflowText(name, answers.agent, pinned?.action ?? null, pinned?.version);
        placeholder ??= text.match(ACTION_PLACEHOLDER)?.[0];
        await put(`.github/workflows/${name}`, text);
      }
    }
  } catch (e) {
    if (made !== undefined) await rm(made, { recursive: true, force: true });
    throw e;
  }
  for (const f of written) io.stdout.write(`wrote ${f}\n`);
  for (const f of kept) io.stdout.write(`kept ${f}: it exists (--force overwrites it)\n`);

  const near = relative(process.cwd(), root) || '.';
  const here = near.startsWith('..') ? root : near;
  // The grader and the agent tried now: problems the run would stop at, files they say to write.
  const { problems, toWrite, watched } = await tryGraderAndAgent(answers, root, here, io);
  if (v.github === true) {
    io.stdout.write(
      "\nforkflush's branches hold code an agent wrote, and the app's pull requests and pushes start your pull_request and\n" +
        "push workflows with the repository's secrets: add branches-ignore: ['forkflush/**'] to them (README, \"Agent code and your CI\").\n",
    );
  }
  if (pinned?.version)
    io.stdout.write(`\nThe workflows use ${pinned.action} (${pinned.version}, pinned to its commit).\n`);
  if (pinned?.note) io.stdout.write(`\nNote: ${pinned.note}\n`);
  if (placeholder) {
    io.stdout.write(
      `\nIn both workflows, replace ${placeholder} with the forkflush repository and a release tag (or pass --action).\n`,
    );
  }
  // What the run reads: what init wrote, the files the grader, the agent and the protected list
  // name, and those the problems above say to write.
  const named = [...namedPaths(answers.grader), ...namedPaths(answers.agentCommand), ...answers.protected].filter(
    (p) => !/[*?[]/.test(p) && existsSync(join(root, p)),
  );
  // The untracked files the grader read (init's own are in the list anyway).
  const read = (watched.read ?? []).filter((f) => !f.startsWith('.github/') && !named.includes(f));
  if (read.length > 0)
    io.stdout.write(
      `\nthe grader read ${read.length === 1 ? 'a file' : `${read.length} files`} that git does not have yet: ${read.slice(0, 10).join(', ')}` +
        `${read.length > 10 ? `, and ${read.length - 10} more` : ''}.\nEpisodes are graded on the commit: the git add line below takes ${read.length === 1 ? 'it' : 'them'}.\n`,
    );
  const files = [
    ...new Set([
      '.github',
      ...['TASK.md', 'NOTES.md'].filter((f) => existsSync(join(root, f))),
      ...named,
      ...read,
      ...toWrite,
    ]),
  ];
  const git = here === '.' ? 'git' : `git -C ${shellQuote(here)}`;
  // Outside a repository the git add would fail: the steps start by making one.
  const inRepo = (await new Git(root).exec(['rev-parse', '--is-inside-work-tree'], { check: false })).exitCode === 0;
  io.stdout.write(
    `\nNext${problems > 0 ? ', once the problems above are fixed' : ''}: commit the task (episodes start from the last commit), then run it:\n` +
      (inRepo ? '' : `  git init ${shellQuote(here)}\n`) +
      `  ${git} add ${files.map(shellQuote).join(' ')} && ${git} commit -m "forkflush task"\n` +
      `  forkflush plan ${shellQuote(here)}\n  forkflush run ${shellQuote(here)}\n`,
  );
  if (v.github === true) io.stdout.write(githubSteps(answers.agent));
  return 0;
}

/**
 * The file of the task a command starts, if it names one: `./grade.sh`, `node grade.mjs`,
 * `python3 -u score.py`. Only its first simple command counts: after `cd dir &&` the file is
 * another folder's.
 */
/** What is left to do on GitHub once the task is committed (README, "On GitHub"). */
function githubSteps(agent: string): string {
  const cli = specOfName(agent)?.cli;
  const key = cli
    ? `${cli.secret.name} for ${agent} (${cli.secret.note})`
    : 'the keys your agent needs (give the forkflush step in forkflush.yml an env, as its comment shows)';
  return (
    '\nThen on GitHub (README, "On GitHub"):\n' +
    '  push the commit to the default branch: the app reads the config there, and GitHub runs the workflows from it\n' +
    '  add the repository secrets (Settings > Secrets and variables > Actions, or gh secret set NAME):\n' +
    `    ${key}\n` +
    "    FORKFLUSH_CONTEXT_KEY, which encrypts the agents' contexts: openssl rand -base64 32 | gh secret set FORKFLUSH_CONTEXT_KEY\n" +
    '  autoresearch.yml runs the app in Actions with GITHUB_TOKEN; for your own GitHub App (app.yml), install it on the\n' +
    '    repository and add the secrets FORKFLUSH_APP_ID and FORKFLUSH_APP_PRIVATE_KEY\n' +
    '  open an issue that describes the task, and label it autoresearch\n'
  );
}

/** The answers: from flags, else from questions on a terminal, else the defaults with --yes. */
async function ask(root: string, v: Parsed['values'], io: Io): Promise<Answers> {
  const tty = io.stdin?.isTTY === true && v.yes !== true;
  const rl = tty && io.stdin ? createInterface({ input: io.stdin, output: io.stdout }) : null;
  try {
    // An answer without a default: what it is, and the flag that gives it.
    type Needed = { what: string; flag: string };
    const question = async (given: string | undefined, text: string, fallback: string | Needed): Promise<string> => {
      if (given !== undefined) return given;
      const offered = typeof fallback === 'string' ? fallback : null;
      if (rl) {
        const answer = (await rl.question(`${text}${offered ? ` [${offered}]` : ''}: `)).trim();
        if (answer) return answer;
      }
      if (typeof fallback === 'string') return fallback;
      const otherwise = rl
        ? 'type one when asked'
        : `run init on a terminal${v.yes ? ' without --yes' : ''} to be asked`;
      throw new UserError(`no ${fallback.what} given: pass --${fallback.flag} '<command>' (or ${otherwise})`);
    };
    const s = (x: unknown) => (typeof x === 'string' ? x : undefined);
    const metric = await question(
      undefined,
      'What does the score measure (a sentence for TASK.md)?',
      'the score the grader prints',
    );
    const grader = await question(s(v.grader), 'The command that prints the score (its last line is the score)?', {
      what: 'grader',
      flag: 'grader',
    });
    const direction = await question(
      s(v.direction),
      'Is a higher score better (maximize) or a lower one (minimize)?',
      'maximize',
    );
    if (direction !== 'maximize' && direction !== 'minimize')
      throw new UserError(`--direction must be maximize or minimize, got "${direction}"`);
    const check = await question(undefined, 'A check that must pass before scoring (e.g. npm test), or none?', 'none');
    const agent = await question(s(v.agent), `The agent (${AGENT_KINDS.join(', ')})?`, 'command');
    if (!(AGENT_KINDS as readonly string[]).includes(agent))
      throw new UserError(`--agent must be one of ${AGENT_KINDS.join(', ')}, got "${agent}"`);
    const agentCommand =
      agent === 'command'
        ? await question(s(v['agent-command']), 'The command that runs one episode of your agent?', {
            what: 'agent command',
            flag: 'agent-command',
          })
        : (s(v['agent-command']) ?? '');
    const unit = await question(
      s(v.unit),
      `The budget's unit (${UNITS.join(', ')})?`,
      agent === 'command' ? 'tokens' : 'usd',
    );
    if (!(UNITS as readonly string[]).includes(unit))
      throw new UserError(`--unit must be one of ${UNITS.join(', ')}, got "${unit}"`);
    const budgetText = await question(
      s(v.budget),
      `The whole run's budget, in ${unit}?`,
      unit === 'usd' ? '20' : '400',
    );
    const budget = Number(budgetText);
    if (!(Number.isFinite(budget) && budget > 0))
      throw new UserError(`--budget must be a number above 0, got "${budgetText}"`);
    const named = [...namedPaths(grader), ...(check === 'none' ? [] : namedPaths(check))].filter((p) =>
      existsSync(join(root, p)),
    );
    const given = Array.isArray(v.protected) ? v.protected.filter((x): x is string => typeof x === 'string') : null;
    const protectedText = given
      ? given.join(', ')
      : await question(undefined, 'Paths the agent must not change (comma-separated)?', named.join(', ') || 'none');
    const protectedPaths =
      protectedText === 'none'
        ? []
        : protectedText
            .split(',')
            .map((p) => p.trim())
            .filter(Boolean);
    return {
      metric,
      grader,
      direction,
      check: check === 'none' ? '' : check,
      agent,
      agentCommand,
      budget,
      unit,
      protected: protectedPaths,
    };
  } finally {
    rl?.close();
  }
}

function yamlString(s: string): string {
  return JSON.stringify(s);
}

function configText(a: Answers): string {
  const command = a.check ? `${a.check} && ${a.grader}` : a.grader;
  const agent =
    a.agent === 'command'
      ? `  kind: command\n  # Runs one episode: the prompt on stdin, its context in $FORKFLUSH_CONTEXT_DIR (README, "The command agent").\n  command: ${yamlString(a.agentCommand)}\n`
      : `  kind: ${a.agent}\n${a.agentCommand ? `  command: ${yamlString(a.agentCommand)}\n` : ''}  # model: ...        # the CLI's default unless set\n`;
  return `# yaml-language-server: $schema=./autoresearch.schema.json
# forkflush's task config (README, "Every key"). Written by forkflush init; edit freely.
task: TASK.md
grader:
  # Run in a clean checkout of each episode's work; its last stdout line is the score.
  command: ${yamlString(command)}
  direction: ${a.direction}
  timeout: ${INIT_GRADER_TIMEOUT_SECONDS} # seconds per grading
  # Restored from the base before grading; an episode that changes one gets no score.
  protected: [${a.protected.map(yamlString).join(', ')}]
agent:
${agent}  timeout: ${AGENT_TIMEOUT_SECONDS} # seconds per episode, whatever the budget
budget:
  total: ${a.budget}
  unit: ${a.unit} # ${a.unit === 'usd' ? 'as the agent reports it, or priced by forkflush' : a.unit === 'tokens' ? 'as the agent reports them' : a.unit === 'minutes' ? 'wall time' : 'grader runs the agent asks for'}
# The paper's method and numbers (fork points, K = 4 branches, budgets) are the defaults.
strategy: fork-and-flush
`;
}

function taskText(a: Answers): string {
  return `# The task

${TASK_PLACEHOLDER}

## The score

${a.metric}. It is the last line that \`${a.grader}\` prints; ${a.direction === 'maximize' ? 'higher' : 'lower'} is better.
${a.check ? `\nBefore scoring, \`${a.check}\` must pass: a workspace that fails it gets no score.\n` : ''}`;
}

function notesText(): string {
  return `# Notes

The agents' journal: each episode reads it, adds what it tried and learned, and forkflush appends
one line per episode with its score.
`;
}

/** The workflows `init --github` writes (examples/workflows), in .github/workflows. */
export const GITHUB_WORKFLOWS = ['forkflush.yml', 'autoresearch.yml', 'autoresearch-tick.yml'];

/** The worker step's env for an agent with no key of its own (the command agent): an example. */
const COMMAND_ENV = `        # What your agent needs, from the repository's secrets: give this step an env, e.g.
        #   env:
        #     MY_KEY: \${{ secrets.MY_KEY }}
        # The agent gets the variables agent.env lists, never GITHUB_TOKEN or the runner's tokens.
`;

/**
 * A workflow as init writes it: the example, with the Action's reference and the agent's secret.
 * `version`: the tag `action`'s commit was pinned from, named in a comment after it.
 */
export async function workflowText(
  name: string,
  agent: string,
  action: string | null,
  version?: string,
): Promise<string> {
  let text = await readFile(packageFile('examples', 'workflows', name), 'utf8');
  if (action) {
    const [repo, ref] = action.split('@');
    const named = version ? ` # ${version}` : '';
    text = text
      .replace(
        /^( +)# Replace your-org\/forkflush[^\n]*\n(?: +#[^\n]*\n)?/m,
        `$1# forkflush at ${version ? `${version}, pinned to its commit` : action} (forkflush init --action).\n`,
      )
      .replace(/^( +- uses: )your-org\/forkflush@[\w.-]+$/m, `$1${action}${named}`)
      .replace(ACTION_PLACEHOLDER, action)
      .replaceAll('repository: your-org/forkflush', `repository: ${repo}`);
    if (ref) text = text.replace(/(repository: [^\n]+\n\s+ref: )\S+/, `$1${ref}${named}`);
  }
  if (name === 'forkflush.yml') {
    const secret = specOfName(agent)?.cli?.secret;
    text = secret
      ? text.replace(
          /^ {10}ANTHROPIC_API_KEY: \$\{\{ secrets\.ANTHROPIC_API_KEY \}\}$/m,
          `          ${secret.name}: \${{ secrets.${secret.name} }} # ${secret.note}`,
        )
      : // No key to name: an `env:` of comments alone would be null, which GitHub refuses.
        text.replace(/^ {8}env:\n(?: {10}[^\n]*\n)+/m, COMMAND_ENV);
  }
  return text;
}

/** A file of the forkflush package, from the running code (dist/ or src/cli/). */
function packageFile(...parts: string[]): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, ...parts))) return join(dir, ...parts);
    dir = dirname(dir);
  }
  throw new Error(`forkflush's ${parts.join('/')} is missing from its installation`);
}

const NO_SCORE_YET = 'That is fine for a task that starts from nothing; otherwise fix the grader before you run.';

/**
 * The grader run once on the workspace as it is (watching which untracked files it reads), and the
 * agent's command checked: the problems the run would stop at, said now, and the files they say to
 * write, which the git add of the next steps takes too.
 */
async function tryGraderAndAgent(answers: Answers, root: string, here: string, io: Io) {
  // Problems the run would stop at; files they say to write, which the git add below takes too.
  let problems = 0;
  const toWrite: string[] = [];

  io.stdout.write(`\ngrading the workspace as it is now: ${answers.grader}\n`);
  // Files git does not have that the grader reads must be committed too: runs grade the commit.
  const watched = await whileWatchingReads(root, await untrackedFiles(root), () =>
    runShell(answers.grader, {
      cwd: root,
      timeoutMs: INIT_GRADER_TIMEOUT_SECONDS * 1000,
      maxOutput: GRADER_OUTPUT_MAX_CHARS,
    }),
  );
  const g = watched.result;
  // Read as every grading of the run reads it.
  const reading = g.exitCode === 0 ? parseScore(g.stdout, g.outputCut ? GRADER_OUTPUT_MAX_CHARS : null) : null;
  if (reading?.score === null) io.stdout.write(`  no score yet (${reading.reason}). ${NO_SCORE_YET}\n`);
  else if (reading) io.stdout.write(`  score: ${reading.score}\n`);
  else {
    const why = g.spawnError ?? failureLine(g.stderr || g.stdout) ?? '';
    const how = `${g.stopped ? 'it timed out' : `exit ${g.exitCode}`}${why ? `: ${why}` : ''}`;
    const graderFile = fileItRuns(answers.grader);
    const missing = graderFile !== null && !existsSync(join(root, graderFile));
    if (missing) toWrite.push(graderFile);
    // No score is fine only from a grader that ran: one that cannot start would score no episode either.
    const cannot = missing
      ? `${join(here, graderFile)} does not exist (${how}).\n  Write it (the last line it prints is the score)`
      : g.spawnError || g.exitCode === 127
        ? `a program it runs is not found (${how}).\n  Install it or name it with its full path`
        : g.exitCode === 126
          ? `a file it runs is not executable (${how}).\n  chmod +x it, or run it through its interpreter`
          : null;
    if (cannot) problems++;
    io.stdout.write(
      cannot
        ? `  problem: the grader cannot run: ${cannot}, or correct grader.command in ${CONFIG_PATH}.\n`
        : `  no score yet (${how}). ${NO_SCORE_YET}\n`,
    );
  }
  const agentFile = answers.agentCommand ? fileItRuns(answers.agentCommand) : null;
  if (agentFile !== null && !existsSync(join(root, agentFile))) {
    // The run's pre-flight stops at it: say so now.
    problems++;
    toWrite.push(agentFile);
    io.stdout.write(
      `\nproblem: the agent cannot run: ${join(here, agentFile)}, which agent.command runs, does not exist.\n` +
        `Write it${answers.agent === 'command' ? ' (README, "The command agent")' : ''}, or correct agent.command in ${CONFIG_PATH}.\n`,
    );
  }
  return { problems, toWrite, watched };
}
