// MAX-3-SAT solver: for each DIMACS CNF file named on the command line, prints one JSON line
// {"file": <the name as given>, "assignment": "0101..."} with one character per variable,
// variable 1 first ('1' = true, '0' = false).
// Approach: none yet. Every variable is set to false.
import { readFileSync } from 'node:fs';

function variableCount(text) {
  const header = text.split('\n').find((line) => line.startsWith('p cnf'));
  if (!header) throw new Error('no "p cnf" line');
  return Number(header.trim().split(/\s+/)[2]);
}

for (const file of process.argv.slice(2)) {
  const n = variableCount(readFileSync(file, 'utf8'));
  console.log(JSON.stringify({ file, assignment: '0'.repeat(n) }));
}
