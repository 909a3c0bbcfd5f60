// An issue's conversation: whether it is open and its labels, forkflush's status comment (kept
// current in place), its other comments (each written once), reactions to commands, labels.
import { BODY_MAX_CHARS } from '../core/bounds.js';
import { clip } from '../core/github-text.js';
import { isLabel } from '../core/names.js';
import { createOnce, ONCE, type RepoScope, rateLimited, status } from './requests.js';

/** Room kept for a once-marker after a clipped answer (its key is an event's or a comment's id). */
const MARKER_ROOM_CHARS = 512;

export type Reaction = 'eyes' | '+1' | '-1';

/** The hidden line that names the event a comment answers (commentOnce); GitHub does not show it. */
export function onceMarker(key: string): string {
  return `<!-- forkflush:answers ${key.replace(/[^\w:.-]/g, '_')} -->`;
}

/** How far before a comment's first try its lookup starts (write). */
const CLOCK_SLACK_MS = 5 * 60_000;

export class Issues {
  constructor(
    private readonly scope: RepoScope,
    /** The repository's `owner/name` as it is now (a rename redirects its old name). */
    private readonly fullName: () => Promise<string>,
  ) {}

  /** Whether the issue is open, and its labels; null when there is none. */
  async get(issue: number): Promise<{ open: boolean; labels: string[] } | null> {
    try {
      const { data } = await this.scope.octokit.rest.issues.get({ ...this.scope.r, issue_number: issue });
      const labels = data.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? '')));
      return { open: data.state === 'open', labels };
    } catch (e) {
      if (status(e) === 404 || status(e) === 410) return null;
      throw e;
    }
  }

  /**
   * Whether the issue is gone: GitHub answers 410 for one deleted, and for every issue while Issues
   * are turned off for the repository (a 404 says no more than "not seen"). One transferred answers
   * 301, which fetch follows to the issue it became: another number, or another repository's (the
   * repository's own rename redirects too, to the same issue of the same repository).
   */
  async gone(issue: number): Promise<boolean> {
    try {
      const { data } = await this.scope.octokit.rest.issues.get({ ...this.scope.r, issue_number: issue });
      if (data.number !== issue) return true;
      const at = new URL(data.repository_url).pathname.toLowerCase();
      const named = (name: string) => at.endsWith(`/repos/${name.toLowerCase()}`);
      return !named(`${this.scope.r.owner}/${this.scope.r.repo}`) && !named(await this.fullName());
    } catch (e) {
      if (status(e) === 410) return true;
      if (status(e) === 404) return false;
      throw e;
    }
  }

  /**
   * Reacts to a comment (`eyes`: taken; `+1`, `-1`: done or refused). GitHub keeps one reaction of
   * a kind per author, so a repeat is harmless.
   */
  async react(commentId: number, content: Reaction): Promise<void> {
    await this.scope.octokit.rest.reactions.createForIssueComment({ ...this.scope.r, comment_id: commentId, content });
  }

  /**
   * Edits forkflush's status comment on an issue, or writes it; returns its id. `body` starts with
   * `marker`. Without a known id (a run's first sync, or one whose record save was lost after the
   * comment was written), the issue's comments are searched for forkflush's one first: once per
   * run, through all of the issue's comments. A 404 is not taken on its word (a proxy can say it
   * after the edit was made): the comments are searched again, and only a comment that is gone
   * is written anew. One this token may not edit (403: another app's, whose text happened to start
   * with the marker) is passed over.
   */
  async upsertComment(issue: number, commentId: number | null, body: string, marker: string): Promise<number> {
    const refused = new Set<number>();
    let id = commentId ?? (await this.findMarkedComment(issue, marker, refused));
    let searched = commentId === null;
    while (id !== null) {
      try {
        await this.scope.octokit.rest.issues.updateComment({ ...this.scope.r, comment_id: id, body });
        return id;
      } catch (e) {
        // A 403 for this comment (another app's, or one locked); not GitHub's rate limit's, which is retried later.
        if (status(e) === 403 && !rateLimited(e)) refused.add(id);
        else if (status(e) !== 404 || searched) throw e;
      }
      id = await this.findMarkedComment(issue, marker, refused);
      searched = true;
    }
    return this.write(issue, body);
  }

  /**
   * The oldest comment by a bot on the issue that starts with `marker` (and is not one of
   * `passedOver`): forkflush's status comment starts with it, and a comment that only quotes it
   * (a person's, another bot's) does not.
   */
  private async findMarkedComment(issue: number, marker: string, passedOver: Set<number>): Promise<number | null> {
    const comments = await this.scope.octokit.paginate(this.scope.octokit.rest.issues.listComments, {
      ...this.scope.r,
      issue_number: issue,
      per_page: 100,
    });
    return (
      comments.find((c) => c.user?.type === 'Bot' && c.body?.startsWith(marker) && !passedOver.has(c.id))?.id ?? null
    );
  }

  async comment(issue: number, body: string): Promise<void> {
    await this.write(issue, body);
  }

  /**
   * Writes the answer to one event (a refusal, a command's reply) once, whatever delivers the
   * event again, even to an app restarted in between: the comment carries the event's key in a
   * hidden line (onceMarker), and a bot's comment on the issue with that line is the answer
   * already given: a refused start has no run record to keep it in. (Two deliveries of one event
   * handled at the very same moment could both write; a redelivery comes after the first answer.)
   */
  async commentOnce(issue: number, key: string, body: string): Promise<number> {
    const marker = onceMarker(key);
    const comments = await this.scope.octokit.paginate(this.scope.octokit.rest.issues.listComments, {
      ...this.scope.r,
      issue_number: issue,
      per_page: 100,
    });
    const given = comments.find((c) => c.user?.type === 'Bot' && c.body?.includes(marker));
    if (given) return given.id;
    // Clipped before the marker goes on: a refusal of a thousand problems must still be said.
    return this.write(issue, `${clip(body, BODY_MAX_CHARS - MARKER_ROOM_CHARS)}\n\n${marker}`);
  }

  /**
   * Writes a comment once: after a failure that may hide a success, the comment is looked for among
   * the issue's comments by forkflush (a bot) with the same body, updated since a little before the
   * first try (CLOCK_SLACK_MS: the app's clock and GitHub's may differ).
   */
  async write(issue: number, text: string): Promise<number> {
    const body = clip(text, BODY_MAX_CHARS);
    // GitHub's own format: whole seconds, UTC.
    const since = new Date(Date.now() - CLOCK_SLACK_MS).toISOString().replace(/\.\d+Z$/, 'Z');
    return createOnce(
      async () => {
        const { data } = await this.scope.octokit.rest.issues.createComment({
          ...this.scope.r,
          issue_number: issue,
          body,
          ...ONCE,
        });
        return data.id;
      },
      () => this.findComment(issue, body, since),
    );
  }

  /**
   * The oldest comment by a bot on the issue with exactly this body, updated since `since`. A
   * person's comment is never taken for it. Another bot's with the very same text within minutes
   * is: in Actions mode every workflow writes as github-actions[bot], and the same reply from
   * another instance of this app (a doubled delivery) is the comment not to write twice.
   */
  private async findComment(issue: number, body: string, since: string): Promise<number | null> {
    const comments = await this.scope.octokit.paginate(this.scope.octokit.rest.issues.listComments, {
      ...this.scope.r,
      issue_number: issue,
      since,
      per_page: 100,
    });
    return comments.find((c) => c.user?.type === 'Bot' && c.body === body)?.id ?? null;
  }

  async addLabel(issue: number, label: string): Promise<void> {
    await this.scope.octokit.rest.issues.addLabels({ ...this.scope.r, issue_number: issue, labels: [label] });
  }

  async removeLabel(issue: number, label: string): Promise<void> {
    const remove = async (name: string) => {
      try {
        await this.scope.octokit.rest.issues.removeLabel({ ...this.scope.r, issue_number: issue, name });
        return true;
      } catch (e) {
        if (status(e) !== 404) throw e;
        return false;
      }
    };
    if (await remove(label)) return;
    // Not under that name: maybe as the team made it (`Autoresearch`), one label whatever the case.
    const named = (await this.get(issue))?.labels.find((l) => l !== label && isLabel(l, label));
    if (named) await remove(named);
  }
}
