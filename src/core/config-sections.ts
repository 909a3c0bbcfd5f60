import { z } from 'zod';
import { TIMEOUT_MAX_SECONDS } from './bounds.js';
import { hostPatternProblem } from './egress.js';
import {
  AGENT_TIMEOUT_SECONDS,
  EXTRA_ROUNDS,
  GRADER_TIMEOUT_SECONDS,
  MAX_BRANCHES,
  PAPER,
  RUNS_PER_REPO,
  SETUP_TIMEOUT_SECONDS,
  UNITS,
} from './method.js';
import { coveredSecret, isForgeSecret } from './secrets.js';

/** The agent kinds' names: each has its spec in src/agents/specs.ts (which does not compile without it). */
export const AGENT_KINDS = [
  'command',
  'claude-code',
  'codex',
  'copilot',
  'gemini',
  'aider',
  'opencode',
  'qwen-code',
] as const;
export type AgentKind = (typeof AGENT_KINDS)[number];
export const SANDBOX_MODES = ['auto', 'required', 'off'] as const;
export const PULL_REQUESTS = ['episodes', 'winners', 'final'] as const;

/**
 * Keys the schema accepts but never suggests or lists in a message ("did you mean", "Valid keys"),
 * each with the reason.
 */
export const unlisted = z.registry<{ reason: string }>();

// A message the schema gives a value is a predicate about it, starting with "must" or "names": the
// translator puts the key before it and what was found after it ("fork.at[1] must be between 0 and 1
// (exclusive), got 1.5"). A message that does not start so is a whole sentence (the checks across fields).

/** A fraction of the budget spent, strictly inside it: a fork point. */
const FRACTION = 'must be between 0 and 1 (exclusive)';
const fraction = z.number().gt(0, FRACTION).lt(1, FRACTION);

/** A share of the budget that may be all of it: a branch's. */
const SHARE = 'must be a fraction above 0 and at most 1';
const share = z.number().gt(0, SHARE).max(1, SHARE);

/**
 * A file forkflush reads or writes in the repository: relative, inside it. forkflush writes the
 * journal itself, so `..` or an absolute path would let a config write anywhere.
 */
export const repoPath = z
  .string()
  .min(1)
  .refine((p) => insideRepository(p), { message: "must be a path inside the repository (relative, no '..')" })
  .refine((p) => !p.split(/[\\/]/).some((part) => part.toLowerCase() === '.git'), {
    message: 'must not be inside .git, where git keeps no file of the repository',
  });

/** A glob of repository paths (git pathspec glob syntax), inside the repository too. */
const repoGlob = repoPath;

/** A path on this machine, for the sandbox: absolute, or ~/ for the home folder. */
const hostPath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith('/') || p === '~' || p.startsWith('~/'), {
    message: 'must be an absolute path or start with ~/',
  });

/** An environment variable name, or a prefix ending in * (ANTHROPIC_*). */
const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/, { message: 'must be a variable name, or a prefix ending in * (AWS_*)' })
  .superRefine((n, ctx) => {
    const covered = n.endsWith('*') ? coveredSecret(n.slice(0, -1)) : isForgeSecret(n) ? n : null;
    if (covered)
      ctx.addIssue({
        code: 'custom',
        message:
          n === covered
            ? 'names a forge credential or a forkflush variable, which forkflush never passes on'
            : `names a prefix that covers ${covered}, a forge credential or a forkflush variable, which forkflush never passes on: list the names the program needs`,
      });
  });

export function insideRepository(path: string): boolean {
  if (path.startsWith('/') || path.startsWith('\\') || /^[A-Za-z]:/.test(path)) return false;
  return !path.split(/[\\/]/).some((part) => part === '..');
}

/** A timeout in seconds: positive, and at most TIMEOUT_MAX_SECONDS (a week). */
const timeoutSeconds = (fallback: number) => z.number().positive().max(TIMEOUT_MAX_SECONDS).default(fallback);

