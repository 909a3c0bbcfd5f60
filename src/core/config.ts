// The public contract: `.github/autoresearch.yml`. One zod schema gives the defaults (the
// paper's, from method.ts), the validation, the TypeScript type and the published JSON Schema.
// Its messages are data of the schema: a value's rule carries its own wording, and a translator
// that reads only zod's public API (issues, `shape`, `unwrap()`, `in`, `options`) locates them.
// The sections' schemas are config-sections.ts; its error wording is config-errors.ts.
import { LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { EPISODES_PER_BUDGET_MAX } from './bounds.js';
import { fileItRuns } from './commands.js';
import { compareSchema } from './compare/config.js';
import { describeIssue, findOffset, mappingOf } from './config-errors.js';
import {
  agentSchema,
  budgetSchema,
  commandLine,
  forkSchema,
  graderSchema,
  limitsSchema,
  PULL_REQUESTS,
  promptsSchema,
  repoPath,
  SANDBOX_MODES,
  sandboxSchema,
  scheduleSchema,
  setupSchema,
  unlisted,
} from './config-sections.js';
import { matchesGlob, normalGlob } from './globs.js';
import { isRecord } from './json.js';
import { mapSchema } from './map/config.js';
import { MAX_BRANCHES, PAPER, STRATEGIES, UNITS, type Unit } from './method.js';

export const CONFIG_PATH = '.github/autoresearch.yml';
/** Where people put the config by mistake: forkflush names the file it found instead of saying there is none. */
export const CONFIG_MISNAMED = ['.github/autoresearch.yaml', 'autoresearch.yml', 'autoresearch.yaml'];

/** What to tell someone whose config is at a misnamed path. */
export function misnamedConfig(found: string): string {
  return `${found} is not read: forkflush reads ${CONFIG_PATH} (move or rename it there)`;
}

export {
  AGENT_KINDS,
  type AgentKind,
  type AgentSchema,
  insideRepository,
  PULL_REQUESTS,
  SANDBOX_MODES,
  type ScheduleConfig,
} from './config-sections.js';
export { STRATEGIES, UNITS, type Unit };

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
      // Past MAX_BRANCHES, fork.branches' own error says what to do.
      if (share > 1 + 1e-9 && c.fork.branches <= MAX_BRANCHES) {
        ctx.addIssue({
          code: 'custom',
          path: ['fork', 'branch_budget'],
          message:
            `${rounds} fork rounds x ${c.fork.branches} branches x ${c.fork.branch_budget} = ${round3(share)} of the budget, ` +
            `more than all of it; lower fork.branch_budget to at most ${Math.floor(1000 / (rounds * c.fork.branches)) / 1000}, ` +
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
        // The library's words for this one are advice to its caller.
        const what =
          e.code === 'MULTIPLE_DOCS'
            ? 'a second YAML document starts here (`---`), and the config is one: remove the line, or move what follows into the mapping above'
            : `not valid YAML: ${e.message.split('\n')[0]}`;
        return `${file}:${pos.line}:${pos.col}: ${what}`;
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
  const config = withDerivedDefaults(result.data);
  const episodes = config.budget.total / config.budget.episode;
  if (episodes > EPISODES_PER_BUDGET_MAX) {
    const { total, episode, unit } = config.budget;
    throw new ConfigError([
      `${locate(['budget', 'episode'])}: budget.episode: ${episode} ${unit} an episode makes ${Math.floor(episodes).toLocaleString('en-US')} episodes of budget.total (${total} ${unit}), more than the ${EPISODES_PER_BUDGET_MAX} a run may plan. ` +
        `budget.episode is an amount in ${unit}, not a share of the total (fork.branch_budget is a share): leave it out for the paper's ${PAPER.episodeBudget * total} ${unit}, or raise it`,
    ]);
  }
  const lessThanOne = wholeGradings(config);
  if (lessThanOne) throw new ConfigError([`${locate(lessThanOne.path)}: ${lessThanOne.message}`]);
  const journalGlob = config.grader.protected.find((g) => matchesGlob(config.journal, g));
  if (journalGlob !== undefined)
    throw new ConfigError([
      `${locate(['grader', 'protected'])}: grader.protected: ${JSON.stringify(journalGlob)} protects the journal (${config.journal}), which every episode's prompt asks the agent to write: ` +
        'every episode that did would get no score. Take the journal out of grader.protected (or name another file as journal)',
    ]);
  // Where forkflush reads its config (on GitHub, always): journal lines would make it YAML no more.
  if (config.journal === CONFIG_PATH)
    throw new ConfigError([
      `${locate(['journal'])}: journal: ${CONFIG_PATH} is the config file, which forkflush would append the agents' notes to: name another file`,
    ]);
  const nested = insideShared(config);
  if (nested)
    throw new ConfigError([
      `${locate(['sandbox', nested.key])}: sandbox.${nested.key}: ${nested.path} is inside sandbox.write's ${nested.shared}, where the agents write: one could make it a link to anywhere. Leave it out (${nested.shared} is shown whole), or name a folder outside it`,
    ]);
  const script = scriptAt(config, config.journal);
  if (script)
    throw new ConfigError([
      `${locate(['journal'])}: journal: ${config.journal} is the script ${script.key} runs (\`${script.command}\`), which forkflush would append the agents' notes to: name another file, such as NOTES.md`,
    ]);
  return config;
}

/** A sandbox.read or sandbox.write folder inside a sandbox.write one (by their names as written), if any. */
function insideShared(c: Config): { key: 'read' | 'write'; path: string; shared: string } | null {
  const name = (path: string) => path.replace(/\/+/g, '/').replace(/(.)\/$/, '$1');
  for (const key of ['read', 'write'] as const)
    for (const path of c.sandbox[key]) {
      const shared = c.sandbox.write.find((w) => name(path).startsWith(`${name(w)}/`));
      if (shared !== undefined) return { key, path, shared };
    }
  return null;
}

/** The command of the config that runs the file at `path` as its script (or program), if one does. */
function scriptAt(c: Config, path: string): { key: string; command: string } | null {
  const commands: [string, string | undefined][] = [
    ['grader.command', c.grader.command],
    ['agent.command', c.agent.command],
    ...c.setup.commands.map((command): [string, string] => ['setup', command]),
  ];
  const file = normalGlob(path);
  for (const [key, command] of commands) {
    const ran = command ? fileItRuns(command) : null;
    if (ran && normalGlob(ran) === file) return { key, command: command as string };
  }
  return null;
}

/**
 * With `unit: evaluations` an episode may grade at least once, so an allowance under one grading
 * would let its round spend past the budget (ten branches of 0.09 spend 10 of 3): refused.
 */
function wholeGradings(c: Config): { path: string[]; message: string } | null {
  if (c.budget.unit !== 'evaluations') return null;
  const { total, episode } = c.budget;
  const fork = c.strategy === 'fork-and-flush' || c.strategy === 'fork-only';
  const branch = c.fork.branch_budget * total;
  const raise = (share: number) => `raise budget.total to at least ${Math.ceil(1 / share - 1e-9)}`;
  if (fork && branch < 1 - 1e-9)
    return {
      path: ['fork', 'branch_budget'],
      message:
        `fork.branch_budget: ${c.fork.branch_budget} of budget.total (${total} evaluations) gives each branch ${round3(branch)} evaluations, less than one grading ` +
        `(each may grade once, so a round of ${c.fork.branches} would spend ${c.fork.branches}): ${raise(c.fork.branch_budget)}, or fork.branch_budget to at least ${round3(1 / total + 0.0005)}`,
    };
  if (episode < 1 - 1e-9)
    return {
      path: ['budget', 'episode'],
      message:
        `budget.episode: ${round3(episode)} evaluations an episode is less than one grading (each may grade once): set budget.episode to at least 1 ` +
        `(left out, it is ${PAPER.episodeBudget} of budget.total: then ${raise(PAPER.episodeBudget)})`,
    };
  return null;
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
