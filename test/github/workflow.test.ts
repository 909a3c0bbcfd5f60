// The fake GitHub's workflow_dispatch: the example workflows as GitHub Actions would run them, and the expression
// language they use.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings hold GitHub Actions expressions
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { dispatchWorkflow, WorkflowError } from './workflow.js';

const example = (name: string) => readFileSync(new URL(`../../examples/workflows/${name}`, import.meta.url), 'utf8');
const FORKFLUSH = example('forkflush.yml');
const ROUND = { run: 'issue-7', round: '2', episodes: '["r2.b0","r2.b1","r2.b2"]' };

/** A workflow of one job with these parts, as YAML. */
function workflow(job: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return stringify({ on: { workflow_dispatch: null }, jobs: { j: { 'runs-on': 'ubuntu-latest', ...job } }, ...extra });
}
/** The value GitHub gives `text` in a step's `with:`. */
function evaluate(text: string, github: Record<string, unknown> = {}): string | undefined {
  const run = dispatchWorkflow(
    workflow({ steps: [{ uses: 'a/b@v1', with: { v: text } }] }),
    {},
    {
      github: { repository: 'octo-org/octo-repo', ...github },
      secrets: { TOKEN: 's3cret' },
    },
  );
  return run.jobs[0]?.steps[0]?.with.v;
}

describe('examples/workflows/forkflush.yml', () => {
  it('gives one job per episode, named and configured as the app expects', () => {
    const run = dispatchWorkflow(FORKFLUSH, ROUND, { secrets: { ANTHROPIC_API_KEY: 'sk-test' } });
    expect(run.name).toBe('forkflush');
    expect(run.displayTitle).toBe('forkflush issue-7 round 2');
    expect(run.concurrencyGroup).toBe('forkflush-issue-7-round-2');
    expect(run.cancelInProgress).toBe(false);
    expect(run.jobs.map((j) => j.name)).toEqual([
      'forkflush issue-7 r2.b0',
      'forkflush issue-7 r2.b1',
      'forkflush issue-7 r2.b2',
    ]);
    expect(run.jobs[1]).toEqual({
      key: 'episode',
      name: 'forkflush issue-7 r2.b1',
      matrix: { episode: 'r2.b1' },
      timeoutMinutes: 100,
      permissions: { contents: 'write' },
      steps: [
        { uses: 'actions/setup-node@v5', with: { 'node-version': '24' }, env: {} },
        {
          uses: 'your-org/forkflush@v0.1.0',
          with: { run: 'issue-7', episode: 'r2.b1', 'context-key': '' },
          env: { ANTHROPIC_API_KEY: 'sk-test' },
        },
      ],
    });
  });

  it('reads a missing secret as an empty string', () => {
    const run = dispatchWorkflow(FORKFLUSH, ROUND, {});
    expect(run.jobs[0]?.steps[1]?.env).toEqual({ ANTHROPIC_API_KEY: '' });
  });

  it('refuses a dispatch without a required input, or with an unknown one, as the API does', () => {
    const { episodes: _, ...noEpisodes } = ROUND;
    expect(() => dispatchWorkflow(FORKFLUSH, noEpisodes, {})).toThrow(
      new WorkflowError("Required input 'episodes' not provided"),
    );
    expect(() => dispatchWorkflow(FORKFLUSH, { ...ROUND, extra: 'x', more: 'y' }, {})).toThrow(
      new WorkflowError('Unexpected inputs provided: ["extra","more"]'),
    );
  });

  it('fails a round without episodes, as the matrix has no values', () => {
    expect(() => dispatchWorkflow(FORKFLUSH, { ...ROUND, episodes: '[]' }, {})).toThrow(
      "Matrix vector 'episode' has no values",
    );
    expect(() => dispatchWorkflow(FORKFLUSH, { ...ROUND, episodes: 'r2.b0' }, {})).toThrow(
      /Error evaluating 'fromJSON\(inputs.episodes\)'/,
    );
  });
});

