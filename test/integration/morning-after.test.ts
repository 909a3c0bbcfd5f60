// What a team reads the morning after a `forkflush run` left going overnight: the exit code and
// the last lines. Whole runs through the CLI with command agents; each row failed for a fault
// found in review.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, said } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const status = async (dir: string) => JSON.parse((await cli('status', dir, '--json')).out);

describe('a grader that starts failing midway through the night (a dependency removed)', () => {
  // Once any episode had scored, no rule looked at the grader again (core/stop.ts noScoreYet
  // covered the first episodes only): the run spent the rest of its budget on episodes the judge
  // could not grade, and ended "finished", exit 0, without a word about the grader.
  it('does not end green and silent after the judge failed on every episode since', async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh a.sh',
      budget: 'total: 60\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2\n',
    });
    const logs = join(repo.callsLog, '..');
    const dep = join(logs, 'dep.sh');
    writeFileSync(dep, 'cat value.txt\n', { mode: 0o755 });
    // The agent's episode r2.b0 takes the grader's dependency away, as an upgrade in the night would.
    writeFileSync(
      join(repo.dir, 'a.sh'),
      `echo $(( $(cat value.txt) + 1 )) > value.txt\necho '{"spent": 5}' > "$FORKFLUSH_USAGE_FILE"\n` +
        `if [ "$FORKFLUSH_EPISODE" = r2.b0 ]; then rm -f ${dep}; fi\n`,
    );
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8')
        .replace('command: sh grade.sh', `command: sh ${dep}`)
        .replace('sandbox:\n', `sandbox:\n  read: [${JSON.stringify(logs)}]\n`),
    );
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'the grader reads its dependency');

    const r = await cli('run', repo.dir);
    const s = await status(repo.dir);
    const scores = s.rounds.flatMap((x: { episodes: { id: string; score: number | null }[] }) =>
      x.episodes.map((e) => `${e.id}=${e.score}`),
    );
    const facts = `exit ${r.code}; status ${s.status}; spent ${s.budget.spent}/60; episodes ${scores.join(' ')}\n${r.err.slice(-600)}\n${r.out.slice(-400)}`;
    // The premise: episodes scored before r2.b0, and none did after it.
    expect(
      scores.slice(0, 3).every((x: string) => !x.endsWith('=null')),
      facts,
    ).toBe(true);
    expect(r.code, facts).not.toBe(0);
    expect(said(r.err).join('\n'), facts).toMatch(/grader/);
  }, 180_000);
});

describe('an agent that hangs until agent.timeout in every episode after the opening round', () => {
  // core/stop.ts crashStop quoted `last.failure?.quote || last.note` as the agent's last words: for
  // a silent timeout that is forkflush's own spend note, so the stop line read "the last with the
  // agent wrote no usage file; no usage reported: charged 2.4 tokens as an estimate ...".
  it("stops with a line that does not pass forkflush's spend note off as the agent's last words", async () => {
    const repo = makeTaskRepo({
      agentCommand: 'sh a.sh',
      budget: 'total: 40\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2\n',
      files: {
        'a.sh':
          'case "$FORKFLUSH_EPISODE" in r0.*) echo 5 > value.txt; echo \'{"spent": 3}\' > "$FORKFLUSH_USAGE_FILE";; *) sleep 100;; esac\n',
      },
    });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('timeout: 20', 'timeout: 3'));
    repo.git('commit', '-qam', 'a short agent.timeout');
    const r = await cli('run', repo.dir);
    const last = said(r.err).at(-1) ?? '';
    expect(r.code, r.err).toBe(2);
    expect(last, r.err).toMatch(/ran until its time limit/);
    expect(last, r.err).not.toMatch(/the last with the agent wrote no usage file/);
    expect(last, r.err).not.toMatch(/the last with [^,]*charged [\d.]+ tokens as an estimate/);
  }, 180_000);
});
