// A stateful fake of the GitHub REST endpoints forkflush calls, mounted on nock. Its shapes follow
// GitHub's REST API (the fields forkflush reads); its rules are the ones forkflush relies on:
// a ref update without force must be a fast-forward, a ref or pull request that exists is a 422,
// a missing one a 404.
import { createHash } from 'node:crypto';
import nock from 'nock';

export interface FakeCommit {
  sha: string;
  message: string;
  parents: string[];
  files: Record<string, string>;
}

export interface FakePull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: 'open' | 'closed';
}

export class FakeGitHub {
  readonly owner = 'octo-org';
  readonly repo = 'octo-repo';
  readonly commits = new Map<string, FakeCommit>();
  readonly refs = new Map<string, string>();
  readonly pulls: FakePull[] = [];
  readonly comments: { id: number; issue: number; body: string; edits: number }[] = [];
  readonly checkRuns: { id: number; head_sha: string; name: string; conclusion: string; output: { title: string } }[] =
    [];
  readonly dispatches: { workflow: string; ref: string; inputs: Record<string, string> }[] = [];
  readonly labels = new Map<number, Set<string>>();
  readonly log: string[] = [];
  permissions: Record<string, string> = {};
  /** Fails the next matching request once with this status (e.g. a ref update, to simulate a race). */
  failNext: { method: string; path: RegExp; status: number } | null = null;
  private nextId = 100;

  constructor(files: Record<string, string>) {
    const root = this.commit({ message: 'initial', parents: [], files });
    this.refs.set('refs/heads/main', root);
  }

  commit(c: Omit<FakeCommit, 'sha'>): string {
    const sha = createHash('sha1')
      .update(JSON.stringify([c, this.commits.size]))
      .digest('hex');
    this.commits.set(sha, { ...c, sha });
    return sha;
  }

  isAncestor(a: string, b: string): boolean {
    const seen = new Set<string>();
    const stack = [b];
    while (stack.length > 0) {
      const s = stack.pop() as string;
      if (s === a) return true;
      if (seen.has(s)) continue;
      seen.add(s);
      stack.push(...(this.commits.get(s)?.parents ?? []));
    }
    return false;
  }

  branch(name: string): string | undefined {
    return this.refs.get(`refs/heads/${name}`);
  }

