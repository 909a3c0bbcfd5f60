// A worker's release against the run record's writer: why a worker cannot read a record (version
// skew says which release to pin), and how release versions order.

/**
 * Why a worker could not read the run's record (`why`), said so that the fix is clear. A record
 * last saved by a newer forkflush than the worker (`writer` and `worker` are release versions,
 * `writer` null when the record does not say) is version skew: the worker Action is pinned to an
 * older release than the app runs. It is not read leniently, dropping what it does not know:
 * a key this worker ignored could be one that confines the agent.
 */
export function unreadableRunReason(why: string, worker: string, writer: string | null): string {
  if (writer !== null && RELEASE.test(writer) && compareVersions(writer, worker) > 0) {
    return (
      `${WORKER_CANNOT_READ}: it is forkflush ${worker}, older than the app (forkflush ${writer}) that wrote it ` +
      `(${why}); use the worker Action of the app's release (uses: …/forkflush@v${writer} in the worker workflow)`
    );
  }
  return `${WORKER_CANNOT_READ} (forkflush ${worker}): ${why}`;
}

/** How every reason of unreadableRunReason starts: a stop it caused gives that fix. */
export const WORKER_CANNOT_READ = "this worker Action cannot read the run's record";

/** A release version as the record states it (anything else there is not trusted into a message). */
const RELEASE = /^v?\d{1,6}\.\d{1,6}\.\d{1,6}(?:-[0-9A-Za-z.-]{1,40})?$/;

/** Orders release versions (1.2.10 after 1.2.9); a pre-release (1.2.0-rc.1) comes before its release. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core = '', pre] = v.replace(/^v/, '').split(/-(.*)/s);
    return { parts: core.split('.').map((n) => Number.parseInt(n, 10) || 0), pre: pre ?? null };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < Math.max(x.parts.length, y.parts.length); i++) {
    const d = (x.parts[i] ?? 0) - (y.parts[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === null) return 1;
  if (y.pre === null) return -1;
  // Pre-release identifiers one by one, numbers as numbers (rc.9 before rc.10), as semver orders them.
  const xs = x.pre.split('.');
  const ys = y.pre.split('.');
  for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
    const [p, q] = [xs[i], ys[i]];
    if (p === undefined) return -1;
    if (q === undefined) return 1;
    if (p === q) continue;
    const numeric = /^\d+$/.test(p) && /^\d+$/.test(q);
    if (numeric) return Math.sign(Number(p) - Number(q));
    return p < q ? -1 : 1;
  }
  return 0;
}
