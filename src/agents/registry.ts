// Which adapter runs an agent of a given kind.
import type { Config } from '../core/config.js';
import type { AgentAdapter, AgentFactory } from './agent.js';
import { commandAgent } from './command.js';

const FACTORIES: Record<Config['agent']['kind'], AgentFactory> = {
  command: (agent) => commandAgent(agent.command as string),
};

export function agentFor(config: Config): AgentAdapter {
  return FACTORIES[config.agent.kind](config.agent);
}
