// The grader of the MAX-3-SAT example. Runs `node solver.mjs instances/*.cnf`, checks what it
// prints and counts the satisfied clauses over all instances. Diagnostics go to stderr; the last
// line on stdout is the score: 100 * satisfied / total clauses, with 3 decimals. Any failure of the
// solver or any malformed output ends with exit code 1 and no score.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SOLVER_TIMEOUT_MS = 20_000;
const here = dirname(fileURLToPath(import.meta.url));

function fail(reason) {
  process.stderr.write(`grade: ${reason}\n`);
  process.exit(1);
}

/** Reads a DIMACS CNF file: the variable count and the clauses as arrays of literals. */
function readCnf(file) {
  let variables = -1;
  let declared = -1;
  const clauses = [];
  let current = [];
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('c')) continue;
    if (line.startsWith('%')) break;
    if (line.startsWith('p')) {
      const [, format, n, m] = line.split(/\s+/);
      if (format !== 'cnf') fail(`${file}: not a cnf problem line: ${line}`);
      variables = Number(n);
      declared = Number(m);
      continue;
    }
    for (const token of line.split(/\s+/)) {
      const lit = Number(token);
      if (!Number.isInteger(lit)) fail(`${file}: bad literal ${token}`);
      if (lit === 0) {
        clauses.push(current);
        current = [];
      } else current.push(lit);
    }
  }
  if (current.length > 0) clauses.push(current);
  if (variables < 1 || clauses.length !== declared) fail(`${file}: malformed instance`);
  return { variables, clauses };
}

const files = readdirSync(join(here, 'instances'))
  .filter((f) => f.endsWith('.cnf'))
  .sort()
  .map((f) => join('instances', f));
if (files.length === 0) fail('no instances found in instances/');
const instances = new Map(files.map((f) => [resolve(here, f), { name: f, ...readCnf(join(here, f)) }]));

const started = performance.now();
const run = spawnSync(process.execPath, ['solver.mjs', ...files], {
  cwd: here,
  encoding: 'utf8',
  timeout: SOLVER_TIMEOUT_MS,
  killSignal: 'SIGKILL',
  maxBuffer: 64 * 1024 * 1024,
});
const seconds = (performance.now() - started) / 1000;
if (run.error?.code === 'ETIMEDOUT') fail(`the solver did not finish within ${SOLVER_TIMEOUT_MS / 1000} s`);
if (run.error) fail(`the solver could not run: ${run.error.message}`);
if (run.status !== 0) {
  // Name the error itself when there is one (a stack trace's last line says little).
  const lines = (run.stderr ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const tail = lines.find((l) => /^[A-Za-z]*Error\b/.test(l)) ?? lines.at(-1) ?? '';
  fail(
    `the solver ${run.signal ? `was killed by ${run.signal}` : `exited with code ${run.status}`}${tail ? `: ${tail}` : ''}`,
  );
}
process.stderr.write(`grade: the solver took ${seconds.toFixed(2)} s\n`);

const answers = new Map();
for (const line of run.stdout.split('\n')) {
  if (line.trim() === '') continue;
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    fail(`the solver printed a line that is not JSON: ${line.slice(0, 80)}`);
  }
  if (typeof entry?.file !== 'string' || typeof entry?.assignment !== 'string') {
    fail(`each output line needs a string "file" and a string "assignment": ${line.slice(0, 80)}`);
  }
  const key = resolve(here, entry.file);
  const inst = instances.get(key);
  if (!inst) fail(`the solver answered for an unknown file: ${entry.file}`);
  if (answers.has(key)) fail(`the solver answered twice for ${inst.name}`);
  if (entry.assignment.length !== inst.variables) {
    fail(`${inst.name}: the assignment has ${entry.assignment.length} characters, expected ${inst.variables}`);
  }
  if (!/^[01]*$/.test(entry.assignment)) fail(`${inst.name}: the assignment may only contain 0 and 1`);
  answers.set(key, entry.assignment);
}

let satisfied = 0;
let total = 0;
for (const [key, inst] of instances) {
  const assignment = answers.get(key);
  if (assignment === undefined) fail(`the solver gave no assignment for ${inst.name}`);
  let sat = 0;
  for (const clause of inst.clauses) {
    if (clause.some((lit) => (assignment[Math.abs(lit) - 1] === '1') === lit > 0)) sat += 1;
  }
  process.stderr.write(
    `grade: ${basename(inst.name)}: ${sat}/${inst.clauses.length} clauses satisfied (${inst.clauses.length - sat} unsatisfied)\n`,
  );
  satisfied += sat;
  total += inst.clauses.length;
}
process.stderr.write(`grade: ${satisfied}/${total} clauses satisfied in all\n`);
process.stdout.write(`${((100 * satisfied) / total).toFixed(3)}\n`);
