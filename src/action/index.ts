import { run } from './main.js';

await run();
// Done once its outputs and summary are written: an artifact upload given up on (artifact.ts) lives
// on with its library's own retries, and would keep the job running minutes after its result.
process.exit();
