import { it } from 'vitest';
import { runShard } from './suite.js';

it('chaos shard 3 of 4: every run keeps the invariants', () => runShard(3, 4));
