// The `aider` agent: aider (PyPI aider-chat), from the repository Aider-AI/aider; it cannot be installed here, so
// its tests run the fake test/fixtures/agents/aider/fake-aider.mjs built from it. No turn or money limit.
// - `--message-file F --yes-always` sends one message, applies the reply and exits; `--yes-always` never runs the
//   model's shell commands (aider/io.py confirm_ask). The conversation is the chat history markdown.
// - After each model call (base_coder.py calculate_and_show_tokens_and_cost): "Tokens: {sent} sent[, {n} cache
//   write][, {n} cache hit], {received} received." and, when the model has prices, " Cost: ${message} message,
//   ${session} session." (this process's). Counts as format_tokens prints them: "997", "1.6k", "12k"; older
//   "2,841". "Model: <name> with <format> edit format" (older "Main model:").
// - A failed model call prints "litellm.<Name>Error: ..." and aider still exits 0 (Aider-AI/aider#5552).
// - Its repo map cache `.aider.tags.cache.v*` is in the git root (aider/repomap.py): with --no-gitignore,
//   `.aider*` goes in the repository's exclude file.
import { isUtf8 } from 'node:buffer';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { plainText } from '../core/text.js';
import { addUse, type Spent, type Tally } from '../core/usage.js';
import { followLog, readFrom, sizeOf } from '../io/agent-reads.js';
import { Git } from '../io/git.js';
import { OPENAI, PROVIDER_ENV, PROVIDER_HOSTS } from './model-apis.js';
import { defineSpec } from './spec.js';
import type { Lines } from './transcript.js';

export const HISTORY_FILE = 'aider.chat.history.md';
const EXCLUDE = '.aider*';

export const aider = defineSpec<{ episodes: string[] }>({
  kind: 'aider',
  name: 'aider',
  cli: {
    executable: 'aider',
    package: 'aider-chat',
    version: '0.86.2', // never run against the real aider: the newest release when its fake was written
    installer: 'pip',
    secret: { name: 'OPENAI_API_KEY', note: 'or the key of the model aider uses' },
  },
  // It talks to any provider LiteLLM knows: the usual providers' keys and endpoints.
  passEnv: ['AIDER_*', ...PROVIDER_ENV, 'COHERE_*', 'OLLAMA_*'],
  egress: {
    hosts: PROVIDER_HOSTS,
    // aider documents OPENAI_API_BASE for an OpenAI endpoint (aider/website/docs/llms/openai-compat.md); LiteLLM also reads OPENAI_BASE_URL.
    routes: [{ ...OPENAI, baseUrl: ['OPENAI_API_BASE', 'OPENAI_BASE_URL'] }],
    notProxied:
      "other providers' keys (LiteLLM sends each to an endpoint of its own, which aider documents for OpenAI only); aider itself cannot be installed here, so this is tested against a fake of it",
  },

  async resume(e, record) {
    const history = await readFrom(join(e.contextDir, HISTORY_FILE), 0);
    if (history.length === 0) return { unusable: `${HISTORY_FILE} is missing` };
    if (!isUtf8(history)) return { unusable: `${HISTORY_FILE} is not UTF-8 text` };
    return { episodes: Array.isArray(record?.episodes) ? record.episodes.filter((x) => typeof x === 'string') : [] };
  },

  async start(e, saved) {
    const excluded = await excludeAiderFiles(e.workdir);
    const history = join(e.contextDir, HISTORY_FILE);
    // Its usage lines, read from the log as it grows.
    const lines: string[] = [];
    const read = await followLog(e.logFile, (line) => lines.push(line));
    return {
      args: [
        ...['--message-file', e.promptFile, '--yes-always', '--chat-history-file', history],
        ...['--input-history-file', join(e.contextDir, 'aider.input.history')],
        ...(saved ? ['--restore-chat-history'] : []),
        ...['--no-gitignore', '--no-auto-commits', '--no-analytics', '--no-check-update', '--no-show-release-notes'],
        ...['--no-show-model-warnings', '--no-detect-urls', '--no-pretty', '--no-fancy-input'],
        ...(e.agent.model ? ['--model', e.agent.model] : []),
        ...e.agent.args,
      ],
      spent: async (run) => {
        await read(run !== undefined);
        const out = parseAiderOutput(lines.join('\n'));
        const spent = aiderUsage(out, e.agent.model);
        if (run && !out.model && !e.agent.model && out.calls.length > 0 && spent.costUsd === undefined)
          spent.notes = ['aider named no model; priced at the dearest known'];
        if (run && excluded) spent.notes = [excluded, ...(spent.notes ?? [])];
        return spent;
      },
      ending(run) {
        const out = parseAiderOutput(run.stdout);
        const error = out.errors.at(-1);
        // litellm's exception names a provider's status (litellm/exceptions.py).
        const status = {
          Authentication: 401,
          PermissionDenied: 403,
          NotFound: 404,
          RateLimit: 429,
          ServiceUnavailable: 503,
        }[/^litellm\.(\w+?)Error/.exec(error?.message ?? '')?.[1] ?? ''];
        const failed = { why: error?.message ?? null, status: status ?? null };
        if (run.exitCode !== 0 || run.spawnError) return failed;
        if (out.calls.length === 0)
          return {
            ...failed,
            exit: 'crash',
            note: `aider made no successful model call (it exits 0 all the same): ${(error?.message ?? 'it printed no usage line').slice(0, 300)}`,
          };
        if (error && error.afterCalls === out.calls.length)
          return { note: `aider's last model call failed: ${error.message.slice(0, 300)}` };
        return {};
      },
      record: async (run) =>
        run && (await sizeOf(history)) > 0
          ? { historyFile: HISTORY_FILE, episodes: [...(saved?.episodes ?? []), e.episodeId] }
          : null,
    };
  },

  transcript: aiderLog,
  // Each model reply is followed by its usage line: the last reply is what stands between the last two.
  finalMessage(stdout) {
    const lines = stdout.split('\n');
    const usage = lines.flatMap((l, i) => (/^Tokens: /.test(l) ? [i] : []));
    const end = usage.at(-1);
    if (end === undefined) return null;
    const reply = lines.slice((usage.at(-2) ?? -1) + 1, end).join('\n');
    return reply.trim() || null;
  },
  version: (log) => /^(?:> )?Aider v(\S+)/m.exec(plainText(log))?.[1] ?? null,
});

