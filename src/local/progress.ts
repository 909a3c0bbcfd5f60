// Progress of a local run: one line per event, and on a terminal a live footer with the
// episodes in flight and how long each has run.
import { PROGRESS_REDRAW_EVERY_MS } from '../core/bounds.js';
import { spent } from '../core/budget.js';
import { describeContext } from '../core/journal.js';
import { scoreText } from '../core/report.js';
import type { Episode, EpisodeResult, Round, RunState } from '../core/state.js';
import { formatNumber } from '../core/text.js';

export type RunEvent =
  | { type: 'round'; state: RunState; round: Round }
  | { type: 'episode-start'; state: RunState; episode: Episode }
  | { type: 'episode-done'; state: RunState; episode: Episode; result: EpisodeResult }
  /** Said while the episode runs (worker/episode-input.ts `warn`). */
  | { type: 'episode-warning'; state: RunState; episode: Episode; warning: string }
  | { type: 'decided'; state: RunState; round: Round }
  | { type: 'finished'; state: RunState };

/** The line printed for an event (null: nothing to print). */
export function eventLine(e: RunEvent): string | null {
  const unit = e.state.config.budget.unit;
  const budget = () => `${formatNumber(spent(e.state), 2)}/${formatNumber(e.state.config.budget.total)} ${unit}`;
  switch (e.type) {
    case 'round': {
      const r = e.round;
      const each = formatNumber(r.episodes[0]?.allowance ?? 0, 2);
      const what =
        r.kind === 'fork'
          ? `${r.episodes.length} branches`
          : r.episodes.length > 1
            ? `${r.episodes.length} lineages`
            : '1 episode';
      return `round ${r.index} (${r.phase}): ${what}, ${each} ${unit} each`;
    }
    case 'episode-start': {
      const ep = e.episode;
      return `${ep.id} started (${describeContext(ep)}${ep.directive ? ', told to try a different approach' : ''})`;
    }
    case 'episode-done': {
      const r = e.result;
      const score = r.score === null ? `no score: ${r.reason}` : `scored ${scoreText(r.score)}`;
      const note = r.note ? ` [${r.note}]` : '';
      return `${e.episode.id} ${score}, spent ${formatNumber(r.spent, 2)} ${unit} (${r.exit}, ${formatNumber(r.wallSeconds, 1)} s)${note}`;
    }
    case 'episode-warning':
      return `${e.episode.id}: warning: ${e.warning}`;
    case 'decided': {
      const r = e.round;
      const best = e.state.best ? `best ${scoreText(e.state.best.score)}` : 'no best yet';
      if (r.kind === 'serial') return null;
      const winner = r.decision?.winner;
      const w = winner ? r.episodes.find((x) => x.id === winner) : undefined;
      const head = w
        ? `winner ${winner} (${scoreText(w.result?.score)})`
        : r.decision?.voided
          ? `${r.decision.voided}: the leader goes on unchanged`
          : 'no branch scored: the leader goes on unchanged';
      return `round ${r.index} decided: ${head}; ${best}; spent ${budget()}`;
    }
    case 'finished':
      return `finished: spent ${budget()}`;
  }
}

export interface ProgressView {
  onEvent(e: RunEvent): void;
  close(): void;
}

export function progressView(
  out: NodeJS.WriteStream,
  startedAt: number,
  now: () => number,
  env: NodeJS.ProcessEnv = process.env,
): ProgressView {
  const running = new Map<string, number>();
  // The live footer needs a terminal; colour follows NO_COLOR and FORCE_COLOR (no-color.org, force-color.org).
  const live = out.isTTY === true;
  const colour =
    env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' ? env.FORCE_COLOR !== '0' : !env.NO_COLOR && live;
  const sgr = (code: string) => (s: string) => (colour ? `\x1b[${code}m${s}\x1b[0m` : s);
  const dim = sgr('2');
  // A failed episode and a warning stand out in red, a decision in bold, the end in green.
  const paint = (e: RunEvent, line: string) =>
    (e.type === 'episode-done' && e.result.score === null) || e.type === 'episode-warning'
      ? sgr('31')(line)
      : e.type === 'decided'
        ? sgr('1')(line)
        : e.type === 'finished'
          ? sgr('32')(line)
          : line;
  let footerLines = 0;
  const elapsed = (ms: number) => {
    const s = Math.floor(ms / 1000);
    return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
  };
  const clearFooter = () => {
    if (footerLines > 0) out.write(`\x1b[${footerLines}A\x1b[J`);
    footerLines = 0;
  };
  const drawFooter = () => {
    if (!live || running.size === 0) return;
    const t = now();
    const lines = [...running].map(([id, since]) => `  ${dim(`${id} running ${elapsed(t - since)}`)}`);
    out.write(`${lines.join('\n')}\n`);
    footerLines = lines.length;
  };
  const timer = live
    ? setInterval(() => {
        clearFooter();
        drawFooter();
      }, PROGRESS_REDRAW_EVERY_MS)
    : undefined;
  timer?.unref();
  return {
    onEvent(e) {
      if (e.type === 'episode-start') running.set(e.episode.id, now());
      if (e.type === 'episode-done') running.delete(e.episode.id);
      const line = eventLine(e);
      clearFooter();
      if (line) out.write(`${dim(`[${elapsed(now() - startedAt)}]`)} ${paint(e, line)}\n`);
      drawFooter();
    },
    close() {
      if (timer) clearInterval(timer);
      clearFooter();
    },
  };
}
