// The worker workflow's runs: a round dispatched once (found again after a lost answer), its
// runs listed by title or read by id, cancelled on a stop; and the Actions-mode tick's workflow turned on and off.
import { isRoundRunOf, roundRunTitle } from '../core/names.js';
import { createOnce, type Octokit, ONCE, type RepoScope, status } from './requests.js';

/** A workflow run as GitHub lists it. */
export type WorkflowRun = Awaited<
  ReturnType<Octokit['rest']['actions']['listWorkflowRuns']>
>['data']['workflow_runs'][number];

export class Workflows {
  constructor(private readonly scope: RepoScope) {}

  /**
   * Dispatches the workflow once; returns the id of the run it started, when GitHub says (it does
   * with return_run_details; an older GitHub answers 204 and no id), so that only that run's
   * events may end the round. After an answer that may have been lost, a run not yet completed
   * with the round's title (GitHub creates a dispatched run at once) is the one this made.
   */
  async dispatch(workflow: string, ref: string, inputs: Record<string, string>): Promise<number | null> {
    const title =
      inputs.run !== undefined && inputs.round !== undefined ? roundRunTitle(inputs.run, Number(inputs.round)) : null;
    const started = await createOnce(
      async () => {
        const { data } = await this.scope.octokit.rest.actions.createWorkflowDispatch({
          ...this.scope.r,
          workflow_id: workflow,
          ref,
          inputs,
          return_run_details: true,
          ...ONCE,
        } as Parameters<Octokit['rest']['actions']['createWorkflowDispatch']>[0]);
        const id = (data as { workflow_run_id?: unknown } | undefined)?.workflow_run_id;
        return { id: typeof id === 'number' ? id : null };
      },
      async () => {
        if (title === null) return null;
        const live = (await this.runsTitled(workflow, title)).find((w) => w.status !== 'completed');
        return live ? { id: live.id } : null;
      },
    );
    return started.id;
  }

  /** One workflow run by its id, or null when GitHub has none (deleted, or never made). */
  async run(id: number): Promise<WorkflowRun | null> {
    try {
      return (await this.scope.octokit.rest.actions.getWorkflowRun({ ...this.scope.r, run_id: id })).data;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /**
   * The newest run of the workflow with this title that was not cancelled (a dispatch taken over),
   * with the branch it runs on.
   */
  async liveRun(workflow: string, title: string): Promise<{ id: number; branch: string | null } | null> {
    const live = (await this.runsTitled(workflow, title)).find((w) => w.conclusion !== 'cancelled');
    return live ? { id: live.id, branch: live.head_branch } : null;
  }

  /** The workflow's dispatched runs with this title, among its 100 newest. */
  async runsTitled(workflow: string, title: string): Promise<WorkflowRun[]> {
    const { data } = await this.scope.octokit.rest.actions.listWorkflowRuns({
      ...this.scope.r,
      workflow_id: workflow,
      event: 'workflow_dispatch',
      per_page: 100,
    });
    return data.workflow_runs.filter((w) => w.display_title === title);
  }

  /** Cancels one workflow run; false when it has completed already, or is gone. */
  async cancel(id: number): Promise<boolean> {
    try {
      await this.scope.octokit.rest.actions.cancelWorkflowRun({ ...this.scope.r, run_id: id });
      return true;
    } catch (e) {
      if (status(e) === 409 || status(e) === 404) return false;
      throw e;
    }
  }

  /** Cancels the workflow's runs still queued or in progress whose title names the run. */
  async cancelRuns(workflow: string, run: string): Promise<number> {
    let cancelled = 0;
    // Waiting and pending runs sit in a concurrency group or before an environment: stop them too.
    for (const state of ['queued', 'in_progress', 'waiting', 'pending'] as const) {
      const { data } = await this.scope.octokit.rest.actions.listWorkflowRuns({
        ...this.scope.r,
        workflow_id: workflow,
        status: state,
        per_page: 100,
      });
      for (const w of data.workflow_runs) {
        if (!isRoundRunOf(w.display_title ?? '', run)) continue;
        try {
          await this.scope.octokit.rest.actions.cancelWorkflowRun({ ...this.scope.r, run_id: w.id });
          cancelled++;
        } catch (e) {
          if (status(e) !== 409) throw e;
        }
      }
    }
    return cancelled;
  }

  /**
   * Enables or disables a workflow (Actions mode's tick, which runs only while a run needs it).
   * False when the repository has no such workflow.
   */
  async setEnabled(workflow: string, enabled: boolean): Promise<boolean> {
    try {
      const args = { ...this.scope.r, workflow_id: workflow };
      if (enabled) await this.scope.octokit.rest.actions.enableWorkflow(args);
      else await this.scope.octokit.rest.actions.disableWorkflow(args);
      return true;
    } catch (e) {
      if (status(e) === 404) return false;
      throw e;
    }
  }
}
