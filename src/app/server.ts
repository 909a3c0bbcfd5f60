#!/usr/bin/env node
// The hosted entry: `forkflush-app` or `npm start` (this file run directly, probot's server
// bundled in, so the package needs no dependency); its default export is the app function too,
// for a server of the team's own that loads it with probot's `run`. A hosted app has no scheduler to call the nightly tick, so it keeps its own:
// a check at start and every hour that, once the hour FORKFLUSH_NIGHTLY_HOUR (UTC, default 3) has
// passed since its last tick, ticks every repository of every installation. The app holds no state; the tick only repairs and
// starts what the runs' records say is due, so a restart or a second replica does no harm.
//
// It refuses to start without a webhook secret: Probot would otherwise verify deliveries with its
// fallback secret, "development", and anyone could send the app events.
import { createHmac } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { type Probot, run } from 'probot';
import { recordKeyFrom } from '../github/record-seal.js';
import { forkflushApp, tickInstallation } from './app.js';

const HOUR_MS = 60 * 60 * 1000;

export default async function hostedApp(app: Probot): Promise<void> {
  await requireWebhookSecret(app);
  const recordKey = recordKeyFrom(process.env);
  forkflushApp({ recordKey })(app);
  const hour = nightlyHour(process.env);
  if (hour !== null) startNightly(app, hour, recordKey);
}

/** Probot's webhook secret when none is given (probot/lib/server/server.js, defaultWebhookSecret). */
const PROBOT_FALLBACK_SECRET = 'development';

/**
 * Throws unless the app verifies deliveries with a secret of its own: with WEBHOOK_SECRET (or
 * `--secret`) unset Probot falls back to "development", and a delivery signed with that is
 * taken. The check asks Probot's own verifier, whatever the secret came from.
 */
export async function requireWebhookSecret(app: Probot): Promise<void> {
  await app.ready();
  const probe = '{"forkflush":"is the webhook secret set?"}';
  const signature = `sha256=${createHmac('sha256', PROBOT_FALLBACK_SECRET).update(probe).digest('hex')}`;
  if (await app.webhooks.verify(probe, signature)) {
    throw new Error(
      `forkflush-app: no webhook secret: set WEBHOOK_SECRET to the app's webhook secret (GitHub's app settings, "Webhook secret"). Without it Probot would take any delivery signed with "${PROBOT_FALLBACK_SECRET}".`,
    );
  }
}

/** FORKFLUSH_NIGHTLY_HOUR: 0 to 23 (UTC), default 3; `off` for no tick (e.g. another replica ticks). */
export function nightlyHour(env: NodeJS.ProcessEnv): number | null {
  const value = env.FORKFLUSH_NIGHTLY_HOUR?.trim() || '3';
  if (value === 'off') return null;
  const hour = Number(value);
  if (!/^\d{1,2}$/.test(value) || hour > 23) {
    throw new Error(`FORKFLUSH_NIGHTLY_HOUR is "${value}": use an hour of the day in UTC (0 to 23), or off`);
  }
  return hour;
}

/**
 * Checks at start and every hour; ticks when the day's hour has passed since the last tick this
 * process completed. So a restart ticks (it cannot know whether the one before it did; a second
 * tick in a day does no harm), a process that lives less than an hour ticks, and a tick that fails
 * is tried at the next check, past midnight too.
 */
export function startNightly(
  app: Probot,
  hour: number,
  recordKey: Buffer | null,
  now = () => new Date(),
): NodeJS.Timeout {
  let done = Number.NEGATIVE_INFINITY;
  let busy = false;
  const check = () => {
    const due = lastHourMark(now(), hour);
    if (busy || due <= done) return;
    busy = true;
    // The night is that of the hour mark: a restart by day serves the night's round only if no tick did.
    tickInstallations(app, now, recordKey, new Date(due).toISOString().slice(0, 10))
      .then(() => {
        done = due;
      })
      .catch((e) => app.log.error(e, 'forkflush: the nightly tick could not list the installations'))
      .finally(() => {
        busy = false;
      });
  };
  // unref: the timers alone never keep the process alive.
  setTimeout(check, 0).unref();
  return setInterval(check, HOUR_MS).unref();
}

/** The last time (ms) at or before `at` that it was `hour` o'clock UTC. */
function lastHourMark(at: Date, hour: number): number {
  const mark = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate(), hour);
  return mark <= at.getTime() ? mark : mark - 24 * HOUR_MS;
}

/**
 * Runs the nightly tick in each repository the app is installed on, one at a time; `now` is read
 * again for each run (a tick of many repositories takes long, and a round's deadline counts from its dispatch).
 */
export async function tickInstallations(
  app: Probot,
  now: Date | (() => Date),
  recordKey: Buffer | null,
  night?: string,
): Promise<void> {
  const clock = typeof now === 'function' ? now : () => now;
  const asApp = await app.auth();
  const installations = await asApp.paginate(asApp.rest.apps.listInstallations, { per_page: 100 });
  for (const installation of installations) {
    if (installation.suspended_at) continue;
    // One installation's or repository's trouble (a revoked permission, a broken record) must not
    // stop the others; it is logged and tried again tomorrow.
    try {
      const octokit = await app.auth(installation.id);
      const log = app.log.child({ installation: installation.id });
      await tickInstallation(octokit, clock, recordKey, log, { rounds: true, ...(night ? { night } : {}) });
    } catch (e) {
      app.log.error(
        { err: e, installation: installation.id },
        `forkflush: the nightly tick of installation ${installation.id} failed`,
      );
    }
  }
}

// Run directly (the bin, `npm start`, or `node dist/app.js`): serve with probot's own server,
// configured from the same environment variables as `probot run` (APP_ID, PRIVATE_KEY or
// PRIVATE_KEY_PATH, WEBHOOK_SECRET, PORT, LOG_LEVEL, ...; a .env file is read too), health at
// GET /ping. A setup that cannot serve ends the process with its reason and exit code 1.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  try {
    await run(hostedApp);
  } catch (e) {
    // The reason is one line (a missing APP_ID, a port in use); the stack only when asked for.
    const debug = /^(debug|trace)$/i.test(process.env.LOG_LEVEL ?? '');
    const stack = e instanceof Error && debug ? e.stack : undefined;
    console.error(stack ?? (e instanceof Error ? e.message : String(e)));
    if (!debug) console.error('(LOG_LEVEL=debug prints where it failed)');
    process.exit(1);
  }
}
