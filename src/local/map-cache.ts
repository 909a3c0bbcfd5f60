// What the map's judge answered, kept so that a map is resumable and a second map (of a larger
// compare, say) asks nothing twice: specs by commit, judgments by triplet, one folder per judge
// (its kind, command or model, and the prompts' version) in `.forkflush/map-cache/<judge>/`. Only
// answers are kept: a failed call is asked again by the next map, but what it cost is kept, by the
// map's target, so that map.budget holds across maps run again. A line or file a crash tore is read
// as missing, and what is appended after it is kept.
import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../core/config.js';
import { MAP_PROMPT_VERSION } from '../core/map/prompts.js';
import type { Judgment } from '../core/map/record.js';
import { tripletKey } from '../core/map/sample.js';
import { writeAtomic } from './store.js';

export interface CachedSpec {
  commit: string;
  spec: string;
  spent: number;
}

export interface CachedJudgment extends Judgment {
  spent: number;
}

/** The judge's identity: what changes its answers (kind, command, model, arguments, prompts). */
export function judgeKey(judge: Config['agent']): string {
  const what = { kind: judge.kind, command: judge.command ?? null, model: judge.model ?? null, args: judge.args };
  return createHash('sha256')
    .update(JSON.stringify({ ...what, prompts: MAP_PROMPT_VERSION }))
    .digest('hex')
    .slice(0, 16);
}

export class MapCache {
  private constructor(
    readonly dir: string,
    private readonly judge: Config['agent'],
    /** Every judgment answered, by tripletKey. */
    readonly judgments: Map<string, CachedJudgment>,
    /** What calls that brought no answer cost (failed, interrupted), by the map's target. */
    private readonly unanswered: Map<string, number>,
    /** The files whose last line a crash tore: the next line appended starts on a line of its own. */
    private readonly torn: Set<string>,
  ) {}

  /** The cache as it is (nothing written: a dry run reads it too). */
  static async open(dir: string, judge: Config['agent']): Promise<MapCache> {
    const torn = new Set<string>();
    const lines = async (name: string) => {
      const text = await readFile(join(dir, name), 'utf8').catch(() => '');
      if (text !== '' && !text.endsWith('\n')) torn.add(name);
      return text.split('\n');
    };
    const judgments = new Map<string, CachedJudgment>();
    for (const line of await lines(JUDGMENTS)) {
      const j = parseJudgment(line);
      if (j) judgments.set(tripletKey(j), j);
    }
    const unanswered = new Map<string, number>();
    for (const line of await lines(UNANSWERED)) {
      const u = parseUnanswered(line);
      if (u) unanswered.set(u.target, (unanswered.get(u.target) ?? 0) + u.spent);
    }
    return new MapCache(dir, judge, judgments, unanswered, torn);
  }

  /** Its folder, with a note of which judge it is for people looking into it. */
  async make(): Promise<void> {
    await mkdir(join(this.dir, 'specs'), { recursive: true });
    const about = { judge: { ...this.judge, env: undefined }, prompts: MAP_PROMPT_VERSION };
    await writeFile(join(this.dir, 'judge.json'), `${JSON.stringify(about, null, 2)}\n`);
  }

  async spec(commit: string): Promise<CachedSpec | null> {
    const text = await readFile(this.specFile(commit), 'utf8').catch(() => null);
    if (text === null) return null;
    try {
      const v = JSON.parse(text) as Partial<CachedSpec>;
      return v.commit === commit && typeof v.spec === 'string' && typeof v.spent === 'number'
        ? { commit, spec: v.spec, spent: v.spent }
        : null;
    } catch {
      return null;
    }
  }

  async saveSpec(s: CachedSpec): Promise<void> {
    await writeAtomic(this.specFile(s.commit), `${JSON.stringify(s)}\n`);
  }

  async saveJudgment(j: CachedJudgment): Promise<void> {
    const line = { anchor: j.anchor, a: j.a, b: j.b, answer: j.answer, spent: j.spent };
    await this.append(JUDGMENTS, line);
    this.judgments.set(tripletKey(j), line);
  }

  /** What the map of `target` spent on calls that brought no answer, over every map of it so far. */
  unansweredSpent(target: string): number {
    return this.unanswered.get(target) ?? 0;
  }

  async saveUnanswered(target: string, spent: number): Promise<void> {
    await this.append(UNANSWERED, { target, spent });
    this.unanswered.set(target, this.unansweredSpent(target) + spent);
  }

  private async append(name: string, value: object): Promise<void> {
    const start = this.torn.has(name) ? '\n' : '';
    await appendFile(join(this.dir, name), `${start}${JSON.stringify(value)}\n`);
    this.torn.delete(name);
  }

  private specFile(commit: string): string {
    if (!/^[0-9a-f]{7,64}$/.test(commit)) throw new Error(`not a commit id: ${commit}`);
    return join(this.dir, 'specs', `${commit}.json`);
  }
}

const JUDGMENTS = 'judgments.jsonl';
const UNANSWERED = 'unanswered-spend.jsonl';

function parseUnanswered(line: string): { target: string; spent: number } | null {
  try {
    const v = JSON.parse(line) as { target?: unknown; spent?: unknown };
    const ok = typeof v.target === 'string' && typeof v.spent === 'number' && Number.isFinite(v.spent) && v.spent >= 0;
    return ok ? { target: v.target as string, spent: v.spent as number } : null;
  } catch {
    return null;
  }
}

function parseJudgment(line: string): CachedJudgment | null {
  if (line.trim() === '') return null;
  try {
    const v = JSON.parse(line) as Partial<CachedJudgment>;
    const ids = [v.anchor, v.a, v.b];
    if (
      ids.every((x) => typeof x === 'string') &&
      (v.answer === 'a' || v.answer === 'b') &&
      typeof v.spent === 'number'
    )
      return v as CachedJudgment;
  } catch {
    // A line a crash tore.
  }
  return null;
}
