import { claudeHarness } from './claude-code.js';
import { agentFaults } from './suite.js';

agentFaults(claudeHarness);
