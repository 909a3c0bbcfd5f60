// The `claude-code` agent: Claude Code in print mode (docs.claude.com/en/docs/claude-code: cli-reference,
// headless, env-vars; recorded outputs of 2.1.332 in test/fixtures/agents/claude-code/).
// - CLAUDE_CONFIG_DIR (`<context>/home`) holds `projects/<project>/<session id>.jsonl` (projectDirName of
//   the real cwd); `--resume` continues a session only from the project folder of the cwd.
// - `-p --output-format stream-json --verbose`: JSON lines, `system/init` first, `result` last (readStream).
//   A failed API call still ends in subtype "success" with `is_error`.
// - `total_cost_usd` and `modelUsage` are cumulative over a resumed conversation, restored from the
//   transcript's last `cost-state` row (appended whenever a run ends, SIGTERM too).
// - One API response is one assistant row per content block, each with `message.id` and `usage`.
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, realpath, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { figure, isRecord, jsonLines, lastText, num, str } from '../core/json.js';
import { addUse, type Spent, spentSince, type Tally } from '../core/usage.js';
import { GrowingFile, readFrom } from '../io/agent-reads.js';
import type { LoginFile } from '../io/logins.js';
import type { RunResult } from '../io/process.js';
import { ANTHROPIC, BEARER } from './model-apis.js';
import { defineSpec, type Ending, UUID } from './spec.js';
import { contentText, describeInput, eachEvent, type Lines, money } from './transcript.js';

/** Claude Code on Bedrock, Vertex AI or Foundry: their cloud credentials are its login. */
const CLOUDS = ['CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY'];

