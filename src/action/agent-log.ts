// The agent's log where people look (issue 10): its transcript in a collapsed group of the job
// log (or setup's log, when setup failed and no agent ran), the full logs (redacted) beside it on
// the runner and as an artifact of the run, the agent's version, and the facts of the episode the
// summary shows (from the records repository).
//
// Secrets: the agent's log holds whatever the agent printed, and the agent had its own keys (its
// kind's variables and agent.env); a tool call that ran `env` prints them. GitHub masks the job's
// secrets in the job log, never in an artifact. So every value forkflush knows to be a secret (the
// token, the context key, the Actions runtime's tokens, every variable whose name says key, token,
// secret, password or credential, the agent's own variables that look like credentials, with
// their lines, JSON strings and encodings), and text shaped like a well-known token, is replaced
// by *** before anything is printed, written or uploaded; the values are also masked in the job
// log (core.setSecret). The raw log stays in forkflush's private folder.
// Every part goes through one redaction (log-secrets.ts); the summary's facts from the records are
// record-facts.ts, the artifact's upload artifact.ts.
import { randomBytes } from 'node:crypto';
import { constants, mkdir, open, realpath, rm, writeFile } from 'node:fs/promises';
import { delimiter, isAbsolute, join, relative, sep } from 'node:path';
import { agentFor, cliOf, episodeTranscript, specOf } from '../agents/specs.js';
import {
  FAILURE_QUOTE_MAX_CHARS,
  JOB_LOG_SETUP_TAIL_LINES,
  JOB_LOG_STDERR_TAIL_LINES,
  LOG_MAX_BYTES,
  VERSION_OUTPUT_MAX_CHARS,
  VERSION_TIMEOUT_MS,
} from '../core/bounds.js';
import type { AgentKind } from '../core/config.js';
import { plainText } from '../core/text.js';
import { findExecutable } from '../io/executables.js';
import { runProcess } from '../io/process.js';
import { episodeLogs, expandHome } from '../worker/boundary.js';
import { allowedEnv } from '../worker/env.js';
import { redactor } from '../worker/redact.js';
import { cliFolder } from './agent-install.js';
import {
  type ArtifactResult,
  type ArtifactService,
  artifactName,
  type UploadClient,
  uploadArtifact,
} from './artifact.js';
import type { JobOutcome } from './episode-job.js';
import { handedOverEnv, secretValues } from './log-secrets.js';
import { cleanText, type RecordFacts, readRecordFacts } from './record-facts.js';
import { jobPlaces } from './settings.js';

// ---------------------------------------------------------------------------------------------
// The logs

