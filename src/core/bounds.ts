// The operational limits, in one place: sizes, counts, timeouts and caps, each with its unit in its
// name and why it is what it is. The method's numbers (budgets, fork points, deadlines of a round)
// are in method.ts; these are the bounds that keep a hostile or broken agent, grader or forge from
// filling a disk, a log or a request. This module imports nothing, so every layer may read it (the
// layer rules of test/unit/layers.test.ts name it); nothing else in src/ should set one again.

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

// ---------------------------------------------------------------------------------------------
// Logs and output

/**
 * The most a command may write to its log file, and the most of a log the Action keeps, prints
 * from and uploads: one number, so what the agent wrote is what is uploaded. A command that writes
 * more is stopped (LOG_FULL); an hour's transcript is a few megabytes, and past the end of the log
 * nothing could be metered (aider's and opencode's usage is read from it).
 */
export const LOG_MAX_BYTES = 128 * MiB;
/** The most of git's stdout (or stderr) read: a listing of a few hundred thousand paths fits. */
export const GIT_OUTPUT_MAX_CHARS = 64_000_000;
/** What setup's log keeps of one command's output, at most (the end is kept). */
export const SETUP_OUTPUT_MAX_CHARS = 1_000_000;
/** What a grading's output keeps, at most: the score is its last line, the rest is for the reader. */
export const GRADER_OUTPUT_MAX_CHARS = 1_000_000;
/** What an agent CLI's install keeps of its output: enough for npm's error, not its progress bars. */
export const INSTALL_OUTPUT_MAX_CHARS = 200_000;
/** What a CLI's `--version` answer keeps: one line is expected. */
export const VERSION_OUTPUT_MAX_CHARS = 20_000;
/** The most of one line of output a failure line quotes (a CLI's own error, a grader's last words). */
export const FAILURE_LINE_MAX_CHARS = 200;
/** The most of an agent's own line a failure keeps (`quote`), and of forkflush's fix or an error's first line. */
export const FAILURE_QUOTE_MAX_CHARS = 300;
/** The most lines of an agent's output failure recognition reads (its end: where a CLI says why it stopped). */
export const FAILURE_READ_MAX_LINES = 400;

// ---------------------------------------------------------------------------------------------
// The journal

/** The journal forkflush reads back from a snapshot, at most (an agent could write gigabytes). */
export const JOURNAL_READ_MAX_BYTES = 16 * MiB;
/** The journal a shell reads at most per commit for the losers' notes (an agent could commit gigabytes). */
export const LOSER_JOURNAL_MAX_BYTES = 1 * MiB;
/** The journal lines an episode's record and check run quote (its newest). */
export const JOURNAL_TAIL_LINES = 5;
/**
 * The most of one journal line quoted, in the record, the check run and the job log alike (one
 * number: the job log's 400 and the record's 500 had no reason to differ; 400 keeps a line readable).
 */
export const JOURNAL_LINE_MAX_CHARS = 400;

// ---------------------------------------------------------------------------------------------
// The job log of the Action

/** The files `git diff --stat` lists in the job log's summary of an episode's commit. */
export const JOB_LOG_DIFFSTAT_MAX_FILES = 40;
/** The journal lines the episode added that the job log shows (its newest). */
export const JOB_LOG_JOURNAL_MAX_LINES = 30;
/** How many lines of the other output (stderr) the agent's group ends with. */
export const JOB_LOG_STDERR_TAIL_LINES = 20;
/** How many of setup's last lines the group shows when setup failed (the whole log is in the artifact). */
export const JOB_LOG_SETUP_TAIL_LINES = 40;
/** Values shorter than this are not secrets worth masking (they would mask half the log). */
export const SECRET_MIN_CHARS = 8;
/** The longest the job waits for the artifact service. */
export const ARTIFACT_UPLOAD_TIMEOUT_MS = 120_000;

// ---------------------------------------------------------------------------------------------
// What an episode records

/** A file larger than this is not recorded: GitHub refuses a push with one, and hashing it is unbounded. */
export const RECORDED_FILE_MAX_BYTES = 100 * MiB;
/** Nor are added or changed files past this, all together. */
export const RECORDED_CHANGES_MAX_BYTES = 2 * GiB;
/** Nor more files than this (each costs git a hash and the judge a file, however small). */
export const RECORDED_CHANGES_MAX_FILES = 100_000;
/**
 * Nor a workspace whose paths, listed, pass this (episodes add up): forkflush lists the tree (the
 * judge, checkouts) and reads at most GIT_OUTPUT_MAX_CHARS of a listing, half of it for what else it lists.
 */