describe('examples/workflows/autoresearch.yml', () => {
  const AUTORESEARCH = example('autoresearch.yml');

  it('runs its app job on a dispatch by hand', () => {
    const run = dispatchWorkflow(AUTORESEARCH, {}, { github: { token: 'ghs_x' }, secrets: { FORKFLUSH_APP_ID: '12' } });
    expect(run).toMatchObject({ name: 'autoresearch', displayTitle: 'autoresearch', cancelInProgress: false });
    expect(run.concurrencyGroup).toBeUndefined();
    expect(run.jobs).toHaveLength(1);
    const job = run.jobs[0];
    expect(job).toMatchObject({ key: 'app', name: 'app', matrix: {}, timeoutMinutes: 10 });
    expect(job?.permissions).toMatchObject({ contents: 'write', actions: 'write' });
    expect(job?.steps.map((s) => s.uses)).toEqual([
      'actions/create-github-app-token@v2',
      'actions/checkout@v5',
      'actions/setup-node@v5',
      undefined,
    ]);
    expect(job?.steps[1]?.with).toEqual({
      repository: 'your-org/forkflush',
      ref: 'v0.1.0',
      path: '.forkflush-app',
      'persist-credentials': 'false',
    });
    expect(job?.steps[3]).toEqual({
      run: 'node .forkflush-app/dist/app-actions.js',
      with: {},
      env: { FORKFLUSH_APP_ID: '12', GITHUB_TOKEN: 'ghs_x', FORKFLUSH_APP_TOKEN: '' },
    });
  });

  it("evaluates the job's if (with object filters) against the event", () => {
    const closed = (sender: string) => ({
      event_name: 'issues',
      event: {
        action: 'closed',
        issue: { labels: [{ name: 'bug' }, { name: 'autoresearch' }] },
        sender: { type: sender },
      },
    });
    expect(dispatchWorkflow(AUTORESEARCH, {}, { github: closed('User') }).jobs).toHaveLength(1);
    expect(dispatchWorkflow(AUTORESEARCH, {}, { github: closed('Bot') }).jobs).toHaveLength(0);
  });
});

describe('dispatch inputs', () => {
  const yaml = stringify({
    on: {
      workflow_dispatch: {
        inputs: {
          level: { type: 'choice', options: ['low', 'high'], default: 'low' },
          dry: { type: 'boolean', default: false },
          note: { type: 'string' },
        },
      },
    },
    'run-name':
      "${{ inputs.level }} ${{ inputs.dry && 'dry' || 'wet' }} [${{ inputs.note }}] ${{ github.event.inputs.dry }}",
    jobs: { j: { steps: [{ run: 'true' }] } },
  });

  it('applies defaults and types', () => {
    expect(dispatchWorkflow(yaml, {}, {}).displayTitle).toBe('low wet [] false');
    expect(dispatchWorkflow(yaml, { level: 'high', dry: 'true', note: 'n' }, {}).displayTitle).toBe(
      'high dry [n] true',
    );
  });

  it('refuses values that a choice or a boolean does not allow', () => {
    expect(() => dispatchWorkflow(yaml, { level: 'medium' }, {})).toThrow(
      "Provided value 'medium' for input 'level' not in the list of allowed values",
    );
    expect(() => dispatchWorkflow(yaml, { dry: 'yes' }, {})).toThrow(
      "Provided value 'yes' for input 'dry' is not a boolean",
    );
  });

  it('refuses a workflow without a workflow_dispatch trigger', () => {
    const push = stringify({ on: { push: { branches: ['main'] } }, jobs: { j: { steps: [{ run: 'true' }] } } });
    expect(() => dispatchWorkflow(push, {}, {})).toThrow(
      new WorkflowError("Workflow does not have 'workflow_dispatch' trigger"),
    );
    expect(() => dispatchWorkflow(push.replace('push:', 'workflow_run:'), {}, {})).toThrow(WorkflowError);
    const list = stringify({ on: ['push', 'workflow_dispatch'], jobs: { j: { steps: [{ run: 'true' }] } } });
    expect(dispatchWorkflow(list, {}, {}).jobs).toHaveLength(1);
    expect(dispatchWorkflow('on: workflow_dispatch\njobs:\n  j:\n    steps: [{run: x}]\n', {}, {}).jobs).toHaveLength(
      1,
    );
  });
});

