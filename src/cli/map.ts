// `forkflush map [DIR] [--run ID | --compare ID] [--json] [--dry-run]`: the idea map of a run or a
// compare (local/map.ts makes it), printed, with map.png rendered from map.svg where the renderer is
// installed (local/map-png.ts).
import { join } from 'node:path';
import { UserError } from '../core/errors.js';
import { amount, mapText } from '../core/map/report.js';
import { formatNumber } from '../core/text.js';
import { type MapPlan, makeMap } from '../local/map.js';
import { renderPng } from '../local/map-png.js';
import type { Parsed } from './args.js';
import { integer } from './flags.js';
import type { Io } from './io.js';

export async function mapCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const out = v.json ? io.stderr : io.stdout;
  const str = (x: unknown) => (typeof x === 'string' ? x : undefined);
  if (v.run !== undefined && v.compare !== undefined) throw new UserError('give --run or --compare, not both');
  const outcome = await makeMap({
    dir,
    ...(str(v.config) ? { configFile: str(v.config) } : {}),
    ...(str(v.run) ? { run: str(v.run) } : {}),
    ...(str(v.compare) ? { compare: str(v.compare) } : {}),
    ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', str(v.concurrency) ?? '', 1) } : {}),
    dryRun: v['dry-run'] === true,
    now: io.now,
    ...(io.env ? { env: io.env } : {}),
    ...(io.signal ? { signal: io.signal } : {}),
    log: (line) => out.write(`${line}\n`),
  });
  if (v['dry-run']) {
    out.write(
      `${planText(outcome.plan)}\nno judge was started. Make it: forkflush map ${dir}${v.run ? ` --run ${v.run}` : ''}${v.compare ? ` --compare ${v.compare}` : ''}\n`,
    );
    if (v.json) io.stdout.write(`${JSON.stringify({ ...outcome.plan, dryRun: true }, null, 2)}\n`);
    return 0;
  }
  if (outcome.code !== 0 || !outcome.record || !outcome.files) {
    io.stderr.write(`forkflush: ${outcome.message ?? 'the map was not drawn'}\n`);
    return outcome.code === 0 ? 1 : outcome.code;
  }
  const { record, files } = outcome;
  const png = await renderPng(join(files.folder, 'map.svg'), join(files.folder, 'map.png'));
  if (v.json) io.stdout.write(`${JSON.stringify(record, null, 2)}\n`);
  else
    out.write(
      `\n${mapText(record).join('\n')}\n\nmap:     ${files.json}\npicture: ${files.svg}\n` +
        `${'file' in png ? `png:     ${png.file}\n` : ''}` +
        `report:  ${join(files.folder, 'report.md')}\n`,
    );
  if ('note' in png) io.stderr.write(`forkflush: note: ${png.note}\n`);
  if (outcome.failedLogs)
    io.stderr.write(`forkflush: note: the logs of the judge's failed calls: ${outcome.failedLogs}\n`);
  return 0;
}

/** What a map would ask and spend (--dry-run). */
export function planText(p: MapPlan): string {
  const est = (e: MapPlan['estimate']['spec']) =>
    `${amount(e.each)} each (${e.from === 'cache' ? "the mean of this judge's calls so far" : "forkflush's rough figure for an LLM judge"})`;
  return [
    `map of ${p.target.kind} ${p.target.id}: ${formatNumber(p.snapshots)} snapshots of ${formatNumber(p.runs)} run(s); judge ${p.judge}`,
    `spec calls: ${formatNumber(p.specs.toAsk)} (${formatNumber(p.specs.cached)} cached)`,
    `triplet calls: ${formatNumber(p.triplets.toAsk)} (${formatNumber(p.triplets.cached)} cached; ${formatNumber(p.triplets.total)} judgments in all)`,
    `estimated spend: about ${amount(p.estimate.total)} ${p.unit} (specs ${est(p.estimate.spec)}; triplets ${est(p.estimate.triplet)}); map.budget ${amount(p.budget)} ${p.unit}`,
  ].join('\n');
}
