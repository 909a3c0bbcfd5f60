// Review of the latest changes (normalGlob, parseCommand): rows that fail on the code as it is.
// Each row's comment says what happens now and what should.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCommand } from '../../src/core/github-text.js';
import { matchesGlob } from '../../src/core/globs.js';

const FILES = ['grade.mjs', 'tests.md', 'a/grade.mjs', 'tests/x', 'tests/sub/y', '.github/autoresearch.yml'];
const dir = mkdtempSync(join(tmpdir(), 'forkflush-self-review-globs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
execFileSync('git', ['init', '-q', dir]);
for (const f of FILES) {
  mkdirSync(join(dir, dirname(f)), { recursive: true });
  writeFileSync(join(dir, f), f);
}
execFileSync('git', ['add', '-A'], { cwd: dir });

describe('normalGlob reads a glob as git reads it', () => {
  it('a `.` part after a wildcard part (`*/.`, `**/.`, `tests/**/.`) selects what git selects: nothing', () => {
    // git drops `.` parts of a pathspec's literal lead only (`tests/.` is `tests`); after a
    // wildcard, `/.` is kept and matches no file. Now normalGlob drops every `.` part, so `*/.`
    // reads as `*` (every top file), `**/.` as `**` (the whole tree, journal included) and
    // `tests/**/.` as `tests/**`. Before the change (only a leading `./` dropped) these matched
    // nothing, as git does.
    for (const pattern of ['*/.', '**/.', 'tests/**/.', 'a/*/.']) {
      const git = execFileSync('git', ['ls-files', '-z', '--', `:(glob)${pattern}`], { cwd: dir, encoding: 'utf8' })
        .split('\0')
        .filter(Boolean)
        .sort();
      expect(FILES.filter((f) => matchesGlob(f, pattern)).sort(), pattern).toEqual(git);
    }
  });
});

describe('parseCommand keeps the words of a fork ask', () => {
  it("a zero-width non-joiner inside a word of the ask (Persian, Hindi) is kept: it is the language's, not a paste's", () => {
    // INVISIBLE drops U+200C and U+200D from the whole comment, the ask included: the Persian word
    // «می‌خواهم» reaches the branches as «میخواهم» (another spelling), an emoji sequence such as
    // 👩‍💻 (woman, U+200D, laptop) as two emoji. The invisible characters need dropping around the
    // command word, not inside the ask.
    const ask = 'یک جستجوی ممنوعه را امتحان کن، می\u200cخواهم سریع‌تر شود 👩\u200d💻';
    const parsed = parseCommand(`/autoresearch fork ${ask}`);
    expect(parsed).toEqual({ command: 'fork', args: ask });
  });
});
