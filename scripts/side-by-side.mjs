// `node scripts/side-by-side.mjs CMD [CMD...]`: runs shell commands at the same time and fails (exit
// 1) when any of them fails, once all have ended. The first writes to the terminal; each other one's
// output is printed whole when it ends, so two test runs do not interleave their lines.
// `npm run test:agents` runs the faults files (whose rows mostly wait on a CLI's backoff) beside the
// whole runs (which keep the CPU busy), rather than after them.
import { spawn } from 'node:child_process';

const commands = process.argv.slice(2);
if (commands.length === 0) {
  console.error('usage: node scripts/side-by-side.mjs CMD [CMD...]');
  process.exit(2);
}
const ran = commands.map(
  (command, i) =>
    new Promise((resolve) => {
      const child = spawn(command, { shell: true, stdio: i === 0 ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
      const output = [];
      child.stdout?.on('data', (d) => output.push(d));
      child.stderr?.on('data', (d) => output.push(d));
      child.on('exit', (code, signal) => {
        if (i > 0) process.stdout.write(`\n--- ${command}\n${Buffer.concat(output).toString()}`);
        if (code !== 0)
          console.error(`side-by-side: \`${command}\` ${signal ? `ended by ${signal}` : `exited ${code}`}`);
        resolve(code === 0);
      });
    }),
);
process.exit((await Promise.all(ran)).every(Boolean) ? 0 : 1);
