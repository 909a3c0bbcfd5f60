import { codexHarness } from './codex.js';
import { agentContract } from './suite.js';

agentContract(codexHarness);
