// Hostile agents and setups around `setup:`: an agent that patches what setup installed (so the
// protected grader would print its number) and tries to poison the setup cache its siblings
// share; a setup command that hunts for forge tokens. Under /var/tmp, in the sandbox (required).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { allEpisodes } from '../../src/core/state.js';
import {
  cleanupAttackTemps,
  describeSandboxed,
  folderText,
  makeAttackRepo,
  runLocal,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);
afterEach(() => {
  delete process.env.GITHUB_TOKEN;
  delete process.env.GH_TOKEN;
  delete process.env.FF_SETUP_CONTROL;
});

/** setup "installs" deps/lib.sh; the protected grader adds its BONUS to the value. */
const SETUP_FILES = {
  'setup.sh': 'mkdir -p deps && echo BONUS=0 > deps/lib.sh\n',
  'grade.sh': '. ./deps/lib.sh\necho $(( $(cat value.txt) + BONUS ))\n',
};

describeSandboxed('setup and hostile agents', () => {
  it('an agent that patches what setup installed, and the setup cache, gets its honest score', async () => {
    const repo = makeAttackRepo({
      // Patch the installed dependency, hunt for the cache in the run folder (hidden), write 5.
      agent:
        'echo BONUS=1000000 > deps/lib.sh; ' +
        'for f in {repo}/.forkflush/*/setup-cache/*/files/deps/lib.sh; do [ -f "$f" ] && echo BONUS=1000000 > "$f" && echo poisoned "$f" >> {logs}/loot; done; ' +
        'ls -d {repo}/.forkflush/*/setup-cache >> {logs}/loot 2>&1; ' +
        `echo 5 > value.txt; echo '{"spent": 1}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: 'sh grade.sh',
      protected: ['grade.sh', 'setup.sh'],
      files: SETUP_FILES,
      budget: 'total: 24\n  unit: tokens\n  episode: 6',
      strategy: 'fork-and-flush',
      extra: 'setup: {commands: [sh setup.sh], cache: true}\nfork: {branches: 2, at: [0.5], branch_budget: 0.25}',
    });
    const { state, run } = await runLocal(repo);
    const episodes = allEpisodes(state);
    expect(episodes.length).toBeGreaterThanOrEqual(4);
    for (const e of episodes) {
      // The judge made deps/lib.sh afresh from the committed tree: BONUS=0, whatever the agent did.
      expect(e.result?.score, e.id).toBe(5);
      expect(showFile(join(repo.dir, '.git'), e.result?.commit ?? '', 'deps/lib.sh'), e.id).toBeNull();
    }
    // The cache was never in the agents' sight, and holds what setup made.
    const loot = folderText(repo.logs);
    expect(loot).not.toContain('poisoned');
    expect(loot).toMatch(/No such file or directory/);
    const cache = run.store.path('setup-cache');
    const entries = readdirSync(cache).filter((n) => !n.startsWith('.'));
    expect(entries.length).toBeGreaterThanOrEqual(1);
    for (const entry of entries) {
      expect(readFileSync(join(cache, entry, 'files', 'deps', 'lib.sh'), 'utf8')).toBe('BONUS=0\n');
    }
    // A whole fork run of sandboxed episodes with setups: over a minute on a busy two-core machine.
  }, 240_000);

  it('a setup command finds no forge token: not in its environment, not in any process it can see', async () => {
    const secret = unique('ghs_setup');
    process.env.GITHUB_TOKEN = secret;
    process.env.GH_TOKEN = secret;
    // setup counts the token's sightings into deps/saw (the workspace's for the agent to commit,
    // the judge's for the grader to print), in its environment and every process's it can see.
    // The needle is put together in the shell and read from a file: no command line holds it.
    // A control, passed on through setup.env, shows that the hunt finds what is there.
    const control = unique('control');
    process.env.FF_SETUP_CONTROL = control;
    const count = (needle: string, into: string) => [
      `a=${needle.slice(0, 8)}; b=${needle.slice(8)}; printf '%s\\n' "$a$b" > "$TMPDIR/needle"`,
      `(env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null) | tr '\\0' '\\n' | grep -c -F -f "$TMPDIR/needle" > ${into} || true`,
    ];
    const hunt = [...count(secret, 'deps/saw'), ...count(control, 'deps/control')].join('\n');
    const repo = makeAttackRepo({
      agent: `cp deps/saw saw.txt; cp deps/control control.txt; echo 1 > value.txt; echo '{"spent": 1}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: 'sh -c ". ./deps/lib.sh; cat deps/saw"',
      protected: ['grade.sh', 'setup.sh'],
      files: { ...SETUP_FILES, 'hunt.sh': `mkdir -p deps\n${hunt}\n` },
      // GITHUB_TOKEN cannot even be listed in setup.env (the config refuses it), nor G* or GH_*.
      extra: 'setup: {commands: [sh setup.sh, sh hunt.sh], env: [FF_SETUP_CONTROL]}',
    });
    const { result } = await runLocal(repo);
    expect(showFile(join(repo.dir, '.git'), result.commit, 'saw.txt')).toBe('0\n');
    expect(Number(showFile(join(repo.dir, '.git'), result.commit, 'control.txt'))).toBeGreaterThanOrEqual(1);
    expect(result.score).toBe(0);
  });
});
