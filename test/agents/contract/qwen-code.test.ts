import { qwenHarness } from './qwen-code.js';
import { agentContract } from './suite.js';

agentContract(qwenHarness);
