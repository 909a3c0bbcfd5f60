import { opencodeHarness } from './opencode.js';
import { agentFaults } from './suite.js';

agentFaults(opencodeHarness);
