import { claudeHarness } from './claude-code.js';
import { agentContract } from './suite.js';

agentContract(claudeHarness);