/** Adds `.aider*` to the repository's exclude file (not committed); a note if that failed. */
async function excludeAiderFiles(workdir: string): Promise<string | undefined> {
  const r = await new Git(workdir).exec(['rev-parse', '--git-path', 'info/exclude'], { check: false });
  if (r.exitCode !== 0) return; // Not a git repository: nothing forkflush commits.
  const file = resolve(workdir, r.stdout.trim());
  try {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (text.split('\n').some((l) => l.trim() === EXCLUDE)) return;
    await mkdir(dirname(file), { recursive: true });
    const sep = text === '' || text.endsWith('\n') ? '' : '\n';
    const entry = `# forkflush, aider agent: aider's files in the git root (repo map cache)\n${EXCLUDE}\n`;
    await writeFile(file, `${text}${sep}${entry}`);
  } catch (e) {
    return `could not add ${EXCLUDE} to ${file} (${(e as Error).message}): aider's cache may be committed`;
  }
}

interface AiderOutput {
  calls: {
    sent: number;
    received: number;
    cacheWrite: number;
    cacheHit: number;
    messageCost?: number;
    sessionCost?: number;
  }[];
  model?: string;
  /** litellm error lines, each with the number of calls that had completed before it. */
  errors: { message: string; afterCalls: number }[];
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: colour codes are what is removed
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;
// Any figure: one that is not a count ("-4000") is a call whose spend is unknown, not no call.
const COUNT = String.raw`(\S+?)`;
const TOKENS = new RegExp(
  String.raw`Tokens: ${COUNT} sent(?:, ${COUNT} cache write)?(?:, ${COUNT} cache hit)?, ${COUNT} received\.`,
);
const COST = /Cost: \$(\d+(?:\.\d+)?) (?:message|request), \$(\d+(?:\.\d+)?) session\./;
const MODEL = /^(?:Main model|Model): (\S+)/;
const ERROR = /^(litellm\.[A-Za-z]+(?:Error|Exception)\b.*)$/;

/** "1.6k" → 1600, "12k" → 12000, "1,234" → 1234, "997" → 997. */
export function parseTokenCount(text: string): number {
  const t = text.replace(/,/g, '');
  return t.endsWith('k') ? Math.round(Number(t.slice(0, -1)) * 1000) : Number(t);
}

export function parseAiderOutput(text: string): AiderOutput {
  const out: AiderOutput = { calls: [], errors: [] };
  const tokens = (x: string | undefined) => (x ? parseTokenCount(x) : 0);
  for (const raw of text.replace(ANSI, '').split(/\r?\n/)) {
    // The same lines appear blockquoted ("> ") in the chat history file.
    const line = raw.replace(/^> /, '').trim();
    const t = TOKENS.exec(line);
    if (t)
      out.calls.push({ sent: tokens(t[1]), cacheWrite: tokens(t[2]), cacheHit: tokens(t[3]), received: tokens(t[4]) });
    const cost = COST.exec(line);
    const last = out.calls.at(-1);
    if (cost && last && last.messageCost === undefined) {
      last.messageCost = Number(cost[1]);
      last.sessionCost = Number(cost[2]);
    }
    out.model ??= MODEL.exec(line)?.[1];
    const error = ERROR.exec(line);
    if (error) out.errors.push({ message: error[1] as string, afterCalls: out.calls.length });
  }
  if (out.model === undefined) delete out.model;
  return out;
}

/** One run's usage: aider's own session cost when it priced every call, else priced by forkflush (its "sent" includes the cache hits and writes). */
export function aiderUsage(output: AiderOutput, configuredModel?: string): Spent {
  const tally: Tally = {};
  const model = output.model ?? configuredModel ?? 'unknown';
  for (const c of output.calls)
    addUse(tally, model, { input: c.sent, cached: c.cacheHit, written: c.cacheWrite, output: c.received, calls: 1 });
  const priced = output.calls.length > 0 && output.calls.every((c) => c.sessionCost !== undefined);
  return priced || output.calls.length === 0 ? { tally, costUsd: output.calls.at(-1)?.sessionCost ?? 0 } : { tally };
}

const SKIP = /^(?:Git repo:|Repo-map:|Weak model:|Editor model:|Added .* to the chat|Cost: \$)/;
const FENCE = /^(?:```|~~~)/;
const FAILED_BLOCKS = /^# (\d+ SEARCH\/REPLACE blocks? failed to match!?)/;

/** aider's console as a transcript: its banner, the model, each reply with the files it edits, each call's usage, errors. */
function aiderLog(text: string, out: Lines): void {
  const lines = plainText(text).split('\n');
  let turns = 0;
  let prose: string | null = null;
  const edits = new Set<string>();
  let fence = false;
  let inErrorReport = false;
  // After a failed model call, the text is aider's own advice, not a reply.
  let failedCall = false;
  const reply = () => {
    const edited = edits.size > 0 ? ` [edits ${[...edits].join(', ')}]` : '';
    if (prose !== null || edited)
      out.add(failedCall && !edited ? 'aider' : 'assistant', `${prose ?? '(edits)'}${edited}`);
    prose = null;
    edits.clear();
    failedCall = false;
  };
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/^> /, '').trim();
    const next = (lines[i + 1] ?? '').trim();
    const parsed = parseAiderOutput(line);
    const [call, error] = [parsed.calls[0], parsed.errors[0]];
    const version = /^Aider v(\S+)/.exec(line)?.[1];
    if (line === '') continue;
    if (version) out.add('start', `Aider ${version}`);
    else if (parsed.model && MODEL.test(line)) out.add('model', line.replace(/^(?:Main model|Model): /, ''));
    else if (call) {
      reply();
      const cost = call.messageCost ?? /^Cost: \$(\d+(?:\.\d+)?) (?:message|request)/.exec(next)?.[1];
      const usage = /Tokens: (.*?) received\./.exec(line)?.[1] ?? `${call.sent} sent`;
      out.add(`turn ${++turns}`, `${usage} received${cost !== undefined ? `, $${cost}` : ''}`);
      fence = inErrorReport = false;
    } else if (error) {
      reply();
      out.add('error', error.message);
      failedCall = true;
    } else if (/^Applied edit to (.+)$/.test(line)) out.add('edit', line.replace(/^Applied edit to /, 'applied to '));
    else if (FAILED_BLOCKS.test(line)) {
      out.add('error', FAILED_BLOCKS.exec(line)?.[1] as string);
      inErrorReport = true;
    } else if (inErrorReport) {
      // aider's report of the failed blocks ends with its advice.
      if (/^The SEARCH section must/.test(line)) inErrorReport = false;
    } else if (SKIP.test(line) || /^(?:<<<<<<< SEARCH|=======|>>>>>>> REPLACE)\s*$/.test(line)) continue;
    else if (FENCE.test(line)) fence = !fence;
    // A file name on its own line, before its fenced or bare SEARCH block, names an edit.
    else if (!/\s/.test(line) && (FENCE.test(next) || /^<<<<<<< SEARCH/.test(next))) edits.add(line);
    // A file name aider echoes before what it did with the file's blocks.
    else if (!fence && !(!/\s/.test(line) && (/^Applied edit to /.test(next) || FAILED_BLOCKS.test(next))))
      prose ??= line;
  }
  reply();
}