export const RECORDED_TREE_LISTING_MAX_BYTES = 32_000_000;
/** Most protected files the judge pins one by one; past it, their top folders are read-only whole. */
export const PINNED_PROTECTED_MAX_FILES = 256;
/** The most untracked files looked at for the grader's reads: past it, a folder of generated data, not the task's inputs. */
export const UNTRACKED_CANDIDATES_MAX_FILES = 5000;
/**
 * The largest spend or usage figure of an agent's report that is believed (a quadrillion tokens or
 * dollars): past it the report is broken or hostile, and sums of such figures overflow to Infinity,
 * which JSON records as null and no record then reads (core/usage.ts believableFigures).
 */
export const REPORTED_FIGURE_MAX = 1e15;

// ---------------------------------------------------------------------------------------------
// An agent's carried context

/** Folders whose path is longer than this are cut off: well under PATH_MAX (4096), so their removal still works. */
export const CONTEXT_PATH_MAX_BYTES = 2048;
/** Files larger than this are removed: no CLI keeps a conversation that large, and copying one on is costly. */
export const CONTEXT_FILE_MAX_BYTES = 256 * MiB;
/**
 * A context whose files pass this in all (by apparent size: a sparse file is copied in full) is
 * emptied: a conversation is megabytes, and each carried copy (and on GitHub, the packed archive
 * held in memory) would cost all of it again.
 */
export const CONTEXT_MAX_BYTES = 1 * GiB;
/**
 * A context holding more entries than this (files and folders) is emptied too: empty folders cost
 * no bytes, but 300,000 of them took two minutes and 1.2 GB of disk to copy on, once per branch.
 */
export const CONTEXT_MAX_ENTRIES = 100_000;
/** How many removed entries a cleaning's note names. */
export const NOTE_NAMED_TRAPS_MAX = 3;

// ---------------------------------------------------------------------------------------------
// Processes, sandboxes and the machine

/**
 * How long a stopped forkflush takes at most to exit: every step of an episode listens to the stop
 * and ends in a few seconds (an agent gets 2 s to stop before it is killed); past this, whatever did
 * not listen is killed with everything else forkflush started, and the run is left as last saved.
 */
export const CLI_STOP_WITHIN_MS = 10_000;
/**
 * How long a cancelled job takes at most to end: within the 7.5 s a runner gives a cancelled step
 * between its SIGINT and its SIGTERM (the SIGKILL follows 2.5 s later).
 */
export const ACTION_STOP_WITHIN_MS = 7_000;
/** How long output is still read after the command exits: a detached child may hold the pipes. */
export const OUTPUT_DRAIN_MS = 300;
/** After that, turns of the event loop that may still read output (each reads up to ~2 MB a pipe). */
export const DRAIN_POLLS_MAX = 1_000;
/** How often a tracked command's processes are listed (to find the ones that left its group). */
export const PROCESS_TRACK_EVERY_MS = 250;
/** What a command's output keeps in memory of each stream by default (the end): a grader's or a git's answer fits. */
export const PROCESS_OUTPUT_MAX_CHARS = 1_000_000;
/** How long a stopped command has between its SIGTERM and the SIGKILL by default: time to remove its lock files. */
export const STOP_GRACE_MS = 2000;
/** How long the commands of a process about to exit get between SIGTERM and SIGKILL: git removes its lock files in less. */
export const STOP_ALL_GRACE_MS = 500;
/** How often the terminal's progress footer (elapsed time, spend) is redrawn. */
export const PROGRESS_REDRAW_EVERY_MS = 1000;
/** When a stopped command gets its second SIGTERM (the SIGKILL follows at killAfterMs). */
export const SECOND_SIGNAL_AFTER_MS = 300;
/** How long a command that could not start takes at most: a shell's "not found", on a busy machine. */
export const NOT_STARTED_WITHIN_MS = 5000;
/**
 * A git command that has not finished in this long has stalled: on the largest repositories
 * forkflush is meant for (a checkout of a few hundred thousand files, 2 GB of changes to hash) git
 * takes minutes on a slow disk, never ten.
 */
export const GIT_TIMEOUT_MS = 10 * 60 * 1000;
/** Sandboxes one forkflush process may run at once under root: uids are (pid, slot), pid < 2^22. */
export const SANDBOX_SLOTS_PER_PROCESS = 32;
/** The most processes one sandbox gets: see processLimit (io/accounts.ts). */
export const SANDBOX_MAX_PROCESSES = 8192;
/** How long one command of the Action's sandbox setup may take (a sysctl, an AppArmor profile, a sudo check). */
export const SANDBOX_SETUP_TIMEOUT_MS = 300_000;

