// The agent's log in the worker Action (src/action/agent-log.ts, log-secrets.ts, artifact.ts): what is masked before the log is
// printed or uploaded, the job log's group, the artifact (the decision, a fake client, and the
// real @actions/artifact client against a fake of the Actions results service), the version.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliFolder } from '../../src/action/agent-install.js';
import {
  groupBody,
  type LogContext,
  parseVersion,
  probeVersion,
  publishAgentLog,
  readLog,
  setupGroupBody,
  versionFromLog,
  workflowSafe,
} from '../../src/action/agent-log.js';
import { artifactName, artifactUnavailable, type UploadClient, uploadArtifact } from '../../src/action/artifact.js';
import type { JobOutcome } from '../../src/action/episode-job.js';
import { secretValues } from '../../src/action/log-secrets.js';
import type { CliFacts } from '../../src/agents/spec.js';
import { cliOf } from '../../src/agents/specs.js';
import type { AgentKind } from '../../src/core/config.js';
import { MASK, redactor, secretVariants } from '../../src/worker/redact.js';

const pin = (kind: AgentKind) => cliOf(kind) as CliFacts;

import { parseConfig } from '../../src/core/config.js';

const temp = () => mkdtempSync(join(tmpdir(), 'forkflush-agent-log-'));
const fixture = (kind: string, name: string) =>
  readFileSync(join(import.meta.dirname, '..', 'fixtures', 'agents', kind, name), 'utf8');

describe('what is masked', () => {
  const jobEnv = {
    PATH: '/usr/bin:/bin',
    ANTHROPIC_API_KEY: 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz',
    CODEX_AUTH_JSON: JSON.stringify({ tokens: { access_token: 'at-0123456789abcdef', id_token: 'short' } }),
    ACTIONS_RUNTIME_TOKEN: 'runtime-token-value-123',
    GITHUB_REPOSITORY: 'owner/repo',
    COPILOT_MODEL: 'gpt-5-mini',
    LANG: 'C.UTF-8',
  };

  it('the known secrets, forge secrets and variables named like secrets; not the rest', () => {
    const values = secretValues(jobEnv, ['ghs_the_job_token_1234'], {
      COPILOT_MODEL: 'gpt-5-mini',
      MY_ENDPOINT_SIGNER: 'a1b2c3d4e5f6g7h8i9j0',
    });
    for (const v of [
      'ghs_the_job_token_1234',
      jobEnv.ANTHROPIC_API_KEY,
      jobEnv.CODEX_AUTH_JSON,
      // A JSON secret's strings, as they would be printed alone.
      'at-0123456789abcdef',
      'runtime-token-value-123',
      // What the agent got that looks like a credential.
      'a1b2c3d4e5f6g7h8i9j0',
    ]) {
      expect(values).toContain(v);
    }
    for (const v of ['owner/repo', 'gpt-5-mini', '/usr/bin:/bin', 'C.UTF-8', 'short']) expect(values).not.toContain(v);
  });

  it('each value as it appears in a log: itself, its lines, JSON-escaped, URL-encoded and base64', () => {
    const v = 'line-one-"quoted"\nline-two-secret';
    expect(secretVariants(v)).toEqual(
      expect.arrayContaining([
        v,
        'line-one-"quoted"',
        'line-two-secret',
        'line-one-\\"quoted\\"\\nline-two-secret',
        encodeURIComponent(v),
        Buffer.from(v).toString('base64'),
      ]),
    );
  });

  it('replaces them, longest first, and text shaped like a well-known token, in stream-json and in plain text', () => {
    const redact = redactor(secretValues(jobEnv, ['ghs_the_job_token_1234']));
    const leak = JSON.stringify({
      type: 'user',
      message: {
        content: [
          {
            type: 'tool_result',
            content: `ANTHROPIC_API_KEY=${jobEnv.ANTHROPIC_API_KEY}\nCODEX_AUTH_JSON=${jobEnv.CODEX_AUTH_JSON}\ntoken ghs_the_job_token_1234`,
          },
        ],
      },
    });
    const text = redact(`${leak}\nfound ghp_${'a'.repeat(36)} and AKIAABCDEFGHIJKLMNOP in a file\n`);
    expect(text).not.toContain('sk-ant-api03');
    expect(text).not.toContain('at-0123456789abcdef');
    expect(text).not.toContain('ghs_the_job_token_1234');
    expect(text).not.toContain('ghp_aaaa');
    expect(text).not.toContain('AKIAABCDEFGHIJKLMNOP');
    expect(text).toContain(`ANTHROPIC_API_KEY=${MASK}`);
    // Still JSON: the values were replaced inside their strings.
    expect(() => JSON.parse(text.split('\n')[0] ?? '')).not.toThrow();
    expect(redact('nothing secret here, gpt-5-mini')).toBe('nothing secret here, gpt-5-mini');
  });

  it('keeps the end of a log that is too long, and says so', async () => {
    const dir = temp();
    const file = join(dir, 'agent.log');
    writeFileSync(file, `${'a'.repeat(50)}\nline two\nline three\n`);
    expect(await readLog(file)).toBe(`${'a'.repeat(50)}\nline two\nline three\n`);
    expect(await readLog(file, 25)).toBe(
      '[forkflush: the first 51 bytes of this log are left out]\nline two\nline three\n',
    );
    expect(await readLog(join(dir, 'none.log'))).toBeNull();
  });
});

