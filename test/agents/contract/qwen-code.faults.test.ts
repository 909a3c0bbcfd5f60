import { qwenHarness } from './qwen-code.js';
import { agentFaults } from './suite.js';

agentFaults(qwenHarness);
