// The command line's grammar: every command with its own flags, usage and examples, and the
// parser that holds each command to its flags. The help texts are made from the same table.
import { parseArgs } from 'node:util';
import { AGENT_KINDS, STRATEGIES, UNITS } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { closest } from '../core/text.js';

interface Flag {
  type: 'string' | 'boolean';
  /** The value's name in the help ("N", "FILE"); booleans have none. */
  value?: string;
  short?: string;
  help: string;
  /** May be given more than once (a list). */
  multiple?: boolean;
}

const FLAGS = {
  config: { type: 'string', value: 'FILE', help: 'the config file (default: DIR/.github/autoresearch.yml)' },
  strategy: { type: 'string', value: 'NAME', help: STRATEGIES.join(' | ') },
  budget: { type: 'string', value: 'N', help: "the total budget, in the config's unit" },
  branches: { type: 'string', value: 'K', help: 'branches per fork round (best-of-n: lineages)' },
  seed: { type: 'string', value: 'N', help: "the seed of every random choice and of each episode's FORKFLUSH_SEED" },
  concurrency: { type: 'string', value: 'N', help: 'episodes at once (default: K); for map, judge calls at once' },
  'keep-rejected': { type: 'boolean', help: 'keep the branches of rejected episodes' },
  'dry-run': { type: 'boolean', help: 'check everything and print the plan; start no agent' },
  smoke: {
    type: 'boolean',
    help: 'start the agent once on a tiny prompt, in the sandbox, and print its answer; no run',
  },
  run: { type: 'string', value: 'ID', help: 'the run (default: the newest)' },
  compare: { type: 'string', value: 'ID', help: 'the compare (or probe) to map (default: the newest compare)' },
  json: { type: 'boolean', help: 'print JSON (its shape: README, "JSON output")' },
  grader: { type: 'string', value: 'CMD', help: 'the command that prints the score' },
  direction: { type: 'string', value: 'D', help: 'maximize | minimize' },
  agent: { type: 'string', value: 'KIND', help: AGENT_KINDS.join(' | ') },
  'agent-command': { type: 'string', value: 'CMD', help: 'the command of a command agent, or the CLI to run' },
  unit: { type: 'string', value: 'U', help: UNITS.join(' | ') },
  protected: { type: 'string', value: 'GLOB', multiple: true, help: 'a path the agent must not change (repeatable)' },
  yes: { type: 'boolean', short: 'y', help: 'take the default for every question not answered by a flag' },
  github: { type: 'boolean', help: 'also write the two workflow files for GitHub' },
  force: { type: 'boolean', help: 'overwrite files that exist' },
  action: { type: 'string', value: 'REPO@REF', help: 'the forkflush Action the workflows use (with --github)' },
  strategies: { type: 'string', value: 'LIST', help: 'strategies to compare, comma-separated (default: all five)' },
  seeds: { type: 'string', value: 'N', help: 'runs per strategy, seed i the same for every strategy (default 5)' },
  variant: {
    type: 'string',
    value: 'NAME=KEY=VALUE,...',
    multiple: true,
    help: 'a config variant to compare, e.g. one-fork=fork.at=[0.5] (repeatable; replaces compare.variants)',
  },
  resume: { type: 'boolean', help: 'continue the newest unfinished one, as it was planned' },
  runs: { type: 'string', value: 'N', help: 'independent single runs (default 4)' },
  'budget-each': {
    type: 'string',
    value: 'B',
    help: 'the budget of each probe run (default: two episodes of the planned run)',
  },
  help: { type: 'boolean', short: 'h', help: 'this text' },
} satisfies Record<string, Flag>;

export type FlagName = keyof typeof FLAGS;

export interface CommandSpec {
  name: string;
  args: string;
  summary: string;
  flags: FlagName[];
  examples: string[];
}

const RUN_FLAGS: FlagName[] = ['config', 'strategy', 'budget', 'branches'];