/** A log forkflush wrote (not a file the agent can reach), its last LOG_MAX_BYTES; null when there is none. */
export async function readLog(path: string, max = LOG_MAX_BYTES): Promise<string | null> {
  const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!h) return null;
  try {
    const s = await h.stat();
    if (!s.isFile()) return null;
    const start = Math.max(0, s.size - max);
    const buf = Buffer.alloc(s.size - start);
    const { bytesRead } = await h.read(buf, 0, buf.length, start);
    let text = buf.subarray(0, bytesRead).toString('utf8');
    if (start > 0) {
      const nl = text.indexOf('\n');
      text = `[forkflush: the first ${start + nl + 1} bytes of this log are left out]\n${text.slice(nl + 1)}`;
    }
    return text;
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The agent's version

/** A version in a line such as "codex-cli 0.171.0" or "Aider v0.86.1". */
const VERSION = /\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?/;

/** The version an agent's log states (where its spec reads one), or null. */
export function versionFromLog(kind: AgentKind, logText: string): string | null {
  const stated = specOf(kind).version?.(logText) ?? null;
  return stated === null ? null : parseVersion(stated);
}

/** The version in a CLI's `--version` output: the first version-like word, else null. */
export function parseVersion(output: string): string | null {
  for (const line of plainText(output).split('\n')) {
    const m = VERSION.exec(line);
    if (m) return m[0];
  }
  return null;
}

export interface VersionProbe {
  kind: AgentKind;
  /** agent.command: for a CLI kind, the executable instead of the kind's own. */
  command?: string | undefined;
  /** The agent's allowlisted environment (its kind's variables, agent.env, the basics). */
  env: NodeJS.ProcessEnv;
  /** Folders the agent could write (workspace, context, sandbox.write): nothing there is run. */
  agentWritable: string[];
  /** An empty folder for the CLI's home and working directory while it answers. */
  scratch: string;
  timeoutMs?: number;
}

/**
 * The agent CLI's version from `<executable> --version`, run once by forkflush outside the
 * sandbox with the agent's allowlisted environment and a home of its own. An executable the
 * agent could have written (relative, or found in a folder it could write) is never run: that
 * would be the agent's code outside its sandbox. Null when it cannot be told.
 */
export async function probeVersion(p: VersionProbe): Promise<{ version: string | null; why?: string }> {
  const cli = cliOf(p.kind);
  if (!cli) return { version: null, why: `a ${p.kind} agent has no CLI of its own, so no version` };
  const name = p.command ?? cli.executable;
  const file = await findExecutable(name, p.env.PATH ?? '');
  if (!file) return { version: null, why: `${name} is not an absolute path or a program on PATH` };
  const real = await realpath(file).catch(() => file);
  const unsafe = [file, real].some((f) => p.agentWritable.some((dir) => inside(f, dir)));
  if (unsafe)
    return { version: null, why: `${file} is in a folder the agent could write: not run outside its sandbox` };
  await rm(p.scratch, { recursive: true, force: true });
  await mkdir(p.scratch, { recursive: true });
  try {
    const r = await runProcess(file, ['--version'], {
      cwd: p.scratch,
      env: { ...p.env, HOME: p.scratch, TMPDIR: p.scratch, NO_COLOR: '1' },
      timeoutMs: p.timeoutMs ?? VERSION_TIMEOUT_MS,
      maxOutput: VERSION_OUTPUT_MAX_CHARS,
    });
    const version = parseVersion(`${r.stdout}\n${r.stderr}`);
    return version ? { version } : { version: null, why: `${name} --version said no version (exit ${r.exitCode})` };
  } finally {
    await rm(p.scratch, { recursive: true, force: true }).catch(() => {});
  }
}

function inside(file: string, dir: string): boolean {
  const r = relative(dir, file);
  return r === '' || (!r.startsWith(`..${sep}`) && r !== '..' && !isAbsolute(r));
}

// ---------------------------------------------------------------------------------------------
// The job log

/**
 * A group's lines, as printed between `::group::` and `::endgroup::`. Everything the agent (or
 * setup) wrote is behind a prefix and inside `::stop-commands::`, so no line of it is a workflow
 * command (an annotation, a mask, an output, another group).
 */
function quoted(lines: string[], stopToken: string): string[] {
  return [`::stop-commands::${stopToken}`, ...lines.map((l) => workflowSafe(`> ${l}`)), `::${stopToken}::`];
}

/** A word joiner: invisible, not white space, so the runner reads no command where it stands. */
const JOINER = '\u2060';

/**
 * Text for the job log that holds no workflow command, whatever the agent, setup or the grader
 * put in it. The runner takes a line starting with `::` (after white space) as a command, and
 * `##[` anywhere in a line as one of its old form (`##[stop-commands]` would turn off every later
 * mask, group and error); a word joiner in front of each keeps the text as it reads.
 */
export function workflowSafe(text: string): string {
  return text
    .split(/(\r\n|\r|\n)/)
    .map((part) => part.replace(/##\[/g, `##${JOINER}[`).replace(/^([\s\u0085]*)::/, `$1${JOINER}::`))
    .join('');
}

/** The transcript group: one line per turn or tool call, then the tail of the agent's other output. */
export function groupBody(
  transcript: string[],
  other: string[],
  stopToken = randomBytes(16).toString('hex'),
): string[] {
  const body = transcript.length === 0 ? ['(no transcript: the log holds no turn or tool call)'] : [...transcript];
  if (other.length > 0) {
    const tail = other.slice(-JOB_LOG_STDERR_TAIL_LINES);
    const what =
      tail.length < other.length ? `its last ${tail.length} of ${other.length} lines` : `${other.length} lines`;
    body.push(`--- the agent's other output (stderr, lines that are not events): ${what} ---`);
    body.push(...tail);
  }
  return quoted(body, stopToken);
}

/** The setup group: the last JOB_LOG_SETUP_TAIL_LINES lines of setup.log (the commands and their output). */
export function setupGroupBody(setupLog: string, stopToken = randomBytes(16).toString('hex')): string[] {
  const lines = cleanText(setupLog);
  const tail = lines.slice(-JOB_LOG_SETUP_TAIL_LINES);
  const head = tail.length < lines.length ? [`--- its last ${tail.length} of ${lines.length} lines ---`] : [];
  return quoted([...head, ...tail], stopToken);
}

export interface LogIo {
  info(line: string): void;
  warning(line: string): void;
  startGroup(title: string): void;
  endGroup(): void;
  setSecret(value: string): void;
}

export interface LogContext {
  run: string;
  episode: string;
  /** forkflush's private folder (RUNNER_TEMP/forkflush): the records, the scratch and context folders. */
  privateDir: string;
  /** The agent's workspace (GITHUB_WORKSPACE): paths in it are shown relative. */
  workspace: string;
  /** Where the redacted copies go, outside the private folder, for later steps (RUNNER_TEMP/forkflush-logs). */
  logsDir: string;
  /** When this job started: the turns a carried context holds from earlier episodes are older. */
  started: Date;
  /** The job's environment before forkflush forgot its forge secrets (for what to mask). */
  jobEnv: NodeJS.ProcessEnv;
  /** The environment the agent's allowlist is taken from (forge secrets gone). */
  env: NodeJS.ProcessEnv;
  /** Secrets forkflush holds: the token, its basic credentials, the context key. */
  known: string[];
  /** The job's outcome; null when the job failed before it had one. */
  outcome: JobOutcome | null;
  service: ArtifactService;
}

export interface AgentLogReport {
  kind: AgentKind | null;
  version: string | null;
  /** The redacted copy of agent.log on the runner; null when this job ran no agent. */
  logFile: string | null;
  /** Lines of transcript printed. */
  lines: number;
  artifact: ArtifactResult | null;
  facts: RecordFacts;
}

/**
 * Prints the transcript group, writes the redacted copies of the logs, uploads them as an
 * artifact and finds the agent's version. Never throws: the log is a report on the episode, and
 * the episode's result stands whatever happens to its report.
 */
export async function publishAgentLog(
  ctx: LogContext,
  logIo: LogIo,
  client: () => Promise<UploadClient>,
): Promise<AgentLogReport> {
  // Warnings and group titles can carry an error's text or a path: never a workflow command.
  // (Lines go through as they are: the quoted bodies hold the stop-commands token lines.)
  const io: LogIo = {
    ...logIo,
    warning: (line) => logIo.warning(workflowSafe(line)),
    startGroup: (title) => logIo.startGroup(workflowSafe(title)),
  };
  const facts = await readRecordFacts(jobPlaces(ctx).records, ctx.run, ctx.outcome).catch(
    (): RecordFacts => ({ config: null, issue: null, diffStat: [], journal: [] }),
  );
  const report: AgentLogReport = {
    kind: facts.config?.agent.kind ?? null,
    version: null,
    logFile: null,
    lines: 0,
    artifact: null,
    facts,
  };
  try {
    await publish(ctx, io, client, report);
  } catch (e) {
    io.warning(
      `forkflush could not report the agent's log: ${plainText((e as Error).message ?? String(e)).slice(0, FAILURE_QUOTE_MAX_CHARS)}`,
    );
  }
  return report;
}

async function publish(ctx: LogContext, io: LogIo, client: () => Promise<UploadClient>, report: AgentLogReport) {
  const config = report.facts.config;
  const places = jobPlaces(ctx);
  const logs = episodeLogs(places.scratch);
  // An attempt that found its result already pushed ran nothing: what is in the folder is not its.
  const ranHere = ctx.outcome?.attempt !== 'already-recorded';
  const raw = ranHere ? await readLog(logs.agent) : null;
  const setup = ranHere ? await readLog(logs.setup) : null;
  if (raw === null && setup === null) {
    io.info(workflowSafe(`forkflush ${ctx.episode}: no agent ran in this job, so there is no agent log`));
    return;
  }
  const handedOver = config ? handedOverEnv(config, ctx.env) : {};
  const secrets = secretValues(ctx.jobEnv, ctx.known, handedOver);
  for (const s of secrets) io.setSecret(s);
  const redact = redactor(secrets);

  // The redacted copies, for later steps of the job (the log-file output) and the artifact.
  const dir = join(ctx.logsDir, `${ctx.run}-${ctx.episode}`);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  const copy = async (name: string, text: string | null): Promise<string | null> => {
    if (text === null) return null;
    const file = join(dir, name);
    await writeFile(file, text);
    files.push(file);
    return file;
  };
  const text = raw === null ? null : redact(raw);
  const agentCopy = await copy('agent.log', text);
  const grader = await readLog(logs.grader);
  await copy('grader.log', grader === null ? null : redact(grader));
  const setupText = setup === null ? null : redact(setup);
  const setupCopy = await copy('setup.log', setupText);
  if (text === null || agentCopy === null) {
    // Setup failed (or was stopped): no agent ran, and setup's log is what says why.
    io.startGroup(`forkflush ${ctx.episode}: setup's log (no agent ran; full log in ${setupCopy})`);
    for (const l of setupGroupBody(setupText ?? '')) io.info(l);
    io.endGroup();
  } else {
    report.logFile = agentCopy;
    await transcriptGroup(ctx, io, report, { text, redact, copy, contextDir: places.context });
  }

  const name = artifactName(ctx.run, ctx.episode, ctx.jobEnv.GITHUB_RUN_ATTEMPT);
  report.artifact = await uploadArtifact({ client, name, files, root: dir, service: ctx.service, env: process.env });
  if (report.artifact.uploaded) {
    io.info(
      `forkflush: the episode's logs (redacted) are the artifact ${name}${report.artifact.url ? `: ${report.artifact.url}` : ''}`,
    );
  } else {
    const log = report.logFile ? ["the agent's log", report.logFile] : ["setup's log", setupCopy];
    io.warning(
      `${log[0]} was not uploaded as an artifact: ${report.artifact.why}. It is on the runner, redacted, in ${log[1]}`,
    );
  }
}

/** The agent's redacted log and transcript copied, its version found, its transcript printed in a group. */
async function transcriptGroup(
  ctx: LogContext,
  io: LogIo,
  report: AgentLogReport,
  log: {
    text: string;
    redact: (text: string) => string;
    copy: (name: string, text: string | null) => Promise<string | null>;
    contextDir: string;
  },
): Promise<void> {
  const config = report.facts.config;
  const kind: AgentKind = config?.agent.kind ?? 'command';
  const t = await episodeTranscript(kind, log.text, {
    workdir: ctx.workspace,
    contextDir: log.contextDir,
    since: ctx.started,
    redact: log.redact,
  });
  const lines = t.lines;
  await log.copy('transcript.txt', `${[...lines, '', ...t.other].join('\n')}\n`);
  report.kind = kind;
  report.lines = lines.length;

  report.version = versionFromLog(kind, log.text);
  const cli = cliOf(kind);
  if (!report.version && config && cli) {
    // The CLI forkflush installed for the episode is first on the agent's PATH (agent-install.ts).
    const env = allowedEnv(ctx.env, [...agentFor(config).passEnv, ...config.agent.env]);
    if (config.agent.command === undefined) {
      env.PATH = [join(cliFolder(cli, ctx.env), 'bin'), env.PATH].filter(Boolean).join(delimiter);
    }
    const probe = await probeVersion({
      kind,
      command: config.agent.command,
      env,
      agentWritable: [ctx.workspace, ctx.privateDir, ...config.sandbox.write.map(expandHome)],
      scratch: join(ctx.logsDir, `.version-${ctx.episode}`),
    }).catch((e: Error) => ({ version: null, why: e.message }));
    report.version = probe.version;
    if (probe.why) io.info(workflowSafe(`forkflush: the agent's version is not known: ${probe.why}`));
  }

  const agent = `${kind}${report.version ? ` ${report.version}` : ''}`;
  io.startGroup(
    `forkflush ${ctx.episode}: the agent's transcript (${agent}, ${lines.length} lines; full log in ${report.logFile})`,
  );
  for (const l of groupBody(lines, t.other)) io.info(l);
  io.endGroup();
}
