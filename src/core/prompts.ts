// Prompts: a branch prompt for an episode that starts with a fresh context, and a short
// continuation prompt for one that carries its context on. Neither states the budget (as in the
// paper): the budget only bounds the session.
import type { Config } from './config.js';
import { keepsLosers, sectionRound } from './losers.js';
import { describeEpisodeId } from './names.js';
import type { Episode, RunState } from './state.js';
import { formatNumber } from './text.js';

export const DEFAULT_BRANCH_TEMPLATE = `You are working on an open-ended task in the current folder.{{#fresh}} This session has no earlier conversation: everything learned so far is in the files, above all in {{journal}}.{{/fresh}}

## The task
{{task}}

## The files
- The workspace: every file in this folder is yours to read and change, except the protected ones.
- {{journal}}: the journal. Each entry says what was tried and what score it got.{{#losers}}
- In {{journal}}, a section headed "Branches that lost round N" holds what branches discarded at a fork point wrote in their journals: ideas already tried from an earlier workspace, with the score each of those branches reached. Their notes are quoted (lines starting with ">"), not checked; read them as leads, not facts, and leave the section as it is.{{/losers}}
- The score: run \`{{grade}}\` from this folder; the last line it prints is the score.
- Protected (restored before the final grading; changing them voids your score): {{protected}}.

## Where things stand
- Best score so far: {{best}}.
- Goal: {{goal}}.
- Hard constraint: the grader must run and print a score; a workspace without a score never counts.

## How to work
1. Read {{journal}} and the code before you change anything, so you do not repeat what already failed.
2. Do not limit yourself to small edits: if the current approach has stalled, replace it.
3. After every change, run the grader and add an entry to {{journal}}: the idea, the change, the score.
4. Your session ends at a limit you are not told; keep the workspace working and the journal current.
5. When you stop, print the best score you reached and what produced it.
{{#directive}}

## Your direction
Try a substantially different approach from those the journal describes, not a refinement of them.
{{/directive}}`;

export const DEFAULT_CONTINUATION_TEMPLATE = `Continue working on the task. Best score so far: {{best}} ({{goal}}). After every change run \`{{grade}}\` and add an entry to {{journal}}.`;

/** The values a template can use, and what each one is (shown when a template names another). */
export const TEMPLATE_VARIABLES = {
  task: 'the task description',
  journal: 'the journal file',
  grade: 'the command that prints the score',
  protected: 'the protected paths',
  best: 'the best score so far and where it is',
  goal: 'maximize or minimize the score',
  direction: '"maximize" or "minimize"',
  fresh: 'section shown when the episode starts with no conversation',
  directive: 'section shown when the branch is told to try a different approach',
  losers: 'section shown when the journal keeps what the branches that lost a fork round wrote (fork.losers: journal)',
  episode: 'the episode id (r<round>.b<branch>)',
} as const;

export type TemplateValues = Record<keyof typeof TEMPLATE_VARIABLES, string | boolean>;

export class TemplateError extends Error {
  override name = 'TemplateError';
}

/**
 * Renders `{{name}}` and `{{#name}}...{{/name}}` (shown when the value is true or a non-empty
 * string). An unknown name is an error that says which names exist.
 */
