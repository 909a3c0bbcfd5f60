// `/autoresearch map` on GitHub: a writer's command, checked before anything is spent, dispatches
// one map job (matrix value `map`) once per comment; the job's end shows the map it pushed on
// refs/forkflush/<run>/map once per map commit (the picture, basins, agreement against run identity
// and chance), or its failure in one line; the status comment and the result pull request embed
// the last map. The job's own part (a map commit) is played here; action-map.test.ts runs it.
import { describe, expect, it } from 'vitest';
import { mapRef } from '../../src/core/names.js';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

async function playRound(h: Harness, score: (id: string) => number | null) {
  const state = h.state(RUN);
  const open = h.openEpisodes(RUN);
  for (const e of open) if (!e.result) h.pushResult(state, e, score(e.id));
  for (const e of open) await h.jobCompleted(RUN, e.id);
}

/** A run with three graded episodes of their own (the opening round's two, the leader's first). */
async function gradedRun(): Promise<Harness> {
  const h = await new Harness().load();
  await h.label(7);
  await playRound(h, (id) => (id === 'r0.b1' ? 50 : 40));
  await playRound(h, () => 55);
  return h;
}

const mapDispatches = (h: Harness) => h.gh.dispatches.filter((d) => d.inputs.round === 'map');
const issueComments = (h: Harness) => h.gh.comments.filter((c) => c.issue === 7);
const bodies = (h: Harness) => issueComments(h).map((c) => c.body);

