// The public contract: `.github/autoresearch.yml`. One zod schema gives the defaults (the
// paper's, from method.ts), the validation, the TypeScript type and the published JSON Schema.
// Its messages are data of the schema: a value's rule carries its own wording, and a translator
// that reads only zod's public API (issues, `shape`, `unwrap()`, `in`, `options`) locates them.
// (Over 400 lines: one schema for one file; its error wording is config-errors.ts.)
import { LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { compareSchema } from './compare-config.js';
import { describeIssue, findOffset, mappingOf } from './config-errors.js';
import { hostPatternProblem } from './egress.js';
import { mapSchema } from './map-config.js';
import {
  AGENT_TIMEOUT_SECONDS,
  EXTRA_ROUNDS,
  GRADER_TIMEOUT_SECONDS,
  MAX_BRANCHES,
  PAPER,
  RUNS_PER_REPO,
  SETUP_TIMEOUT_SECONDS,
  STRATEGIES,
} from './method.js';
import { coveredSecret, isForgeSecret } from './secrets.js';

export const CONFIG_PATH = '.github/autoresearch.yml';

export { STRATEGIES };
export const UNITS = ['usd', 'tokens', 'minutes', 'evaluations'] as const;
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
const unlisted = z.registry<{ reason: string }>();

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
const repoPath = z
  .string()
  .min(1)
  .refine((p) => insideRepository(p), { message: "must be a path inside the repository (relative, no '..')" });

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

const graderSchema = z.strictObject({
  command: z.string().min(1).describe('Shell command run in the workspace; its last stdout line is the score.'),
  direction: z.enum(['maximize', 'minimize']).default('maximize'),
  timeout: z.number().positive().default(GRADER_TIMEOUT_SECONDS).describe('Seconds one grading may take.'),
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

const agentSchema = z.strictObject({
  kind: z.enum(AGENT_KINDS).default('command'),
  command: z
    .string()
    .min(1)
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
  timeout: z
    .number()
    .positive()
    .default(AGENT_TIMEOUT_SECONDS)
    .describe('Hard wall-clock limit of one episode in seconds, whatever the budget unit.'),
  env: z
    .array(envName)
    .default([])
    .describe(
      "Environment variables passed to the agent, beyond PATH, HOME, the locale and its adapter's own (names, or prefixes with *).",
    ),
});

/** The agent section's schema: the map's judge (map-config.ts) takes the same keys. */
export type AgentSchema = typeof agentSchema;

/** A shell command line: not empty. */
const commandLine = z.string().min(1);

/**
 * What prepares a workspace before each episode, outside the agent's budget: its commands, run in
 * the workspace before the agent and again in the judge's clean checkout before grading.
 */
const setupSchema = z.strictObject({
  commands: z
    .array(commandLine)
    .default([])
    .describe(
      "Shell commands run in order in the episode's workspace before the agent starts, and in the judge's clean checkout before grading (npm ci, pip install -r requirements.txt). What they make that git does not track is not part of the episode's result.",
    ),
  timeout: z
    .number()
    .positive()
    .default(SETUP_TIMEOUT_SECONDS)
    .describe(`Seconds all the commands together may take, each time setup runs; default ${SETUP_TIMEOUT_SECONDS}.`),
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

const sandboxSchema = z.strictObject({
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

const budgetSchema = z.strictObject({
  total: z.number().positive().describe('The whole run spends this much, in `unit`.'),
  unit: z.enum(UNITS).default('usd'),
  episode: z.number().positive().optional().describe(`One serial episode; default ${PAPER.episodeBudget} of total.`),
});

const forkSchema = z.strictObject({
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

const promptsSchema = z.strictObject({
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
const scheduleSchema = z
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
const limitsSchema = z.strictObject({
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

export const configSchema = z
  .strictObject({
    $schema: z.string().optional().register(unlisted, { reason: "for editors: the JSON Schema's address" }),
    task: repoPath.default('TASK.md').describe('File in the repository that describes the task.'),
    grader: graderSchema,
    agent: agentSchema,
    setup: z
      .union([commandLine, z.array(commandLine), setupSchema])
      .default([])
      .transform((s) =>
        setupSchema.parse(typeof s === 'string' ? { commands: [s] } : Array.isArray(s) ? { commands: s } : s),
      )
      .describe(
        "Commands that prepare the workspace before each episode (outside the agent's budget), and the judge's checkout before grading: a command, a list of them, or a mapping with commands, timeout, network, env and cache.",
      ),
    budget: budgetSchema,
    strategy: z.enum(STRATEGIES).default('fork-and-flush'),
    fork: forkSchema.default(forkSchema.parse({})),
    journal: repoPath.default('NOTES.md'),
    prompts: promptsSchema.default({}),
    schedule: z
      .union([z.enum(['none', 'nightly']), scheduleSchema])
      .default('none')
      .describe(
        'On GitHub, the rounds after the plan, from a budget of their own: a mapping with budget, and nightly (one fork round of the leader a night) with until or rounds. "none": only rounds asked for with /autoresearch fork, up to budget.total more. ("nightly" alone is what older runs recorded: new configs give the mapping.)',
      ),
    pull_requests: z
      .enum(PULL_REQUESTS)
      .default('final')
      .describe(
        "On GitHub, which pull requests a run opens. final (the default): one, the run's result, as a draft; episodes' work stays on refs under refs/forkflush/ that no workflow triggers on. winners or episodes: every episode is also a branch (which the repository's push workflows see), and the winner of each fork round, or every episode, gets a pull request into the lineage branch. Every episode gets a check run with its score whatever this says.",
      ),
    limits: limitsSchema.default(limitsSchema.parse({})),
    compare: compareSchema.optional(),
    map: mapSchema(agentSchema).optional(),
    sandbox: z
      .union([z.enum(SANDBOX_MODES), sandboxSchema])
      .default('auto')
      .transform((s): z.output<typeof sandboxSchema> => (typeof s === 'string' ? { mode: s, read: [], write: [] } : s))
      .describe('How episodes are confined: auto, required or off, or a mapping with mode, read, write and network.'),
  })
  .superRefine((c, ctx) => {
    if (c.agent.kind === 'command' && c.agent.command === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['agent', 'command'],
        message: 'agent.command is required for agent.kind "command" (the shell command that runs one episode)',
      });
    }
    const m = c.map;
    if (m?.unit && m.unit !== c.budget.unit && m.unit !== 'minutes' && m.budget === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['map', 'budget'],
        message: `map.budget is required when map.unit (${m.unit}) is not budget.unit (${c.budget.unit}): the most the map's judge may spend, in ${m.unit}`,
      });
    }
    const at = c.fork.at;
    for (let i = 1; i < at.length; i++) {
      if ((at[i] as number) <= (at[i - 1] as number)) {
        ctx.addIssue({
          code: 'custom',
          path: ['fork', 'at', i],
          message: `fork.at must increase: fork.at[${i}] is ${at[i]}, not above fork.at[${i - 1}] = ${at[i - 1]}`,
        });
      }
    }
    if (c.fork.directives !== undefined && c.fork.directives > c.fork.branches) {
      ctx.addIssue({
        code: 'custom',
        path: ['fork', 'directives'],
        message: `fork.directives must be at most fork.branches (${c.fork.branches}), got ${c.fork.directives}`,
      });
    }
    if (c.budget.episode !== undefined && c.budget.episode > c.budget.total) {
      ctx.addIssue({
        code: 'custom',
        path: ['budget', 'episode'],
        message: `budget.episode must be at most budget.total (${c.budget.total}), got ${c.budget.episode}`,
      });
    }
    if (c.strategy === 'fork-and-flush' || c.strategy === 'fork-only') {
      const rounds = 1 + at.length;
      const share = rounds * c.fork.branches * c.fork.branch_budget;
      if (share > 1 + 1e-9) {
        ctx.addIssue({
          code: 'custom',
          path: ['fork', 'branch_budget'],
          message:
            `${rounds} fork rounds x ${c.fork.branches} branches x ${c.fork.branch_budget} = ${round3(share)} of the budget, ` +
            `more than all of it; lower fork.branch_budget to at most ${round3(1 / (rounds * c.fork.branches))}, ` +
            'or use fewer branches or fork points',
        });
      }
    }
  });

export type ConfigInput = z.input<typeof configSchema>;
type ParsedConfig = z.output<typeof configSchema>;
/** A validated config, with every default filled in. */
export type Config = Omit<ParsedConfig, 'budget' | 'fork'> & {
  budget: ParsedConfig['budget'] & { episode: number };
  fork: ParsedConfig['fork'] & { directives: number };
};
export type Strategy = (typeof STRATEGIES)[number];
export type Unit = (typeof UNITS)[number];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
  }
}

/** Overrides from the command line, checked by the CLI before they get here. */
export interface ConfigOverrides {
  strategy?: Strategy;
  budget?: number;
  branches?: number;
  /** agent.model (GitHub's per-run overrides, core/run-overrides.ts). */
  model?: string;
}

/** Parses and validates the YAML text of a config; throws ConfigError with located messages. */
export function parseConfig(text: string, file: string, overrides: ConfigOverrides = {}): Config {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => {
        const pos = lineCounter.linePos(e.pos[0]);
        return `${file}:${pos.line}:${pos.col}: not valid YAML: ${e.message.split('\n')[0]}`;
      }),
    );
  }
  const raw: unknown = doc.toJS() ?? {};
  if (typeof raw !== 'object' || Array.isArray(raw) || raw === null) {
    throw new ConfigError([`${file}:1:1: the config must be a mapping of keys (grader, agent, budget, ...)`]);
  }
  const input = applyOverrides(raw as Record<string, unknown>, overrides);
  const locate = (path: PropertyKey[], key?: string) => {
    const offset = findOffset(doc.contents, path, key);
    const pos = lineCounter.linePos(offset);
    return `${file}:${pos.line}:${pos.col}`;
  };
  // Runs recorded before schedule had a budget said only "nightly" (the schema still reads them);
  // a config now says what the nightly rounds may spend, and until when.
  if (input.schedule === 'nightly') {
    throw new ConfigError([
      `${locate(['schedule'])}: schedule: nightly needs a budget and an end: write it as a mapping, e.g. schedule: { nightly: true, budget: ${formatBudget(input)}, rounds: 7 } (or until: YYYY-MM-DD instead of rounds)`,
    ]);
  }
  const result = configSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => describeIssue(issue, input, locate, validKeysAt));
    // In the file's order, as a reader fixes them.
    const at = (m: string) => /^:(\d+):(\d+)/.exec(m.slice(file.length))?.slice(1).map(Number) ?? [0, 0];
    problems.sort((a, b) => (at(a)[0] ?? 0) - (at(b)[0] ?? 0) || (at(a)[1] ?? 0) - (at(b)[1] ?? 0));
    throw new ConfigError(problems);
  }
  return withDerivedDefaults(result.data);
}

/** The defaults that depend on other fields: the episode size and the number of directives. */
export function withDerivedDefaults(c: ParsedConfig): Config {
  return {
    ...c,
    budget: { ...c.budget, episode: c.budget.episode ?? PAPER.episodeBudget * c.budget.total },
    fork: { ...c.fork, directives: c.fork.directives ?? Math.min(PAPER.directives, c.fork.branches) },
  };
}

function applyOverrides(raw: Record<string, unknown>, o: ConfigOverrides): Record<string, unknown> {
  const out: Record<string, unknown> = { ...raw };
  if (o.strategy !== undefined) out.strategy = o.strategy;
  if (o.budget !== undefined) {
    const budget = isRecord(raw.budget) ? { ...raw.budget } : {};
    // A new total rescales a relative default, so drop an episode size that no longer fits.
    if (typeof budget.episode === 'number' && budget.episode > o.budget) delete budget.episode;
    out.budget = { ...budget, total: o.budget };
  }
  if (o.branches !== undefined) {
    const fork = isRecord(raw.fork) ? { ...raw.fork } : {};
    out.fork = { ...fork, branches: o.branches };
  }
  if (o.model !== undefined) out.agent = { ...(isRecord(raw.agent) ? raw.agent : {}), model: o.model };
  return out;
}

/** A budget to suggest: the run's own total, else 10. */
function formatBudget(input: Record<string, unknown>): number {
  const total = isRecord(input.budget) ? input.budget.total : undefined;
  return typeof total === 'number' && total > 0 ? total : 10;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The keys the schema allows at a path (for "did you mean" and the list of valid keys). */
export function validKeysAt(path: readonly PropertyKey[]): string[] {
  let object = mappingOf(configSchema);
  for (const p of path) {
    const field = typeof p === 'string' ? object?.shape[p] : undefined;
    object = field === undefined ? undefined : mappingOf(field);
  }
  if (!object) return [];
  return Object.entries(object.shape)
    .filter(([, field]) => !unlisted.has(field))
    .map(([key]) => key);
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** The JSON Schema published for editors (`npm run schema` writes it to schema/autoresearch.schema.json). */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { io: 'input', target: 'draft-7' }) as Record<string, unknown>;
  return {
    title: 'forkflush: .github/autoresearch.yml',
    ...schema,
  };
}
