// A scripted stand-in for an AI coding agent, for forkflush's `command` agent contract. It does
// what the agents in the fork-and-flush paper do on MAX-3-SAT, without a language model: it knows
// a handful of real local-search algorithms, writes one of them into solver.mjs with concrete
// parameters, runs the grader, logs the try in NOTES.md and keeps the best solver.
//
// Contract (see forkflush's README): the workspace is the current folder; the prompt comes on
// stdin and in $FORKFLUSH_PROMPT_FILE; $FORKFLUSH_CONTEXT_DIR holds the agent's "chat memory"
// (empty for a fresh context); $FORKFLUSH_BUDGET is what this session may spend, in
// $FORKFLUSH_BUDGET_UNIT; spend is reported as {"spent": N} in $FORKFLUSH_USAGE_FILE;
// $FORKFLUSH_GRADE runs the grader; $FORKFLUSH_SEED is the only source of randomness.
//
// Behaviour that models the paper's "idea basin":
// - a fresh context reads the journal and picks an approach: half the time the journal's best
//   approach with new random parameters, otherwise another one (untried ones first);
// - a carried context keeps its line of work (its approach, or the workspace's solver if that is
//   ahead) and only nudges the best parameters it has seen; it rarely (8%) switches approach;
// - told to try "a substantially different approach", it leaves the journal's best approach.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SOLVER = 'solver.mjs';
const JOURNAL = 'NOTES.md';
const MEMORY = 'memory.json';

// ---------------------------------------------------------------- environment and randomness

function required(name) {
  const value = process.env[name];
  if (value === undefined || value === '') {
    process.stderr.write(`agent: ${name} is not set; run me through forkflush (or set it by hand)\n`);
    process.exit(2);
  }
  return value;
}

const contextDir = required('FORKFLUSH_CONTEXT_DIR');
const usageFile = required('FORKFLUSH_USAGE_FILE');
const gradeCommand = required('FORKFLUSH_GRADE');
const budget = Number(required('FORKFLUSH_BUDGET'));
const unit = process.env.FORKFLUSH_BUDGET_UNIT ?? 'tokens';
const seedText = required('FORKFLUSH_SEED');
if (!Number.isFinite(budget) || budget < 0) {
  process.stderr.write(`agent: FORKFLUSH_BUDGET must be a number, got ${process.env.FORKFLUSH_BUDGET}\n`);
  process.exit(2);
}

/** mulberry32 over a 32-bit FNV-1a hash of the seed text. */
function seededRandom(text) {
  let h = 0x811c9dc5;
  for (const ch of String(text)) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  let a = h;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = seededRandom(seedText);
const uniform = (lo, hi) => lo + (hi - lo) * random();
const integer = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const logUniform = (lo, hi) => Math.exp(uniform(Math.log(lo), Math.log(hi)));
const choose = (items) => items[Math.floor(random() * items.length)];
const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));
const round2 = (x) => Math.round(x * 100) / 100;

function readPrompt() {
  const file = process.env.FORKFLUSH_PROMPT_FILE;
  let fromStdin = '';
  if (!process.stdin.isTTY) {
    try {
      fromStdin = readFileSync(0, 'utf8');
    } catch {
      fromStdin = '';
    }
  }
  if (file && existsSync(file)) return readFileSync(file, 'utf8');
  return fromStdin;
}

// ---------------------------------------------------------------- the approaches it knows