describe('expressions', () => {
  it('evaluates literals, with quotes escaped by doubling them', () => {
    expect(evaluate("${{ 'it''s' }}")).toBe("it's");
    expect(evaluate('${{ 42 }} ${{ -1.5 }} ${{ 0xff }} ${{ 1e3 }} ${{ true }} ${{ null }}.')).toBe(
      '42 -1.5 255 1000 true .',
    );
  });

  it('interpolates several expressions in one string', () => {
    expect(evaluate("a ${{ 'b' }} c ${{ 1 }}${{ github.repository }}")).toBe('a b c 1octo-org/octo-repo');
    expect(evaluate('no expression')).toBe('no expression');
  });

  it('reads contexts with dots, brackets and object filters', () => {
    const github = { event: { labels: [{ name: 'bug' }, { name: 'autoresearch' }], 'my-key': 'v' } };
    expect(
      evaluate("${{ github['repository'] }} ${{ github.event['my-key'] }} ${{ github.event.my-key }}", github),
    ).toBe('octo-org/octo-repo v v');
    expect(evaluate('${{ github.event.labels[1].name }} ${{ GITHUB.Event.Labels[0].NAME }}', github)).toBe(
      'autoresearch bug',
    );
    expect(evaluate("${{ join(github.event.labels.*.name, ', ') }}", github)).toBe('bug, autoresearch');
    expect(evaluate("${{ contains(github.event.labels.*.name, 'AutoResearch') }}", github)).toBe('true');
    expect(evaluate('[${{ github.nothing.here }}] ${{ secrets.TOKEN }} [${{ secrets.MISSING }}]')).toBe('[] s3cret []');
  });

  it('compares loosely, as GitHub does', () => {
    expect(evaluate("${{ 'abc' == 'ABC' }} ${{ '1' == 1 }} ${{ null == '' }} ${{ 1 != 2 }} ${{ 'a' == 'b' }}")).toBe(
      'true true true true false',
    );
    expect(evaluate("${{ 1 < 2 }} ${{ 'b' > 'A' }} ${{ 2 <= 2 }} ${{ 3 >= 4 }} ${{ 'x' < 1 }}")).toBe(
      'true true true false false',
    );
  });

  it('applies ! && || and parentheses, && and || giving an operand', () => {
    expect(evaluate("${{ !true }} ${{ !'' }} ${{ false || 'fallback' }} ${{ 'x' && 'y' }} ${{ 0 && 'y' }}")).toBe(
      'false true fallback y 0',
    );
    expect(evaluate('${{ !(1 == 2) && (false || true) }} ${{ true || false && false }}')).toBe('true true');
    expect(evaluate("${{ false && fromJSON('not json') }}")).toBe('false');
  });

  it('calls the functions, with names in any case', () => {
    expect(evaluate("${{ format('{0}-{1} {{x}}', 'a', 2) }} ${{ '}}' }}")).toBe('a-2 {x} }}');
    expect(evaluate("${{ contains('Hello', 'ELL') }} ${{ contains(fromJSON('[\"a\",\"b\"]'), 'B') }}")).toBe(
      'true true',
    );
    expect(evaluate("${{ startsWith('forkflush', 'FORK') }} ${{ endsWith('forkflush', 'fork') }}")).toBe('true false');
    expect(evaluate("${{ join(fromJSON('[1,2,3]'), '+') }} ${{ join(fromJSON('[1,2]')) }}")).toBe('1+2+3 1,2');
    expect(evaluate('${{ toJSON(fromJSON(\'{"a":[1]}\')) }}')).toBe('{\n  "a": [\n    1\n  ]\n}');
    expect(evaluate("${{ FromJson('[5]')[0] }} ${{ fromJSON('[5]') }} ${{ fromJSON('{}') }}")).toBe('5 Array Object');
  });

  it('names the expression in errors', () => {
    expect(() => evaluate('${{ nope(1) }}')).toThrow(
      new WorkflowError("Invalid expression 'nope(1)': unknown function 'nope'"),
    );
    expect(() => evaluate('${{ 1 == }}')).toThrow(/^Invalid expression '1 ==': unexpected end/);
    expect(() => evaluate('${{ 1 # 2 }}')).toThrow("Invalid expression '1 # 2': unexpected '#' at position 4");
    expect(() => evaluate("${{ 'open }}")).toThrow(/^Unclosed/);
    expect(() => evaluate('${{ 1 2 }}')).toThrow(/^Invalid expression '1 2': unexpected '2'/);
    expect(() => evaluate("${{ format('{0}') }}")).toThrow(/^Error evaluating 'format\('\{0\}'\)'/);
    expect(() => evaluate('${{ contains(1) }}')).toThrow(/wrong number of arguments to contains\(\)/);
    expect(() => evaluate('${{ runner.os }}')).toThrow(
      "Invalid expression 'runner.os': unrecognized named-value 'runner'",
    );
    expect(() => evaluate('${{ 1 ')).toThrow(WorkflowError);
  });
});

