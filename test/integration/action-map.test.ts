// The map job of the worker Action (`/autoresearch map`, matrix value `map`), built from src/
// (whatever dist/ holds) and run as one job against a real git remote: it draws the run's idea map
// with a command judge that follows the judge contract, pushes map.json, map.svg and the judge's
// answers as a commit on refs/forkflush/<run>/map, and a re-run starts from those answers and asks
// the judge nothing again. A judge that fails pushes the answers it gave, no map, and the job is
// red with the reason in one line.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { applyDecision, applyResult, decide } from '../../src/core/reconcile.js';
import type { RunState } from '../../src/core/state.js';
import { ActionRepo, buildActionFromSource, RUN, result } from './action-repo.js';

let action = '';

beforeAll(async () => {
  action = await buildActionFromSource();
}, 120_000);

const MAP_REF = `refs/forkflush/${RUN}/map`;

/**
 * A command judge: a snapshot's spec is its value.txt; of a triplet, the value nearer the
 * anchor's. It logs each call where the test reads it (the sandbox lets it write there only).
 * FAIL_TRIPLETS=1 makes every triplet call fail.
 */
function judgeScript(logs: string, failTriplets: boolean): string {
  return `#!/bin/sh
set -eu
echo "$FORKFLUSH_MAP_STEP" >> ${JSON.stringify(join(logs, 'judge-calls.log'))}
case "$FORKFLUSH_MAP_STEP" in
spec) cat > /dev/null; echo "value $(cat value.txt)" ;;
triplet)
  ${failTriplets ? 'echo "the judge is broken" >&2; exit 3' : ''}
  node -e '
    const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const v = (s) => Number(/value (\\d+)/.exec(s)[1]);
    const a = Math.abs(v(t.anchor.spec) - v(t.a.spec)), b = Math.abs(v(t.anchor.spec) - v(t.b.spec));
    console.log(a <= b ? "a" : "b");
  ' "$FORKFLUSH_TRIPLET_FILE" ;;
esac
`;
}

/** A run whose opening round has four graded episodes, each with a workspace of its own, and a map asked. */
function mappedRun(repo: ActionRepo, failTriplets = false): RunState {
  const judge = join(repo.logs, 'judge.sh');
  writeFileSync(judge, judgeScript(repo.logs, failTriplets));
  chmodSync(judge, 0o755);
  const map = `map:\n  judge: {kind: command, command: ${JSON.stringify(`sh ${judge}`)}, timeout: 30}\n  triplets: 12\n  held_out: 0.5\n  unit: minutes\n  budget: 30\n`;
  const config = parseConfig(`${repo.configText()}${map}`, '.github/autoresearch.yml');
  let state: RunState = { ...repo.openingState(), config };
  const values = [3, 4, 40, 41];
  for (const [i, e] of (state.rounds[0]?.episodes ?? []).entries()) {
    const value = values[i] ?? i;
    const commit = repo.commitOnBase({ 'value.txt': String(value) }, `value ${value}`);
    state = applyResult(state, e.id, result(commit, value));
  }
  const opening = state.rounds[0];
  if (!opening) throw new Error('no opening round');
  state = applyDecision(state, 0, decide(state, opening));
  repo.publish(state, (r) => {
    r.facts.map = { asked: 'comment:1', by: 'maintainer', at: '2026-12-01T00:00:00Z', dispatched: { at: 'x' } };
  });
  return state;
}

const calls = (repo: ActionRepo) => {
  const file = join(repo.logs, 'judge-calls.log');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
};

describe('the map job of the worker Action', () => {
  it('draws the map on refs/forkflush/<run>/map, and a re-run asks the judge nothing again', () => {
    const repo = new ActionRepo();
    mappedRun(repo);
    const first = repo.runAction({ episode: 'map', action, timeoutMs: 180_000 });
    expect(first.exitCode, first.stdout).toBe(0);
    const commit = repo.ref(MAP_REF);
    expect(commit).toBe(first.outputs.commit);
    const record = JSON.parse(repo.show(MAP_REF, 'map.json'));
    expect(record.points).toHaveLength(4);
    expect(record.judgments).toBeGreaterThan(0);
    expect(record.target).toEqual({ kind: 'run', id: RUN });
    expect(repo.show(MAP_REF, 'map.svg')).toMatch(/^<svg/);
    expect(repo.git(['ls-tree', '-r', '--name-only', MAP_REF])).toMatch(/^cache\/[0-9a-f]{16}\/judgments\.jsonl$/m);
    expect(first.summary).toContain(`### forkflush ${RUN}: idea map`);
    // The agreement line (4 points make 12 triplets; which are held out goes by their commits' hashes).
    expect(first.summary).toMatch(
      /Held-out agreement \d\.\d\d on \d+ judgments? \(run identity alone|No judgment was held out/,
    );
    expect(first.summary).toContain('not uploaded as an artifact: ACTIONS_RESULTS_URL is not set');
    const asked = calls(repo);
    expect(asked.filter((c) => c === 'spec')).toHaveLength(4);
    expect(asked.filter((c) => c === 'triplet').length).toBeGreaterThanOrEqual(12);

    const again = repo.runAction({ episode: 'map', action, timeoutMs: 180_000 });
    expect(again.exitCode, again.stdout).toBe(0);
    expect(calls(repo)).toEqual(asked);
    const second = repo.ref(MAP_REF);
    expect(second).not.toBe(commit);
    expect(repo.git(['rev-parse', `${MAP_REF}^`])).toBe(commit);
    expect(JSON.parse(repo.show(MAP_REF, 'map.json')).triplets).toEqual(record.triplets);
  }, 400_000);

  it('with a judge that fails, pushes its answers and no map, and fails in one line', () => {
    const repo = new ActionRepo();
    mappedRun(repo, true);
    const r = repo.runAction({ episode: 'map', action, timeoutMs: 180_000 });
    expect(r.exitCode).not.toBe(0);
    const errors = r.stdout.split('\n').filter((l) => l.startsWith('::error::'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^::error::forkflush issue-42 map: the judge failed \d+ judgments in a row/);
    const files = repo.git(['ls-tree', '-r', '--name-only', MAP_REF]).split('\n');
    expect(files).not.toContain('map.json');
    expect(files.filter((f) => /^cache\/[0-9a-f]{16}\/specs\/[0-9a-f]{40}\.json$/.test(f))).toHaveLength(4);
  }, 400_000);

  it('of a run that asked for no map, fails and says so', () => {
    const repo = new ActionRepo();
    repo.publish(repo.openingState());
    const r = repo.runAction({ episode: 'map', action });
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toContain(`::error::forkflush ${RUN} map: run ${RUN} has no idea map asked for`);
    expect(repo.ref(MAP_REF)).toBeNull();
  }, 120_000);
});