// Each approach: how to draw parameters at random, and how to nudge good ones (w = step width,
// 1 or 2). Bounds keep the slowest choice well inside the grader's time limit.
const APPROACHES = {
  random: {
    fresh: () => ({ tries: Math.round(logUniform(1, 150)) }),
    nudge: (p, w) => ({ tries: Math.round(clamp(p.tries * Math.exp(w * uniform(-0.6, 0.6)), 1, 150)) }),
  },
  greedy: {
    fresh: () => ({ restarts: integer(1, 10), sideways: integer(0, 12) }),
    nudge: (p, w) => ({
      restarts: clamp(p.restarts + w * integer(-2, 2), 1, 10),
      sideways: clamp(p.sideways + w * integer(-3, 3), 0, 12),
    }),
  },
  walksat: {
    fresh: () => walksatParams(uniform(0.02, 0.9), logUniform(1000, 8000), integer(1, 4)),
    nudge: (p, w) =>
      walksatParams(
        p.noise + w * uniform(-0.08, 0.08),
        p.flips * Math.exp(w * uniform(-0.4, 0.4)),
        random() < 0.3 ? p.tries + choose([-1, 1]) : p.tries,
      ),
  },
  tabu: {
    fresh: () => ({ tenure: integer(1, 50), flips: Math.round(logUniform(300, 1500) / 100) * 100 }),
    nudge: (p, w) => ({
      tenure: clamp(p.tenure + w * integer(-5, 5), 1, 50),
      flips: clamp(Math.round((p.flips * Math.exp(w * uniform(-0.3, 0.3))) / 100) * 100, 300, 1500),
    }),
  },
};
const NAMES = Object.keys(APPROACHES);
// How likely the agent is to reach for each approach when it picks one without evidence.
const PRIOR = { random: 1, greedy: 3, walksat: 2, tabu: 2 };

function walksatParams(noise, flips, tries) {
  const t = clamp(tries, 1, 4);
  // At most 16 000 flips per instance in all.
  const f = clamp(Math.round(flips / 100) * 100, 500, Math.min(8000, Math.floor(16000 / t / 100) * 100));
  return { noise: round2(clamp(noise, 0.01, 0.95)), flips: f, tries: t };
}

const describe = (approach, params) =>
  `${approach} ${Object.entries(params)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')}`;

// ---------------------------------------------------------------- writing solver.mjs

const COMMON = String.raw`
// --- reading instances, randomness, output ---

// xorshift32 with a fixed seed per instance: the solver prints the same answers on every run.
function generator(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s = (s ^ (s << 13)) >>> 0;
    s = (s ^ (s >>> 17)) >>> 0;
    s = (s ^ (s << 5)) >>> 0;
    return s / 4294967296;
  };
}

// DIMACS CNF -> flat literals, clause starts and, per literal, the clauses it occurs in.
// The literal v has index 2v, the literal -v has index 2v + 1.
function readInstance(file) {
  const text = readFileSync(file, 'latin1');
  let n = 0;
  const lits = [];
  const starts = [0];
  let i = 0;
  while (i < text.length) {
    const ch = text.charCodeAt(i);
    if (ch === 99 /* c */ || ch === 112 /* p */) {
      const eol = text.indexOf('\n', i);
      const line = text.slice(i, eol < 0 ? text.length : eol);
      if (ch === 112) n = Number(line.trim().split(/\s+/)[2]);
      i = eol < 0 ? text.length : eol + 1;
    } else if (ch === 37 /* % */) break;
    else if (ch === 45 /* - */ || (ch >= 48 && ch <= 57)) {
      let sign = 1;
      if (ch === 45) {
        sign = -1;
        i++;
      }
      let x = 0;
      for (let d = text.charCodeAt(i); d >= 48 && d <= 57; d = text.charCodeAt(++i)) x = x * 10 + d - 48;
      if (x === 0) starts.push(lits.length);
      else lits.push(sign * x);
    } else i++;
  }
  if (starts[starts.length - 1] !== lits.length) starts.push(lits.length);
  const m = starts.length - 1;
  const occStart = new Int32Array(2 * n + 3);
  for (const x of lits) occStart[(x > 0 ? 2 * x : -2 * x + 1) + 1]++;
  for (let k = 1; k < occStart.length; k++) occStart[k] += occStart[k - 1];
  const fill = occStart.slice();
  const occ = new Int32Array(lits.length);
  for (let c = 0; c < m; c++) {
    for (let k = starts[c]; k < starts[c + 1]; k++) {
      const x = lits[k];
      occ[fill[x > 0 ? 2 * x : -2 * x + 1]++] = c;
    }
  }
  return { n, m, lits: Int32Array.from(lits), starts: Int32Array.from(starts), occ, occStart };
}

function randomAssignment(n, random) {
  const a = new Uint8Array(n + 1);
  for (let v = 1; v <= n; v++) a[v] = random() < 0.5 ? 1 : 0;
  return a;
}

function printAnswer(file, assign, n) {
  let s = '';
  for (let v = 1; v <= n; v++) s += assign[v] ? '1' : '0';
  console.log(JSON.stringify({ file, assignment: s }));
}
`;