// Blank is empty: a shell given only spaces runs nothing and exits 0.
export const commandLine = z.string().regex(/\S/, 'must not be empty');

export const graderSchema = z.strictObject({
  command: commandLine.describe('Shell command run in the workspace; its last stdout line is the score.'),
  direction: z.enum(['maximize', 'minimize']).default('maximize'),
  timeout: timeoutSeconds(GRADER_TIMEOUT_SECONDS).describe('Seconds one grading may take.'),
  protected: z
    .array(repoGlob)
    .default([])
    .describe('Globs restored from the lineage base before grading; an episode that changed them gets no score.'),
  network: z
    .boolean()
    .default(false)
    .describe('Whether the grader may use the network (in the sandbox it has only loopback otherwise).'),
  env: z
    .array(envName)
    .default([])
    .describe(
      'Environment variables passed to the grader, beyond PATH, HOME and the locale (names, or prefixes with *).',
    ),
});

export const agentSchema = z.strictObject({
  kind: z.enum(AGENT_KINDS).default('command'),
  command: commandLine
    .optional()
    .describe(
      'kind "command": the shell command run in the workspace (required). Other kinds: the executable, if not on PATH.',
    ),
  model: z.string().min(1).optional().describe('The model the agent CLI uses (passed through).'),
  args: z.array(z.string()).default([]).describe('Extra arguments passed through to the agent CLI.'),
  max_turns: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Most model turns in one episode, where the agent supports it.'),
  timeout: timeoutSeconds(AGENT_TIMEOUT_SECONDS).describe(
    'Hard wall-clock limit of one episode in seconds, whatever the budget unit.',
  ),
  env: z
    .array(envName)
    .default([])
    .describe(
      "Environment variables passed to the agent, beyond PATH, HOME, the locale and its adapter's own (names, or prefixes with *).",
    ),
});

/** The agent section's schema: the map's judge (map/config.ts) takes the same keys. */
export type AgentSchema = typeof agentSchema;

/** A shell command line: not empty. */

/**
 * What prepares a workspace before each episode, outside the agent's budget: its commands, run in
 * the workspace before the agent and again in the judge's clean checkout before grading.
 */
export const setupSchema = z.strictObject({
  commands: z
    .array(commandLine)
    .default([])
    .describe(
      "Shell commands run in order in the episode's workspace before the agent starts, and in the judge's clean checkout before grading (npm ci, pip install -r requirements.txt). What they make that git does not track is not part of the episode's result.",
    ),
  timeout: timeoutSeconds(SETUP_TIMEOUT_SECONDS).describe(
    `Seconds all the commands together may take, each time setup runs; default ${SETUP_TIMEOUT_SECONDS}.`,
  ),
  network: z
    .boolean()
    .default(true)
    .describe(
      'Whether setup may use the network (to download dependencies); in the sandbox it has only loopback otherwise.',
    ),
  env: z
    .array(envName)
    .default([])
    .describe(
      'Environment variables passed to setup, beyond PATH and the locale (names, or prefixes with *); forge tokens are refused.',
    ),
  cache: z
    .boolean()
    .default(false)
    .describe(
      'Locally: copy what setup made for a base commit into the other workspaces of the same base instead of running it again. Only for outputs that still work when copied to another folder (node_modules does, a Python virtualenv does not). The judge always runs setup afresh.',
    ),
});

