// A scripted stand-in for the idea map's judge (`forkflush map`), for the bundled example: like
// agent.mjs it is not a language model. It follows forkflush's command judge contract (README,
// "Idea maps") and judges by a plain, documented similarity:
//
// - spec ($FORKFLUSH_MAP_STEP=spec, cwd: a read-only checkout of the snapshot): it reads solver.mjs
//   and writes a stand-in specification: the approach its header comment names, its APPROACH and
//   PARAMS constants (the exact quantitative choices), and the identifiers of its code, most used first.
// - triplet ($FORKFLUSH_MAP_STEP=triplet, $FORKFLUSH_TRIPLET_FILE: the anchor, a and b with their
//   specs): the distance between two specs is 1 - the Jaccard similarity of their identifier sets,
//   plus, for the same approach, the parameters' mean difference on a log scale (at most 0.3, so
//   the approach always counts more than its numbers), or 1 for another approach. Its last line
//   is "a" or "b", whichever is nearer the anchor (a on a tie).
//
// Spend: as an LLM judge would be charged, about one token per 4 characters it read and wrote,
// reported in $FORKFLUSH_USAGE_FILE.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const env = process.env;
const step = env.FORKFLUSH_MAP_STEP;
let read = 0;
const readText = (file) => {
  const text = readFileSync(file, 'utf8');
  read += text.length;
  return text;
};
const charge = (written) => {
  if (env.FORKFLUSH_USAGE_FILE)
    writeFileSync(env.FORKFLUSH_USAGE_FILE, JSON.stringify({ spent: Math.ceil((read + written) / 4) }));
};

if (step === 'spec') {
  readText(env.FORKFLUSH_PROMPT_FILE);
  const spec = specOf(existsSync('solver.mjs') ? readText('solver.mjs') : '');
  process.stdout.write(spec);
  charge(spec.length);
} else if (step === 'triplet') {
  const t = JSON.parse(readText(env.FORKFLUSH_TRIPLET_FILE));
  const [anchor, a, b] = [t.anchor, t.a, t.b].map((x) => parseSpec(x.spec));
  const answer = distance(anchor, a) <= distance(anchor, b) ? 'a' : 'b';
  process.stdout.write(`${answer}\n`);
  charge(2);
} else {
  process.stderr.write(`judge: FORKFLUSH_MAP_STEP is "${step}": run me through forkflush map\n`);
  process.exit(2);
}

/** The stand-in specification of a solver's source. */
function specOf(source) {
  const approach = /^\/\/ Approach: (.*)$/m.exec(source)?.[1] ?? 'none stated';
  const name = /^const APPROACH = '(\w+)';$/m.exec(source)?.[1] ?? 'none';
  const params = /^const PARAMS = (\{.*\});$/m.exec(source)?.[1] ?? '{}';
  const counts = new Map();
  const code = source.replace(/\/\/.*$/gm, '').replace(/(['"`])(?:\\.|(?!\1).)*\1/g, '');
  for (const word of code.match(/[A-Za-z_$][\w$]*/g) ?? []) counts.set(word, (counts.get(word) ?? 0) + 1);
  const words = [...counts].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)).map(([w]) => w);
  return [
    'Stand-in specification (written by the example judge from the code, not by a language model).',
    `Approach: ${approach}`,
    `Algorithm: ${name}`,
    `Parameters: ${params}`,
    `Identifiers: ${words.join(' ')}`,
    '',
  ].join('\n');
}

function parseSpec(spec) {
  const line = (key) => new RegExp(`^${key}: (.*)$`, 'm').exec(spec)?.[1] ?? '';
  let params = {};
  try {
    params = JSON.parse(line('Parameters') || '{}');
  } catch {
    params = {};
  }
  return { algorithm: line('Algorithm'), params, words: new Set(line('Identifiers').split(' ').filter(Boolean)) };
}

function distance(x, y) {
  const shared = [...x.words].filter((w) => y.words.has(w)).length;
  const union = new Set([...x.words, ...y.words]).size;
  const jaccard = union === 0 ? 1 : shared / union;
  if (x.algorithm !== y.algorithm) return 1 - jaccard + 1;
  const keys = Object.keys(x.params).filter((k) => typeof y.params[k] === 'number');
  const diff = keys.map((k) => Math.abs(Math.log((1 + Math.abs(x.params[k])) / (1 + Math.abs(y.params[k])))));
  const mean = diff.length === 0 ? 0 : diff.reduce((s, v) => s + v, 0) / diff.length;
  return 1 - jaccard + Math.min(0.3, mean);
}
