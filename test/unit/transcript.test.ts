// The agent's transcript as the job log shows it, read from the outputs recorded from each kind's
// real CLI (test/fixtures/agents/<kind>/; aider's are composed from its documented formats, see
// its README there) and from a command agent's plain output.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionLines } from '../../src/agents/gemini-session.js';
import { readTranscript } from '../../src/agents/specs.js';
import { capLines, LINE_MAX, LINES_MAX, Lines, type TranscriptOptions } from '../../src/agents/transcript.js';
import type { AgentKind } from '../../src/core/config.js';

const transcriptLines = (kind: AgentKind, text: string, options: TranscriptOptions = {}) =>
  readTranscript(kind, text, options).lines;
/** Gemini's turns from its session file, as the Action's log shows them. */
const geminiSessionLines = (text: string, since?: Date, options: TranscriptOptions = {}) => {
  const out = new Lines(options.workdir);
  sessionLines(text, since, out);
  return out.done();
};

const fixture = (kind: string, name: string) =>
  readFileSync(join(import.meta.dirname, '..', 'fixtures', 'agents', kind, name), 'utf8');

/** Every recorded log an agent's stdout and stderr can hold, by kind. */
const LOGS: [AgentKind, string][] = [
  ['claude-code', 'fresh.stream.jsonl'],
  ['claude-code', 'resumed.stream.jsonl'],
  ['claude-code', 'api-error.stream.jsonl'],
  ['claude-code', 'killed.stream.jsonl'],
  ['claude-code', 'max-budget.stream.jsonl'],
  ['claude-code', 'max-turns.stream.jsonl'],
  ['claude-code', 'no-conversation.stream.jsonl'],
  ['codex', 'fresh.stdout.jsonl'],
  ['codex', 'carried.stdout.jsonl'],
  ['codex', 'budget.stdout.jsonl'],
  ['codex', 'unauthorized.stdout.jsonl'],
  ['copilot', 'fresh.stdout.jsonl'],
  ['copilot', 'auth-error.stdout.jsonl'],
  ['gemini', 'result-fresh.stdout.txt'],
  ['gemini', 'result-auto-model.stdout.txt'],
  ['gemini', 'error-turn-limit.stderr.txt'],
  ['opencode', 'fresh.stdout.jsonl'],
  ['opencode', 'reasoning.stdout.jsonl'],
  ['opencode', 'content-filter.stdout.jsonl'],
  ['opencode', 'http401.stdout.jsonl'],
  ['aider', 'fake-run.log'],
  ['aider', 'documented-output.txt'],
];

