// Writes the bundled MAX-3-SAT instances: uniform random 3-SAT with 300 variables and 1500
// clauses (5 clauses per variable, well past the satisfiability threshold of about 4.27, so no
// assignment satisfies every clause and the question is how many can be satisfied).
// Deterministic: the same seeds always give the same files. Usage: node make-instances.mjs
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const VARIABLES = 300;
const CLAUSES = 1500;
const SEEDS = [11, 22, 33, 44];

// splitmix32: a tiny seeded generator of 32-bit integers.
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

function instance(seed) {
  const next = generator(seed);
  const lines = [
    `c uniform random 3-SAT, ${VARIABLES} variables, ${CLAUSES} clauses, seed ${seed}`,
    'c written by make-instances.mjs; do not edit',
    `p cnf ${VARIABLES} ${CLAUSES}`,
  ];
  for (let c = 0; c < CLAUSES; c++) {
    const vars = [];
    while (vars.length < 3) {
      const v = 1 + (next() % VARIABLES);
      if (!vars.includes(v)) vars.push(v);
    }
    lines.push(`${vars.map((v) => (next() & 1 ? -v : v)).join(' ')} 0`);
  }
  return `${lines.join('\n')}\n`;
}

const here = dirname(fileURLToPath(import.meta.url));
mkdirSync(join(here, 'instances'), { recursive: true });
SEEDS.forEach((seed, i) => {
  const file = join(here, 'instances', `rand3-${String(i + 1).padStart(2, '0')}.cnf`);
  writeFileSync(file, instance(seed));
  console.log(`wrote ${file}`);
});
