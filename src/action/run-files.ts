// The two files of a run's state ref, as the app writes them: `state.json` (the core's RunState)
// and `run.json` (what the core does not need: the task text, the prompt templates, and where
// the config file is, to protect it).
import { z } from 'zod';
import type { RunState } from '../core/state.js';

export interface RunFacts {
  task: string;
  templates: { branch?: string; continuation?: string };
  /** The config file's path in the repository, e.g. .github/autoresearch.yml. */
  configPath: string;
}

const runFactsSchema = z.object({
  task: z.string(),
  templates: z.object({ branch: z.string().optional(), continuation: z.string().optional() }).default({}),
  configPath: z.string().min(1),
});

export function parseRunFacts(text: string, where: string): RunFacts {
  const parsed = runFactsSchema.safeParse(parseJson(text, where));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${where}: ${issue?.path.join('.') || 'the file'}: ${issue?.message ?? 'not valid'}`);
  }
  const { task, templates, configPath } = parsed.data;
  return {
    task,
    templates: {
      ...(templates.branch !== undefined ? { branch: templates.branch } : {}),
      ...(templates.continuation !== undefined ? { continuation: templates.continuation } : {}),
    },
    configPath,
  };
}

/**
 * The state as the core wrote it. Only its shape is checked: the core made it, and its config was
 * validated when the run started.
 */
export function parseRunState(text: string, where: string): RunState {
  const raw = parseJson(text, where);
  const state = raw as Partial<RunState> | null;
  if (
    typeof state !== 'object' ||
    state === null ||
    state.version !== 1 ||
    typeof state.id !== 'string' ||
    !Array.isArray(state.rounds) ||
    typeof state.config !== 'object'
  ) {
    throw new Error(`${where}: not a forkflush run state (version 1)`);
  }
  return state as RunState;
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${where}: not valid JSON (${(e as Error).message})`);
  }
}
