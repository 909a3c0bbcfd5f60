// The CLI's commands, one file each (run.ts, resume.ts, status.ts, plan.ts, init.ts, compare.ts,
// probe.ts, map.ts): this file reads the command line, answers --version, help and schema, sends
// every other command to its file, and turns an error into one line and an exit code.
import { tmpdir } from 'node:os';
import pkg from '../../package.json' with { type: 'json' };
import { ConfigError, configJsonSchema } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { RecordError } from '../core/records.js';
import { diskFull } from '../worker/episode-errors.js';
import { COMMANDS, commandUsage, parseCommandLine, usage } from './args.js';
import { compareCommand } from './compare.js';
import { initTask } from './init.js';
import type { Io } from './io.js';
import { mapCommand } from './map.js';
import { planCommand } from './plan.js';
import { probeCommand } from './probe.js';
import { resumeCommand } from './resume.js';
import { runCommand } from './run.js';
import { statusCommand } from './status.js';

export type { Io } from './io.js';

export const VERSION: string = pkg.version;

export async function main(argv: string[], io: Io): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (e) {
    if (e instanceof ConfigError) {
      io.stderr.write(`forkflush: the config is not valid:\n${e.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return 2;
    }
    if (e instanceof UserError || e instanceof RecordError) {
      io.stderr.write(`forkflush: ${e.message}\n`);
      return 2;
    }
    const err = e as Error;
    // Where the command worked: here, the folders it was given, the temp folder.
    const full = await diskFull(e, [process.cwd(), ...argv.filter((a) => !a.startsWith('-')), tmpdir()]);
    if (full) {
      io.stderr.write(`forkflush: the disk is full (${full}): free some space, then run the command again\n`);
      return 1;
    }
    io.stderr.write(`forkflush: failed: ${err.message}\n`);
    if ((io.env ?? process.env).FORKFLUSH_DEBUG) io.stderr.write(`${err.stack}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: Io): Promise<number> {
  const p = parseCommandLine(argv);
  if (p.version) {
    io.stdout.write(`forkflush ${VERSION}\n`);
    return 0;
  }
  if (p.command === null) {
    // No command: the usage is the answer to --help, and a mistake otherwise.
    (p.help ? io.stdout : io.stderr).write(usage(VERSION));
    return p.help ? 0 : 2;
  }
  if (p.help) {
    io.stdout.write(commandUsage(p.command));
    return 0;
  }
  const name = p.command.name;
  if (name === 'help') {
    const [topic] = p.positionals;
    const c = topic ? COMMANDS.find((x) => x.name === topic) : undefined;
    if (topic && !c) throw new UserError(`no command "${topic}": use ${COMMANDS.map((x) => x.name).join(', ')}`);
    io.stdout.write(c ? commandUsage(c) : usage(VERSION));
    return 0;
  }
  if (name === 'schema') {
    if (p.positionals.length > 0) throw new UserError('forkflush schema takes no arguments');
    io.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    return 0;
  }
  const [dir = '.', ...extra] = p.positionals;
  if (extra.length > 0)
    throw new UserError(`unexpected argument ${extra[0]}: give one folder (see forkflush help ${name})`);
  switch (name) {
    case 'plan':
      return planCommand(dir, p, io);
    case 'run':
      return runCommand(dir, p, io);
    case 'resume':
      return resumeCommand(dir, p, io);
    case 'status':
      return statusCommand(dir, p, io);
    case 'init':
      return initTask(dir, p.values, io);
    case 'compare':
      return compareCommand(dir, p, io);
    case 'probe':
      return probeCommand(dir, p, io);
    case 'map':
      return mapCommand(dir, p, io);
  }
  throw new UserError(`unknown command "${name}"`);
}
