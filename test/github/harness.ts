// Drives the Probot app with real webhook payload shapes (@octokit/webhooks-examples, patched)
// against the fake GitHub, and plays the worker jobs' part: a job pushes a result commit to its
// episode branch, then GitHub reports the job as completed.
import examples from '@octokit/webhooks-examples';
import { Probot, ProbotOctokit } from 'probot';
import { forkflushApp } from '../../src/app/app.js';
import { commitMessage } from '../../src/core/journal.js';
import { episodeBranch, stateRef } from '../../src/core/names.js';
import type { Episode, RunState } from '../../src/core/state.js';
import { FakeGitHub } from './fake-github.js';

export const CONFIG = `grader:
  command: node grade.mjs
  protected: [grade.mjs]
agent:
  command: node agent.mjs
budget:
  total: 100
  unit: tokens
  episode: 10
fork:
  branches: 2
  at: [0.5]
  branch_budget: 0.15
`;

type Example = { name: string; examples: Record<string, any>[] };

/** A payload of a real GitHub webhook example, with our repository and the given changes. */
export function payload(event: string, action: string, patch: (p: any) => void, gh: FakeGitHub): any {
  const found = (examples as unknown as Example[])
    .find((e) => e.name === event)
    ?.examples.find((x) => x.action === action);
  if (!found) throw new Error(`no example of ${event}.${action}`);
  const p = structuredClone(found);
  p.repository.name = gh.repo;
  p.repository.full_name = `${gh.owner}/${gh.repo}`;
  p.repository.owner.login = gh.owner;
  delete p.installation;
  patch(p);
  return p;
}

export class Harness {
  readonly gh: FakeGitHub;
  readonly probot: Probot;
  clock = new Date('2026-11-30T12:00:00Z');
  private delivery = 0;

  constructor(files: Record<string, string> = { '.github/autoresearch.yml': CONFIG, 'grade.mjs': 'x' }) {
    this.gh = new FakeGitHub(files);
    this.gh.permissions = { maintainer: 'maintain', reader: 'read' };
    this.probot = new Probot({
      githubToken: 'ghs_test_token',
      logLevel: 'fatal',
      // A function, so it applies after Probot's own defaults (which turn throttling on).
      Octokit: ProbotOctokit.defaults((options: any) => ({
        ...options,
        retry: { enabled: false },
        throttle: { enabled: false },
      })),
    });
  }

  /**
   * The app restarted between two steps: a fresh Probot instance (nothing kept in memory) loaded
   * with the app, against the same fake GitHub.
   */
  async restart(): Promise<this> {
    const probot = new Probot({
      githubToken: 'ghs_test_token',
      logLevel: 'fatal',
      Octokit: ProbotOctokit.defaults((options: any) => ({
        ...options,
        retry: { enabled: false },
        throttle: { enabled: false },
      })),
    });
    await probot.load(forkflushApp({ now: () => this.clock }));
    (this as { probot: Probot }).probot = probot;
    return this;
  }

  /** The run's record files (run.json), or null before the run has one. */
  runFiles(run: string): Record<string, any> | null {
    const sha = this.gh.refs.get(stateRef(run));
    const text = sha ? this.gh.commits.get(sha)?.files['run.json'] : undefined;
    return text === undefined ? null : JSON.parse(text);
  }

  async load(): Promise<this> {
    await this.probot.load(forkflushApp({ now: () => this.clock }));
    this.gh.mount();
    return this;
  }

  async send(event: string, action: string, patch: (p: any) => void): Promise<void> {
    await this.probot.receive({
      id: `delivery-${++this.delivery}`,
      name: event as never,
      payload: payload(event, action, patch, this.gh),
    });
  }

  label(issue: number, user = 'maintainer', type = 'User', name = 'autoresearch') {
    return this.send('issues', 'labeled', (p) => {
      p.issue.number = issue;
      p.issue.title = 'Pack it tighter';
      p.issue.body = 'Make the score go up.';
      delete p.issue.pull_request;
      p.label.name = name;
      p.sender.login = user;
      p.sender.type = type;
    });
  }

  comment(issue: number, body: string, user = 'maintainer') {
    return this.send('issue_comment', 'created', (p) => {
      p.issue.number = issue;
      delete p.issue.pull_request;
      p.comment.body = body;
      p.sender.login = user;
      p.sender.type = 'User';
    });
  }

  jobCompleted(run: string, episode: string, conclusion = 'success', branch = 'main') {
    return this.send('workflow_job', 'completed', (p) => {
      p.workflow_job.name = `forkflush ${run} ${episode}`;
      p.workflow_job.conclusion = conclusion;
      p.workflow_job.head_branch = branch;
      p.repository.default_branch = 'main';
    });
  }

  runCompleted(run: string, round: number, branch = 'main') {
    return this.send('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${run} round ${round}`;
      p.workflow_run.head_branch = branch;
      p.repository.default_branch = 'main';
    });
  }

  state(run: string): RunState {
    const sha = this.gh.refs.get(stateRef(run)) as string;
    return JSON.parse(this.gh.commits.get(sha)?.files['state.json'] as string);
  }

  /** The worker's part: a result commit on the episode's branch, with the score in its trailers. */
  pushResult(state: RunState, e: Episode, score: number | null, spent = e.allowance) {
    const branch = `refs/heads/${episodeBranch(state.id, e.round, e.branch)}`;
    const head = this.gh.refs.get(branch);
    if (head !== e.base) return false;
    const message = commitMessage(
      state.id,
      state.config,
      e,
      {
        score,
        ...(score === null ? { reason: 'the grader exited with code 1' } : {}),
        spent,
        exit: 'finished',
        protectedChanged: [],
        agentSeconds: 1,
        graderSeconds: 0.5,
        wallSeconds: 2,
      },
      { diffStat: '1 file changed, 2 insertions(+)', journalTail: [`- ${e.id}: tried something`] },
    );
    const parent = this.gh.commits.get(e.base);
    const sha = this.gh.commit({ message, parents: [e.base], files: { ...parent?.files, 'NOTES.md': `${e.id}\n` } });
    this.gh.refs.set(branch, sha);
    return true;
  }

  /** The open round's episodes, as the app dispatched them. */
  openEpisodes(run: string): Episode[] {
    return this.state(run).rounds.find((r) => !r.decision)?.episodes ?? [];
  }
}
