// failureLine: the line of a failed program's output that says why it failed; agent text made
// safe for a terminal (plainText) and for GitHub (inertOnGitHub, markdownTable, cutText); formatNumber, the figures of tables and messages.
import { describe, expect, it } from 'vitest';
import {
  cutText,
  failureLine,
  formatNumber,
  inertOnGitHub,
  markdownTable,
  plainText,
  shownName,
} from '../../src/core/text.js';

/** The word joiner inertOnGitHub puts in, shown. */
const WJ = '\u2060';

describe('failureLine', () => {
  it("finds Node's error under its code frame, skipping the stack and the version banner", () => {
    const node = [
      '/work/grade.js:3',
      "  throw new Error('boom: the fixture is missing');",
      '  ^',
      '',
      'Error: boom: the fixture is missing',
      '    at Object.<anonymous> (/work/grade.js:3:9)',
      '    at Module._compile (node:internal/modules/cjs/loader:1554:14)',
      '',
      'Node.js v20.20.2',
    ].join('\n');
    expect(failureLine(node)).toBe('Error: boom: the fixture is missing');
  });

  it("finds Node's error with its code in brackets (a package missing from node_modules), not the object's closing brace", () => {
    const node = [
      'node:internal/modules/esm/resolve:873',
      '  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);',
      '        ^',
      '',
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'padder' imported from /work/grade.mjs",
      '    at packageResolve (node:internal/modules/esm/resolve:873:9)',
      '    at ModuleJob._link (node:internal/modules/esm/module_job:168:49) {',
      "  code: 'ERR_MODULE_NOT_FOUND'",
      '}',
      '',
      'Node.js v20.20.2',
    ].join('\n');
    expect(failureLine(node)).toBe(
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'padder' imported from /work/grade.mjs",
    );
  });

  it('finds a Python exception after its Traceback', () => {
    const py = [
      'Traceback (most recent call last):',
      '  File "/work/grade.py", line 4, in <module>',
      '    score = 1 / 0',
      'ZeroDivisionError: division by zero',
    ].join('\n');
    expect(failureLine(py)).toBe('ZeroDivisionError: division by zero');
  });

  it.each([
    ['fatal: not a git repository (or any of the parent directories): .git', 'git'],
    ['error[E0308]: mismatched types', 'rustc'],
    ['panic: runtime error: index out of range [3] with length 3', 'Go'],
    ['TypeError: Cannot read properties of undefined', 'JavaScript'],
  ])('finds %s (%s) among other lines', (line) => {
    expect(failureLine(`compiling…\n${line}\n  more detail\ndone\n`)).toBe(line);
  });

  it('else the last meaningful line; colour codes are dropped; long lines are cut', () => {
    expect(failureLine('step 1\n\u001b[31mthe score file is empty\u001b[0m\n\n')).toBe('the score file is empty');
    expect(failureLine('')).toBe('');
    expect(failureLine('x'.repeat(500), 40)).toHaveLength(40);
  });
});

describe('plainText', () => {
  it('removes whole escape sequences: colours, cursor moves, a window title, a clipboard write', () => {
    const hostile =
      '\r\u001b[2K\u001b[1Ascored 1000000\u001b]0;pwned\u0007 and \u001b]52;c;Y3VybCBldmls\u001b\\done\u009bJ\u0007';
    expect(plainText(hostile)).toBe('scored 1000000 and doneJ');
  });

  it('keeps tabs, newlines and text in any script; drops bidirectional overrides', () => {
    expect(plainText('a\tb\nc — ü 日本')).toBe('a\tb\nc — ü 日本');
    expect(plainText('admin\u202e\u2066txt.exe')).toBe('admintxt.exe');
  });

  it('keeps the word joiner that makes text inert on GitHub', () => {
    expect(plainText(inertOnGitHub('fixes #1'))).toBe(inertOnGitHub('fixes #1'));
  });
});

describe('shownName', () => {
  it('shows a plain name as it is, and one with control or bidi characters quoted, each as \\uXXXX', () => {
    expect(shownName('.githooks/pre-commit')).toBe('.githooks/pre-commit');
    expect(shownName('é/名前 x')).toBe('é/名前 x');
    expect(shownName('.githooks/pre-commit\x1b[1A\r')).toBe('".githooks/pre-commit\\u001b[1A\\u000d"');
    expect(shownName('a\u202eb\x9b')).toBe('"a\\u202eb\\u009b"');
  });
});

describe('inertOnGitHub', () => {
  it('breaks references, mentions and closing keywords with a word joiner', () => {
    const hostile =
      'fixes #12, Resolves org/other#3, CLOSES: https://github.com/o/r/issues/4, gh-12, GH-7, @user, @org/team, fixed\tit';
    expect(inertOnGitHub(hostile)).toBe(
      `f${WJ}ixes #${WJ}12, R${WJ}esolves org/other#${WJ}3, C${WJ}LOSES: https://github.com/o/r/issues/4, ` +
        `gh-${WJ}12, GH-${WJ}7, @${WJ}user, @${WJ}org/team, f${WJ}ixed\tit`,
    );
  });

  it('is idempotent, and leaves alone what GitHub would not link, mention or close', () => {
    const text = 'closes #1 @a GH-2 resolved: #3';
    expect(inertOnGitHub(inertOnGitHub(text))).toBe(inertOnGitHub(text));
    const plain = 'prefixes # 1, fixtures, closest #a, closes, @ home, issue-12, x@-y';
    expect(inertOnGitHub(plain)).toBe(plain);
  });
});

describe('markdownTable', () => {
  it('keeps each row one line, whatever line ending a cell holds (a bare \\r ends a line too)', () => {
    const table = markdownTable(['a', 'b'], [['x\ry', 'p\r\nq\n| r']]);
    expect(table.split(/\r\n?|\n/)).toEqual(['| a | b |', '| --- | --- |', '| x y | p q \\| r |']);
  });
});

describe('cutText', () => {
  it('cuts to the length with a marker, never inside a surrogate pair', () => {
    expect(cutText('abcdef', 6)).toBe('abcdef');
    expect(cutText('abcdefgh', 6, '…')).toBe('abcde…');
    const cut = cutText('ab😀😀😀', 4, '…');
    expect(cut).toBe('ab…');
    expect(cut).not.toMatch(/\p{Cs}/u); // no lone surrogate
  });
});

describe('formatNumber', () => {
  it('rounds to its decimals and drops trailing zeros', () => {
    expect(formatNumber(99.36712)).toBe('99.367');
    expect(formatNumber(2.5, 2)).toBe('2.5');
    expect(formatNumber(400)).toBe('400');
    expect(formatNumber(0)).toBe('0');
  });

  it('never shows a figure that is not zero as 0: a budget of 0.0001 is not a budget of 0', () => {
    expect(formatNumber(0.0001)).toBe('0.0001');
    expect(formatNumber(0.00004167, 2)).toBe('0.000042');
    expect(formatNumber(-0.0002)).toBe('-0.0002');
    expect(formatNumber(0.0005)).toBe('0.001');
  });
});
