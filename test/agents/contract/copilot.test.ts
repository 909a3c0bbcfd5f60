import { copilotHarness } from './copilot.js';
import { agentContract } from './suite.js';

agentContract(copilotHarness);
