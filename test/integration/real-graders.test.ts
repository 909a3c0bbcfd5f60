import { describe, expect, it } from 'vitest';
import { isolationFor } from '../../src/worker/boundary.js';
import { cli, said } from './cli-io.js';
import { makeTaskRepo, retask } from './task-repo.js';

const status = async (dir: string) => JSON.parse((await cli('status', dir, '--json')).out);
/** What a terminal shows of a line: colour codes take no room, a carriage return goes back to its start. */
const onScreen = (line: string) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape is what is removed
  line.replace(/\x1b\[[0-9;]*m/g, '');

/** A small config: serial episodes of 6 tokens, the given grader and protected paths. */
const config = (grader: string, protectedPaths: string[], total = 12) => `grader:
  command: ${grader}
  protected: ${JSON.stringify(protectedPaths)}
  timeout: 60
agent:
  command: sh agent.sh
  timeout: 60
budget:
  total: ${total}
  unit: tokens
  episode: 6
strategy: single-run
`;

/** An agent that adds one to value.txt and checks its score with $FORKFLUSH_GRADE, as the prompt tells it to. */
const IMPROVES =
  'cat > /dev/null\nv=$(cat value.txt); echo $((v+1)) > value.txt\n"$FORKFLUSH_GRADE" > /dev/null\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n';

describe('graders real users write', async () => {
  const sandboxed = (await isolationFor('auto')).sandbox !== null;
  if (!sandboxed) console.warn('\n!!!!!!!! REAL-GRADER RUN TESTS SKIPPED: no sandbox here. !!!!!!!!\n');
  const maybe = sandboxed ? it : it.skip;

  // A C or Python project whose test harness is built by the grader inside its own protected
  // folder (`make -C tests`, `cc -o tests/build/check`, pytest's --junitxml=tests/report.xml),
  // `tests/**` protected as `forkflush init --protected` suggests. The dry run graded the initial
  // workspace without a check of what the grader made under protected paths and said "the checks
  // passed". In the run, every $FORKFLUSH_GRADE the agent called left tests/build/v in its live
  // workspace; the snapshot (worker/snapshot.ts) recorded it as the agent's change to a protected
  // path, every episode got "no score: the agent changed protected paths: tests/build/v", and
  // after the opening round the run stopped (exit 1), its budget for those episodes spent, telling
  // the user "the agent changes what grader.protected keeps every time: say in the task that it
  // must not": the agent never wrote there, the grader did. (An agent that never grades fared no
  // better: the judge's tests/ is read-only, so the build failed there.) The initial grade now
  // lists what the grader wrote at protected paths (local/initial-grade.ts, worker/snapshot.ts
  // offCommitAtProtectedPaths) and refuses before any agent runs.
  maybe(
    'a grader that builds into its protected tests folder: the run and its dry run refuse before any agent, naming what it wrote',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          'tests/grade.sh': 'mkdir -p tests/build && cp value.txt tests/build/v && cat tests/build/v\n',
          'agent.sh': IMPROVES,
        },
        config('sh tests/grade.sh', ['tests/**']),
      );
      for (const how of [['--dry-run'], []]) {
        const r = await cli('run', repo.dir, ...how);
        const told = said(r.err).join('\n');
        expect(told).not.toMatch(/the agent changes what grader.protected keeps/);
        expect(r.code, `${how.join(' ') || 'run'}: ${r.out}\n${r.err}`).toBe(2);
        expect(told).toContain('tests/build/v');
      }
    },
    300_000,
  );

  // A benchmark grader (a timing, a sampled metric) whose score varies from one run to the next on
  // the same code. The README calls the grader deterministic, and nothing checked it: each lucky
  // regrade could become the run's best, the run exit 0 with no warning, the user read noise as
  // progress (in a fork round the same noise picks the winner). A quick initial grading is now run
  // twice, and two scores for the same commit are said before the night (local/initial-grade.ts).
  // (An episode's tree is never graded twice alone: each adds its journal line, review r11.)
  maybe(
    'a noisy grader: the run says, before any agent, that the same commit got two scores',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          // value x 1e9, plus the clock's nanoseconds: two gradings never agree.
          'grade.sh': 'echo $(( $(cat value.txt) * 1000000000 + $(date +%N | sed "s/^0*//;s/^$/0/") ))\n',
          'agent.sh': IMPROVES,
        },
        config('sh grade.sh', ['grade.sh']),
      );
      for (const how of [['--dry-run'], []]) {
        const r = await cli('run', repo.dir, ...how);
        expect(said(r.err).join('\n'), `${r.out}\n${r.err}`).toMatch(
          /the grader gave the initial workspace two scores, \d+ and \d+, graded twice as committed: a grader that is not deterministic/,
        );
      }
      // A deterministic grader says nothing of the kind (the rows below, and review r11's).
    },
    300_000,
  );

  // A deterministic "lines of code" grader (cloc, `wc -l` over the repository: a task to make the
  // code smaller) and a run whose second episode changes nothing (review r11, of a first warning
  // that compared episodes' scores; the initial grading twice replaced it). The journal (NOTES.md) gets
  // r0.b0's line when its result is committed (worker/episode-result.ts commitResult), after the
  // judge graded r0.b0's tree, so r1.b0 grades r0.b0's files plus that line: one more line, a
  // different score, every time. core/end-warnings.ts regradedDifferently keys scores by commit
  // and takes "changed nothing" for "the same files", so the run ends with "warning: the grader
  // gave the same files different scores ... A grader that is not deterministic (a timing, a
  // sample) makes the best ... partly luck: have grader.command repeat its measurement and print
  // the mean". The grader is deterministic; the user is sent to rewrite a correct grader (and the
  // same follows for a fork round's losers section, added to the journal before the agent runs).
  maybe(
    'a deterministic grader that reads the journal: an unchanged episode is not called a non-deterministic regrade',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          // Lines of every file but git's: deterministic for a given tree.
          'grade.sh': "find . -name .git -prune -o -type f -print | sort | xargs cat | wc -l | tr -d ' '\n",
          'agent.sh':
            'cat > /dev/null\nif [ "$FORKFLUSH_EPISODE" = r0.b0 ]; then echo 1 > value.txt; fi\n"$FORKFLUSH_GRADE" > /dev/null\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
        },
        config('sh grade.sh', ['grade.sh'], 12),
      );
      const r = await cli('run', repo.dir);
      const s = await status(repo.dir);
      const scores = s.rounds.flatMap((round: { episodes: { id: string; score: number | null }[] }) =>
        round.episodes.map((e) => `${e.id}=${e.score}`),
      );
      expect(said(r.err).join('\n'), `${scores.join(' ')}\n${r.out}\n${r.err}`).not.toMatch(
        /not deterministic|different scores/i,
      );
    },
    300_000,
  );
  // A shell grader that prints its score in colour (`printf '\033[32m%s\033[0m\n' "$score"`, a
  // test runner's coloured summary, rich/chalk forced on). The score line is not a bare number,
  // and the reason quotes it with its colour codes removed: the dry run prints (its escape codes
  // raw, which the terminal renders) "initial workspace: no score (the grader's last line is not a
  // number: 0)", and the run's stop says "(the grader's last line is not a number: 1)". The user
  // is told that "1" is not a number, and looks everywhere but at the colour. core/score.ts
  // parseScore reads the line with its escapes; core/text.ts plainText then hides them in the
  // reason. The number a terminal shows is read.
  maybe(
    "a score printed in colour: the reason does not call the number the user sees 'not a number'",
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        { 'grade.sh': 'printf "\\033[32m%s\\033[0m\\n" "$(cat value.txt)"\n', 'agent.sh': IMPROVES },
        config('sh grade.sh', ['grade.sh']),
      );
      const dry = await cli('run', repo.dir, '--dry-run');
      const initial = onScreen(dry.out.split('\n').find((l) => l.startsWith('initial workspace:')) ?? '');
      expect(initial).not.toMatch(/is not a number: 0\)/);
      expect(initial).toBe('initial workspace: score 0');
      const r = await cli('run', repo.dir);
      expect(said(r.err).join('\n')).not.toMatch(/is not a number: 1\)/);
    },
    300_000,
  );

  // A hand-written benchmark that shows its progress on stdout with carriage returns, Python's
  // `print(f"case {i}/{n}", end="\r")`, then prints the score. A terminal shows the score at the
  // start of the last line; the grader's output holds "case 1/3\rcase 2/3\rcase 3/3\r0". core/
  // score.ts parseScore splits lines on "\n" only, so the last line is all of it, and the reason,
  // its carriage returns removed (core/text.ts plainText), reads "the grader's last line is not a
  // number: case 1/3case 2/3case 3/30": a "3/30" the grader never printed, the score glued to the
  // progress (the dry run prints the carriage returns raw, and the terminal writes over the start of its own line). The run spends its opening round and stops. Treating a carriage return as the end
  // of a line (as the terminal the user tried it in does) reads 0.
  maybe(
    'progress with carriage returns before the score: the score is read, not glued to the progress',
    async () => {
      const repo = makeTaskRepo();
      retask(
        repo,
        {
          'grade.sh': 'for i in 1 2 3; do printf "case %s/3\\r" $i; done\ncat value.txt\n',
          'agent.sh': IMPROVES,
        },
        config('sh grade.sh', ['grade.sh']),
      );
      const dry = await cli('run', repo.dir, '--dry-run');
      expect(dry.out).toMatch(/^initial workspace: score 0$/m);
    },
    300_000,
  );
});