describe('matrix', () => {
  const names = (yaml: string, inputs: Record<string, string> = {}) =>
    dispatchWorkflow(yaml, inputs, {}).jobs.map((j) => j.name);

  it('makes the product of the vectors, less exclusions, and names the jobs after the values', () => {
    const strategy = { matrix: { os: ['linux', 'mac'], node: [20, 22], exclude: [{ os: 'mac', node: 20 }] } };
    expect(names(workflow({ strategy }))).toEqual(['j (linux, 20)', 'j (linux, 22)', 'j (mac, 22)']);
    expect(names(workflow({ name: 'Build', strategy }))).toEqual([
      'Build (linux, 20)',
      'Build (linux, 22)',
      'Build (mac, 22)',
    ]);
  });

  it("adds inclusions the way GitHub's documentation shows", () => {
    const include = [
      { color: 'green' },
      { color: 'pink', animal: 'cat' },
      { fruit: 'apple', shape: 'circle' },
      { fruit: 'banana' },
      { fruit: 'banana', animal: 'cat' },
    ];
    const yaml = workflow({ strategy: { matrix: { fruit: ['apple', 'pear'], animal: ['cat', 'dog'], include } } });
    expect(dispatchWorkflow(yaml, {}, {}).jobs.map((j) => j.matrix)).toEqual([
      { fruit: 'apple', animal: 'cat', color: 'pink', shape: 'circle' },
      { fruit: 'apple', animal: 'dog', color: 'green', shape: 'circle' },
      { fruit: 'pear', animal: 'cat', color: 'pink' },
      { fruit: 'pear', animal: 'dog', color: 'green' },
      { fruit: 'banana' },
      { fruit: 'banana', animal: 'cat' },
    ]);
  });

  it('takes vectors, or the whole matrix, from expressions, and evaluates names, env and the timeout per job', () => {
    const yaml = stringify({
      on: {
        workflow_dispatch: { inputs: { shards: { required: true }, config: { default: '{"include":[{"a":1}]}' } } },
      },
      env: { WORKFLOW: 'w' },
      jobs: {
        test: {
          name: 'test ${{ matrix.shard }}',
          'timeout-minutes': '${{ fromJSON(inputs.shards)[0] }}',
          strategy: { matrix: { shard: '${{ fromJSON(inputs.shards) }}' } },
          env: { SHARD: 'shard-${{ matrix.shard }}' },
          steps: [
            { name: 'run ${{ env.SHARD }}', run: 'echo ${{ env.WORKFLOW }} $X', env: { X: '${{ env.SHARD }}!' } },
          ],
        },
        other: { strategy: { matrix: '${{ fromJSON(inputs.config) }}' }, steps: [{ run: 'true' }] },
      },
    });
    const run = dispatchWorkflow(yaml, { shards: '[3,4]' }, {});
    expect(run.jobs.map((j) => [j.name, j.timeoutMinutes])).toEqual([
      ['test 3', 3],
      ['test 4', 3],
      ['other (1)', 360],
    ]);
    expect(run.jobs[1]?.steps[0]).toEqual({
      name: 'run shard-4',
      run: 'echo w $X',
      with: {},
      env: { WORKFLOW: 'w', SHARD: 'shard-4', X: 'shard-4!' },
    });
  });

  it('leaves out jobs whose if is false', () => {
    const yaml = stringify({
      on: { workflow_dispatch: { inputs: { go: { type: 'boolean' } } } },
      jobs: {
        always: { steps: [{ run: 'true' }] },
        bare: { if: "github.event_name == 'workflow_dispatch' && inputs.go", steps: [{ run: 'true' }] },
        wrapped: { if: '${{ !inputs.go }}', steps: [{ run: 'true' }] },
      },
    });
    expect(names(yaml, { go: 'true' })).toEqual(['always', 'bare']);
    expect(names(yaml, { go: 'false' })).toEqual(['always', 'wrapped']);
  });
});
