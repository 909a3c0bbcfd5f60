// `forkflush compare [DIR]`: strategies (and variants) at equal budget, run by local/compare.ts; and
// the options and the ending it shares with probe.
import { parseVariantFlag, type Variant } from '../core/compare/config.js';
import { comparePlan, compareText } from '../core/compare/report.js';
import { STRATEGIES, type Strategy } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { MAX_BRANCHES, MAX_COMPARE_SEEDS } from '../core/method.js';
import { type CompareOptions, runCompare } from '../local/compare.js';
import type { Parsed } from './args.js';
import { argvTail, integer, positive, str } from './flags.js';
import type { Io } from './io.js';

export async function compareCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const out = v.json ? io.stderr : io.stdout;
  const strategies = str(v.strategies)
    ?.split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  for (const x of strategies ?? [])
    if (!(STRATEGIES as readonly string[]).includes(x))
      throw new UserError(`--strategies: "${x}" is not a strategy: use ${STRATEGIES.join(', ')}`);
  const variants = (Array.isArray(v.variant) ? v.variant : []).map((text): Variant => {
    const r = parseVariantFlag(text);
    if ('problem' in r) throw new UserError(r.problem);
    return r;
  });
  if (new Set(variants.map((x) => x.name)).size < variants.length) throw new UserError('--variant: names must differ');
  const o: Omit<CompareOptions, 'log'> = {
    ...compareRunOptions(dir, p, io),
    kind: 'compare',
    ...(strategies ? { strategies: strategies as Strategy[] } : {}),
    ...(v.seeds !== undefined ? { seeds: integer('--seeds', str(v.seeds) ?? '', 1, MAX_COMPARE_SEEDS) } : {}),
    ...(variants.length > 0 ? { variants } : {}),
    ...(v.branches !== undefined ? { branches: integer('--branches', str(v.branches) ?? '', 1, MAX_BRANCHES) } : {}),
  };
  const c = await runCompare({ ...o, log: (line) => out.write(`${line}\n`) });
  const r = c.results;
  if (v['dry-run']) {
    out.write(
      `${comparePlan(c.manifest, r, c.resumed)}\nthe checks passed; no agent was started. Run it: forkflush compare ${dir}${argvTail(p)}\n`,
    );
    // JSON: the results as a compare starts them (every run "not started"), marked as a dry run.
    if (v.json) io.stdout.write(`${JSON.stringify({ ...r, dryRun: true }, null, 2)}\n`);
    return 0;
  }
  return finishCompare(c, `${compareText(r)}\n`, r, dir, io, v.json === true);
}

/** The options compare and probe share, from their flags. */
export function compareRunOptions(dir: string, p: Parsed, io: Io) {
  const v = p.values;
  if (
    v.resume &&
    ['strategies', 'seeds', 'variant', 'budget', 'branches', 'seed', 'runs', 'budget-each'].some(
      (k) => v[k as keyof typeof v] !== undefined,
    )
  )
    throw new UserError(
      '--resume continues it as it was planned: drop the other flags (all but --config, --concurrency and --json)',
    );
  return {
    dir,
    ...(v.config ? { configFile: str(v.config) } : {}),
    ...(v.seed !== undefined ? { seed: integer('--seed', str(v.seed) ?? '', 0, 2 ** 31 - MAX_COMPARE_SEEDS) } : {}),
    ...(v.budget !== undefined ? { budget: positive('--budget', str(v.budget) ?? '') } : {}),
    ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', str(v.concurrency) ?? '', 1) } : {}),
    resume: v.resume === true,
    dryRun: v['dry-run'] === true,
    now: io.now,
    ...(io.env ? { env: io.env } : {}),
    ...(io.signal ? { signal: io.signal } : {}),
  };
}

/** The end of compare and probe: the figures, where the files are, how to go on; the exit code. */
export function finishCompare(
  c: Awaited<ReturnType<typeof runCompare>>,
  text: string,
  json: object,
  dir: string,
  io: Io,
  asJson: boolean,
): number {
  const kind = c.manifest.kind;
  if (asJson) io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  else
    io.stdout.write(
      `\n${text}\nresults: ${c.folder}/results.json\nreport:  ${c.folder}/report.md\nchart:   ${c.folder}/chart.svg\n`,
    );
  if (c.code === 2)
    io.stderr.write(`forkflush: ${c.message}\nfix it, then continue with: forkflush ${kind} ${dir} --resume\n`);
  if (c.code === 130)
    io.stderr.write(`\ninterrupted: finished runs are saved. Continue with: forkflush ${kind} ${dir} --resume\n`);
  if (c.code === 1 && c.idle)
    io.stderr.write(
      `forkflush: ${c.idle}: such runs are left out of the figures; see each run's report.md and its agents' logs\n`,
    );
  else if (c.code === 1 && c.message)
    io.stderr.write(`forkflush: ${c.message}\nno other run was started: fix it, then start a new ${kind}\n`);
  else if (c.code === 1) io.stderr.write(`forkflush: no run of the ${kind} got a score: see each run's report.md\n`);
  return c.code;
}