export const COMMANDS: CommandSpec[] = [
  {
    name: 'run',
    args: '[DIR]',
    summary: 'run the whole plan on the git repository DIR (default: .)',
    flags: [...RUN_FLAGS, 'seed', 'concurrency', 'keep-rejected', 'dry-run', 'smoke'],
    examples: [
      'forkflush run .',
      'forkflush run . --budget 20 --branches 3',
      'forkflush run . --dry-run',
      'forkflush run . --smoke',
    ],
  },
  {
    name: 'plan',
    args: '[DIR]',
    summary: 'print the plan: phases, branches, budget each, cumulative spend',
    flags: [...RUN_FLAGS, 'json'],
    examples: ['forkflush plan .', 'forkflush plan . --strategy best-of-n --json'],
  },
  {
    name: 'status',
    args: '[DIR]',
    summary: 'show the newest run of DIR (or --run ID): live, interrupted or finished',
    flags: ['run', 'json'],
    examples: ['forkflush status .', 'forkflush status . --json'],
  },
  {
    name: 'resume',
    args: '[DIR]',
    summary: 'continue an interrupted run without redoing finished episodes',
    flags: ['run'],
    examples: ['forkflush resume .', 'forkflush resume . --run 20261130-101500'],
  },
  {
    name: 'init',
    args: '[DIR]',
    summary: 'set up a task in DIR: the config, TASK.md, NOTES.md, and with --github the workflows',
    flags: [
      'grader',
      'direction',
      'agent',
      'agent-command',
      'budget',
      'unit',
      'protected',
      'yes',
      'github',
      'action',
      'force',
    ],
    examples: [
      'forkflush init',
      "forkflush init . --grader 'node grade.mjs' --agent claude-code --budget 20 --unit usd --yes",
    ],
  },
  {
    name: 'compare',
    args: '[DIR]',
    summary: 'run strategies x seeds at equal budget and report as the paper does (table, chart, significance)',
    flags: [
      'config',
      'strategies',
      'seeds',
      'seed',
      'budget',
      'branches',
      'variant',
      'concurrency',
      'resume',
      'dry-run',
      'json',
    ],
    examples: [
      'forkflush compare .',
      'forkflush compare . --strategies fork-and-flush,single-run --seeds 3 --budget 200',
      "forkflush compare . --strategies fork-and-flush --variant two-forks=fork.at='[0.33,0.66]' --variant one-fork=fork.at='[0.5]'",
      'forkflush compare . --resume',
    ],
  },
  {
    name: 'probe',
    args: '[DIR]',
    summary:
      'will forking help? short single runs (each a fraction of --budget, the run you plan), their spread, advice',
    flags: ['config', 'runs', 'budget-each', 'budget', 'seed', 'concurrency', 'resume', 'dry-run', 'json'],
    examples: [
      'forkflush probe .',
      'forkflush probe . --budget 20 --runs 6',
      'forkflush probe . --budget-each 5 --json',
    ],
  },
  {
    name: 'map',
    args: '[DIR]',
    summary:
      "the idea map of a compare (default: the newest) or a run: where the agents searched, its basins, the forks' jumps",
    flags: ['run', 'compare', 'config', 'concurrency', 'dry-run', 'json'],
    examples: [
      'forkflush map .',
      'forkflush map . --run 20261130-101500',
      'forkflush map . --compare compare-20261130-101500 --dry-run',
    ],
  },
  {
    name: 'schema',
    args: '',
    summary: 'print the JSON Schema of .github/autoresearch.yml',
    flags: [],
    examples: ['forkflush schema > autoresearch.schema.json'],
  },
  {
    name: 'help',
    args: '[COMMAND]',
    summary: 'this text, or the help of one command',
    flags: [],
    examples: ['forkflush help run'],
  },
];

/** The help of the whole CLI. */
export function usage(version: string): string {
  const width = Math.max(...COMMANDS.map((c) => `${c.name} ${c.args}`.length));
  const lines = COMMANDS.map((c) => `  forkflush ${`${c.name} ${c.args}`.padEnd(width)}  ${c.summary}`);
  return `forkflush ${version}: run an AI coding agent with the fork-and-flush method

Usage:
${lines.join('\n')}

Options everywhere:
  -h, --help       help (of a command: forkflush help COMMAND, or forkflush COMMAND --help)
  -V, --version    the version

Run forkflush help COMMAND for its flags and examples.
`;
}

