import { copilotHarness } from './copilot.js';
import { agentFaults } from './suite.js';

agentFaults(copilotHarness);