describe('the group in the job log', () => {
  it('stops workflow commands around what the agent wrote, and prefixes every line', () => {
    const body = groupBody(['assistant: ::error::pretend', 'tool Bash: ls'], ['::add-mask::x', 'err 2'], 'tok123');
    expect(body).toEqual([
      '::stop-commands::tok123',
      '> assistant: ::error::pretend',
      '> tool Bash: ls',
      "> --- the agent's other output (stderr, lines that are not events): 2 lines ---",
      '> ::add-mask::x',
      '> err 2',
      '::tok123::',
    ]);
    const tail = groupBody(
      [],
      Array.from({ length: 50 }, (_, i) => `e${i}`),
      't',
    );
    expect(tail).toContain('> (no transcript: the log holds no turn or tool call)');
    expect(tail).toContain(
      "> --- the agent's other output (stderr, lines that are not events): its last 20 of 50 lines ---",
    );
    expect(tail.at(-2)).toBe('> e49');
    // A fresh token each time: the agent cannot know it.
    const [a] = groupBody([], []);
    const [b] = groupBody([], []);
    expect(a).toMatch(/^::stop-commands::[0-9a-f]{32}$/);
    expect(a).not.toBe(b);
  });

  it("leaves no command in the agent's words, of either form, inside the group or out of it", () => {
    const j = '\u2060';
    expect(workflowSafe('result: no score (##[stop-commands]x)')).toBe(`result: no score (##${j}[stop-commands]x)`);
    expect(workflowSafe('  ::error::forged\nok ##[add-mask]a ##[x]\r\n::warning::w')).toBe(
      `  ${j}::error::forged\nok ##${j}[add-mask]a ##${j}[x]\r\n${j}::warning::w`,
    );
    expect(workflowSafe('a :: b')).toBe('a :: b');
    // .NET's TrimStart, which the runner uses, takes NEL (U+0085) for white space too.
    expect(workflowSafe('\u0085::error::x')).toBe(`\u0085${j}::error::x`);
    const body = groupBody(['##[stop-commands]x'], [], 't');
    expect(body).toEqual(['::stop-commands::t', `> ##${j}[stop-commands]x`, '::t::']);
    expect(setupGroupBody('npm error ##[group]x\n', 't')).toEqual([
      '::stop-commands::t',
      `> npm error ##${j}[group]x`,
      '::t::',
    ]);
  });
});

