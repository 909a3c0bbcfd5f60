// Review of the latest GitHub-side changes (missingScript): rows that fail on the code as it is.
// Each row's comment says what happens now and what should.
import { describe, expect, it } from 'vitest';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const said = (h: Harness) => h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));

describe('a run whose scripts are committed starts', () => {
  it('grader.command `deno run --allow-read grade.ts` (grade.ts committed) starts the run', async () => {
    // fileItRuns reads an interpreter's second word as its script: for `deno run ...` (and
    // `bun run x.ts`, `bun test`) that is the subcommand `run`. missingScript then asks the default
    // branch for a file named `run` and refuses the run: "`grader.command` runs `run` (`deno run
    // --allow-read grade.ts`), which is not on `main`". Before the change the label started it.
    const config = CONFIG.replace('node grade.mjs', 'deno run --allow-read grade.ts');
    const h = await new Harness({ '.github/autoresearch.yml': config, 'grade.ts': 'console.log(1)\n' }).load();
    await h.label(7);
    expect(h.gh.dispatches.length, said(h).join('\n')).toBeGreaterThan(0);
  });

  it('grader.command `python3 grader` (a committed package folder with __main__.py) starts the run', async () => {
    // fileItRuns names the folder `grader`; the contents API answers a folder with a listing, which
    // readFile gives as null, so missingScript says "`grader.command` runs `grader` ..., which is not
    // on `main`" and nothing starts. The local pre-flight takes it (git cat-file -e HEAD:grader finds
    // the tree), and so did the label before the change.
    const config = CONFIG.replace('node grade.mjs', 'python3 grader');
    const h = await new Harness({
      '.github/autoresearch.yml': config,
      'grader/__main__.py': 'print(1)\n',
    }).load();
    await h.label(7);
    expect(h.gh.dispatches.length, said(h).join('\n')).toBeGreaterThan(0);
  });
});
