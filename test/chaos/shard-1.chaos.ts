import { it } from 'vitest';
import { runShard } from './suite.js';

it('chaos shard 1 of 2: every run keeps the invariants', () => runShard(1, 2));