const COUNT = `
function unsatisfiedCount(inst, assign) {
  let bad = 0;
  for (let c = 0; c < inst.m; c++) {
    let ok = false;
    for (let k = inst.starts[c]; k < inst.starts[c + 1] && !ok; k++) {
      const x = inst.lits[k];
      ok = x > 0 ? assign[x] === 1 : assign[-x] === 0;
    }
    if (!ok) bad++;
  }
  return bad;
}
`;

const LOCAL_STATE = `
// --- incremental state for local search ---
// Per clause: how many literals are true, and the xor of the variables of the true literals
// (which is the true variable itself when exactly one is true). Per variable: how many clauses
// flipping it would repair (make) and break (brk). Plus the list of unsatisfied clauses.
class LocalState {
  constructor(inst, assign) {
    const { n, m, lits, starts } = inst;
    this.inst = inst;
    this.assign = assign;
    this.numTrue = new Int32Array(m);
    this.trueXor = new Int32Array(m);
    this.make = new Int32Array(n + 1);
    this.brk = new Int32Array(n + 1);
    this.unsat = new Int32Array(m);
    this.where = new Int32Array(m).fill(-1);
    this.unsatCount = 0;
    for (let c = 0; c < m; c++) {
      for (let k = starts[c]; k < starts[c + 1]; k++) {
        const x = lits[k];
        const v = x > 0 ? x : -x;
        if ((x > 0) === (assign[v] === 1)) {
          this.numTrue[c]++;
          this.trueXor[c] ^= v;
        }
      }
      if (this.numTrue[c] === 0) {
        this.addUnsat(c);
        for (let k = starts[c]; k < starts[c + 1]; k++) this.make[Math.abs(lits[k])]++;
      } else if (this.numTrue[c] === 1) this.brk[this.trueXor[c]]++;
    }
  }

  addUnsat(c) {
    this.where[c] = this.unsatCount;
    this.unsat[this.unsatCount++] = c;
  }

  removeUnsat(c) {
    const i = this.where[c];
    const last = this.unsat[--this.unsatCount];
    this.unsat[i] = last;
    this.where[last] = i;
    this.where[c] = -1;
  }

  flip(v) {
    const { lits, starts, occ, occStart } = this.inst;
    const { numTrue, trueXor, make, brk } = this;
    const value = (this.assign[v] ^= 1);
    const nowTrue = value ? 2 * v : 2 * v + 1;
    const nowFalse = value ? 2 * v + 1 : 2 * v;
    for (let i = occStart[nowTrue]; i < occStart[nowTrue + 1]; i++) {
      const c = occ[i];
      const before = numTrue[c]++;
      if (before === 0) {
        this.removeUnsat(c);
        for (let k = starts[c]; k < starts[c + 1]; k++) make[Math.abs(lits[k])]--;
        brk[v]++;
      } else if (before === 1) brk[trueXor[c]]--;
      trueXor[c] ^= v;
    }
    for (let i = occStart[nowFalse]; i < occStart[nowFalse + 1]; i++) {
      const c = occ[i];
      const after = --numTrue[c];
      trueXor[c] ^= v;
      if (after === 0) {
        this.addUnsat(c);
        for (let k = starts[c]; k < starts[c + 1]; k++) make[Math.abs(lits[k])]++;
        brk[v]--;
      } else if (after === 1) brk[trueXor[c]]++;
    }
  }
}
`;