  /** Registers the endpoints; call nock.cleanAll() after the test. */
  mount(): void {
    const base = `/repos/${this.owner}/${this.repo}`;
    const scope = nock('https://api.github.com').persist();
    const route = (
      method: string,
      path: RegExp,
      handler: (m: RegExpExecArray, body: any, query: URLSearchParams) => [number, unknown?],
    ) => {
      const re = new RegExp(`^${base}${path.source}(\\?.*)?$`);
      const intercept = (scope as any)[method.toLowerCase()](re);
      intercept.reply((uri: string, body: unknown) => {
        const url = new URL(uri, 'https://api.github.com');
        const m = re.exec(url.pathname) as RegExpExecArray;
        this.log.push(`${method} ${url.pathname}`);
        if (this.failNext && this.failNext.method === method && this.failNext.path.test(url.pathname)) {
          const { status } = this.failNext;
          this.failNext = null;
          return [status, { message: 'injected failure' }];
        }
        const parsed = typeof body === 'string' && body !== '' ? JSON.parse(body) : body;
        return handler(m, parsed, url.searchParams);
      });
    };
    const refPath = (m: RegExpExecArray) => `refs/${decodeURIComponent(m[1] as string)}`;

    route('GET', /$/, () => [200, { default_branch: 'main', full_name: `${this.owner}/${this.repo}` }]);
    route('GET', /\/collaborators\/([^/]+)\/permission/, (m) => {
      const role = this.permissions[m[1] as string] ?? 'none';
      return [200, { permission: role === 'maintain' ? 'write' : role, role_name: role }];
    });
    route('GET', /\/contents\/(.+)/, (m, _b, q) => {
      const ref = q.get('ref') ?? 'main';
      const sha = this.refs.get(`refs/heads/${ref}`) ?? this.refs.get(ref) ?? ref;
      const content = this.commits.get(sha)?.files[decodeURIComponent(m[1] as string)];
      if (content === undefined) return [404, { message: 'Not Found' }];
      return [200, { type: 'file', encoding: 'base64', content: Buffer.from(content).toString('base64') }];
    });
    route('GET', /\/git\/ref\/(.+)/, (m) => {
      const sha = this.refs.get(refPath(m));
      return sha ? [200, { ref: refPath(m), object: { sha, type: 'commit' } }] : [404, { message: 'Not Found' }];
    });
    route('GET', /\/git\/matching-refs\/(.+)/, (m) => {
      const prefix = refPath(m);
      return [
        200,
        [...this.refs].filter(([r]) => r.startsWith(prefix)).map(([ref, sha]) => ({ ref, object: { sha } })),
      ];
    });
    route('POST', /\/git\/refs/, (_m, body) => {
      if (this.refs.has(body.ref)) return [422, { message: 'Reference already exists' }];
      if (!this.commits.has(body.sha)) return [422, { message: 'Object does not exist' }];
      this.refs.set(body.ref, body.sha);
      return [201, { ref: body.ref, object: { sha: body.sha } }];
    });
    route('PATCH', /\/git\/refs\/(.+)/, (m, body) => {
      const ref = refPath(m);
      const old = this.refs.get(ref);
      if (!old) return [422, { message: 'Reference does not exist' }];
      if (!body.force && !this.isAncestor(old, body.sha)) return [422, { message: 'Update is not a fast forward' }];
      this.refs.set(ref, body.sha);
      return [200, { ref, object: { sha: body.sha } }];
    });
    route('DELETE', /\/git\/refs\/(.+)/, (m) => {
      if (!this.refs.delete(refPath(m))) return [422, { message: 'Reference does not exist' }];
      return [204];
    });
    const trees = new Map<string, Record<string, string>>();
    route('POST', /\/git\/trees/, (_m, body) => {
      const files = Object.fromEntries(body.tree.map((t: { path: string; content: string }) => [t.path, t.content]));
      const sha = createHash('sha1').update(JSON.stringify(files)).digest('hex');
      trees.set(sha, files);
      return [201, { sha }];
    });
    route('POST', /\/git\/commits$/, (_m, body) => {
      const sha = this.commit({ message: body.message, parents: body.parents, files: trees.get(body.tree) ?? {} });
      return [201, { sha }];
    });
    route('GET', /\/git\/commits\/([0-9a-f]+)/, (m) => {
      const c = this.commits.get(m[1] as string);
      return c ? [200, { sha: c.sha, message: c.message, parents: c.parents.map((sha) => ({ sha })) }] : [404, {}];
    });
    route('POST', /\/pulls$/, (_m, body) => {
      if (this.pulls.some((p) => p.head === body.head && p.state === 'open'))
        return [422, { message: 'A pull request already exists' }];
      const pr: FakePull = {
        number: this.nextId++,
        head: body.head,
        base: body.base,
        title: body.title,
        body: body.body,
        state: 'open',
      };
      this.pulls.push(pr);
      return [201, { number: pr.number }];
    });
    route('GET', /\/pulls$/, (_m, _b, q) => {
      const head = (q.get('head') ?? '').split(':')[1];
      return [200, this.pulls.filter((p) => p.head === head && p.state === (q.get('state') ?? 'open'))];
    });
    route('PATCH', /\/pulls\/(\d+)/, (m, body) => {
      const pr = this.pulls.find((p) => p.number === Number(m[1]));
      if (!pr) return [404, {}];
      pr.state = body.state ?? pr.state;
      return [200, { number: pr.number, state: pr.state }];
    });
    route('POST', /\/issues\/(\d+)\/comments/, (m, body) => {
      const c = { id: this.nextId++, issue: Number(m[1]), body: body.body as string, edits: 0 };
      this.comments.push(c);
      return [201, { id: c.id }];
    });
    route('PATCH', /\/issues\/comments\/(\d+)/, (m, body) => {
      const c = this.comments.find((x) => x.id === Number(m[1]));
      if (!c) return [404, {}];
      c.body = body.body;
      c.edits++;
      return [200, { id: c.id }];
    });
    route('POST', /\/issues\/(\d+)\/labels/, (m, body) => {
      const set = this.labels.get(Number(m[1])) ?? new Set();
      for (const l of body.labels) set.add(l);
      this.labels.set(Number(m[1]), set);
      return [200, [...set].map((name) => ({ name }))];
    });
    route('DELETE', /\/issues\/(\d+)\/labels\/(.+)/, (m) => {
      const ok = this.labels.get(Number(m[1]))?.delete(decodeURIComponent(m[2] as string));
      return ok ? [200, []] : [404, { message: 'Label does not exist' }];
    });
    route('POST', /\/check-runs/, (_m, body) => {
      const run = {
        id: this.nextId++,
        head_sha: body.head_sha,
        name: body.name,
        conclusion: body.conclusion,
        output: body.output,
      };
      this.checkRuns.push(run);
      return [201, { id: run.id }];
    });
    route('POST', /\/actions\/workflows\/([^/]+)\/dispatches/, (m, body) => {
      this.dispatches.push({ workflow: decodeURIComponent(m[1] as string), ref: body.ref, inputs: body.inputs });
      return [204];
    });
    route('GET', /\/actions\/workflows\/([^/]+)\/runs/, () => [200, { total_count: 0, workflow_runs: [] }]);
  }
}
