// The `map:` key of .github/autoresearch.yml: how `forkflush map` draws where the agents searched
// (README, "Idea maps"). config.ts validates the key with this schema and hands it its agent
// schema (the judge takes the same keys as `agent`); this module imports nothing of config.ts, not
// even types (its settings, read from a whole config, are settings.ts).
import { z } from 'zod';
import { MAP_DEFAULT_MINUTES, MAP_HELD_OUT, MAP_SNAPSHOTS, MAP_TRIPLETS_PER_POINT } from '../method.js';

export const MAP_UNITS = ['usd', 'tokens', 'minutes'] as const;
export type MapUnit = (typeof MAP_UNITS)[number];
export const EMBEDDINGS = ['tste', 'soe'] as const;
export type Embedding = (typeof EMBEDDINGS)[number];

/** The key's schema, with the judge taking `agent`'s (config.ts hands it over). */
export function mapSchema<AgentSchema extends z.ZodType<{ kind: string; command?: string | undefined }>>(
  agent: AgentSchema,
) {
  return z
    .strictObject({
      snapshots: z
        .number()
        .int()
        .min(2)
        .optional()
        .describe(
          `Snapshots (episode commits) per run; default ${MAP_SNAPSHOTS}, the paper's. Every fork point, branch end and the final best are always in.`,
        ),
      triplets: z
        .number()
        .int()
        .min(10)
        .optional()
        .describe(
          `Triplet judgments in all; default ${MAP_TRIPLETS_PER_POINT.toFixed(1)} per point (the paper's 6,000 for 5 runs x 51 snapshots).`,
        ),
      held_out: z
        .number()
        .gt(0, 'must be a fraction above 0 and at most 0.5')
        .max(0.5, 'must be a fraction above 0 and at most 0.5')
        .optional()
        .describe(`The share of judgments held out of the fit to measure agreement; default ${MAP_HELD_OUT}.`),
      judge: agent
        .optional()
        .describe(
          'The judge that writes specs and answers triplets: the same keys as `agent`; default the task agent.',
        ),
      budget: z
        .number()
        .positive()
        .optional()
        .describe(
          `The most the map's judge spends, in map.unit; default budget.total (${MAP_DEFAULT_MINUTES} minutes for a task budgeted in evaluations).`,
        ),
      unit: z
        .enum(MAP_UNITS)
        .optional()
        .describe('The unit of map.budget: usd, tokens or minutes; default budget.unit (minutes for evaluations).'),
      embedding: z
        .enum(EMBEDDINGS)
        .optional()
        .describe("tste (the paper's t-STE, default) or soe (soft ordinal embedding, the paper's check)."),
    })
    .superRefine((m, ctx) => {
      if (m.judge?.kind === 'command' && m.judge.command === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['judge', 'command'],
          message: 'map.judge.command is required for map.judge.kind "command" (the shell command the judge runs)',
        });
    })
    .describe('forkflush map: the idea map of a run or a compare (functional specs, triplet judge, t-STE, basins).');
}
