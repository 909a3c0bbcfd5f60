import { runInActions } from './actions-mode.js';

process.exitCode = await runInActions();