const SEARCH = {
  random: {
    summary: 'random sampling: draw PARAMS.tries random assignments and keep the best one.',
    code: `
function solve(inst, random) {
  let best = null;
  let bestBad = Infinity;
  for (let t = 0; t < PARAMS.tries; t++) {
    const a = randomAssignment(inst.n, random);
    const bad = unsatisfiedCount(inst, a);
    if (bad < bestBad) {
      bestBad = bad;
      best = a;
    }
  }
  return best;
}
`,
  },
  greedy: {
    summary:
      'steepest-ascent hill climbing (GSAT style). From a random assignment, flip the variable\n' +
      '// that repairs the most clauses net until no flip helps, allowing up to PARAMS.sideways flips\n' +
      '// in a row that change nothing; PARAMS.restarts climbs, keep the best local optimum.',
    code: `
function solve(inst, random) {
  let best = null;
  let bestBad = Infinity;
  const ties = new Int32Array(inst.n);
  for (let r = 0; r < PARAMS.restarts; r++) {
    const s = new LocalState(inst, randomAssignment(inst.n, random));
    let sideways = 0;
    for (let step = 0; step < 20 * inst.n; step++) {
      let top = -Infinity;
      let count = 0;
      for (let v = 1; v <= inst.n; v++) {
        const g = s.make[v] - s.brk[v];
        if (g > top) {
          top = g;
          count = 0;
        }
        if (g === top) ties[count++] = v;
      }
      if (top < 0 || (top === 0 && sideways >= PARAMS.sideways)) break;
      sideways = top === 0 ? sideways + 1 : 0;
      s.flip(ties[Math.floor(random() * count)]);
    }
    if (s.unsatCount < bestBad) {
      bestBad = s.unsatCount;
      best = s.assign.slice();
    }
  }
  return best;
}
`,
  },
  walksat: {
    summary:
      'WalkSAT. Pick an unsatisfied clause at random; flip a variable of it that breaks no\n' +
      '// clause if there is one, else a random one of its variables with probability PARAMS.noise,\n' +
      '// else the one that breaks fewest. PARAMS.tries runs of PARAMS.flips flips; keep the best seen.',
    code: `
function solve(inst, random) {
  const { lits, starts } = inst;
  let best = null;
  let bestBad = Infinity;
  for (let t = 0; t < PARAMS.tries; t++) {
    const s = new LocalState(inst, randomAssignment(inst.n, random));
    if (s.unsatCount < bestBad) {
      bestBad = s.unsatCount;
      best = s.assign.slice();
    }
    for (let f = 0; f < PARAMS.flips && s.unsatCount > 0; f++) {
      const c = s.unsat[Math.floor(random() * s.unsatCount)];
      const from = starts[c];
      const size = starts[c + 1] - from;
      let pick = 0;
      let fewest = Infinity;
      let ties = 0;
      for (let k = from; k < from + size; k++) {
        const v = Math.abs(lits[k]);
        const b = s.brk[v];
        if (b < fewest) {
          fewest = b;
          pick = v;
          ties = 1;
        } else if (b === fewest && random() * ++ties < 1) pick = v;
      }
      if (fewest > 0 && random() < PARAMS.noise) pick = Math.abs(lits[from + Math.floor(random() * size)]);
      s.flip(pick);
      if (s.unsatCount < bestBad) {
        bestBad = s.unsatCount;
        best = s.assign.slice();
      }
    }
  }
  return best;
}
`,
  },
  tabu: {
    summary:
      'tabu search. Each step flips the variable with the best net gain among those not flipped\n' +
      '// in the last PARAMS.tenure steps (a tabu flip is allowed when it reaches a new best);\n' +
      '// PARAMS.flips steps from one random start, keep the best assignment seen.',
    code: `
function solve(inst, random) {
  const s = new LocalState(inst, randomAssignment(inst.n, random));
  const lastFlip = new Int32Array(inst.n + 1).fill(-1000000);
  const ties = new Int32Array(inst.n);
  let best = s.assign.slice();
  let bestBad = s.unsatCount;
  for (let step = 0; step < PARAMS.flips && bestBad > 0; step++) {
    let top = -Infinity;
    let count = 0;
    for (let v = 1; v <= inst.n; v++) {
      const g = s.make[v] - s.brk[v];
      if (step - lastFlip[v] <= PARAMS.tenure && s.unsatCount - g >= bestBad) continue;
      if (g > top) {
        top = g;
        count = 0;
      }
      if (g === top) ties[count++] = v;
    }
    if (count === 0) continue;
    const pick = ties[Math.floor(random() * count)];
    s.flip(pick);
    lastFlip[pick] = step;
    if (s.unsatCount < bestBad) {
      bestBad = s.unsatCount;
      best = s.assign.slice();
    }
  }
  return best;
}
`,
  },
};

