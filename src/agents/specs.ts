// The one list of agent kinds, which everything that varies by agent reads. core/config.ts holds the
// kinds' names (the config schema must know them): the type of SPECS makes the two agree.
import type { AgentKind, Config } from '../core/config.js';
import type { AgentAdapter } from './agent.js';
import { aider } from './aider.js';
import { claudeCode } from './claude-code.js';
import { codex } from './codex.js';
import { command } from './command.js';
import { copilot } from './copilot.js';
import { gemini } from './gemini.js';
import { opencode } from './opencode.js';
import { qwenCode } from './qwen-code.js';
import { adapterOf } from './runner.js';
import type { AgentSpec, CliFacts } from './spec.js';
import { capLines, Lines, readTranscript as read, type Transcript, type TranscriptOptions } from './transcript.js';

export const SPECS: Readonly<Record<AgentKind, AgentSpec>> = {
  command,
  'claude-code': claudeCode,
  codex,
  copilot,
  gemini,
  aider,
  opencode,
  'qwen-code': qwenCode,
};

export function specOf(kind: AgentKind): AgentSpec {
  return SPECS[kind];
}

/** The spec of a kind named by the user (a flag, a prompt), or undefined for a name that is none. */
export function specOfName(name: string): AgentSpec | undefined {
  return Object.hasOwn(SPECS, name) ? SPECS[name as AgentKind] : undefined;
}

/** The CLI a kind installs and starts (none for `command`). */
export function cliOf(kind: AgentKind): CliFacts | undefined {
  return SPECS[kind].cli;
}

/** Every kind that has a CLI of its own, with it. */
export function agentClis(): [AgentKind, CliFacts][] {
  return Object.values(SPECS).flatMap((s) => (s.cli ? [[s.kind as AgentKind, s.cli] as [AgentKind, CliFacts]] : []));
}

export function adapterFor(agent: Config['agent']): AgentAdapter {
  return adapterOf(specOf(agent.kind), agent);
}

export function agentFor(config: Config): AgentAdapter {
  return adapterFor(config.agent);
}

/** An agent's final message in what it printed on stdout (a command agent's: the whole of it); null when there is none. */
export function finalMessage(kind: AgentKind, stdout: string): string | null {
  return specOf(kind).finalMessage(stdout);
}

/** The transcript of an agent's log, as its kind's reader makes it. */
export function readTranscript(kind: AgentKind, logText: string, options: TranscriptOptions = {}): Transcript {
  return read(specOf(kind).transcript, logText, options);
}

/** An episode's transcript: its log's, with the turns a CLI keeps in its context instead (redacted) since `since`. */
export async function episodeTranscript(
  kind: AgentKind,
  logText: string,
  o: TranscriptOptions & { contextDir: string; since: Date; redact: (text: string) => string },
): Promise<Transcript> {
  const t = readTranscript(kind, logText, o);
  const more = specOf(kind).contextTranscript;
  const kept = new Lines(o.workdir, o.redact);
  if (!more || !(await more(o.contextDir, o.since, kept).catch(() => false))) return t;
  const turns = kept.done();
  if (turns.length === 0) return t;
  return { ...t, lines: capLines([...turns, ...t.lines.filter((l) => !l.startsWith('assistant: '))]) };
}
