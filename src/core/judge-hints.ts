// What differs where the judge runs a grader from a grader run by hand, named when the reasons
// its gradings failed point at it (the run's no-score stop, the pre-flight of `forkflush run`).
import { DROPPED } from './failure.js';

/**
 * Node failing to load a package by its bare name: never a file that a task starting from nothing
 * leaves the agent to write (that is `Cannot find module './solver'` or an absolute path; Python's
 * `No module named` can be either, so it gets the hint but does not stop a run).
 */
export const MISSING_PACKAGE = /Cannot find package '|Cannot find module '(?![./])/;
const MISSING_DEPENDENCY = /Cannot find (?:package|module)|ERR_MODULE_NOT_FOUND|ModuleNotFoundError|No module named/i;

/** Where the judge's grader finds its dependencies, and how to give them. */
export const DEPENDENCY_HINT =
  'the judge has only the committed files, so a dependency in a folder git ignores (node_modules, .venv) is not there: ' +
  'install it with setup.commands (npm ci, pip install -r requirements.txt), or commit it';

/** What differs in the judge from a grader run by hand, where the reasons point at it. */
const JUDGE_HINTS: [RegExp, string][] = [
  [MISSING_DEPENDENCY, DEPENDENCY_HINT],
  [
    // A connection that dropped (its codes whole words), or a host that no name resolves.
    new RegExp(`${DROPPED.source}|resolve host|name resolution|Network is unreachable`, 'i'),
    "the judge's grader has no network unless grader.network: true",
  ],
  [/not a git repository/i, 'the judge grades a checkout of the commit without .git: the grader cannot run git there'],
  [
    /\bis not set\b|unbound variable|KeyError|environment variable/i,
    'the grader gets only the basics (PATH, locale, proxies) and what grader.env lists',
  ],
  [/timed out after/i, 'grader.timeout is the limit, with the branches graded side by side'],
  [
    /cannot open|No such file|ENOENT|not found/i,
    'the judge has only the committed files (none that .gitignore leaves out), no home folder, and of the folders outside the repository only those sandbox.read lists',
  ],
  [
    /last line is not a number|printed nothing on stdout/i,
    'the score is the last line of its stdout: a bare number, or JSON with a numeric "score"',
  ],
];

/** What differs where the grader runs, for these reasons of its failures: " (as it runs there: ...)", or "". */
export function judgeHint(reasons: string[]): string {
  const hints = JUDGE_HINTS.filter(([re]) => reasons.some((r) => re.test(r))).map(([, hint]) => hint);
  return hints.length > 0 ? ` (as it runs there: ${hints.join('; ')})` : '';
}