describe('the artifact', () => {
  const service = {
    token: 'runtime',
    resultsUrl: 'https://results-receiver.actions.githubusercontent.com/',
    serverUrl: 'https://github.com',
    repository: 'owner/repo',
    runId: '123',
  };

  it('is uploaded only where the artifact service is: a job with its runtime token and results URL, not GHES', () => {
    expect(artifactUnavailable(service)).toBeNull();
    expect(artifactUnavailable({ ...service, serverUrl: 'https://acme.ghe.com' })).toBeNull();
    expect(artifactUnavailable({ ...service, token: undefined })).toMatch(/ACTIONS_RUNTIME_TOKEN is not set/);
    expect(artifactUnavailable({ ...service, resultsUrl: undefined })).toMatch(/ACTIONS_RESULTS_URL is not set/);
    expect(artifactUnavailable({ ...service, serverUrl: 'https://github.example.com' })).toMatch(/Enterprise Server/);
  });

  it('is named by the run, the episode and a re-run attempt', () => {
    expect(artifactName('issue-42', 'r0.b1', '1')).toBe('forkflush-issue-42-r0.b1');
    expect(artifactName('issue-42', 'r0.b1', undefined)).toBe('forkflush-issue-42-r0.b1');
    expect(artifactName('issue-42', 'r0.b1', '3')).toBe('forkflush-issue-42-r0.b1-attempt-3');
  });

  it('gets the runtime variables for the upload only, and links the artifact', async () => {
    const env: NodeJS.ProcessEnv = { OTHER: 'x' };
    const seen: unknown[] = [];
    const client: UploadClient = {
      uploadArtifact: async (name, files, root, options) => {
        seen.push({ name, files, root, options, token: env.ACTIONS_RUNTIME_TOKEN, url: env.ACTIONS_RESULTS_URL });
        return { id: 77, size: 10 };
      },
    };
    const r = await uploadArtifact({
      client: async () => client,
      name: 'n',
      files: ['/d/a'],
      root: '/d',
      service,
      env,
    });
    expect(r).toEqual({
      uploaded: true,
      name: 'n',
      id: 77,
      url: 'https://github.com/owner/repo/actions/runs/123/artifacts/77',
    });
    expect(seen).toEqual([
      { name: 'n', files: ['/d/a'], root: '/d', options: {}, token: 'runtime', url: service.resultsUrl },
    ]);
    expect(env).toEqual({ OTHER: 'x' });
  });

  it('never fails the episode: a missing service or a failed upload is a reason', async () => {
    const env: NodeJS.ProcessEnv = {};
    let called = false;
    const never = async (): Promise<UploadClient> => {
      called = true;
      throw new Error('not reached');
    };
    const missing = await uploadArtifact({
      client: never,
      name: 'n',
      files: [],
      root: '/',
      service: { ...service, resultsUrl: undefined },
      env,
    });
    expect(missing).toEqual({ uploaded: false, name: 'n', why: expect.stringMatching(/ACTIONS_RESULTS_URL/) });
    expect(called).toBe(false);
    const failing: UploadClient = {
      uploadArtifact: async () => {
        throw new Error('Failed to CreateArtifact: Received non-retryable error: (403) Forbidden');
      },
    };
    const failed = await uploadArtifact({ client: async () => failing, name: 'n', files: [], root: '/', service, env });
    expect(failed).toEqual({
      uploaded: false,
      name: 'n',
      why: 'the upload failed: Failed to CreateArtifact: Received non-retryable error: (403) Forbidden',
    });
    const stalled: UploadClient = { uploadArtifact: () => new Promise(() => {}) };
    const late = await uploadArtifact({
      client: async () => stalled,
      name: 'n',
      files: [],
      root: '/',
      service,
      env,
      timeoutMs: 20,
    });
    expect(late).toEqual({ uploaded: false, name: 'n', why: 'the upload failed: no answer in 0.02 s' });
    expect(env).toEqual({});
  });

  describe('with the real @actions/artifact client and a fake results service', () => {
    // The Twirp service of Actions' results (CreateArtifact, FinalizeArtifact) and the blob store
    // its signed URL points at (Put Block, Put Block List), as @actions/artifact 6.2.1 calls them.
    const calls: { method: string; path: string; body: string }[] = [];
    const blocks = new Map<string, Buffer>();
    let blob = Buffer.alloc(0);
    let base = '';
    const server = createServer(async (req, res) => {
      const body = await read(req);
      const url = new URL(req.url ?? '/', base);
      calls.push({ method: req.method ?? '', path: url.pathname, body: body.toString('utf8').slice(0, 500) });
      if (url.pathname.endsWith('/CreateArtifact')) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, signedUploadUrl: `${base}/blob/logs.zip?sig=secret-signature` }));
      } else if (url.pathname === '/blob/logs.zip' && url.searchParams.get('comp') === 'block') {
        blocks.set(url.searchParams.get('blockid') ?? '', body);
        res.statusCode = 201;
        res.end();
      } else if (url.pathname === '/blob/logs.zip' && url.searchParams.get('comp') === 'blocklist') {
        const ids = [...body.toString('utf8').matchAll(/<(?:Latest|Uncommitted|Committed)>([^<]+)</g)].map(
          (m) => m[1] ?? '',
        );
        blob = Buffer.concat(ids.map((id) => blocks.get(id) ?? Buffer.alloc(0)));
        res.statusCode = 201;
        res.setHeader('etag', '"1"');
        res.setHeader('last-modified', new Date().toUTCString());
        res.end();
      } else if (url.pathname.endsWith('/FinalizeArtifact')) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, artifactId: '4242' }));
      } else {
        res.statusCode = 404;
        res.end('{}');
      }
    });

    beforeAll(async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      // What the client reads besides the runtime's variables (config.ts: isGhes, the upload's pace).
      process.env.GITHUB_SERVER_URL = 'https://github.com';
      process.env.ACTIONS_ARTIFACT_UPLOAD_TIMEOUT_MS = '10000';
    });
    afterAll(() => {
      server.close();
      delete process.env.GITHUB_SERVER_URL;
      delete process.env.ACTIONS_ARTIFACT_UPLOAD_TIMEOUT_MS;
    });

    it('uploads the logs as one zip, with the backend ids of the runtime token', async () => {
      const dir = temp();
      writeFileSync(join(dir, 'agent.log'), 'the agent said ***\n');
      writeFileSync(join(dir, 'transcript.txt'), 'assistant: done\n');
      const scp = 'Actions.GenericRead:x Actions.Results:run-backend-id:job-backend-id';
      const jwt = [{ alg: 'none' }, { scp }, 'sig']
        .map((p) => Buffer.from(typeof p === 'string' ? p : JSON.stringify(p)).toString('base64url'))
        .join('.');
      const { DefaultArtifactClient } = await import('@actions/artifact');
      const r = await uploadArtifact({
        client: async () => new DefaultArtifactClient(),
        name: 'forkflush-issue-42-r0.b1',
        files: [join(dir, 'agent.log'), join(dir, 'transcript.txt')],
        root: dir,
        service: { ...service, token: jwt, resultsUrl: `${base}/` },
        env: process.env,
      });
      expect(r).toEqual({
        uploaded: true,
        name: 'forkflush-issue-42-r0.b1',
        id: 4242,
        url: 'https://github.com/owner/repo/actions/runs/123/artifacts/4242',
      });
      const create = calls.find((c) => c.path.endsWith('/CreateArtifact'));
      expect(JSON.parse(create?.body ?? '{}')).toMatchObject({
        workflow_run_backend_id: 'run-backend-id',
        workflow_job_run_backend_id: 'job-backend-id',
        name: 'forkflush-issue-42-r0.b1',
      });
      expect(unzip(blob)).toEqual({ 'agent.log': 'the agent said ***\n', 'transcript.txt': 'assistant: done\n' });
      expect(process.env.ACTIONS_RUNTIME_TOKEN).toBeUndefined();
    });
  });
});

