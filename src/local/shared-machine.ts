// The episodes of a local run that share one machine, and a judge's wait to have it to itself.
// Nothing bounds a sandbox's CPU, so a branch can starve its sibling's judge until the grader
// times out (test/attacks/round3-neighbours.test.ts): a judge whose grader timed out while another
// episode ran is graded once more alone (worker/episode.ts gradeStep). It then waits for the
// episodes in flight to end, and no new one starts until it is done.
import type { SharedMachine } from '../worker/episode-input.js';

export class EpisodeFloor implements SharedMachine {
  private inFlight = 0;
  /** Episodes ever entered: a window that sees this move saw another episode start. */
  private entered = 0;
  /** Closed while a judge waits for the machine or has it. */
  private gate: Promise<void> | null = null;
  /** One judge alone at a time. */
  private queue: Promise<void> = Promise.resolve();
  private idle: (() => void)[] = [];

  /** Runs an episode, once no judge has the machine alone or waits for it. */
  async run<T>(episode: () => Promise<T>): Promise<T> {
    while (this.gate) await this.gate;
    this.inFlight++;
    this.entered++;
    try {
      return await episode();
    } finally {
      this.leave();
    }
  }

  othersSince(): () => boolean {
    const [others, entered] = [this.inFlight > 1, this.entered];
    return () => others || this.entered > entered;
  }

  async alone<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
    // The caller steps out while it waits: two judges waiting for each other would wait for ever.
    this.leave();
    const turn = this.queue;
    let done = () => {};
    this.queue = new Promise((resolve) => {
      done = resolve;
    });
    let open = () => {};
    try {
      await turn;
      this.gate = new Promise((resolve) => {
        open = resolve;
      });
      while (this.inFlight > 0 && !signal.aborted) await this.idleOr(signal);
      if (signal.aborted) throw new Error('stopped while waiting to be judged alone');
      return await fn();
    } finally {
      this.gate = null;
      open();
      this.inFlight++;
      done();
    }
  }

  private leave(): void {
    this.inFlight--;
    if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
  }

  private idleOr(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      this.idle.push(resolve);
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }
}