/** How many of the repository's committed links that lead out of it the pre-flight probes (one probe argument each). */
export const LINKS_PROBED_MAX = 200;
/** How long the probe of what a sandbox can see may take: a shell's tests of a few paths, on a busy machine. */
export const SANDBOX_PROBE_TIMEOUT_MS = 30_000;
/** How long a CLI's `--version` may take: a Node CLI's start, on a busy runner. */
export const VERSION_TIMEOUT_MS = 15_000;
/** How often the machine's free tasks, memory and disk are read while a judge grades. */
export const MACHINE_WATCH_EVERY_MS = 200;
/** How long a judge waits for a shortage of the machine to pass (a sibling's build ending, memory freed). */
export const MACHINE_SHORTAGE_PAUSE_MS = 5000;
/** Less than this free on a filesystem is a full disk. */
export const DISK_FULL_BELOW_BYTES = 64 * MiB;
/** Fewer free inodes than this on a filesystem is a full disk. */
export const DISK_FULL_BELOW_INODES = 1000;
/** Connections one episode's grade service holds at once: far more than an agent's gradings at once need. */
export const GRADE_SERVICE_MAX_CONNECTIONS = 64;
/**
 * The longest timeout a config may set (agent, grader, setup, the map's judge), in seconds: a week.
 * Node fires a timer of more than 2^31 - 1 ms (24.8 days) at once, so a month meant as "no limit"
 * stopped every episode as it started; no episode of an overnight run needs more than a week.
 */
export const TIMEOUT_MAX_SECONDS = 7 * 24 * 3600;
/** The longest delay Node's timers keep (2^31 - 1 ms); a longer one fires after 1 ms. */
export const TIMER_MAX_MS = 2 ** 31 - 1;
/**
 * How often awake time is counted (io/awake.ts), and the most one count takes: a longer step is this
 * process stopped or its machine frozen, time no command could use. An overloaded machine starves a
 * process's timers for seconds (a two-core CI runner with a suite and the agent CLIs beside it: a
 * 60 s limit counted 2 s steps only stretched past 200 s), so starving must still count in full.
 */
export const AWAKE_TICK_MS = 500;
export const AWAKE_STEP_MAX_MS = 10_000;
/**
 * Ctrl-Z stops forkflush's commands in passes until a pass finds every one stopped (one may fork,
 * or continue another, meanwhile); at most this many, a few milliseconds each.
 */
export const STOP_PASSES_MAX = 50;
/** How long `forkflush init`'s trial grading may take, and the grader.timeout it writes. */
export const INIT_GRADER_TIMEOUT_SECONDS = 300;
/**
 * The most tree listings the app makes to find a tree's protected files when GitHub truncates its
 * recursive listing (past 100,000 entries): each is one API request, and a result's check is one
 * of many on a round's way; globs that reach everywhere in so large a tree cannot be checked.
 */
export const TREE_WALK_MAX_LISTINGS = 200;
/** The most files a copy of the working tree may hold to be graded (when the commit gets no score): past it, no comparison. */
export const WORKING_TREE_MAX_FILES = 20_000;
/** And the most bytes: a copy of a working tree larger than this costs more than the answer is worth. */
export const WORKING_TREE_MAX_BYTES = 1 * GiB;
/** How many paths the judge's setup log names of what setup made under protected paths (the rest: ', ...'). */
export const JUDGE_PLANTED_NAMED_MAX = 5;
/** How many paths a result's reason names of what the graded code wrote under protected paths. */
export const JUDGE_WRITTEN_NAMED_MAX = 3;
/** How many files a message names before it says ', ...'. */
export const NAMED_FILES_MAX = 10;

/**
 * An initial grading at most this long (seconds) is run twice: a score that differs tells a grader
 * that is not deterministic (a timing, a sample) before the night. An episode's tree is never
 * graded twice alone (each adds its journal line), so later is too late.
 */
export const REGRADE_CHECK_MAX_SECONDS = 30;
/** Runs one task folder may start in one second: their ids are the second, then -2, -3, ... */
export const RUNS_PER_SECOND_MAX = 999;

// ---------------------------------------------------------------------------------------------
// The egress proxy

/** How long opening one upstream connection may take. */
export const EGRESS_DIAL_TIMEOUT_MS = 15_000;
/** How long a wildcard target's name may take to resolve here before it goes to the machine's proxy unchecked (where the proxy alone resolves names). */
export const EGRESS_SCREEN_LOOKUP_MS = 2_000;
/** How often a running agent's unreachable targets are looked at, to be said while it still runs (a CLI retries for minutes). */
export const EGRESS_UNREACHABLE_CHECK_MS = 5_000;
/**
 * How long a try of the agent goes on failing to reach every allowed target, having reached none,
 * before it is stopped as a network failure (retried later, core/failure.ts): a CLI offline would
 * retry its API until agent.timeout, episode after episode, the whole night.
 */
