// Which adapter runs an agent of a given kind.
import type { Config } from '../core/config.js';
import type { AgentAdapter } from './agent.js';
import { commandAgent } from './command.js';

export function agentFor(config: Config): AgentAdapter {
  switch (config.agent.kind) {
    case 'command':
      return commandAgent(config.agent.command);
  }
}