describe('/autoresearch map', () => {
  it('from a writer, dispatches one map job; the map it pushes is shown once, and the status comment embeds it', async () => {
    const h = await gradedRun();
    await h.comment(7, '/autoresearch map');
    expect(mapDispatches(h)).toHaveLength(1);
    expect(mapDispatches(h)[0]?.inputs).toEqual({ run: RUN, round: 'map', episodes: '["map"]' });
    expect(h.runFiles(RUN)?.map).toMatchObject({ asked: expect.stringMatching(/^comment:\d+$/), by: 'maintainer' });
    expect(h.runFiles(RUN)?.map?.dispatched).toBeDefined();
    // The command's comment was taken and carried out: no reply, only the reactions.
    const before = issueComments(h).length;

    const sha = h.pushMap(RUN);
    await h.jobCompleted(RUN, 'map');
    const shown = bodies(h).filter((b) => b.startsWith('## Idea map'));
    expect(shown).toHaveLength(1);
    expect(shown[0]).toContain(`https://github.com/octo-org/octo-repo/blob/${sha}/map.svg?raw=true`);
    expect(shown[0]).toMatch(/Held-out agreement|No judgment was held out/);
    expect(shown[0]).toContain('### Basins visited per run');
    expect(shown[0]).toContain(`\`${mapRef(RUN)}\` at \`${sha.slice(0, 10)}\``);
    expect(h.runFiles(RUN)?.map?.drawn).toMatchObject({ commit: sha });
    // The status comment (edited in place) shows the map from now on.
    const status = issueComments(h).find((c) => c.body.includes('<!-- forkflush:issue-7 -->'));
    expect(status?.body).toContain('#### Idea map');
    expect(status?.body).toContain(`/blob/${sha}/map.svg?raw=true`);

    // The job's end delivered again, and the workflow run's end too: nothing more is said.
    await h.jobCompleted(RUN, 'map');
    await h.send('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${RUN} round map`;
      p.workflow_run.head_branch = 'main';
      p.workflow_run.conclusion = 'success';
    });
    expect(bodies(h).filter((b) => b.startsWith('## Idea map'))).toHaveLength(1);
    expect(issueComments(h).length).toBe(before + 1);
  });

  it('the same comment delivered again, or after a restart, dispatches nothing more; another comment does', async () => {
    const h = await gradedRun();
    const send = (id: number) =>
      h.send('issue_comment', 'created', (p) => {
        p.issue.number = 7;
        delete p.issue.pull_request;
        p.comment.id = id;
        p.comment.body = '/autoresearch map';
        p.sender.login = 'maintainer';
        p.sender.type = 'User';
      });
    await send(901);
    await send(901);
    await h.restart();
    await send(901);
    expect(mapDispatches(h)).toHaveLength(1);
    await send(902);
    expect(mapDispatches(h)).toHaveLength(2);
    expect(h.runFiles(RUN)?.map?.asked).toBe('comment:902');
  });

  it('from someone without write access, gets no answer and dispatches nothing', async () => {
    const h = await gradedRun();
    const said = issueComments(h).length;
    await h.comment(7, '/autoresearch map', 'reader');
    expect(mapDispatches(h)).toHaveLength(0);
    expect(issueComments(h)).toHaveLength(said);
    expect(h.runFiles(RUN)?.map).toBeUndefined();
  });

  it('before an episode is graded, is refused in one comment and spends nothing', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.comment(7, '/autoresearch map');
    expect(mapDispatches(h)).toHaveLength(0);
    expect(bodies(h).at(-1)).toMatch(/^forkflush drew no idea map: the run has no graded episode yet/);
    expect(h.runFiles(RUN)?.map).toBeUndefined();
  });

  it('with map: settings that are not valid on the default branch, is refused and says which', async () => {
    const h = await gradedRun();
    // Someone sets map: on the default branch after the run started, wrongly.
    const main = h.gh.refs.get('refs/heads/main') as string;
    const files = h.gh.commits.get(main)?.files ?? {};
    const config = `${files['.github/autoresearch.yml']}map:\n  held_out: 0.9\n`;
    const next = h.gh.commit({
      message: 'map settings',
      parents: [main],
      files: { ...files, '.github/autoresearch.yml': config },
    });
    h.gh.refs.set('refs/heads/main', next);
    await h.comment(7, '/autoresearch map');
    expect(mapDispatches(h)).toHaveLength(0);
    expect(bodies(h).at(-1)).toMatch(/^forkflush drew no idea map: the map reads its settings/);
    expect(bodies(h).at(-1)).toContain('held_out');
  });

  it('whose job failed, says so once in one line; a re-run that pushes a map shows it', async () => {
    const h = await gradedRun();
    await h.comment(7, '/autoresearch map');
    await h.jobCompleted(RUN, 'map', 'failure');
    await h.jobCompleted(RUN, 'map', 'failure');
    const failed = bodies(h).filter((b) => b.startsWith('forkflush drew no idea map'));
    expect(failed).toHaveLength(1);
    expect(failed[0]?.split('\n')[0]).toMatch(
      /^forkflush drew no idea map: `its job ended: failure` \(\[its job\]\(.+\) says why\)\./,
    );
    expect(h.runFiles(RUN)?.map?.drawn).toBeUndefined();
    // The job run again (its answers kept on the map ref) pushes a map, with a PNG this time.
    const sha = h.pushMap(RUN, true);
    await h.jobCompleted(RUN, 'map');
    expect(
      bodies(h).filter((b) => b.startsWith('## Idea map') && b.includes(`/blob/${sha}/map.png?raw=true`)),
    ).toHaveLength(1);
  });

  it("of a finished run, heard from the workflow run's end (Actions mode), is embedded in the result pull request", async () => {
    const h = await gradedRun();
    for (let guard = 0; guard < 50 && h.state(RUN).status !== 'finished'; guard++) await playRound(h, () => 60);
    expect(h.state(RUN).status).toBe('finished');
    await h.comment(7, '/autoresearch map');
    const sha = h.pushMap(RUN);
    await h.send('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${RUN} round map`;
      p.workflow_run.head_branch = 'main';
      p.workflow_run.conclusion = 'success';
    });
    expect(bodies(h).filter((b) => b.startsWith('## Idea map'))).toHaveLength(1);
    const [result] = h.gh.pulls;
    expect(result?.body).toContain('#### Idea map');
    expect(result?.body).toContain(`https://github.com/octo-org/octo-repo/blob/${sha}/map.svg?raw=true`);
  });

  it("from another workflow run than the map's dispatch, changes nothing", async () => {
    const h = await gradedRun();
    await h.comment(7, '/autoresearch map');
    h.pushMap(RUN);
    await h.send('workflow_job', 'completed', (p) => {
      p.workflow_job.name = `forkflush ${RUN} map`;
      p.workflow_job.conclusion = 'success';
      p.workflow_job.head_branch = 'main';
      p.workflow_job.run_id = 999_999;
    });
    expect(bodies(h).filter((b) => b.startsWith('## Idea map'))).toHaveLength(0);
    expect(h.runFiles(RUN)?.map?.drawn).toBeUndefined();
  });
});
