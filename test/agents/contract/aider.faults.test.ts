import { aiderHarness } from './aider.js';
import { agentFaults } from './suite.js';

agentFaults(aiderHarness);
