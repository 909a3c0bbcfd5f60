// The plan of a comparison (its manifest, compare.json): which runs, in which order, with which
// config; whether an unfinished one is the one a command asks for; and each variant's config,
// checked before any run starts. Pure: local/compare.ts writes the manifest and starts the runs.
import { z } from 'zod';
import { type Config, ConfigError, type ConfigOverrides, parseConfig, type Strategy } from '../config.js';
import { COMPARE_SEEDS, STRATEGIES } from '../method.js';
import { NewerRecordError, RecordError } from '../records.js';
import { AS_IS, configMapping, fixedKeyProblem, leafKeys, type Variant, variantConfigText } from './config.js';

export const COMPARE_VERSION = 1;

const entrySchema = z.object({
  strategy: z.enum(STRATEGIES),
  variant: z.string(),
  seed: z.number().int(),
  /** The run's id once it was started. */
  run: z.string().nullable(),
  /** Wall time compare spent driving it, over every session. */
  wallSeconds: z.number().nonnegative(),
  /** Runs started for this entry and given up: their agent could not start (setup fixed since). */
  abandoned: z.array(z.string()).optional(),
});

export const manifestSchema = z.object({
  version: z.literal(COMPARE_VERSION),
  kind: z.enum(['compare', 'probe']),
  id: z.string(),
  createdAt: z.string(),
  configFile: z.string(),
  /** The config's text when the compare started: runs started later must see the same. */
  configText: z.string(),
  /** The commit its runs start from (the task's HEAD when it started; none for a plain folder). */
  baseCommit: z.string().optional(),
  /** --budget and --branches, applied to every run (null: the config's). */
  budget: z.number().positive().nullable(),
  branches: z.number().int().positive().nullable(),
  seed: z.number().int(),
  strategies: z.array(z.enum(STRATEGIES)).min(1),
  variants: z.array(z.object({ name: z.string(), set: z.record(z.string(), z.unknown()) })).min(1),
  seeds: z.array(z.number().int()).min(1),
  entries: z.array(entrySchema),
  /** Wall time of the compare's own sessions, all together (its runs may overlap within it). */
  wallSeconds: z.number().nonnegative().optional(),
  /** A probe: the budget of the run it was probing for. */
  planned: z.number().positive().optional(),
});

export type CompareManifest = z.infer<typeof manifestSchema>;
export type CompareEntry = z.infer<typeof entrySchema>;

export function parseManifest(text: string, where: string): CompareManifest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new RecordError(`${where}: not JSON: the compare's manifest is damaged; remove its folder to start afresh`);
  }
  const version = (json as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > COMPARE_VERSION)
    throw new NewerRecordError(
      `${where}: version: written by a newer forkflush (version ${version}); this one reads up to ${COMPARE_VERSION}: upgrade forkflush to go on`,
    );
  const r = manifestSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new RecordError(
      `${where}: ${issue?.path.join('.') || 'the manifest'}: ${issue?.message ?? 'not valid'} (not a forkflush compare manifest; remove its folder to start afresh)`,
    );
  }
  return r.data;
}

export interface PlanInput {
  kind: 'compare' | 'probe';
  id: string;
  createdAt: string;
  configFile: string;
  configText: string;
  /** The config, parsed (its `compare:` key gives the defaults). */
  config: Config;
  strategies?: Strategy[];
  seeds?: number;
  variants?: Variant[];
  budget?: number;
  branches?: number;
  seed: number;
  planned?: number;
  baseCommit?: string;
}

/**
 * The runs of a comparison, in the order they start: seed by seed, and within a seed every variant
 * and strategy, so an interrupted compare has about as many runs of each. Seeds are seed, seed + 1,
 * ...: `forkflush run --seed` with one of them repeats that run alone.
 */
export function planCompare(p: PlanInput): CompareManifest {
  const strategies = [...new Set(p.strategies ?? p.config.compare?.strategies ?? STRATEGIES)];
  const count = p.seeds ?? p.config.compare?.seeds ?? COMPARE_SEEDS;
  const variants = p.variants ?? p.config.compare?.variants ?? [AS_IS];
  const seeds = Array.from({ length: count }, (_, i) => p.seed + i);
  const entries: CompareEntry[] = [];
  for (const seed of seeds)
    for (const v of variants)
      for (const strategy of strategies) entries.push({ strategy, variant: v.name, seed, run: null, wallSeconds: 0 });
  return {
    version: COMPARE_VERSION,
    kind: p.kind,
    id: p.id,
    createdAt: p.createdAt,
    configFile: p.configFile,
    configText: p.configText,
    budget: p.budget ?? null,
    branches: p.branches ?? null,
    seed: p.seed,
    strategies,
    variants,
    seeds,
    entries,
    ...(p.planned !== undefined ? { planned: p.planned } : {}),
    ...(p.baseCommit !== undefined ? { baseCommit: p.baseCommit } : {}),
  };
}

/** Whether an unfinished compare is the one this command asks for (then the command resumes it). */
export function samePlan(a: CompareManifest, b: CompareManifest, seedGiven: boolean): boolean {
  const key = (m: CompareManifest) =>
    JSON.stringify([
      m.kind,
      m.configFile,
      m.configText,
      m.baseCommit,
      m.budget,
      m.branches,
      m.strategies,
      m.variants,
      m.seeds.length,
    ]);
  return key(a) === key(b) && (!seedGiven || a.seed === b.seed);
}

/** The overrides a run of an entry starts with (its variant's keys are in its config file). */
export function runOverrides(m: CompareManifest, strategy: Strategy): ConfigOverrides {
  return {
    strategy,
    ...(m.budget !== null ? { budget: m.budget } : {}),
    ...(m.branches !== null ? { branches: m.branches } : {}),
  };
}

/** A variant's config file text, or null for the config as it is (the user's own file is used). */
export function variantText(m: CompareManifest, v: Variant, configPathInRepo: string | null): string | null {
  if (Object.keys(v.set).length === 0) return null;
  return variantConfigText(configMapping(m.configText) ?? {}, v, configPathInRepo ? [configPathInRepo] : []);
}

/**
 * Every variant's config for every strategy, checked before any run starts: a key it may not change,
 * a --branches that would override its fork.branches, or what parseConfig finds wrong.
 */
export function checkVariants(m: CompareManifest): string[] {
  const problems: string[] = [];
  for (const v of m.variants) {
    const fixed = fixedKeyProblem(v);
    if (fixed) problems.push(fixed);
    else if (m.branches !== null && leafKeys(v.set).includes('fork.branches'))
      problems.push(`variant ${v.name} sets fork.branches, which --branches would override: drop one of them`);
    if (fixed) continue;
    const text = variantText(m, v, null) ?? m.configText;
    const label = `variant ${v.name}`;
    for (const strategy of m.strategies) {
      try {
        parseConfig(text, label, runOverrides(m, strategy));
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        const ps = e.problems.map((x) =>
          v.set && Object.keys(v.set).length > 0 ? x.replace(/^[^:]+:\d+:\d+: /, `${label}: `) : x,
        );
        problems.push(...ps.map((x) => `${x} (with strategy ${strategy})`));
        break;
      }
    }
  }
  return [...new Set(problems)];
}

/** How many episodes a run of this config runs at once at most: K in fork rounds and best-of-n, else 1. */
export function runWidth(config: Config): number {
  return config.strategy === 'single-run' || config.strategy === 'flush-only' ? 1 : config.fork.branches;
}