describe("the agent's version", () => {
  it('from the log where the agent states it', () => {
    const init = JSON.stringify({ type: 'system', subtype: 'init', claude_code_version: '2.1.332', model: 'm' });
    expect(versionFromLog('claude-code', `${init}\n`)).toBe('2.1.332');
    expect(versionFromLog('aider', 'Aider v0.86.1\nModel: x\n')).toBe('0.86.1');
    expect(versionFromLog('codex', '{"type":"thread.started"}')).toBeNull();
  });

  it('from what --version prints', () => {
    expect(parseVersion('codex-cli 0.171.0\n')).toBe('0.171.0');
    expect(parseVersion('1.0.102\nCommit: 1a2b3c4\n')).toBe('1.0.102');
    expect(parseVersion('opencode 1.18.33-beta.1')).toBe('1.18.33-beta.1');
    expect(parseVersion('\u001b[32mgemini\u001b[0m 0.61.0')).toBe('0.61.0');
    expect(parseVersion('no version here')).toBeNull();
  });

  it('runs the CLI once, in a home of its own', async () => {
    const dir = temp();
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    const cli = join(bin, 'codex');
    writeFileSync(cli, '#!/bin/sh\n[ "$HOME" = "$PWD" ] && echo "codex-cli 0.171.0" >&2\n');
    chmodSync(cli, 0o755);
    const scratch = join(dir, 'scratch');
    const r = await probeVersion({
      kind: 'codex',
      env: { PATH: `${bin}:/usr/bin:/bin` },
      agentWritable: [join(dir, 'ws')],
      scratch,
    });
    expect(r).toEqual({ version: '0.171.0' });
    const absolute = await probeVersion({
      kind: 'gemini',
      command: cli,
      env: { PATH: '/usr/bin:/bin' },
      agentWritable: [],
      scratch,
    });
    expect(absolute.version).toBe('0.171.0');
  });

  it('never runs an executable the agent could have written, outside its sandbox', async () => {
    const dir = temp();
    const ws = join(dir, 'ws');
    mkdirSync(join(ws, 'bin'), { recursive: true });
    const cli = join(ws, 'bin', 'claude');
    const ran = join(dir, 'ran');
    writeFileSync(cli, `#!/bin/sh\ntouch ${ran}\necho 9.9.9\n`);
    chmodSync(cli, 0o755);
    const scratch = join(dir, 'scratch');
    const onPath = await probeVersion({
      kind: 'claude-code',
      env: { PATH: join(ws, 'bin') },
      agentWritable: [ws],
      scratch,
    });
    expect(onPath).toEqual({ version: null, why: expect.stringMatching(/in a folder the agent could write/) });
    const relative = await probeVersion({
      kind: 'claude-code',
      command: './bin/claude',
      env: { PATH: '' },
      agentWritable: [ws],
      scratch,
    });
    expect(relative.version).toBeNull();
    expect(() => readFileSync(ran)).toThrow();
    expect(await probeVersion({ kind: 'command', env: {}, agentWritable: [], scratch })).toMatchObject({
      version: null,
    });
    expect(
      await probeVersion({ kind: 'copilot', env: { PATH: join(dir, 'none') }, agentWritable: [], scratch }),
    ).toMatchObject({
      version: null,
      why: expect.stringMatching(/not an absolute path or a program on PATH/),
    });
  });
});

