import { opencodeHarness } from './opencode.js';
import { agentContract } from './suite.js';

agentContract(opencodeHarness);
