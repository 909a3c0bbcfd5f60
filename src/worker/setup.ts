// Setup (`setup:` in the config): the commands that prepare a checkout before its episode, outside
// the agent's budget (npm ci, pip install -r requirements.txt). They run twice per episode: in the
// workspace before the agent, and in the judge's clean checkout before grading, since the judge
// grades exactly the committed tree and what setup makes is not committed.
//
// What still applies to setup: its own time limit (setup.timeout, all its commands together),
// the sandbox's confinement of a grader (it runs the checkout's code: install scripts an agent may
// have written), so no forge credential, no record and no other episode's folder; the network
// unless setup.network is false (installing needs it). What does not: the agent's budget and
// agent.timeout, and grader.network.
//
// What setup does to tracked files is undone: the agent starts from exactly its base's files,
// and the judge grades exactly the committed ones. What it adds that git does not track (whole
// folders like node_modules or .venv) is left out of the episode's result, as if ignored.
import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { appendFile, cp, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { FAILURE_LINE_MAX_CHARS, SETUP_OUTPUT_MAX_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { failureLine, plainText } from '../core/text.js';
import { addCleaned, type Cleaned, removeTree, sweepTree } from '../io/agent-files.js';
import { awakeNow } from '../io/awake.js';
import { runShell } from '../io/process.js';
import type { Confinement, Sandbox } from '../io/sandbox.js';
import { episodeLogs, privateTmp } from './boundary.js';
import { excludePatterns, type OwnRepo, restoreTracked, untrackedPaths } from './cleanroom.js';
import { allowedEnv } from './env.js';
import { NEVER_RECORDED } from './snapshot.js';

/** What one run of setup's commands did. */
export interface SetupRun {
  /** Why setup failed (the command and its error), or null when every command succeeded. */
  failure: string | null;
  seconds: number;
  /** The commands and everything they printed. */
  log: string;
  /** What was swept out of the checkout after the commands (sweepTree), before git read it. */
  cleaned: Cleaned;
}

/**
 * Runs setup's commands in `dir`, one after the other, until one fails or the time is up, with
 * setup's environment (an allowlist: the basics and setup.env, never a forge credential), a home
 * and a /tmp of its own in `tmp` (thrown away: setup installs into the checkout), confined when
 * `confine` is given. Then the tracked files are put back as the checkout's index has them
 * (`restore`: forkflush's git and the index `checkoutInto` wrote for `dir`).
 */
export async function runSetup(o: {
  config: Config;
  dir: string;
  restore?: { own: OwnRepo; index: string } | undefined;
  tmp: string;
  source: NodeJS.ProcessEnv;
  confine?: { sandbox: Sandbox; confinement: Confinement } | undefined;
  signal?: AbortSignal | undefined;
}): Promise<SetupRun> {
  const { setup } = o.config;
  await removeTree(o.tmp);
  await mkdir(join(o.tmp, 'home'), { recursive: true });
  const env = { ...setupEnv(o.source, o.config), ...privateTmp(o.tmp, o.confine !== undefined) };
  // In awake time, as each command's limit is: a frozen machine's stretch is no setup's time.
  const started = awakeNow();
  const deadline = started + setup.timeout * 1000;
  const log: string[] = [];
  let failure: string | null = null;
  for (const command of setup.commands) {
    const left = deadline - awakeNow();
    if (left <= 0) {
      failure = `setup timed out after ${setup.timeout} s (setup.timeout), before \`${command}\``;
      break;
    }
    const r = await runShell(command, {
      cwd: o.dir,
      env,
      timeoutMs: left,
      maxOutput: SETUP_OUTPUT_MAX_CHARS,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.confine ? { confine: o.confine } : { track: true }),
    });
    log.push(`$ ${command}\n${r.stdout}${r.stderr}`);
    if (r.stopped === 'timeout')
      failure = `setup timed out after ${setup.timeout} s (setup.timeout), in \`${command}\``;
    else if (r.stopped) failure = `setup was stopped (${r.stopped}) in \`${command}\``;
    else if (r.spawnError) failure = `setup could not start \`${command}\`: ${r.spawnError}`;
    else if (r.exitCode !== 0) {
      const tail = failureLine(r.stderr.trim() ? r.stderr : r.stdout, FAILURE_LINE_MAX_CHARS);
      const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
      failure = `setup failed: \`${command}\` ${how}${tail ? `: ${tail}` : ''}`;
    }
    if (failure) break;
  }
  const seconds = (awakeNow() - started) / 1000;
  await removeTree(o.tmp).catch(() => {});
  // Setup ran the checkout's code (install scripts): what it left there that would stall git goes first.
  const { cleaned } = await sweepTree(o.dir, o.signal, { nestedRepos: false });
  // Setup never changes the files the episode starts from or the judge grades.
  const restored = o.restore ? await restoreTracked(o.restore.own, o.dir, o.restore.index) : [];
  if (restored.length > 0) {
    log.push(
      `(forkflush put back ${restored.length} tracked file(s) setup changed: ${restored.slice(0, 5).join(', ')}${restored.length > 5 ? ', ...' : ''})\n`,
    );
  }
  return { failure: failure === null ? null : plainText(failure), seconds, log: log.join(''), cleaned };
}

/** Setup's environment: the basics and what setup.env lists; forge credentials never. */
export function setupEnv(source: NodeJS.ProcessEnv, config: Config): NodeJS.ProcessEnv {
  return allowedEnv(source, config.setup.env);
}

/** A workspace prepared for its agent, or why it could not be. */
export type PreparedWorkspace =
  | {
      ok: true;
      /** The ignore file that leaves setup's outputs (and NEVER_RECORDED) out of the snapshot. */
      excludes: string;
      /** For the setup log: ran here, or copied from the cache. */
      how: string;
    }
  | { ok: false; reason: string };

/**
 * Prepares an episode's workspace (a fresh checkout of its base): runs setup there, or copies
 * what setup made for the same base from the cache, and writes the ignore file that keeps those
 * outputs out of the episode's result. The log goes to `setup.log` in `scratchDir`.
 */
export async function prepareWorkspace(o: {
  config: Config;
  own: OwnRepo;
  base: string;
  episode: string;
  workspace: string;
  checkoutIndex: string;
  scratchDir: string;
  source: NodeJS.ProcessEnv;
  confine?: { sandbox: Sandbox; confinement: Confinement } | undefined;
  cache?: SetupCache | undefined;
  signal?: AbortSignal | undefined;
  /** Where what was swept out of the workspace after setup is added up (for the episode's note). */
  removed?: Cleaned | undefined;
}): Promise<PreparedWorkspace> {
  const logFile = episodeLogs(o.scratchDir).setup;
  const excludes = join(o.scratchDir, 'setup.exclude');
  const done = async (paths: string[], how: string): Promise<PreparedWorkspace> => {
    // With what running code writes (the snapshot applies this file in place of its own).
    const patterns = excludePatterns(paths);
    await writeFile(excludes, `${patterns}${NEVER_RECORDED}`);
    const made = paths.length === 0 ? 'nothing untracked' : `${paths.length} untracked path(s), left out of the result`;
    await appendFile(logFile, `(setup ${how}: ${made})\n`);
    return { ok: true, excludes, how };
  };
  const here = async (): Promise<{ paths: string[] } | { failure: string }> => {
    const run = await runSetup({
      config: o.config,
      dir: o.workspace,
      restore: { own: o.own, index: o.checkoutIndex },
      tmp: join(o.scratchDir, 'setup-tmp'),
      source: o.source,
      confine: o.confine,
      signal: o.signal,
    });
    await writeFile(logFile, run.log);
    if (o.removed) addCleaned(o.removed, run.cleaned);
    if (run.failure) return { failure: run.failure };
    return { paths: await untrackedPaths(o.own, o.workspace, o.checkoutIndex) };
  };

  const cache = o.config.setup.cache ? o.cache : undefined;
  if (!cache) {
    const r = await here();
    if ('failure' in r) return { ok: false, reason: r.failure };
    return done(r.paths, 'ran in the workspace');
  }
  await rm(logFile, { force: true });
  const tree = await o.own.out(['rev-parse', `${o.base}^{tree}`]);
  const key = cache.key(tree, o.config, setupEnv(o.source, o.config));
  for (let attempt = 0; attempt < 2; attempt++) {
    const hit = await cache.restore(key, o.workspace);
    if (hit) return done(hit.paths, `was copied from the setup cache (made in ${hit.madeBy}, of the same base)`);
    const running = cache.running(key);
    if (!running) break;
    // Another episode of the same base is running setup: its outcome is this one's.
    const outcome = await running;
    if ('failure' in outcome)
      return { ok: false, reason: `${outcome.failure} (in ${outcome.episode}, of the same base)` };
  }
  const r = await cache.fill(
    key,
    o.episode,
    async () => {
      const run = await here();
      if ('failure' in run) return { failure: run.failure, episode: o.episode };
      return { paths: run.paths, episode: o.episode };
    },
    o.workspace,
  );
  if ('failure' in r) return { ok: false, reason: r.failure };
  return done(r.paths, 'ran in the workspace');
}

type CacheOutcome = { paths: string[]; episode: string } | { failure: string; episode: string };

/**
 * Locally, with setup.cache: what setup made for a base, kept in the run folder (which no agent
 * and no setup can see: it is forkflush's private place) and copied into the other workspaces of
 * the same base, never hard-linked (an agent could write through a link into the copy the next
 * one gets). Filled from a workspace right after setup ran there, before its agent starts, so it
 * holds setup's outputs and nothing an agent wrote. Keyed by the base's tree and everything that
 * shapes setup (its commands, environment and network). The judge never uses it.
 */
export class SetupCache {
  private readonly inflight = new Map<string, Promise<CacheOutcome>>();
  /** The entries episodes asked for since the last prune. */
  private readonly wanted = new Set<string>();

  constructor(readonly dir: string) {}

  key(tree: string, config: Config, env: NodeJS.ProcessEnv): string {
    const { commands, network } = config.setup;
    const vars = Object.entries(env).sort(([a], [b]) => (a < b ? -1 : 1));
    return createHash('sha256')
      .update(JSON.stringify({ tree, commands, network, env: vars, platform: process.platform }))
      .digest('hex')
      .slice(0, 32);
  }

  /** The outcome of setup for `key` running in another episode now, if any. */
  running(key: string): Promise<CacheOutcome> | undefined {
    return this.inflight.get(key);
  }

  /**
   * Copies a kept entry into a fresh checkout; null when there is none, or it cannot be copied
   * (then what was copied is removed again, and setup runs there instead).
   */
  async restore(key: string, workspace: string): Promise<{ paths: string[]; madeBy: string } | null> {
    this.wanted.add(key);
    const entry = join(this.dir, key);
    const manifest = await readFile(join(entry, 'manifest.json'), 'utf8').catch(() => null);
    if (manifest === null) return null;
    const copied: string[] = [];
    try {
      const { paths, madeBy } = JSON.parse(manifest) as { paths: string[]; madeBy: string };
      for (const p of paths) {
        const path = p.replace(/\/$/, '');
        await mkdir(dirname(join(workspace, path)), { recursive: true });
        copied.push(join(workspace, path));
        await cp(join(entry, 'files', path), join(workspace, path), COPY);
      }
      return { paths, madeBy };
    } catch {
      for (const path of copied) await removeTree(path);
      return null;
    }
  }

  /**
   * Runs `make` (setup in `workspace`) for `key`; episodes of the same base that ask meanwhile wait
   * for it. On success, what it made is kept for them (where it cannot be copied, it is not kept).
   */
  async fill(
    key: string,
    episode: string,
    make: () => Promise<CacheOutcome>,
    workspace: string,
  ): Promise<CacheOutcome> {
    const pending = (async () => {
      const outcome = await make();
      if ('paths' in outcome) await this.keep(key, episode, outcome.paths, workspace).catch(() => {});
      return outcome;
    })();
    this.inflight.set(key, pending);
    try {
      return await pending;
    } finally {
      this.inflight.delete(key);
    }
  }

  /**
   * Removes every entry no episode asked for since the last prune, and what an interrupted keep
   * left. Called after each round's episodes, with no setup running: a round's episodes start
   * from one base, the next round's from its winner (a new tree) or the same base again, so the
   * entries of older bases would only fill the disk, one copy of setup's output per round.
   */
  async prune(): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const name of names) if (!this.wanted.has(name)) await removeTree(join(this.dir, name));
    this.wanted.clear();
  }

  private async keep(key: string, episode: string, paths: string[], workspace: string): Promise<void> {
    const entry = join(this.dir, key);
    if (await exists(join(entry, 'manifest.json'))) return;
    const tmp = join(this.dir, `.${key}.${randomBytes(4).toString('hex')}`);
    try {
      for (const p of paths) {
        const path = p.replace(/\/$/, '');
        await mkdir(dirname(join(tmp, 'files', path)), { recursive: true });
        await cp(join(workspace, path), join(tmp, 'files', path), COPY);
      }
      await writeFile(join(tmp, 'manifest.json'), JSON.stringify({ paths, madeBy: episode }));
      await rm(entry, { recursive: true, force: true });
      await rename(tmp, entry);
    } finally {
      await removeTree(tmp);
    }
  }
}

/** Copies as they are: links as links (never followed), times kept, blocks shared only copy-on-write. */
const COPY = {
  recursive: true,
  verbatimSymlinks: true,
  preserveTimestamps: true,
  force: true,
  errorOnExist: false,
  mode: constants.COPYFILE_FICLONE,
} as const;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