function solverSource(approach, params) {
  const search = SEARCH[approach];
  return `// MAX-3-SAT solver: for each DIMACS CNF file named on the command line, prints one JSON line
// {"file": <the name as given>, "assignment": "0101..."}, one character per variable, variable 1 first.
// Approach: ${search.summary}
// Deterministic: a fixed seed per instance.
import { readFileSync } from 'node:fs';

const APPROACH = '${approach}';
const PARAMS = ${JSON.stringify(params)};
${COMMON}${approach === 'random' ? COUNT : LOCAL_STATE}
// --- the search ---
${search.code}
process.argv.slice(2).forEach((file, i) => {
  const inst = readInstance(file);
  const assign = solve(inst, generator(0x5eed + 7919 * (i + 1)));
  printAnswer(file, assign, inst.n);
});
`;
}

// ---------------------------------------------------------------- journal, memory, grading

/** The agent's own journal lines: "- <approach> k=v ...: score X"; the best try per approach. */
function readJournal() {
  const text = existsSync(JOURNAL) ? readFileSync(JOURNAL, 'utf8') : '';
  const best = {};
  const pattern = new RegExp(`^- (${NAMES.join('|')})((?: \\w+=[-\\d.]+)*): score (-?\\d+(?:\\.\\d+)?)\\s*$`);
  for (const line of text.split('\n')) {
    const m = pattern.exec(unquoted(line));
    if (!m) continue;
    const [, approach, rest, score] = m;
    const params = Object.fromEntries(
      rest
        .trim()
        .split(' ')
        .filter(Boolean)
        .map((kv) => {
          const [k, v] = kv.split('=');
          return [k, Number(v)];
        }),
    );
    if (!best[approach] || Number(score) > best[approach].score) best[approach] = { score: Number(score), params };
  }
  return best;
}

/**
 * A journal line without the quote forkflush puts before what the branches that lost a fork round
 * wrote (fork.losers: journal): their tries count as tried, as a reader of the journal would count them.
 */
function unquoted(line) {
  return line.trim().replace(/^> /, '');
}

/** The agent-style lines of the journal, as written by describe(). */
function journalLines() {
  const text = existsSync(JOURNAL) ? readFileSync(JOURNAL, 'utf8') : '';
  return text
    .split('\n')
    .map((l) => /^- (.*?): (score|no score)/.exec(unquoted(l))?.[1])
    .filter(Boolean);
}

/** Which known approach a solver source is, and its parameters; null if it is none of them. */
function recognise(source) {
  const approach = /^const APPROACH = '(\w+)';$/m.exec(source)?.[1];
  const params = /^const PARAMS = (\{.*\});$/m.exec(source)?.[1];
  if (!approach || !APPROACHES[approach] || !params) return null;
  try {
    return { approach, params: JSON.parse(params) };
  } catch {
    return null;
  }
}

function note(line) {
  const text = existsSync(JOURNAL) ? readFileSync(JOURNAL, 'utf8') : '';
  const last = text.trimEnd().split('\n').at(-1) ?? '';
  // A list after a paragraph gets a blank line first.
  const gap = last !== '' && !last.startsWith('- ') ? '\n' : '';
  appendFileSync(JOURNAL, `${text === '' || text.endsWith('\n') ? '' : '\n'}${gap}${line}\n`);
}

