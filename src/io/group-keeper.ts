// The keeper of the commands' process groups, for a forkflush that dies without stopping them.
// Every command runs in a group of its own (process.ts) and an 'exit' handler stops them all, but a
// SIGKILL (`kill -9`, the OOM killer) runs no handler. A confined command's bwrap dies with
// forkflush (--die-with-parent); an unconfined one (sandbox: off, or no bubblewrap) ran on: its
// agent spending on its provider, charged nowhere, and writing the workspace a resume checks out
// again. So one small shell, started before the first unconfined command, keeps the list of their
// groups from its stdin, and when that pipe closes (forkflush is gone, however it ended) it stops
// the groups still listed: SIGTERM, a second, then SIGKILL.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { absolutePath } from './executables.js';

// Lines `+<pgid>` and `-<pgid>`; its own signals are ignored (a Ctrl-C reaches forkflush, which
// stops its commands itself, and this must outlive it to do its one job).
const KEEPER = `trap '' INT HUP TERM
live=' '
while IFS= read -r line; do
  case $line in
    +*) live="$live\${line#+} " ;;
    -*) g=\${line#-}; rest=$live; live=' '; for x in $rest; do [ "$x" = "$g" ] || live="$live$x "; done ;;
  esac
done
left=''
for g in $live; do kill -s TERM -- "-$g" 2>/dev/null && left="$left $g"; done
[ -z "$left" ] && exit 0
sleep 1
for g in $left; do kill -s KILL -- "-$g" 2>/dev/null; done
`;

let keeper: ChildProcess | null = null;

/**
 * Starts the keeper, if it does not run yet, before an unconfined command is spawned: then only a
 * pipe write, in the same turn, lies between the command's start and the keeper knowing its group
 * (started after, a forkflush killed during the keeper's own spawn left the command running).
 */
export function startKeeper(): void {
  if (!keeper) {
    // In no folder of the run's, with nothing of its environment: it holds nothing of the run.
    keeper = spawn('/bin/sh', ['-c', KEEPER], {
      cwd: '/',
      env: { PATH: absolutePath(process.env.PATH ?? '') },
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    keeper.on('error', () => {});
    keeper.stdin?.on('error', () => {});
    // Neither the keeper nor its pipe keeps forkflush running.
    keeper.unref();
    (keeper.stdin as { unref?: () => void } | null)?.unref?.();
  }
}

/**
 * A long command's line that tells the keeper its own group before it runs `program` (resolved,
 * so a program that cannot start fails as a spawn does): forkflush tells it after the spawn, and a
 * forkflush killed in between (a busy machine leaves it unscheduled for a while) left the command
 * running. Its fd 3 is `keeperInput()`, closed for the program; the keeper's end is written in a
 * subshell, so a keeper gone (SIGPIPE) takes no command with it.
 */
export function selfKept(program: string, args: string[]): Launch {
  const line = '(echo "+$$" >&3) 2>/dev/null; exec 3>&- "$0" "$@"';
  return { file: '/bin/sh', args: ['-c', line, program, ...args], keeperAt3: true };
}

/** How a command is started: its program and arguments, and whether its fd 3 is the keeper's input. */
export type Launch = { file: string; args: string[]; keeperAt3?: true };

/** The keeper's input, for a command's fd 3 (selfKept). */
export function keeperInput(): Writable {
  startKeeper();
  return (keeper as ChildProcess).stdin as Writable;
}

function tell(line: string): void {
  startKeeper();
  keeper?.stdin?.write(`${line}\n`);
}

/** The keeper's process, if it runs: it must never be stopped with the commands (Ctrl-Z), or a forkflush killed while stopped leaves them running. */
export function keeperPid(): number | undefined {
  return keeper?.pid;
}

/** A command's group to stop if forkflush dies while the command runs. */
export function keepGroup(pgid: number): void {
  tell(`+${pgid}`);
}

/** The command's leader has exited: its group is no longer the keeper's (its pgid may be reused). */
export function releaseGroup(pgid: number): void {
  if (keeper) tell(`-${pgid}`);
}
