// A map's settings: the `map:` key of a config with every default filled in (map/config.ts is the
// key's schema, which config.ts imports; these read a whole config, so they live apart).
import type { Config } from '../config.js';
import { MAP_DEFAULT_MINUTES, MAP_HELD_OUT, MAP_SNAPSHOTS, MAP_TRIPLETS_PER_POINT, type Unit } from '../method.js';
import type { Embedding, MapUnit } from './config.js';

/** A map's settings, every default filled in. */
export interface MapSettings {
  snapshots: number;
  /** The judgments asked in all, or null: MAP_TRIPLETS_PER_POINT per point. */
  triplets: number | null;
  heldOut: number;
  judge: Config['agent'];
  budget: number;
  unit: MapUnit;
  embedding: Embedding;
}

export function mapSettings(c: Config): MapSettings {
  const m = c.map ?? {};
  const taskUnit: Unit = c.budget.unit;
  const unit: MapUnit = m.unit ?? (taskUnit === 'evaluations' ? 'minutes' : taskUnit);
  // Another unit than the task's without a budget is minutes (config.ts refuses any other).
  const budget = m.budget ?? (unit === taskUnit ? c.budget.total : MAP_DEFAULT_MINUTES);
  return {
    snapshots: m.snapshots ?? MAP_SNAPSHOTS,
    triplets: m.triplets ?? null,
    heldOut: m.held_out ?? MAP_HELD_OUT,
    judge: m.judge ?? c.agent,
    budget,
    unit,
    embedding: m.embedding ?? 'tste',
  };
}

/** The judgments a map of `points` points asks for: map.triplets, or the paper's share per point. */
export function tripletCount(settings: Pick<MapSettings, 'triplets'>, points: number): number {
  return settings.triplets ?? Math.round(points * MAP_TRIPLETS_PER_POINT);
}
