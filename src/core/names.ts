// Names a person can read: the run, the round and the branch are in every ref.

export function lineageBranch(run: string, lineage: number, lineages: number): string {
  return lineages === 1 ? `forkflush/${run}/lineage` : `forkflush/${run}/lineage-${lineage}`;
}

export function episodeBranch(run: string, round: number, branch: number): string {
  return `forkflush/${run}/round-${round}/branch-${branch}`;
}

export function bestBranch(run: string): string {
  return `forkflush/${run}/best`;
}

/** "round 2, branch 1" or "initial workspace". */
export function describeEpisodeId(id: string): string {
  const m = /^r(\d+)\.b(\d+)$/.exec(id);
  return m ? `round ${m[1]}, branch ${m[2]}` : id === 'base' ? 'initial workspace' : id;
}

/** A run id from a time: 20261130-055201. */
export function runIdAt(date: Date): string {
  const iso = date.toISOString();
  return `${iso.slice(0, 10).replace(/-/g, '')}-${iso.slice(11, 19).replace(/:/g, '')}`;
}

// On a forge the run's own records live under refs/forkflush/, outside refs/heads, so a checkout
// of a branch never fetches them and the agent never sees them.

/** A commit whose tree holds `state.json` (the RunState) and `run.json` (task text, templates). */
export function stateRef(run: string): string {
  return `refs/forkflush/${run}/state`;
}

/** A commit whose tree is the context folder an episode left behind. */
export function contextRef(run: string, episode: string): string {
  return `refs/forkflush/${run}/contexts/${episode}`;
}

/** The run id of the run an issue started. */
export function issueRunId(issue: number): string {
  return `issue-${issue}`;
}

/** The title of a round's workflow run: the worker workflow's `run-name` (examples/workflows/forkflush.yml). */
export function roundRunTitle(run: string, round: number): string {
  return `forkflush ${run} round ${round}`;
}
