// Review of round 11's fixes (a helper's, stop 50): bypasses and regressions. Each row failed
// before its fix, for the reason its comment names; the right behaviour each names now holds.

import { existsSync, lstatSync, mkdtempSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AUTOMATION, matchesAny } from '../../src/core/globs.js';
import { bestBranch } from '../../src/core/names.js';
import { CAT_GRADER, cleanupAttackTemps, describeSandboxed, makeAttackRepo, runLocal } from './helpers.js';

afterAll(cleanupAttackTemps);

describeSandboxed('round 11 review: the runs folder in a result', () => {
  // NEVER_RECORDED keeps `/.forkflush` out of a result through core.excludesFile, the LOWEST
  // precedence of git's ignore sources: a pattern in the workspace's own .gitignore wins over it.
  // The agent writes `.gitignore` with `!/.forkflush` (and its `.forkflush` file) and the snapshot
  // records it, so the best branch carries a `.forkflush` entry, and the take-home merge replaces
  // the user's runs folder (every run's state.json, seal.key) as round 11's FILE row showed.
  // Right behaviour: the name is removed from the index after `git add` (git rm --cached /
  // update-index --force-remove on `.forkflush` at the top), whatever the ignore files say.
  it('a .gitignore negation `!/.forkflush` does not put a .forkflush in the best commit', async () => {
    const repo = makeAttackRepo({
      agent: `echo 7 > value.txt; printf '!/.forkflush\\n' >> .gitignore; echo 'replaced every run folder' > .forkflush`,
      grader: CAT_GRADER,
    });
    const { run, result } = await runLocal(repo);
    expect(result.score, result.reason ?? result.note ?? '').toBe(7);
    const id = basename(run.store.dir);
    const planted = repo.git('ls-tree', '--name-only', bestBranch(id), '--', '.forkflush');
    expect.soft(planted, 'the best commit holds a .forkflush entry of the agent').toBe('');
    repo.git('merge', '--no-edit', '-q', bestBranch(id));
    const runs = join(repo.dir, '.forkflush');
    expect(existsSync(runs) && lstatSync(runs).isDirectory(), 'the runs folder is still a folder').toBe(true);
  }, 180_000);
});

describe("round 11 review: AUTOMATION's coding agents' project settings", () => {
  // Today's AUTOMATION names Claude Code's, Gemini's, Qwen's, Cursor's and opencode.json, but not
  // the project settings of three agents forkflush itself runs (agents/codex.ts, opencode.ts,
  // aider.ts), each of which runs programs when the user starts that agent in the folder after the
  // merge: opencode loads `.opencode/{plugin,plugins}/*.{ts,js}` and `.opencode/opencode.json(c)`
  // from the folder and its parents (strings in opencode-linux-x64 1.18.33: `join(r,".opencode")`,
  // `{plugin,plugins}/*.{ts,js}`); Codex reads a trusted project's `.codex/config.toml` (its
  // message: "project configuration and MCP servers ... including MCP commands outside the
  // sandbox", codex 0.171.0); aider reads `.aider.conf.yml` at the repository's root, whose
  // lint-cmd runs after every edit (auto-lint is on by default) and test-cmd with auto-test. An
  // agent that writes one gets no end-of-run warning, where `.claude/settings.json` gets one.
  // Right behaviour: AUTOMATION also holds `.opencode/**`, `.codex/**` and `.aider.conf.yml`.
  it.each(['.opencode/plugins/x.js', '.opencode/opencode.json', '.codex/config.toml', '.aider.conf.yml'])(
    '%s is named by the end-of-run warning',
    (path) => {
      expect(matchesAny(path, AUTOMATION)).toBe(true);
    },
  );
});

describeSandboxed("round 11 review: the pre-flight's hidden places against the sandbox's", () => {
  // worker/boundary.ts hiddenPlaces now hides the account's passwd home (userInfo().homedir) as
  // well as $HOME, and what a sandbox hides is made afresh inside (0755 folders down to a bind).
  // local/sandbox-view.ts hiddenRoots, which closedPlaces uses to decide which folders above the
  // run folder the sandbox's user must pass through, still knows $HOME only (os.homedir()). Under
  // root with HOME elsewhere (`sudo -E`, a CI container's HOME=/github/home, a script's
  // HOME=$(mktemp -d)) and the repository under /root (0700), the pre-flight refuses every run:
  // "the sandbox's user may not pass through /root ... chmod o+x /root", though /root is hidden
  // and remade inside and the run works (checked with hiddenInSandbox mocked out: score 7); it
  // tells the user to open root's home to every account for nothing. Right behaviour: the
  // pre-flight's hidden roots are the sandbox's (one list, shared with boundary.ts), and the run
  // starts. (Skipped where the account's home is not closed to others or forkflush is not root.)
  const closedHome = process.getuid?.() === 0 && (lstatSync(userInfo().homedir).mode & 0o001) === 0;
  it.runIf(closedHome)(
    'a repository in the passwd home, HOME elsewhere: the run starts and scores',
    async () => {
      const root = mkdtempSync(join(userInfo().homedir, 'ff-review-'));
      const home = mkdtempSync('/tmp/ff-review-home-');
      const saved = process.env.HOME;
      process.env.HOME = home;
      try {
        const repo = makeAttackRepo({ dir: root, agent: 'echo 7 > value.txt', grader: CAT_GRADER });
        const { result } = await runLocal(repo);
        expect(result.score, result.reason ?? result.note ?? '').toBe(7);
      } finally {
        process.env.HOME = saved;
        rmSync(root, { recursive: true, force: true });
        rmSync(home, { recursive: true, force: true });
      }
    },
    180_000,
  );
});