// baseline: the totals Claude Code will restore; bytes: the transcript's size before this episode (read from there).
export const claudeCode = defineSpec<{ id: string; baseline: Tally | null; bytes: number }>({
  kind: 'claude-code',
  name: 'Claude Code',
  cli: {
    executable: 'claude',
    package: '@anthropic-ai/claude-code',
    version: '2.1.332',
    installer: 'npm',
    secret: { name: 'ANTHROPIC_API_KEY', note: 'or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`' },
  },
  // Its key, endpoint and switches; Bedrock's and Vertex's credentials come through agent.env.
  passEnv: ['ANTHROPIC_*', 'CLAUDE_CODE_*', 'DISABLE_*', 'MAX_THINKING_TOKENS'],
  egress: {
    // Its login's token endpoint (2.1.332: platform.claude.com/v1/oauth/token) and console.
    hosts: ['api.anthropic.com', 'platform.claude.com', 'console.anthropic.com'],
    routes: [
      {
        ...ANTHROPIC,
        keys: [...ANTHROPIC.keys, { name: 'CLAUDE_CODE_OAUTH_TOKEN', headers: BEARER }],
        offWhen: CLOUDS,
      },
    ],
    notProxied:
      "the login file (~/.claude/.credentials.json), whose OAuth token Claude Code refreshes itself; Bedrock's, Vertex AI's and Foundry's cloud credentials",
  },
  login: {
    keys: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN'],
    other: CLOUDS,
    args: /^--settings/,
    files: claudeLogin,
    how:
      'set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN (from `claude setup-token`, for a Claude subscription), ' +
      'or log in with `claude` (forkflush copies ~/.claude/.credentials.json into each episode), or put that file ' +
      'in CLAUDE_CREDENTIALS_JSON',
  },

  session: { id: UUID },
  async resume(e, _record, id) {
    const transcript = await transcriptPath(e.home, id);
    if (!transcript) return { unusable: `the transcript of session ${id} is missing` };
    const text = (await readFrom(transcript, 0)).toString('utf8');
    const problem = transcriptProblem(text);
    if (problem) return { unusable: `the transcript of session ${id} ${problem}` };
    // To the project folder it looks in from this workspace: the whole folder, else the session's files.
    const from = join(transcript, '..');
    const to = join(e.home, 'projects', projectDirName(await realpath(e.workdir)));
    if (from !== to && !(await lstat(to).catch(() => null))) await rename(from, to);
    else if (from !== to)
      for (const name of [`${id}.jsonl`, id]) {
        if (!(await lstat(join(from, name)).catch(() => null))) continue;
        await rm(join(to, name), { recursive: true, force: true });
        await rename(join(from, name), join(to, name));
      }
    return { id, baseline: readCostState(text), bytes: Buffer.byteLength(text) };
  },

  async start(e, saved) {
    const cwd = await realpath(e.workdir);
    await mkdir(e.home, { recursive: true });
    const id = saved?.id ?? randomUUID();
    const baseline = saved?.baseline ?? null;
    const transcript = new GrowingFile(() => transcriptPath(e.home, id, cwd), saved?.bytes ?? 0);
    // Its assistant rows' tokens so far, each API response once: the last resort of `spent`.
    const assistantTokens = { tally: {} as Tally, seen: new Set<string>() };
    return {
      args: [
        ...['-p', '--output-format', 'stream-json', '--verbose'],
        // The narrowest set that lets it change files and run the grader.
        ...['--permission-mode', 'acceptEdits', '--allowedTools', 'Bash'],
        ...(saved ? ['--resume', id] : ['--session-id', id]),
        ...(e.agent.model ? ['--model', e.agent.model] : []),
        ...(e.agent.max_turns ? ['--max-turns', String(e.agent.max_turns)] : []),
        ...(e.unit === 'usd' ? ['--max-budget-usd', String(Number(Math.max(0, e.allowance).toPrecision(12)))] : []),
        ...e.agent.args,
      ],
      cwd,
      env: {
        CLAUDE_CONFIG_DIR: e.home,
        // Nothing but model calls: no telemetry, error reports, update checks or other traffic.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        DISABLE_AUTOUPDATER: '1',
      },
      // It would rename the project folder the transcript is filed under.
      unset: ['CLAUDE_CODE_PROJECT_DIR_NAME'],
      input: e.prompt,
      // No token limit of its own.
      watch: e.unit === 'tokens',
      async spent(run?: RunResult): Promise<Spent | null> {
        // To the end as it is now (what it wrote since the last poll can pass one read), a line at a time.
        for await (const line of transcript.remaining())
          if (line.includes('"assistant"')) assistantTally(line, assistantTokens);
        const read = { tally: assistantTokens.tally, responses: assistantTokens.seen.size };
        const result = run ? readStream(run.stdout).result : null;
        if (result?.totals) return spentSince(baseline, result.totals, { turns: result.turns });
        // Else the cost record it wrote as it stopped (in this episode's part of the transcript), else its tokens.
        const file = run && (await transcriptPath(e.home, id, cwd));
        const stopped = file && readCostState((await readFrom(file, saved?.bytes ?? 0)).toString('utf8'));
        const note = stopped
          ? 'Claude Code ended without a result; its usage is the cost record it wrote as it stopped (a model call cut off by the stop is not in it)'
          : `Claude Code ended without recording its cost; its tokens were read from the transcript (${read.responses} model responses)`;
        if (stopped) return spentSince(baseline, stopped, { turns: result?.turns ?? null, notes: [note] });
        if (read.responses === 0) return null;
        return { tally: read.tally, turns: null, unsure: true, notes: run ? [note] : [] };
      },
      noUsage: () => 'Claude Code reported no usage',
      ending: (run) => claudeEnding(run, saved ? id : null),
      record: async () => ({ sessionId: id, cwd }),
    };
  },

  transcript: (text, out, other) => eachEvent(text, other, (e) => claudeEvent(out, e)),
  finalMessage: (stdout) => lastText(stdout, (e) => e.type === 'result' && e.result),
  version: (log) => readStream(log).version,
});

/** Where Claude Code keeps a subscription login on Linux ($CLAUDE_CONFIG_DIR, else ~/.claude), and its secret form. */
function claudeLogin(episodeHome: string): LoginFile[] {
  const home = process.env.CLAUDE_CONFIG_DIR || join(homedir(), '.claude');
  const file = '.credentials.json';
  return [{ from: join(home, file), fromEnv: 'CLAUDE_CREDENTIALS_JSON', to: join(episodeHome, file) }];
}

