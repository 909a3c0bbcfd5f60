// The configs shipped as examples stay valid as the schema evolves.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_KINDS, parseConfig } from '../../src/core/config.js';

const root = join(import.meta.dirname, '..', '..', 'examples');
const agentExamples = readdirSync(join(root, 'agents')).filter((f) => f.endsWith('.yml'));

describe('example configs', () => {
  it.each(agentExamples)('examples/agents/%s is valid', (file) => {
    const config = parseConfig(readFileSync(join(root, 'agents', file), 'utf8'), file);
    expect(config.agent.kind).toBe(file.replace(/\.yml$/, ''));
  });

  it('there is one per agent kind', () => {
    expect(agentExamples.map((f) => f.replace(/\.yml$/, '')).sort()).toEqual(
      AGENT_KINDS.filter((k) => k !== 'command').sort(),
    );
  });

  it('the bundled example is valid', () => {
    const file = join(root, 'maxsat', '.github', 'autoresearch.yml');
    expect(parseConfig(readFileSync(file, 'utf8'), file).agent.kind).toBe('command');
  });
});