export function renderTemplate(template: string, values: TemplateValues, source: string): string {
  const known = Object.keys(TEMPLATE_VARIABLES);
  const check = (name: string, index: number) => {
    if (!known.includes(name)) {
      const line = template.slice(0, index).split('\n').length;
      throw new TemplateError(`${source}:${line}: unknown placeholder {{${name}}}; valid: ${known.join(', ')}`);
    }
  };
  const sections = template.replace(
    /\{\{#(\w+)\}\}([\s\S]*?)\{\{\/\1\}\}/g,
    (_all, name: string, body: string, index: number) => {
      check(name, index);
      const v = values[name as keyof TemplateValues];
      return v === true || (typeof v === 'string' && v !== '') ? body : '';
    },
  );
  return sections.replace(/\{\{\s*([#/]?\w+)\s*\}\}/g, (_all, name: string, index: number) => {
    if (name.startsWith('#') || name.startsWith('/')) {
      throw new TemplateError(`${source}: section {{${name}}} is not closed or not opened`);
    }
    check(name, index);
    const v = values[name as keyof TemplateValues];
    return typeof v === 'string' ? v : '';
  });
}

export interface PromptInputs {
  config: Config;
  episode: Episode;
  task: string;
  /** The best score so far and where it is, e.g. "12.5 (round 2, branch 1)", or null. */
  best: { score: number; where: string } | null;
  /** How the agent runs the grader, e.g. "$FORKFLUSH_GRADE". */
  gradeCommand: string;
  templates?: { branch?: string; continuation?: string };
  /** The round whose losers' section forkflush added to this episode's journal (fork.losers: journal). */
  losersAdded?: number;
}

/** The prompt of an episode: the branch prompt for a fresh context, the continuation otherwise. */
export function renderPrompt(p: PromptInputs): string {
  const c = p.config;
  const values: TemplateValues = {
    // Task text can come from untrusted sources (an issue body): it is quoted as data, never merged into the rules.
    task: quoteTask(p.task),
    journal: c.journal,
    grade: p.gradeCommand,
    protected: c.grader.protected.length > 0 ? c.grader.protected.join(', ') : 'none',
    best: p.best ? `${formatNumber(p.best.score, 6)} (${p.best.where})` : 'none yet',
    goal:
      c.grader.direction === 'maximize'
        ? 'maximize the score (higher is better)'
        : 'minimize the score (lower is better)',
    direction: c.grader.direction,
    fresh: p.episode.context === 'fresh',
    directive: p.episode.directive,
    losers: keepsLosers(c),
    episode: p.episode.id,
  };
  // A copied context (fork-only) continues a conversation too, so it gets the continuation prompt.
  const carried = p.episode.context !== 'fresh';
  const template = carried
    ? (p.templates?.continuation ?? DEFAULT_CONTINUATION_TEMPLATE)
    : (p.templates?.branch ?? DEFAULT_BRANCH_TEMPLATE);
  const source = carried ? (c.prompts.continuation ?? 'continuation prompt') : (c.prompts.branch ?? 'branch prompt');
  const text = renderTemplate(template, values, source);
  const notes = [
    ...(carried && p.losersAdded !== undefined
      ? [
          `forkflush added to ${c.journal} what the branches that lost round ${p.losersAdded} wrote in their journals, in a section of its own: ideas already tried, quoted, not checked.`,
        ]
      : []),
    ...(carried && p.episode.directive
      ? ['For this branch: try a substantially different approach from those the journal describes.']
      : []),
    // A writer's words (a review of the run's pull request), quoted as data like the task.
    ...(p.episode.asked
      ? [
          `For this round, someone with write access to the repository asked you to try this:\n\n${quoteTask(p.episode.asked)}`,
        ]
      : []),
  ];
  return [text, ...notes].join('\n\n');
}

/** The prompt of an episode of a run, as every shell gives it: the grader is `$FORKFLUSH_GRADE`. */
export function episodePrompt(
  state: RunState,
  episode: Episode,
  task: string,
  templates: { branch?: string; continuation?: string },
): string {
  const added = sectionRound(state, episode)?.index;
  return renderPrompt({
    config: state.config,
    episode,
    task,
    best: state.best ? { score: state.best.score, where: describeEpisodeId(state.best.episode) } : null,
    gradeCommand: '$FORKFLUSH_GRADE',
    templates,
    ...(added !== undefined ? { losersAdded: added } : {}),
  });
}

/**
 * The config's prompt templates, read from where the run starts (the last commit, the default
 * branch) and tried once: the templates, or the problem in words (a missing file, a bad placeholder).
 */
export async function loadTemplates(
  config: Config,
  read: (path: string) => Promise<string | null>,
  where: string,
): Promise<{ templates: { branch?: string; continuation?: string } } | { problem: string }> {
  const templates: { branch?: string; continuation?: string } = {};
  for (const kind of ['branch', 'continuation'] as const) {
    const path = config.prompts[kind];
    if (!path) continue;
    const text = await read(path);
    if (text === null) return { problem: `prompts.${kind}: ${path} is not in ${where}` };
    templates[kind] = text;
  }
  const problem = templateProblem(config, templates);
  return problem ? { problem } : { templates };
}

function quoteTask(task: string): string {
  const body = task.trim() || '(no description given: read the files and the grader to learn the task)';
  return body
    .split('\n')
    .map((l) => `> ${l}`.trimEnd())
    .join('\n');
}

/** Renders the templates once with sample values: the message of the first problem, or null. */
export function templateProblem(config: Config, templates: { branch?: string; continuation?: string }): string | null {
  const sample: Episode = {
    id: 'r0.b0',
    round: 0,
    branch: 0,
    lineage: 0,
    base: '',
    allowance: 1,
    context: 'fresh',
    contextFrom: null,
    directive: true,
    seed: 1,
  };
  try {
    for (const context of ['fresh', 'carry'] as const) {
      renderPrompt({
        config,
        episode: { ...sample, context },
        task: 'x',
        best: null,
        gradeCommand: 'grade',
        templates,
      });
    }
    return null;
  } catch (e) {
    if (e instanceof TemplateError) return e.message;
    throw e;
  }
}
