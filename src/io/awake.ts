// Awake time: the monotonic clock less the stretches in which this process could not run, stopped
// (SIGSTOP) or frozen with its machine (a paused VM or container, whose monotonic clock moves on).
// A time limit counted in it is time a command could use: a grader that printed its score while
// forkflush was stopped, or was frozen with it, is not "timed out" by the stop; nor is a freeze
// charged as an agent's minutes. A tick counts it; a step longer than AWAKE_STEP_MAX_MS counts as
// that much (a busy machine's late timers lose a little of it, which only lengthens a limit).
import { AWAKE_STEP_MAX_MS, AWAKE_TICK_MS, TIMER_MAX_MS } from '../core/bounds.js';

let awake = 0;
let last = performance.now();
let ticking = false;

/** Awake milliseconds so far (a clock for differences: its zero is when it was first read). */
export function awakeNow(): number {
  if (!ticking) {
    ticking = true;
    // unref: the tick alone never keeps the process alive.
    setInterval(awakeNow, AWAKE_TICK_MS).unref();
  }
  const now = performance.now();
  awake += Math.min(now - last, AWAKE_STEP_MAX_MS);
  last = now;
  return awake;
}

/** Calls `fn` once `ms` of awake time have passed; the function returned cancels it. */
export function afterAwake(ms: number, fn: () => void): () => void {
  const end = awakeNow() + ms;
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  const cancel = () => {
    done = true;
    clearTimeout(timer);
  };
  const check = () => {
    if (done) return;
    const left = end - awakeNow();
    if (left > 0) timer = setTimeout(check, Math.min(left, TIMER_MAX_MS));
    else {
      cancel();
      fn();
    }
  };
  timer = setTimeout(check, Math.min(ms, TIMER_MAX_MS));
  return cancel;
}