/** The project folder name Claude Code uses for a working directory (give it the real path). */
export function projectDirName(realCwd: string): string {
  const sanitized = realCwd.replace(/[^a-zA-Z0-9]/g, '-');
  if (sanitized.length <= 200) return sanitized;
  let hash = 0;
  for (let i = 0; i < realCwd.length; i++) hash = (Math.imul(hash, 31) + realCwd.charCodeAt(i)) | 0;
  return `${sanitized.slice(0, 200)}-${Math.abs(hash).toString(36)}`;
}

/** The transcript `<id>.jsonl` in the project folder of `cwd`, else in any project folder. */
async function transcriptPath(home: string, id: string, cwd?: string): Promise<string | null> {
  const dirs = await readdir(join(home, 'projects')).catch(() => [] as string[]);
  for (const dir of cwd ? [projectDirName(cwd), ...dirs] : dirs) {
    const file = join(home, 'projects', dir, `${id}.jsonl`);
    if ((await lstat(file).catch(() => null))?.isFile()) return file;
  }
  return null;
}

/** The init and result facts of a stream-json stdout; other lines are skipped. */
export function readStream(stdout: string) {
  let init: Record<string, unknown> = {};
  let result: ReturnType<typeof resultOf> | null = null;
  let sessionId: string | null = null;
  for (const row of jsonLines(stdout)) {
    if (row.type === 'system' && row.subtype === 'init') init = row;
    else if (row.type === 'result') result = resultOf(row);
    else continue;
    sessionId = str(row.session_id) ?? sessionId;
  }
  return { sessionId, model: str(init.model), version: str(init.claude_code_version), result };
}

/** A `result` line's facts; `totals` are cumulative over the conversation, null when the line has no figures. */
function resultOf(row: Record<string, unknown>) {
  const errors = Array.isArray(row.errors) ? row.errors.map(String).filter((x) => x.trim() !== '') : [];
  const isError = row.is_error === true;
  const cost = num(row.total_cost_usd);
  return {
    subtype: str(row.subtype) ?? 'unknown',
    isError,
    sessionId: str(row.session_id),
    totals: tallyOf(row.modelUsage, false) ?? (cost === null ? null : addUse({}, 'unknown', { costUsd: cost })),
    turns: num(row.num_turns),
    message: errors.length > 0 ? errors.join('; ') : isError ? str(row.result) : null,
    apiErrorStatus: num(row.api_error_status),
  };
}

/** The totals of the last `cost-state` row in transcript text, or null when there is none. */
export function readCostState(transcript: string): Tally | null {
  let last: Tally | null = null;
  for (const row of jsonLines(transcript))
    if (row.type === 'cost-state') last = tallyOf(row.modelUsage, row.hasUnknownModelCost === true) ?? {};
  return last;
}

/** Anthropic's counts (its input without the cache's reads and writes) as a model's use. */
function use(input: unknown, read: unknown, wrote: unknown, output: unknown) {
  const [r, w] = [figure(read), figure(wrote)];
  return { input: figure(input) + r + w, cached: r, written: w, output: figure(output) };
}

/** `modelUsage` as a tally (a model whose price Claude Code did not know: cost null). */
function tallyOf(value: unknown, allUnknown: boolean): Tally | null {
  if (!isRecord(value)) return null;
  const t: Tally = {};
  for (const [name, m] of Object.entries(value)) {
    if (!isRecord(m)) continue;
    const tokens = use(m.inputTokens, m.cacheReadInputTokens, m.cacheCreationInputTokens, m.outputTokens);
    addUse(t, name, { ...tokens, costUsd: allUnknown || m.costBasis === 'unknown' ? null : (num(m.costUSD) ?? 0) });
  }
  return t;
}

