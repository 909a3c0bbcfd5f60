// The `qwen-code` agent: Qwen Code (`qwen --help` of 0.24.4, and its behaviour against the mock; it
// declares node >= 22 and runs on Node 20).
// - `qwen -p PROMPT --output-format stream-json --approval-mode yolo`: Claude Code's stream-json
//   (its reader reads it). The result's usage is the session's running total, its helper calls (memory
//   extraction) too; each assistant row's is that call's. No cost.
// - QWEN_HOME holds projects/<project>/chats/<session id>.jsonl; `--resume <id>` looks only in the cwd's project.
// - `--auth-type openai|anthropic|gemini` takes that provider's variables (OPENAI_API_KEY, OPENAI_BASE_URL,
//   OPENAI_MODEL, …). Alibaba's endpoints (DashScope, Coding Plan) are *.aliyuncs.com.
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, realpath, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { count, figure, isRecord, jsonLines } from '../core/json.js';
import { addUse, type ModelUse, type Spent, spentSince, type Tally } from '../core/usage.js';
import { followLog, sizeOf } from '../io/agent-reads.js';
import { claudeCode, readStream } from './claude-code.js';
import { ANTHROPIC, GEMINI, OPENAI } from './model-apis.js';
import { defineSpec, UUID } from './spec.js';

/** Claude Code's usage fields, as Qwen Code prints them. */
const tokensOf = (u: Record<string, unknown>) => ({
  input: figure(u.input_tokens),
  cached: figure(u.cache_read_input_tokens),
  output: figure(u.output_tokens),
});

/** Each provider's key, and the `--auth-type` it takes, in order of preference. */
const AUTH_TYPES = { OPENAI_API_KEY: 'openai', ANTHROPIC_API_KEY: 'anthropic', GEMINI_API_KEY: 'gemini' };