function read(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** The files of a zip, from its central directory (archiver streams, so sizes are only there). */
function unzip(zip: Buffer): Record<string, string> {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0)
    throw new Error(`not a zip (${zip.length} bytes): ${execFileSync('od', ['-c'], { input: zip.subarray(0, 32) })}`);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const files: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const size = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extra = zip.readUInt16LE(at + 30);
    const comment = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const data = zip.subarray(start, start + size);
    files[name] = (method === 8 ? inflateRawSync(data) : data).toString('utf8');
    at += 46 + nameLength + extra + comment;
  }
  return files;
}

describe('the report of an episode', () => {
  const SECRET = 'tok-secret-value-123456';

  /** A job's folders after its agent ran, as episode-job.ts leaves them, and an outcome naming the config. */
  function job(kind: string, log: string, extra: Record<string, string> = {}) {
    const root = temp();
    const privateDir = join(root, 'temp', 'forkflush');
    mkdirSync(join(privateDir, 'episode'), { recursive: true });
    writeFileSync(join(privateDir, 'episode', 'agent.log'), log);
    writeFileSync(join(privateDir, 'episode', 'grader.log'), `$ sh grade.sh\n${SECRET}\n`);
    for (const [file, text] of Object.entries(extra)) {
      mkdirSync(join(privateDir, file, '..'), { recursive: true });
      writeFileSync(join(privateDir, file), text);
    }
    const config = parseConfig(
      `grader:\n  command: sh grade.sh\nagent:\n  kind: ${kind}\n  env: [MY_TOKEN]\nbudget:\n  total: 10\n  unit: usd\n`,
      '.github/autoresearch.yml',
    );
    const outcome = {
      run: 'issue-42',
      episode: { id: 'r0.b1', round: 0, branch: 1, base: 'b'.repeat(40) },
      phase: 'opening',
      attempt: 'ran',
      result: { commit: 'c'.repeat(40) },
      config,
    } as unknown as JobOutcome;
    const env = { PATH: '/usr/bin:/bin', MY_TOKEN: SECRET, RUNNER_TOOL_CACHE: join(root, 'tools') };
    const ctx: LogContext = {
      run: 'issue-42',
      episode: 'r0.b1',
      privateDir,
      workspace: join(root, 'workspace'),
      logsDir: join(root, 'temp', 'forkflush-logs'),
      started: new Date(0),
      jobEnv: { ...env, ACTIONS_RUNTIME_TOKEN: 'runtime-token-value-5678' },
      env,
      known: ['ghs_the_job_token_1234'],
      outcome,
      service: {
        token: 'runtime-token-value-5678',
        resultsUrl: 'https://results.example/',
        serverUrl: 'https://github.com',
        repository: 'o/r',
        runId: '9',
      },
    };
    const printed: string[] = [];
    const masked: string[] = [];
    const io = {
      info: (l: string) => printed.push(l),
      warning: (l: string) => printed.push(`::warning::${l}`),
      startGroup: (t: string) => printed.push(`::group::${t}`),
      endGroup: () => printed.push('::endgroup::'),
      setSecret: (v: string) => masked.push(v),
    };
    const uploads: { name: string; files: Record<string, string> }[] = [];
    const client: UploadClient = {
      uploadArtifact: async (name, files) => {
        uploads.push({
          name,
          files: Object.fromEntries(files.map((f) => [f.split('/').at(-1), readFileSync(f, 'utf8')])),
        });
        return { id: 5 };
      },
    };
    return { root, ctx, io, printed, masked, uploads, client: async () => client };
  }

  it('claude-code: its transcript and version from the log, the secret masked everywhere, the logs uploaded', async () => {
    const log = `${fixture('claude-code', 'fresh.stream.jsonl')}my token is ${SECRET}\n`;
    const j = job('claude-code', log);

    const report = await publishAgentLog(j.ctx, j.io, j.client);

    expect(report).toMatchObject({ kind: 'claude-code', version: '2.1.332', lines: 7 });
    expect(report.artifact).toEqual({
      uploaded: true,
      name: 'forkflush-issue-42-r0.b1',
      id: 5,
      url: 'https://github.com/o/r/actions/runs/9/artifacts/5',
    });
    expect(j.masked).toEqual(expect.arrayContaining([SECRET, 'ghs_the_job_token_1234', 'runtime-token-value-5678']));
    const start = j.printed.findIndex((l) => l.startsWith('::group::'));
    expect(j.printed[start]).toMatch(
      /^::group::forkflush r0\.b1: the agent's transcript \(claude-code 2\.1\.332, 7 lines; full log in /,
    );
    expect(j.printed).toContain('> start: Claude Code 2.1.332, model claude-opus-5-5');
    expect(j.printed).toContain('> my token is ***');
    expect(j.printed.join('\n')).not.toContain(SECRET);
    const [upload] = j.uploads;
    expect(Object.keys(upload?.files ?? {})).toEqual(['agent.log', 'grader.log', 'transcript.txt']);
    for (const text of Object.values(upload?.files ?? {})) expect(text).not.toContain(SECRET);
    expect(upload?.files['agent.log']).toContain('my token is ***');
    expect(report.logFile).toBe(join(j.root, 'temp', 'forkflush-logs', 'issue-42-r0.b1', 'agent.log'));
  });

  it('gemini: the turns from its session in the context folder; the version of the CLI forkflush installed', async () => {
    const j = job('gemini', fixture('gemini', 'result-fresh.stdout.txt'), {
      'context/r0.b1/home/.gemini/tmp/ws/chats/session-2026-11-30T07-12-5f0c6c1e.jsonl': fixture(
        'gemini',
        'session-fresh.jsonl',
      ),
    });
    const bin = join(cliFolder(pin('gemini'), j.ctx.env), 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'gemini'), '#!/bin/sh\necho 0.61.0\n');
    chmodSync(join(bin, 'gemini'), 0o755);

    const report = await publishAgentLog(j.ctx, j.io, j.client);

    expect(report.version).toBe('0.61.0');
    const body = j.printed.filter((l) => l.startsWith('> '));
    expect(body.slice(0, 6)).toEqual([
      '> tool write_file: notes.txt',
      expect.stringMatching(/^> result: Successfully created and wrote to new file/),
      '> tool run_shell_command: "$FORKFLUSH_GRADE"',
      expect.stringMatching(/^> result: <untrusted_context>/),
      '> assistant: All done.',
      '> model gemini-2.5-flash: 3 calls, 3600 in, 300 out',
    ]);
  });

  it('an artifact service that is not there is a warning, and the rest of the report stands', async () => {
    const j = job('codex', fixture('codex', 'fresh.stdout.jsonl'));
    j.ctx.service = { ...j.ctx.service, resultsUrl: undefined };

    const report = await publishAgentLog(j.ctx, j.io, j.client);

    expect(report.artifact).toMatchObject({ uploaded: false, why: expect.stringMatching(/ACTIONS_RESULTS_URL/) });
    expect(j.uploads).toEqual([]);
    expect(j.printed.at(-1)).toMatch(
      /^::warning::the agent's log was not uploaded as an artifact: ACTIONS_RESULTS_URL is not set/,
    );
    // No codex on this PATH: its version is not known, and it says why.
    expect(report.version).toBeNull();
    expect(j.printed).toContain(
      "forkflush: the agent's version is not known: codex is not an absolute path or a program on PATH",
    );
    expect(report.lines).toBe(6);
  });
});
