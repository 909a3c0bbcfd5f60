// A hostile map judge: the judge is an agent like any other, so it runs where an episode's agent
// does. In its spec step it tries to write the snapshot it reads, to read and write forkflush's
// records, to find a forge token, and prints terminal escapes in its spec; in its triplet step it
// tries to plant an answer in the judge's cache. None of it works, and the map is still drawn from
// what it answered.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
import { attackTemp, cleanupAttackTemps, describeSandboxed, makeAttackRepo, TOKEN } from './helpers.js';

afterAll(cleanupAttackTemps);

const JUDGE = `# The hostile judge: $1 is its log folder (sandbox.write), $2 the task repository.
L="$1"
R="$2"
note() { echo "$1" >> "$L/judge.log"; }
# What a call spent, as a command agent says it: otherwise each is charged its whole allowance.
echo '{"spent": 0.1}' > "$FORKFLUSH_USAGE_FILE"
case "$FORKFLUSH_MAP_STEP" in
spec)
  cat > /dev/null
  if echo x > planted.txt 2>/dev/null; then note "write the snapshot: done"; else note "write the snapshot: refused"; fi
  if cat "$R/.git/config" > /dev/null 2>&1; then note "read the repository's git config: done"; else note "read the repository's git config: refused"; fi
  state=$(ls "$R"/.forkflush/2*/state.json 2> /dev/null | head -1)
  if [ -n "$state" ] && cat "$state" > /dev/null 2>&1; then note "read a run's state: done"; else note "read a run's state: refused"; fi
  if [ -n "$state" ] && echo '{}' > "$state" 2> /dev/null; then note "write a run's state: done"; else note "write a run's state: refused"; fi
  if [ -n "$GITHUB_TOKEN$GH_TOKEN" ]; then note "token: seen"; else note "token: none"; fi
  printf 'The solution \\033]0;pwned\\007keeps \\033[31mvalue.txt\\033[0m as it is.\\n'
  ;;
triplet)
  if mkdir -p "$R/.forkflush/map-cache/planted" 2> /dev/null; then note "plant in the cache: done"; else note "plant in the cache: refused"; fi
  echo a
  ;;
esac
`;

describeSandboxed('a hostile map judge', () => {
  it('cannot change what it reads, reach the records or a token, nor plant answers; its escapes are dropped', async () => {
    const root = attackTemp('map');
    const logs = join(root, 'logs');
    const repoDir = join(root, 'repo');
    const repo = makeAttackRepo({
      dir: root,
      agent: 'sh -c \'echo "{\\"spent\\": 6}" > "$FORKFLUSH_USAGE_FILE"\'',
      budget: 'total: 18\n  unit: tokens\n  episode: 6',
      protected: ['grade.sh', 'judge.sh'],
      files: { 'judge.sh': JUDGE },
      extra: `map:\n  judge: {kind: command, command: ${JSON.stringify(`sh judge.sh ${logs} ${repoDir}`)}}\n  triplets: 10\n`,
    });
    const env = { ...process.env, GITHUB_TOKEN: TOKEN, GH_TOKEN: TOKEN };
    // Its agent changes nothing: the run made nothing to take home (exit 1), and is mapped all the same.
    expect((await cliWith(['run', repo.dir], { env })).code).toBe(1);
    const r = await cliWith(['map', repo.dir], { env });
    expect(r.code, r.err).toBe(0);
    const log = readFileSync(join(logs, 'judge.log'), 'utf8');
    for (const what of [
      'write the snapshot',
      "read the repository's git config",
      "read a run's state",
      "write a run's state",
    ])
      expect(log, log).toContain(`${what}: refused`);
    expect(log).not.toMatch(/: done/);
    expect(log).toContain('token: none');
    expect(log).toContain('plant in the cache: refused');
    // The specs it wrote are kept as plain text.
    const cache = join(repo.dir, '.forkflush', 'map-cache');
    const [judge] = readdirSync(cache);
    const specs = readdirSync(join(cache, judge as string, 'specs'));
    expect(specs.length).toBeGreaterThanOrEqual(3);
    for (const f of specs) {
      const spec = JSON.parse(readFileSync(join(cache, judge as string, 'specs', f), 'utf8')).spec as string;
      expect(spec).toBe('The solution keeps value.txt as it is.\n');
    }
    expect(readdirSync(cache)).toEqual([judge]);
  }, 300_000);
});