/** A host the agent may connect to through forkflush's proxy (core/egress.ts). */
const hostPattern = z.string().superRefine((p, ctx) => {
  const problem = hostPatternProblem(p);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * Where the agent may connect (sandbox.network). Optional, with no default written: a run that
 * does not set it reads the same with a worker that predates the key.
 */
const networkSchema = z
  .union([
    z.enum(['none'], { message: 'must be "none", or a mapping with allow (a list of hosts)' }),
    z.strictObject({
      allow: z
        .array(hostPattern)
        .default([])
        .describe(
          "Hosts the agent may reach besides its kind's own: names (api.example.com), *.domain, * for any public host, or addresses; with :port, or ports 443 and 80.",
        ),
    }),
  ])
  .optional()
  .describe(
    "Where the agent may connect, through forkflush's proxy: by default its kind's API and login hosts and the package registries setup names; a mapping with allow adds hosts; none allows nothing but the model calls forkflush forwards with the key.",
  );

export const sandboxSchema = z.strictObject({
  mode: z
    .enum(SANDBOX_MODES)
    .default('auto')
    .describe('auto: confine episodes where bubblewrap works; required: refuse to run without it; off: no sandbox.'),
  read: z
    .array(hostPath)
    .default([])
    .describe('Paths outside the workspace the agent and the grader may read (a dataset, a toolchain in ~).'),
  write: z
    .array(hostPath)
    .default([])
    .describe('Paths outside the workspace the agent (not the judge) may write, shared by all episodes.'),
  network: networkSchema,
});

export const budgetSchema = z.strictObject({
  total: z.number().positive().describe('The whole run spends this much, in `unit`.'),
  unit: z.enum(UNITS).default('usd'),
  episode: z.number().positive().optional().describe(`One serial episode; default ${PAPER.episodeBudget} of total.`),
});

export const forkSchema = z.strictObject({
  branches: z.number().int().min(1).max(MAX_BRANCHES).default(PAPER.branches).describe('K: branches per fork round.'),
  at: z
    .array(fraction)
    .default([...PAPER.forkAt])
    .describe('Fork points, as fractions of the total budget spent.'),
  branch_budget: share.default(PAPER.branchBudget).describe('Each branch, as a fraction of total.'),
  directives: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      `Branches per fork round told to try a substantially different approach; default ${PAPER.directives} (at most K).`,
    ),
  losers: z
    .enum(['drop', 'journal'])
    .optional()
    .describe(
      'What the branches that lost a fork round leave: "drop" (default, the paper) discards them whole; "journal" appends the entries each added to its journal (quoted, bounded) to the journal of the lineage that goes on from the winner.',
    ),
});

export const promptsSchema = z.strictObject({
  branch: repoPath.optional().describe('File with the template for a fresh-context episode.'),
  continuation: repoPath.optional().describe('File with the template for a carried-context episode.'),
});

/** A day, YYYY-MM-DD (UTC): the last day a schedule runs. */
const DAY = 'must be a date, YYYY-MM-DD';
const day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, DAY)
  .refine(
    (d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d),
    {
      message: DAY,
    },
  );

/**
 * On GitHub, the rounds after the plan: one fork round of the leader a night, and those a writer or
 * a review asks for (`/autoresearch fork`), all from one budget of their own, with an end.
 */
export const scheduleSchema = z
  .strictObject({
    nightly: z
      .boolean()
      .default(false)
      .describe('Fork the leader into one more round every night once the plan is done (needs until or rounds).'),
    budget: z
      .number()
      .positive()
      .describe(
        'What all rounds after the plan may spend together (nightly and asked-for ones), in budget.unit, on top of budget.total.',
      ),
    until: day.optional().describe('The last day (YYYY-MM-DD, UTC) a round after the plan may start.'),
    rounds: z.number().int().min(1).optional().describe('How many rounds after the plan may run in all.'),
  })
  .superRefine((s, ctx) => {
    if (s.nightly && s.until === undefined && s.rounds === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nightly'],
        message:
          'schedule.nightly needs an end: add schedule.until (the last day, YYYY-MM-DD) or schedule.rounds (how many rounds in all)',
      });
    }
  });

export type ScheduleConfig = z.output<typeof scheduleSchema>;

/** On GitHub: how much one repository and one run may start. */
export const limitsSchema = z.strictObject({
  runs_per_repo: z
    .number()
    .int()
    .min(1)
    .default(RUNS_PER_REPO)
    .describe(`Runs that may be running at once in the repository; default ${RUNS_PER_REPO}.`),
  rounds: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      `Rounds one run may open, nightly and requested ones included; default the most its schedule may open + ${EXTRA_ROUNDS}.`,
    ),
});
