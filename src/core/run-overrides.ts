// Per-run overrides on GitHub: `/autoresearch start budget=50 branches=2 model=...`, in a command or
// as a line of the text. Each key is checked here (what it may be), then the config with
// them applied is checked like any config (core/config.ts parseConfig).
import type { ConfigOverrides, Strategy } from './config.js';
import { parseCommand } from './github-text.js';
import { MAX_BRANCHES, STRATEGIES } from './method.js';

/** The keys a run may override, and what each sets. */
export const OVERRIDE_KEYS = {
  budget: 'budget.total: a number above 0',
  branches: `fork.branches: a whole number from 1 to ${MAX_BRANCHES}`,
  strategy: `strategy: one of ${STRATEGIES.join(', ')}`,
  model: "agent.model: the model's name (letters, digits and . _ - : / @, up to 100)",
} as const;

type OverrideKey = keyof typeof OVERRIDE_KEYS;

/** Overrides as read: what they set, and their text as the status comment echoes it. */
export interface RunOverrides {
  config: ConfigOverrides;
  /** The overrides as `key=value` words, in the order given. */
  text: string;
}

const MODEL = /^[A-Za-z0-9._:/@-]{1,100}$/;

/**
 * The overrides in `words` (`budget=50 branches=2`), or every problem with them, each naming its
 * key and what is valid.
 */
export function parseOverrides(words: string): RunOverrides | { problems: string[] } {
  const config: ConfigOverrides = {};
  const problems: string[] = [];
  const seen = new Set<string>();
  const kept: string[] = [];
  for (const word of words.split(/\s+/).filter((w) => w !== '')) {
    const eq = word.indexOf('=');
    const key = (eq < 0 ? word : word.slice(0, eq)).toLowerCase();
    const value = eq < 0 ? '' : word.slice(eq + 1);
    if (!(key in OVERRIDE_KEYS)) {
      problems.push(`unknown key \`${key.slice(0, 40)}\`: valid keys are ${keyList()}`);
      continue;
    }
    if (seen.has(key)) {
      problems.push(`\`${key}\` is given twice`);
      continue;
    }
    seen.add(key);
    const problem = eq < 0 ? 'has no value' : setOverride(config, key as OverrideKey, value);
    if (problem) problems.push(`\`${key}\` ${problem}: it sets ${OVERRIDE_KEYS[key as OverrideKey]}`);
    else kept.push(`${key}=${value}`);
  }
  return problems.length > 0 ? { problems } : { config, text: kept.join(' ') };
}

/** Sets one override; returns what is wrong with its value, or null. */
function setOverride(config: ConfigOverrides, key: OverrideKey, value: string): string | null {
  const got = `(got \`${value.slice(0, 40)}\`)`;
  const n = Number(value);
  switch (key) {
    case 'budget':
      if (value === '' || !Number.isFinite(n) || n <= 0) return `is not a number above 0 ${got}`;
      config.budget = n;
      return null;
    case 'branches':
      if (!Number.isInteger(n) || n < 1 || n > MAX_BRANCHES)
        return `is not a whole number from 1 to ${MAX_BRANCHES} ${got}`;
      config.branches = n;
      return null;
    case 'strategy':
      if (!(STRATEGIES as readonly string[]).includes(value)) return `is not a strategy ${got}`;
      config.strategy = value as Strategy;
      return null;
    case 'model':
      if (!MODEL.test(value)) return `is not a model name ${got}`;
      config.model = value;
      return null;
  }
}

function keyList(): string {
  return Object.keys(OVERRIDE_KEYS)
    .map((k) => `\`${k}\``)
    .join(', ');
}

/** The words after `/autoresearch start` in the text (read as a comment's command), or null. */
export function overridesInText(text: string): string | null {
  const command = parseCommand(text);
  return command && 'command' in command && command.command === 'start' ? (command.args ?? null) : null;
}
