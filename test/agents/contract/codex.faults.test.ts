import { codexHarness } from './codex.js';
import { agentFaults } from './suite.js';

agentFaults(codexHarness);