// baseline: the session's running total that session.json carries.
export const qwenCode = defineSpec<{ id: string; baseline: Partial<ModelUse> | null }>({
  kind: 'qwen-code',
  name: 'Qwen Code',
  cli: {
    executable: 'qwen',
    package: '@qwen-code/qwen-code',
    version: '0.24.4',
    installer: 'npm',
    secret: { name: 'OPENAI_API_KEY', note: 'with OPENAI_BASE_URL and OPENAI_MODEL for an OpenAI-compatible provider' },
  },
  passEnv: ['QWEN_*', 'OPENAI_*', 'ANTHROPIC_*', 'GEMINI_*', 'DASHSCOPE_*'],
  egress: {
    hosts: [
      ...['api.openai.com', 'api.anthropic.com', 'generativelanguage.googleapis.com'],
      ...['dashscope.aliyuncs.com', 'dashscope-intl.aliyuncs.com', 'dashscope-us.aliyuncs.com'],
      ...['*.dashscope.aliyuncs.com', '*.maas.aliyuncs.com'],
    ],
    // Its three auth types, each from the SDK's own variables (GOOGLE_API_KEY is its Vertex AI's).
    routes: [OPENAI, ANTHROPIC, { ...GEMINI, keys: [{ name: 'GEMINI_API_KEY', headers: ['x-goog-api-key'] }] }],
    notProxied:
      'DASHSCOPE_API_KEY, which its web search sends to an https:// endpoint only (the proxy is plain HTTP on the loopback); a key in agent.args (--openai-api-key)',
  },
  login: {
    keys: Object.keys(AUTH_TYPES),
    args: /^--(?:auth-type|openai-api-key)/,
    lacks: 'API key',
    how:
      'set OPENAI_API_KEY (with OPENAI_BASE_URL and OPENAI_MODEL for an OpenAI-compatible provider such as ' +
      'DashScope), ANTHROPIC_API_KEY or GEMINI_API_KEY',
  },

  session: { id: UUID },
  async resume(e, record, id) {
    const projects = join(e.home, 'projects');
    const cwd = await realpath(e.workdir);
    const to = join(projects, cwd.replace(/[^a-zA-Z0-9]/g, '-'), 'chats');
    for (const dir of await readdir(projects).catch(() => [] as string[])) {
      const file = join(projects, dir, 'chats', `${id}.jsonl`);
      if ((await sizeOf(file)) === 0) continue;
      await mkdir(to, { recursive: true });
      if (join(to, `${id}.jsonl`) !== file) await rename(file, join(to, `${id}.jsonl`));
      // A session belongs to the folder its first record names, or to the one its runtime status
      // names (sessionBelongsToCurrentProject, readRuntimeStatus in its bundle): this workspace.
      const status = {
        schema_version: 1,
        pid: 0,
        session_id: id,
        work_dir: cwd,
        hostname: 'forkflush',
        started_at: Date.now(),
        qwen_version: null,
      };
      await writeFile(join(to, `${id}.runtime.json`), JSON.stringify(status));
      const t = isRecord(record.totals) ? record.totals : null;
      return { id, baseline: t && { input: count(t.input), cached: count(t.cached), output: count(t.output) } };
    }
    return { unusable: `session ${id} is not in the context folder` };
  },

  async start(e, saved) {
    const id = saved?.id ?? randomUUID();
    // Its user settings (QWEN_HOME/settings.json, rewritten every run): no background memory agents
    // (model calls of their own, at the episode's cost), no update checks, no usage statistics.
    await mkdir(e.home, { recursive: true });
    const settings = {
      memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false },
      general: { enableAutoUpdate: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    };
    await writeFile(join(e.home, 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
    const auth = Object.entries(AUTH_TYPES).find(([key]) => e.env[key])?.[1];
    // Its assistant messages on stdout, read from the log as they come: this run's usage so far.
    const tally: Tally = {};
    let model = e.agent.model ?? 'unknown';
    let totals: Partial<ModelUse> | null = null;
    const read = await followLog(e.logFile, (line) => {
      for (const ev of jsonLines(line)) {
        if (ev.type === 'system' && typeof ev.model === 'string') model = e.agent.model ?? ev.model;
        const m = ev.type === 'assistant' && isRecord(ev.message) ? ev.message : null;
        if (m && isRecord(m.usage)) addUse(tally, model, { ...tokensOf(m.usage), calls: 1 });
      }
    });
    return {
      args: [
        ...['--output-format', 'stream-json', '--approval-mode', 'yolo', '--chat-recording'],
        ...(auth && !e.agent.args.some((a) => a.startsWith('--auth-type')) ? ['--auth-type', auth] : []),
        ...(saved ? ['--resume', id] : ['--session-id', id]),
        ...(e.agent.model ? ['--model', e.agent.model] : []),
        ...(e.agent.max_turns ? ['--max-session-turns', String(e.agent.max_turns)] : []),
        ...e.agent.args,
        // The prompt on stdin, appended to an empty -p: no size limit, never read as a flag.
        ...['-p', ''],
      ],
      input: e.prompt,
      env: { QWEN_HOME: e.home, QWEN_CODE_SUPPRESS_YOLO_WARNING: '1' },
      async spent(run): Promise<Spent> {
        await read(run !== undefined);
        const u = run ? [...jsonLines(run.stdout)].find((x) => x.type === 'result' && isRecord(x.usage))?.usage : null;
        if (!run || !isRecord(u)) return { tally };
        // The session's running total (its helper calls included): this episode's share of it.
        totals = tokensOf(u);
        const before = saved?.baseline ? addUse({}, model, saved.baseline) : null;
        return spentSince(before, addUse({}, model, totals), { turns: readStream(run.stdout).result?.turns ?? null });
      },
      ending(run) {
        const r = readStream(run.stdout).result;
        if (run.exitCode === 53 || r?.subtype === 'error_max_turns')
          return { exit: 'budget', note: `Qwen Code stopped at agent.max_turns (${e.agent.max_turns})` };
        if (!r || (!r.isError && r.subtype === 'success')) return {};
        const error = [...jsonLines(run.stdout)].find((x) => x.type === 'result' && isRecord(x.error))?.error;
        const why = isRecord(error) && typeof error.message === 'string' ? error.message : null;
        return { exit: 'crash', why: r.message ?? why };
      },
      record: async () => ({ sessionId: id, totals: totals ?? saved?.baseline ?? null }),
    };
  },

  transcript: claudeCode.transcript,
  finalMessage: claudeCode.finalMessage,
});
