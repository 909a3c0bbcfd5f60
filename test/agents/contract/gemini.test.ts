import { geminiHarness } from './gemini.js';
import { agentContract } from './suite.js';

agentContract(geminiHarness);
