import { it } from 'vitest';
import { runShard } from './suite.js';

it('chaos shard 2 of 4: every run keeps the invariants', () => runShard(2, 4));