function loadMemory() {
  const file = join(contextDir, MEMORY);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

function saveMemory(memory) {
  writeFileSync(join(contextDir, MEMORY), `${JSON.stringify(memory, null, 2)}\n`);
}

let spent = 0;
function reportUsage() {
  writeFileSync(usageFile, `${JSON.stringify({ spent })}\n`);
}

/** Runs the grader: { score } or { score: null, reason }. */
function grade() {
  let stdout;
  try {
    stdout = execFileSync(gradeCommand, [], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 1 << 24,
    });
  } catch (e) {
    const said = `${e.stderr ?? ''}`.trim().split('\n').filter(Boolean).at(-1);
    return { score: null, reason: said ?? (e.status != null ? `the grader exited with code ${e.status}` : e.message) };
  }
  const last = stdout.trim().split('\n').filter(Boolean).at(-1) ?? '';
  const score = Number(last);
  if (last === '' || !Number.isFinite(score))
    return { score: null, reason: `the grader printed no score (${last.slice(0, 60)})` };
  return { score };
}

const hash = (text) => createHash('sha256').update(text).digest('hex').slice(0, 16);
const say = (line) => process.stdout.write(`${line}\n`);

// ---------------------------------------------------------------- the session

const prompt = readPrompt();
const directed = /substantially different approach/i.test(prompt);
const remembered = loadMemory();
const carried = remembered !== null;
const memory = remembered ?? {
  sessions: 0,
  approach: null,
  best: {},
  history: [],
  solverHash: null,
  solverScore: null,
};
memory.sessions += 1;
reportUsage();

const journal = readJournal();
const journalBest = NAMES.filter((a) => journal[a]).sort((a, b) => journal[b].score - journal[a].score)[0] ?? null;
const tried = new Set([...Object.keys(journal), ...Object.keys(memory.best)]);
const seen = new Set([...journalLines(), ...memory.history.map((h) => describe(h.approach, h.params))]);

/** One of `names`, drawn by PRIOR. */
function byPrior(names) {
  let r = random() * names.reduce((sum, a) => sum + PRIOR[a], 0);
  for (const a of names) {
    r -= PRIOR[a];
    if (r < 0) return a;
  }
  return names[names.length - 1];
}

/** Another approach than those in `avoid`, untried ones first. */
function another(avoid) {
  const others = NAMES.filter((a) => !avoid.includes(a));
  const untried = others.filter((a) => !tried.has(a));
  return byPrior(untried.length > 0 ? untried : others);
}

/** Parameters not tried before (as far as the journal and memory tell), from `draw`. */
function untriedParams(approach, draw) {
  let params = draw();
  for (let i = 0; i < 20 && seen.has(describe(approach, params)); i++) params = draw();
  return params;
}

// The solver in the workspace: which of the known approaches it is, with what parameters.
let bestSource = existsSync(SOLVER) ? readFileSync(SOLVER, 'utf8') : '';
const inWorkspace = recognise(bestSource);