describe('the transcript of each kind of agent', () => {
  it('claude-code: the start, each tool call and result, the answer and the end, paths relative to the workspace', () => {
    const log = fixture('claude-code', 'fresh.stream.jsonl');
    expect(transcriptLines('claude-code', log, { workdir: '/tmp/ff-claude-NqDUTk/ws-a' })).toEqual([
      'start: Claude Code 2.1.332, model claude-opus-5-5',
      'tool Write: notes.txt',
      'result: File created successfully at: notes.txt (file state is current in your context — no need to Read it back)',
      'tool Bash: "$FORKFLUSH_GRADE"',
      'result: score 0.625',
      'assistant: Wrote notes.txt.',
      'end: success, 3 turns, $0.0194',
    ]);
  });

  it('claude-code: an error result says why, and a line that is not an event is other output', () => {
    expect(transcriptLines('claude-code', fixture('claude-code', 'max-turns.stream.jsonl')).at(-1)).toBe(
      'end: error_max_turns (error), 2 turns, $0.00646: Reached maximum number of turns (1)',
    );
    expect(transcriptLines('claude-code', fixture('claude-code', 'api-error.stream.jsonl')).at(-1)).toBe(
      'end: success (error), 1 turns, $0: API Error: 400 the mock refuses this request',
    );
    const t = readTranscript('claude-code', fixture('claude-code', 'no-conversation.stream.jsonl'));
    expect(t.lines).toEqual([
      'end: error_during_execution (error), 0 turns, $0: No conversation found with session ID: 0f0f0f0f-1111-4222-8333-444455556666',
    ]);
    expect(t.other).toEqual(['No conversation found with session ID: 0f0f0f0f-1111-4222-8333-444455556666']);
    // Killed before its result: the calls it made are there, and no end.
    expect(transcriptLines('claude-code', fixture('claude-code', 'killed.stream.jsonl'))).toEqual([
      'start: Claude Code 2.1.332, model claude-opus-5-5',
      'tool Write: /tmp/ff-claude-NqDUTk/ws-tokens/y.txt',
      expect.stringMatching(/^result: File created successfully at: \/tmp\/ff-claude-NqDUTk\/ws-tokens\/y\.txt/),
    ]);
  });

  it('codex: the thread, its warning, the command (out of its shell wrapper) and its exit, the answer, the turn', () => {
    expect(transcriptLines('codex', fixture('codex', 'fresh.stdout.jsonl'))).toEqual([
      'start: Codex thread 01a22b53-008f-7713-9e6c-bd1092f36b08',
      'warning: Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.',
      'tool shell: printf 42 > value.txt && "$FORKFLUSH_GRADE"',
      'result (exit 0): 0.75',
      'assistant: Wrote 42.',
      'turn done: 2100 in, 21 out (thread totals)',
    ]);
    const failed = transcriptLines('codex', fixture('codex', 'unauthorized.stdout.jsonl'));
    expect(failed.filter((l) => l.startsWith('error: Reconnecting'))).toHaveLength(5);
    expect(failed.at(-1)).toBe(
      'turn failed: unexpected status 401 Unauthorized: Incorrect API key provided: dummy-key., url: http://127.0.0.1:4556/v1/responses',
    );
  });

  it('codex: its stderr is other output', () => {
    const log = `${fixture('codex', 'fresh.stdout.jsonl')}${fixture('codex', 'resume-unknown.stderr.txt')}`;
    const t = readTranscript('codex', log);
    expect(t.lines).toHaveLength(6);
    expect(t.other[0]).toMatch(/^WARNING: proceeding/);
    expect(t.other).toContain(
      'Error: thread/resume: thread/resume failed: no rollout found for thread id 01a22b3f-0000-7000-8000-000000000000 (code -32600)',
    );
  });

  it('copilot: each tool request and its result, the answer, the exit; retries and the session error', () => {
    expect(transcriptLines('copilot', fixture('copilot', 'fresh.stdout.jsonl'))).toEqual([
      'tool create: f1.txt',
      'result: Created file /tmp/ff-rec-q5xQhM/ws/f1.txt with 1 characters',
      'tool bash: "$FORKFLUSH_GRADE"',
      'result: 7 ⏎ <shellId: 0 completed with exit code 0>',
      'assistant: Done.',
      'end: exit code 0',
    ]);
    const failed = transcriptLines('copilot', fixture('copilot', 'auth-error.stdout.jsonl'));
    expect(failed.slice(0, 2)).toEqual(['model call failed: HTTP 401', 'retry: transient_auth_error']);
    expect(failed.at(-2)).toMatch(
      /^error: authentication: Authentication failed with provider at http:\/\/127\.0\.0\.1/,
    );
    expect(failed.at(-1)).toBe('end: exit code 1');
  });

  it('gemini: the answer, the model calls and the tools of its JSON result; stderr around it is other output', () => {
    expect(transcriptLines('gemini', fixture('gemini', 'result-fresh.stdout.txt'))).toEqual([
      'assistant: All done.',
      'model gemini-2.5-flash: 3 calls, 3600 in, 300 out',
      'tool write_file: 1 calls',
      'tool run_shell_command: 1 calls',
    ]);
    const t = readTranscript('gemini', fixture('gemini', 'error-turn-limit.stderr.txt'));
    // The CLI prints the error twice (plain and "[ERROR] "): once here, counted.
    expect(t.lines).toEqual([
      'error: FatalTurnLimitedError: Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json. (×2)',
    ]);
    expect(t.other).toEqual([
      'Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience.',
      'YOLO mode is enabled. All tool calls will be automatically approved.',
      'YOLO mode is enabled. All tool calls will be automatically approved.',
      'Ripgrep is not available. Falling back to GrepTool.',
    ]);
  });

  it("gemini: its turns from the session file, only this episode's in a resumed session", () => {
    expect(
      geminiSessionLines(fixture('gemini', 'session-fresh.jsonl'), undefined, {
        workdir: '/tmp/ff-gemini-rec-F6tALV/ws',
      }),
    ).toEqual([
      'tool write_file: notes.txt',
      'result: Successfully created and wrote to new file: notes.txt. Here is the updated code: ⏎ hi',
      'tool run_shell_command: "$FORKFLUSH_GRADE"',
      'result: <untrusted_context> ⏎ Output: 0.75 ⏎ Process Group PGID: 27262 ⏎ </untrusted_context>',
      'assistant: All done.',
    ]);
    // The second episode began at 07:12:27; the resume restated the first one's turns, stamped anew.
    const resumed = fixture('gemini', 'session-resumed.jsonl');
    const second = geminiSessionLines(resumed, new Date('2026-11-30T07:12:27Z'));
    expect(second).toEqual([
      'tool write_file: notes.txt',
      'result: Successfully overwrote file: /tmp/ff-gemini-rec-F6tALV/ws/notes.txt. Here is the updated code: ⏎ hi',
      'tool run_shell_command: "$FORKFLUSH_GRADE"',
      'result: <untrusted_context> ⏎ Output: 0.75 ⏎ Process Group PGID: 27982 ⏎ </untrusted_context>',
      'assistant: All done.',
    ]);
    expect(geminiSessionLines(resumed)).toHaveLength(10);
  });

  it('opencode: tool calls and results, thoughts, answers, an unusual stop and the error', () => {
    expect(transcriptLines('opencode', fixture('opencode', 'reasoning.stdout.jsonl'))).toEqual([
      'tool bash: echo hi > x.txt',
      'result: (no output)',
      'thinking: Let me think about it.',
      'assistant: All done: wrote x.txt',
    ]);
    expect(transcriptLines('opencode', fixture('opencode', 'content-filter.stdout.jsonl')).slice(-2)).toEqual([
      'stop: content-filter',
      "error: ContentFilterError: The response was blocked by the provider's content filter",
    ]);
    expect(transcriptLines('opencode', fixture('opencode', 'http401.stdout.jsonl'))).toEqual([
      expect.stringMatching(/^error: APIError: mock error 401/),
    ]);
  });

  it('aider: the banner, each reply with its edits, the usage of each call, failed blocks, applied edits, errors', () => {
    expect(transcriptLines('aider', fixture('aider', 'fake-run.log'))).toEqual([
      'start: Aider 0.86.1',
      'model: openai/gpt-4o with diff edit format',
      'assistant: Changing it. [edits value.txt]',
      'turn 1: 1.5k sent, 100 received, $0.0048',
      'error: 1 SEARCH/REPLACE block failed to match!',
      'assistant: Fixed. [edits value.txt]',
      'turn 2: 1.5k sent, 100 received, $0.0048',
      'edit: applied to value.txt',
    ]);
    const documented = transcriptLines('aider', fixture('aider', 'documented-output.txt'));
    expect(documented).toContain('turn 3: 14k sent, 2.1k cache write, 9.8k cache hit, 550 received, $0.0086');
    expect(documented).toContain('turn 4: 2,841 sent, 381 received, $0');
    expect(documented.slice(-2)).toEqual([
      expect.stringMatching(/^error: litellm\.RateLimitError: /),
      'aider: The API provider has rate limited you. Try again later or check your quotas.',
    ]);
  });

  it('command: its output, line by line', () => {
    expect(transcriptLines('command', 'step 1\n\n  step 2: score 7\n')).toEqual([
      'output: step 1',
      'output: step 2: score 7',
    ]);
  });

  it.each(LOGS)('%s %s: short lines of plain text, nothing raw', (kind, name) => {
    const t = readTranscript(kind, fixture(kind, name));
    expect(t.lines.length).toBeGreaterThan(0);
    for (const line of [...t.lines, ...t.other]) {
      expect([...line].length).toBeLessThanOrEqual(LINE_MAX);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not be there
      expect(line).not.toMatch(/[\u0000-\u0008\u000a-\u001f\u007f]/);
    }
    for (const line of t.lines) expect(line).not.toMatch(/^\{"type"/);
  });
});

describe('a transcript people can read', () => {
  it('drops escape sequences and control characters, and keeps one line per message', () => {
    const event = {
      type: 'assistant',
      message: { content: [{ type: 'text', text: 'done\u001b[31m red\u001b]0;title\u0007\r\nnext\u0000 line' }] },
    };
    expect(transcriptLines('claude-code', JSON.stringify(event))).toEqual(['assistant: done red ⏎ next line']);
    expect(readTranscript('claude-code', 'Error: \u001b[1mboom\u001b[0m\r\n').other).toEqual(['Error: boom']);
  });

  it('cuts a long line, and keeps the start and the end of a long transcript', () => {
    const long = JSON.stringify({
      type: 'assistant',
      message: { content: [{ type: 'text', text: 'x'.repeat(5000) }] },
    });
    const [line] = transcriptLines('claude-code', long);
    expect(line).toHaveLength(LINE_MAX);
    expect(line?.endsWith('…')).toBe(true);
    const many = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n');
    const lines = transcriptLines('command', many);
    expect(lines).toHaveLength(LINES_MAX);
    expect(lines[0]).toBe('output: line 0');
    expect(lines.at(-1)).toBe('output: line 999');
    expect(lines).toContain('… 601 lines left out …');
    expect(capLines(['a', 'b'], 5)).toEqual(['a', 'b']);
  });

  it('counts a line repeated at once instead of printing it again', () => {
    const e = JSON.stringify({ type: 'error', message: 'stream disconnected' });
    expect(transcriptLines('codex', [e, e, e].join('\n'))).toEqual(['error: stream disconnected (×3)']);
  });

  it('survives torn lines and foreign JSON', () => {
    const log =
      '{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}\n{"type":"assis\n[1,2]\n{"other":true}\n';
    const t = readTranscript('claude-code', log);
    expect(t.lines).toEqual(['assistant: hi']);
    expect(t.other).toEqual(['{"type":"assis', '[1,2]']);
  });
});
