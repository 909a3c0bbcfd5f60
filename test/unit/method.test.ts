// The method's numbers: where the paper gives them, they are the paper's (../shared/docs/method.md,
// written out here, not read back), and everything that states them reads them from method.ts.
import { describe, expect, it } from 'vitest';
import { configJsonSchema, parseConfig } from '../../src/core/config.js';
import {
  AGENT_TIMEOUT_SECONDS,
  DIRECTIVE_SEED_SALT,
  GRADER_TIMEOUT_SECONDS,
  LEAST_EPISODE_SHARE,
  MAX_BRANCHES,
  maxSerialEpisodes,
  PAPER,
  ROUND_DEADLINE_SLACK_MINUTES,
  roundDeadlineMinutes,
  STALE_CLAIM_MINUTES,
} from '../../src/core/method.js';

const minimal = 'grader:\n  command: g\nagent:\n  command: a\nbudget:\n  total: 100\n';

describe("the method's numbers", () => {
  it("are the paper's schedule", () => {
    expect(PAPER).toEqual({
      branches: 4,
      forkAt: [0.33, 0.66],
      branchBudget: 0.06,
      episodeBudget: 0.06,
      directives: 2,
    });
    // "Three rounds of four branches: ~72% of B goes to branches".
    expect((1 + PAPER.forkAt.length) * PAPER.branches * PAPER.branchBudget).toBeCloseTo(0.72);
  });

  it('give the config its defaults', () => {
    const c = parseConfig(minimal, 'x');
    expect(c.fork).toEqual({
      branches: PAPER.branches,
      at: [...PAPER.forkAt],
      branch_budget: PAPER.branchBudget,
      directives: PAPER.directives,
    });
    expect(c.budget.episode).toBeCloseTo(PAPER.episodeBudget * 100);
    expect(c.agent.timeout).toBe(AGENT_TIMEOUT_SECONDS);
    expect(c.grader.timeout).toBe(GRADER_TIMEOUT_SECONDS);
    expect(() => parseConfig(`${minimal}fork:\n  branches: ${MAX_BRANCHES + 1}\n`, 'x')).toThrow(
      `fork.branches must be at most ${MAX_BRANCHES}`,
    );
  });

  it("write the schema's descriptions of the derived defaults", () => {
    const props = (configJsonSchema() as { properties: Record<string, { properties: Record<string, any> }> })
      .properties;
    expect(props.budget?.properties.episode.description).toBe(
      `One serial episode; default ${PAPER.episodeBudget} of total.`,
    );
    expect(props.fork?.properties.directives.description).toContain(`default ${PAPER.directives} (at most K)`);
  });

  it('cap a serial stretch at twice the episodes that fill it, plus two', () => {
    expect(maxSerialEpisodes(60, 6)).toBe(22);
    // A span that is a whole number of episodes up to float noise does not count one more.
    expect(maxSerialEpisodes(0.3 * 100, 0.06 * 100)).toBe(12);
    expect(maxSerialEpisodes(1, 6)).toBe(4);
    expect(LEAST_EPISODE_SHARE).toBe(0.25);
  });

  it("salt the directive draw apart from every branch's seed", () => {
    expect(DIRECTIVE_SEED_SALT).toBeGreaterThanOrEqual(MAX_BRANCHES);
  });

  it("give a GitHub round until the agent's time, two gradings and half an hour", () => {
    const c = parseConfig(minimal, 'x');
    expect(roundDeadlineMinutes(c)).toBe(62);
    expect(roundDeadlineMinutes({ agent: { ...c.agent, timeout: 600 }, grader: { ...c.grader, timeout: 90 } })).toBe(
      10 + 3 + 30,
    );
    expect(ROUND_DEADLINE_SLACK_MINUTES).toBe(30);
    expect(STALE_CLAIM_MINUTES).toBe(10);
  });
});
