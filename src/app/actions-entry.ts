import { runInActions } from './actions.js';

process.exitCode = await runInActions();
