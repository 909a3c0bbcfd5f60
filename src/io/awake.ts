// Awake time: the monotonic clock less the stretches in which this process could not run, stopped
// (Ctrl-Z, SIGSTOP) or frozen with its machine (a paused VM or container, whose monotonic clock
// moves on). A time limit counted in it is time a command could use: a grader that printed its score
// while forkflush was stopped, or was frozen with it, is not "timed out" by the stop.
import { AWAKE_STEP_MAX_MS, AWAKE_TICK_MS, TIMER_MAX_MS } from '../core/bounds.js';

let awake = 0;
let last = performance.now();
let ticker: NodeJS.Timeout | null = null;
let waiting = 0;

/** Awake milliseconds so far: each step since the last count, at most AWAKE_STEP_MAX_MS of it. */
function count(): number {
  const now = performance.now();
  awake += Math.min(now - last, AWAKE_STEP_MAX_MS);
  last = now;
  return awake;
}

/** Calls `fn` once `ms` of awake time have passed; the function returned cancels it. */
export function afterAwake(ms: number, fn: () => void): () => void {
  // Counted while a limit waits, and only then: an idle process does not tick.
  if (waiting++ === 0) {
    count();
    ticker = setInterval(count, AWAKE_TICK_MS).unref();
  }
  const end = count() + ms;
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  const cancel = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    if (--waiting === 0 && ticker) {
      clearInterval(ticker);
      ticker = null;
    }
  };
  const check = () => {
    const left = end - count();
    if (left > 0) timer = setTimeout(check, Math.min(left, TIMER_MAX_MS));
    else {
      cancel();
      fn();
    }
  };
  timer = setTimeout(check, Math.min(ms, TIMER_MAX_MS));
  return cancel;
}
