import { geminiHarness } from './gemini.js';
import { agentFaults } from './suite.js';

agentFaults(geminiHarness);