// Choose the approach of this session and where its parameters start.
let approach;
let base = null; // parameters to nudge; null = draw new ones
let why;
if (directed) {
  approach = another([journalBest, carried ? memory.approach : null].filter(Boolean));
  why = `told to try a substantially different approach than ${journalBest ?? 'the journal'}'s; trying ${approach}`;
} else if (carried && memory.approach) {
  const own = memory.best[memory.approach];
  if (random() < 0.08) {
    approach = another([memory.approach]);
    why = `continuing, but ${memory.approach} feels stuck: switching to ${approach}`;
  } else if (inWorkspace && (!own || own.score < (memory.solverScore ?? -Infinity))) {
    // My own line of work is behind the solver in the workspace: polish that one instead.
    approach = inWorkspace.approach;
    base = inWorkspace.params;
    why = `continuing; the best solver here is ${describe(approach, base)}, refining it`;
  } else {
    approach = memory.approach;
    base = own?.params ?? null;
    why = `continuing with ${approach}, refining its best parameters`;
  }
} else if (journalBest === null) {
  approach = byPrior(NAMES);
  why = `the journal has no tries yet; starting with ${approach}`;
} else if (random() < 0.5) {
  approach = journalBest;
  why = `the journal's best is ${journalBest} (${journal[journalBest].score}); re-tuning it from new parameters`;
} else {
  approach = another([journalBest]);
  why = `the journal's best is ${journalBest} (${journal[journalBest].score}); trying ${approach} instead`;
}
memory.approach = approach;
say(`agent: ${carried ? 'carried' : 'fresh'} context, budget ${budget} ${unit}. ${why}.`);

// The score of the workspace as it is (graded once, unless memory already knows it).
let bestScore = null;
let bestWhat = inWorkspace
  ? `${describe(inWorkspace.approach, inWorkspace.params)} (found in the workspace)`
  : 'the solver found in the workspace';
if (carried && memory.solverHash === hash(bestSource) && typeof memory.solverScore === 'number') {
  bestScore = memory.solverScore;
  if (memory.solverWhat) bestWhat = memory.solverWhat;
  say(`agent: solver.mjs is as I left it (score ${bestScore}).`);
} else {
  const cost = integer(1, 2);
  if (spent + cost <= budget) {
    spent += cost;
    const g = grade();
    reportUsage();
    bestScore = g.score;
    say(
      `agent: read the code and graded the current solver: ${g.score === null ? `no score (${g.reason})` : g.score}.`,
    );
  }
}
if (base && bestScore !== null && inWorkspace?.approach === approach) {
  const own = memory.best[approach];
  if (!own || own.score < bestScore) memory.best[approach] = { params: base, score: bestScore };
}
memory.solverHash = hash(bestSource);
memory.solverScore = bestScore;
memory.solverWhat = bestWhat;
saveMemory(memory);

let steps = 0;
for (;;) {
  const cost = integer(3, 6);
  if (spent + cost > budget) break;
  const centre = steps === 0 ? base : (memory.best[approach]?.params ?? null);
  const width = random() < 0.25 ? 2 : 1;
  const params = untriedParams(approach, () =>
    centre ? APPROACHES[approach].nudge(centre, width) : APPROACHES[approach].fresh(),
  );
  const what = describe(approach, params);
  seen.add(what);
  const source = solverSource(approach, params);
  writeFileSync(SOLVER, source);
  const g = grade();
  spent += cost;
  steps += 1;
  reportUsage();
  memory.history.push({ session: memory.sessions, approach, params, score: g.score });
  if (g.score === null) {
    note(`- ${what}: no score: ${g.reason}`);
    say(`agent: ${what}: no score (${g.reason})`);
  } else {
    note(`- ${what}: score ${g.score.toFixed(3)}`);
    say(`agent: ${what}: score ${g.score.toFixed(3)}`);
    const mine = memory.best[approach];
    if (!mine || g.score > mine.score) memory.best[approach] = { params, score: g.score };
  }
  if (g.score !== null && (bestScore === null || g.score > bestScore)) {
    bestScore = g.score;
    bestSource = source;
    bestWhat = what;
  } else if (bestSource !== '') {
    writeFileSync(SOLVER, bestSource); // not better: put the best solver back
  }
  memory.solverHash = hash(readFileSync(SOLVER, 'utf8'));
  memory.solverScore = bestScore;
  memory.solverWhat = bestWhat;
  saveMemory(memory);
}
reportUsage();
say(
  bestScore === null
    ? `agent: done after ${steps} tries, spent ${spent} of ${budget} ${unit}; no score yet.`
    : `agent: done after ${steps} tries, spent ${spent} of ${budget} ${unit}. Best score ${bestScore.toFixed(3)}, from ${bestWhat}.`,
);