export const EGRESS_OFFLINE_STOP_MS = 90_000;
/** How long a client of the proxy may take to send a request's headers: a CLI sends them at once. */
export const EGRESS_HEADERS_TIMEOUT_MS = 30_000;
/** Connections one listener holds at once: plenty for a CLI and its tools, a bound for a flood. */
export const EGRESS_MAX_CONNECTIONS = 256;
/** Connections being opened at once (a name lookup takes a thread of Node's shared pool). */
export const EGRESS_MAX_DIALS = 4;
/** Waiting to be opened, past which a request is refused at once. */
export const EGRESS_MAX_WAITING = 256;
/** How often the model use the proxy relayed is held against the episode's allowance. */
export const EGRESS_METER_CHECK_MS = 2_000;
/**
 * In dollars, the proxy's count stops an agent past this many times its allowance: forkflush's
 * prices (a model not in its table at the dearest entry's) may be above those of a CLI that stops
 * itself at its allowance. In tokens there is nothing to price: it stops at the allowance.
 */
export const METERED_USD_STOP_FACTOR = 2;
/** An answer on a model route read for its usage (core/answer-usage.ts): a JSON body, or one line of a stream. */
export const EGRESS_METER_MAX_BYTES = 16 * 2 ** 20;
/** Distinct refused targets remembered; the rest are counted together. */
export const EGRESS_MAX_REFUSED_TARGETS = 100;

// ---------------------------------------------------------------------------------------------
// GitHub

/** GitHub takes at most 50 annotations per check run request. */
export const GITHUB_ANNOTATIONS_MAX = 50;
/** GitHub refuses a check run's summary or text over 65,535 bytes (in UTF-8; its docs say characters: github/docs#35252). */
export const CHECK_OUTPUT_MAX_BYTES = 65_535;
/** GitHub refuses issue, comment and pull request bodies over 65,536 characters; as many bytes are never more. */
export const BODY_MAX_CHARS = 65_536;
/** How long the Action's git may move (almost) no bytes to or from GitHub before it gives up: a stalled push. */
export const NETWORK_GIT_STALL_SECONDS = 60;
/** Problems of a refused start said on the issue, each at most PROBLEM_MAX_BYTES: the rest are counted. */
export const PROBLEMS_SAID_MAX = 20;
export const PROBLEM_MAX_BYTES = 2_000;
/** What GitHub gives a job without `timeout-minutes` (its documentation of jobs.<id>.timeout-minutes). */
export const GITHUB_JOB_TIMEOUT_MINUTES = 360;
/** Rounds the checklist shows in full; earlier ones are counted in a line. */
export const CHECKLIST_MAX_ROUNDS = 12;
/**
 * Keys kept in each of a run's lists of events acted on (the newest): our choice. 200 label and
 * command events is far more than a run gets; 200 job and workflow-run deliveries are about 40
 * fork rounds of four, well past the time GitHub redelivers or a stale delivery arrives.
 */
export const SEEN_MAX_KEYS = 200;

// ---------------------------------------------------------------------------------------------
// The plan

/** Configs whose schedule's most rounds are remembered (each a simulation of the whole schedule); past it, all are forgotten. */
export const SCHEDULES_REMEMBERED_MAX = 100;

/**
 * The most episodes a budget may hold (budget.total over budget.episode): an overnight run of
 * minute-long episodes is a few hundred. Past it the config is refused: budget.episode read as a
 * share (0.06 of 400 tokens: 6,667 episodes) made planning alone take minutes of CPU.
 */
export const EPISODES_PER_BUDGET_MAX = 1_000;

/** The most rounds the simulation of a schedule looks at (a config beyond it cannot be planned either). */
export const SIMULATED_MAX_ROUNDS = 10_000;

// ---------------------------------------------------------------------------------------------
// run --smoke

/** `run --smoke`: one call to see the agent start and answer, so a few cents and a few minutes at most. */
export const SMOKE_CAP_USD = 0.1;
/** Enough for a CLI's system prompt and tool list (tens of thousands of tokens) and a one-line answer. */
export const SMOKE_CAP_TOKENS = 60_000;
/** The longest the smoke call may take (agent.timeout when that is shorter); also its cap in minutes. */
export const SMOKE_TIMEOUT_SECONDS = 180;
