// The cost of forking K = 4 workspaces of a repository with 20,000 files through forkflush's own
// code path (a checkout by forkflush's own git, and a .git of each workspace's own that borrows
// the objects, as the round began), against a plain `cp -r` of the repository K times, in the same run.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../src/core/config.js';
import { nextRound } from '../src/core/schedule.js';
import { newRunState } from '../src/core/state.js';
import { LocalForge } from '../src/local/forge.js';
import { linkObjects, roundObjects } from '../src/local/round-objects.js';
import { RunStore } from '../src/local/store.js';

const FILES = 20_000;
const K = 4;
const REPEAT = 3;

function makeRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), 'forkflush-bench-'));
  for (let i = 0; i < FILES; i++) {
    const sub = join(dir, `pkg${Math.floor(i / 500)}`, `mod${Math.floor(i / 50) % 10}`);
    if (i % 50 === 0) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `file${i}.ts`), `export const value${i} = ${i};\n// ${'x'.repeat(i % 400)}\n`);
  }
  const git = (...a: string[]) =>
    execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@b', ...a], { cwd: dir, encoding: 'utf8' }).trim();
  git('init', '-q');
  git('add', '-A');
  git('commit', '-qm', 'bench');
  return dir;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const repo = makeRepo();
const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo, encoding: 'utf8' }).trim();
const config = parseConfig(
  'grader: {command: "true"}\nagent: {command: "true"}\nbudget: {total: 100, unit: tokens}\n',
  'bench',
);
const forkTimes: number[] = [];
const copyTimes: number[] = [];
for (let rep = 0; rep < REPEAT; rep++) {
  const runDir = mkdtempSync(join(tmpdir(), 'forkflush-bench-run-'));
  const store = new RunStore(runDir);
  const forge = new LocalForge(repo, store);
  const state = newRunState({ id: `bench${rep}`, seed: rep, config, baseCommit: head, baseScore: null });
  const round = nextRound(state);
  if (!round) throw new Error('no round');
  let t = performance.now();
  await Promise.all(round.episodes.map((e) => forge.prepareEpisode(state, e)));
  forkTimes.push((performance.now() - t) / 1000);
  // Drop the workspaces before the next repetition (a branch is only made for a result).
  rmSync(runDir, { recursive: true, force: true });

  const copies = mkdtempSync(join(tmpdir(), 'forkflush-bench-cp-'));
  t = performance.now();
  for (let k = 0; k < K; k++) execFileSync('cp', ['-r', repo, join(copies, `copy${k}`)]);
  copyTimes.push((performance.now() - t) / 1000);
  rmSync(copies, { recursive: true, force: true });
}
// A round's view of the objects (local/round-objects.ts, made once per round, inside the fork above)
// against `cp -al` of the same folder: the same hard links, made by coreutils.
const viewTimes: number[] = [];
const cpalTimes: number[] = [];
const objects = join(repo, '.git', 'objects');
// As a long run leaves them: the commit above was packed (gc --auto), episodes' objects are loose.
const blobs = mkdtempSync(join(tmpdir(), 'forkflush-bench-blobs-'));
const paths = Array.from({ length: FILES }, (_, i) => join(blobs, String(i)));
for (const [i, p] of paths.entries()) writeFileSync(p, `an episode's file ${i}\n`);
execFileSync('git', ['hash-object', '-w', '--stdin-paths'], { cwd: repo, input: paths.join('\n') });
rmSync(blobs, { recursive: true, force: true });
const loose = readdirSync(objects)
  .filter((d) => /^[0-9a-f]{2}$/.test(d))
  .reduce((n, d) => n + readdirSync(join(objects, d)).length, 0);
for (let rep = 0; rep < REPEAT; rep++) {
  const views = mkdtempSync(join(tmpdir(), 'forkflush-bench-views-'));
  let t = performance.now();
  await roundObjects(views, rep, linkObjects(objects));
  viewTimes.push((performance.now() - t) / 1000);
  t = performance.now();
  execFileSync('cp', ['-al', objects, join(views, 'cp-al')]);
  cpalTimes.push((performance.now() - t) / 1000);
  rmSync(views, { recursive: true, force: true });
}
console.log(
  `round view: ${loose} loose objects linked in ${median(viewTimes).toFixed(2)} s vs cp -al ${median(cpalTimes).toFixed(2)} s`,
);
rmSync(repo, { recursive: true, force: true });
const a = median(forkTimes);
const b = median(copyTimes);
console.log(
  `fork runs (s): ${forkTimes.map((x) => x.toFixed(2)).join(' ')}; cp -r runs (s): ${copyTimes.map((x) => x.toFixed(2)).join(' ')}`,
);
console.log(`fork: K=${K} x ${FILES} files ${a.toFixed(2)} s vs cp -r ${b.toFixed(2)} s (ratio ${(a / b).toFixed(2)})`);