/** The help of one command: its flags only, with examples. */
export function commandUsage(c: CommandSpec): string {
  const flags = c.flags.map((name) => {
    const f: Flag = FLAGS[name];
    const left = `${f.short ? `-${f.short}, ` : ''}--${name}${f.value ? ` ${f.value}` : ''}`;
    return [left, f.help] as const;
  });
  const width = Math.max(16, ...flags.map(([l]) => l.length));
  const list = flags.map(([l, h]) => `  ${l.padEnd(width)}  ${h}`).join('\n');
  return `forkflush ${c.name}: ${c.summary}

Usage:
  forkflush ${c.name}${c.args ? ` ${c.args}` : ''}${c.flags.length > 0 ? ' [flags]' : ''}
${c.flags.length > 0 ? `\nFlags:\n${list}\n` : ''}
Examples:
${c.examples.map((e) => `  ${e}`).join('\n')}
`;
}

export interface Parsed {
  command: CommandSpec | null;
  positionals: string[];
  values: Partial<Record<FlagName, string | boolean | string[]>>;
  help: boolean;
  version: boolean;
}

/** Parses argv: the command first, then only that command's flags (a negative number is a value). */
export function parseCommandLine(argv: string[]): Parsed {
  const first = argv.find((a) => !a.startsWith('-'));
  const command = first === undefined ? null : (COMMANDS.find((c) => c.name === first) ?? null);
  if (first !== undefined && !command) {
    const names = COMMANDS.map((c) => c.name);
    const guess = closest(first, names);
    throw new UserError(
      `unknown command "${first}"${guess ? `; did you mean "${guess}"?` : ''}: use ${names.join(', ')} (see forkflush --help)`,
    );
  }
  const allowed: FlagName[] = [...(command?.flags ?? []), 'help'];
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {
    version: { type: 'boolean', short: 'V' },
  };
  for (const name of allowed) {
    const f: Flag = FLAGS[name];
    options[name] = { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: joinNegativeValues(argv, options),
      allowPositionals: true,
      strict: true,
      options,
      tokens: true,
    });
  } catch (e) {
    const message = (e as Error).message.split('\n')[0] ?? '';
    const flag = /'(-[^']+)'/.exec(message)?.[1];
    const where = command ? `forkflush ${command.name}` : 'forkflush';
    const help = command ? `forkflush help ${command.name}` : 'forkflush --help';
    if (flag && /Unknown option/.test(message)) {
      const guess = flag.startsWith('--')
        ? closest(flag.slice(2).split('=')[0] ?? '', Object.keys(options))
        : undefined;
      throw new UserError(`${where} has no flag ${flag}${guess ? `; did you mean --${guess}?` : ''} (see ${help})`);
    }
    // node's "Option '--budget <value>' argument missing": said in forkflush's words.
    const missing = /^Option '(-\S+)(?:, (--\S+))? <value>' argument missing/.exec(message);
    if (missing) {
      const name = missing[2] ?? missing[1];
      const value = (FLAGS[name?.replace(/^--/, '') as FlagName] as Flag | undefined)?.value ?? 'VALUE';
      throw new UserError(`${name} needs a value: ${name} ${value} (see ${help})`);
    }
    throw new UserError(`${message} (see ${help})`);
  }
  const values = parsed.values as Parsed['values'] & { version?: boolean };
  // A flag given twice with two values (an edited command line, a script's default and the user's):
  // node's parser keeps the last without a word, so a run could spend the budget the user replaced.
  const given = new Map<string, string>();
  for (const t of parsed.tokens ?? []) {
    if (t.kind !== 'option' || options[t.name]?.type !== 'string' || options[t.name]?.multiple) continue;
    const before = given.get(t.name);
    if (before !== undefined && before !== t.value)
      throw new UserError(`--${t.name} is given twice (${before} and ${t.value}): give it once`);
    given.set(t.name, t.value ?? '');
  }
  // An empty value (`--config ''`, a variable that was not set) is a mistake, never the default.
  for (const [name, v] of Object.entries(values))
    if (v === '' || (Array.isArray(v) && v.includes('')))
      throw new UserError(
        `--${name} is empty: give it a value (--${name} ${(FLAGS[name as FlagName] as Flag | undefined)?.value ?? 'VALUE'}), or leave it out`,
      );
  const positionals = parsed.positionals.slice(1);
  return { command, positionals, values, help: values.help === true, version: values.version === true };
}

/**
 * `--budget -1` as `--budget=-1`: node's parser takes "-1" for a flag; a value that looks like
 * a negative number belongs to the flag before it (the range check then says what is wrong).
 */
function joinNegativeValues(argv: string[], options: Record<string, { type: string }>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const next = argv[i + 1];
    const name = a.startsWith('--') ? a.slice(2) : null;
    if (name && options[name]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}
