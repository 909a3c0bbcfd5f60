// What the map's judge answered, kept so that a map is resumable and a second map (of a larger
// compare, say) asks nothing twice: specs by commit, judgments by triplet, one folder per judge
// (its kind, command or model, and the prompts' version) in `.forkflush/map-cache/<judge>/`. Only
// answers are kept: a failed call is asked again by the next map. A line or file a crash tore is
// read as missing.
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
  ) {}

  /** The cache as it is (nothing written: a dry run reads it too). */
  static async open(dir: string, judge: Config['agent']): Promise<MapCache> {
    const text = await readFile(join(dir, 'judgments.jsonl'), 'utf8').catch(() => '');
    const judgments = new Map<string, CachedJudgment>();
    for (const line of text.split('\n')) {
      const j = parseJudgment(line);
      if (j) judgments.set(tripletKey(j), j);
    }
    return new MapCache(dir, judge, judgments);
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
    await appendFile(join(this.dir, 'judgments.jsonl'), `${JSON.stringify(line)}\n`);
    this.judgments.set(tripletKey(j), line);
  }

  private specFile(commit: string): string {
    if (!/^[0-9a-f]{7,64}$/.test(commit)) throw new Error(`not a commit id: ${commit}`);
    return join(this.dir, 'specs', `${commit}.json`);
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