/** Tokens of the assistant rows in transcript text, once per API response (message id), added to `into`; no costs. */
export function assistantTally(transcript: string, into = { tally: {} as Tally, seen: new Set<string>() }) {
  for (const row of jsonLines(transcript)) {
    const m = isRecord(row.message) ? row.message : null;
    const id = str(m?.id);
    if (row.type !== 'assistant' || !m || id === null || into.seen.has(id) || !isRecord(m.usage)) continue;
    into.seen.add(id);
    const u = m.usage;
    const counts = use(u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens);
    addUse(into.tally, str(m.model) ?? 'unknown', { ...counts, calls: 1, costUsd: null });
  }
  return { tally: into.tally, responses: into.seen.size };
}

/** Why a transcript cannot be resumed, or null when it holds a conversation. */
export function transcriptProblem(text: string): string | null {
  if (text.trim() === '') return 'is empty';
  let rows = 0;
  for (const row of jsonLines(text)) {
    rows++;
    if ((row.type === 'user' || row.type === 'assistant') && isRecord(row.message)) return null;
  }
  return rows === 0 ? 'has no readable line (not JSON lines)' : 'holds no conversation (no user or assistant message)';
}

/** How a run ended in Claude Code's terms (`resumed`: the id it was to resume, else null). */
export function claudeEnding(
  run: Pick<RunResult, 'stdout' | 'stderr' | 'exitCode' | 'stopped'>,
  resumed: string | null,
): Ending {
  const r = readStream(run.stdout).result;
  if (resumed && run.stopped === null && !r?.turns && saysNoConversation(`${run.stderr}\n${r?.message ?? ''}`))
    return { restart: `Claude Code found no conversation ${resumed}` };
  const message = r?.message ? ` (${r.message})` : '';
  if (r?.subtype === 'error_max_turns')
    return { exit: 'budget', note: `Claude Code stopped at its turn limit${message}` };
  if (r?.subtype === 'error_max_budget_usd')
    return {
      exit: 'budget',
      note: `Claude Code stopped at its money limit${message}; it checks after each model call, so the spend can pass the allowance by one call`,
    };
  if (!r) return { exit: 'crash', why: run.stderr.trim() ? null : 'no result' };
  if (r.subtype === 'success' && !r.isError && run.exitCode === 0) return {};
  const status = r.apiErrorStatus === null ? '' : ` (API status ${r.apiErrorStatus})`;
  return { exit: 'crash', why: `${r.subtype}${status}: ${r.message ?? 'no message'}`, status: r.apiErrorStatus };
}

/** Claude Code's answer to `--resume <id>` when it cannot find that conversation. */
export function saysNoConversation(output: string): boolean {
  return /No conversation found with session ID/i.test(output);
}

function claudeEvent(out: Lines, e: Record<string, unknown>): void {
  if (e.type === 'system') {
    if (e.subtype === 'init') {
      const [version, model] = [str(e.claude_code_version), str(e.model)];
      const name = version ? `Claude Code ${version}` : 'Claude Code';
      out.add('start', model ? `${name}, model ${model}` : name);
    } else if (typeof e.subtype === 'string') out.add('system', e.subtype);
  } else if (e.type === 'assistant' || e.type === 'user') {
    const content = isRecord(e.message) ? e.message.content : undefined;
    if (typeof content === 'string' && e.type === 'assistant') out.add('assistant', content);
    for (const block of Array.isArray(content) ? content.filter(isRecord) : []) {
      if (block.type === 'text') out.add(e.type === 'assistant' ? 'assistant' : 'user', contentText(block.text));
      else if (block.type === 'thinking') out.add('thinking', contentText(block.thinking));
      else if (block.type === 'tool_use') out.add(`tool ${str(block.name) ?? '?'}`, describeInput(block.input));
      else if (block.type === 'tool_result')
        out.add(block.is_error === true ? 'result (error)' : 'result', contentText(block.content) || '(empty)');
    }
  } else if (e.type === 'result') {
    const r = resultOf(e);
    const cost = r.totals ? money(Object.values(r.totals).reduce((n, m) => n + (m.costUsd ?? 0), 0)) : null;
    const parts = [r.subtype + (r.isError ? ' (error)' : ''), r.turns === null ? null : `${r.turns} turns`, cost];
    out.add('end', [parts.filter(Boolean).join(', '), r.message].filter(Boolean).join(': '));
  }
}
