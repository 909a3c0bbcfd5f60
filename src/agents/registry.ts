// Which adapter runs an agent of a given kind.
import type { Config } from '../core/config.js';
import type { AgentAdapter, AgentFactory } from './agent.js';
import { aiderAgent } from './aider.js';
import { claudeCodeAgent } from './claude-code.js';
import { codexAgent } from './codex.js';
import { command } from './command.js';
import { copilotAgent } from './copilot.js';
import { geminiAgent } from './gemini.js';
import { opencodeAgent } from './opencode.js';
import { adapterOf } from './runner.js';

const FACTORIES: Record<Config['agent']['kind'], AgentFactory> = {
  command: (agent) => adapterOf(command, agent),
  'claude-code': claudeCodeAgent,
  codex: codexAgent,
  copilot: copilotAgent,
  gemini: geminiAgent,
  aider: aiderAgent,
  opencode: opencodeAgent,
};

export function agentFor(config: Config): AgentAdapter {
  return FACTORIES[config.agent.kind](config.agent);
}
