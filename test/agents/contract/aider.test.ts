import { aiderHarness } from './aider.js';
import { agentContract } from './suite.js';

agentContract(aiderHarness);
