// The one list of agent kinds: each spec under its own name, a CLI pinned to an exact version, and
// a row in the README's table of agents that says how to install it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SPECS } from '../../../src/agents/specs.js';
import { AGENT_KINDS } from '../../../src/core/config.js';
import { installCommand } from '../../../src/core/failure.js';

const README = readFileSync(join(import.meta.dirname, '..', '..', '..', 'README.md'), 'utf8');

describe('SPECS', () => {
  it.each(AGENT_KINDS)('%s: its spec, its pin, its row in the README', (kind) => {
    const spec = SPECS[kind];
    expect(spec.kind).toBe(kind);
    const row = README.split('\n').find((l) => l.startsWith(`| \`${kind}\``));
    expect(row, `a row for ${kind} in the README's table of agents`).toBeDefined();
    if (!spec.cli) return;
    expect(spec.cli.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(row).toContain(`\`${installCommand(spec.cli)}\``);
  });
});
