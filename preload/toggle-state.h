/* toggle-state.h: what `coprof toggle` and the shim's control thread say to each other,
 * with no file, socket or fd of its own in the profiled process.
 *
 * Requests travel in the toggle signal: sigqueue(2) carries PL_REQ_* in si_value (a
 * plain kill(2) is a toggle). Answers travel in the control thread's name, which any
 * process of the same user reads in /proc/PID/task/TID/comm: the control thread
 * renames itself after each request it applied. Pure code, also built into coprof. */
#ifndef PL_TOGGLE_STATE_H
#define PL_TOGGLE_STATE_H

#define PL_TS_HIDDEN __attribute__((visibility("hidden")))

/* si_value.sival_int of a queued toggle signal */
enum pl_request {
	PL_REQ_TOGGLE = 1, /* start if stopped, stop (and write) if running */
	PL_REQ_START = 2,  /* start, or nothing if running */
	PL_REQ_STOP = 3,   /* stop and write, or nothing if stopped */
};

/* What the last stop did, and whether profiling runs. */
enum pl_toggle_run {
	PL_RUN_ON = 'R',      /* running */
	PL_RUN_OFF = 'S',     /* stopped: never started, or the last stop wrote a file */
	PL_RUN_EMPTY = 'E',   /* stopped: the last window recorded nothing, so no file */
	PL_RUN_FAILED = 'F',  /* stopped: the last file could not be written */
	PL_RUN_EXITING = 'X', /* the program exits: requests are no longer applied */
};

struct pl_toggle_state {
	int signo;	/* the armed toggle signal; 0: the program took it over */
	int run;	/* enum pl_toggle_run */
	int forked;	/* a forked child (its file names get .PID without %p) */
	unsigned seq;	/* requests applied, modulo PL_TS_SEQ_MOD */
	unsigned dumps; /* files written, modulo PL_TS_DUMPS_MOD (the last one's number) */
};

#define PL_TS_PREFIX "coprof"
#define PL_TS_SEQ_MOD (36u * 36u)
#define PL_TS_DUMPS_MOD (36u * 36u * 36u * 36u)
#define PL_TS_LEN 15 /* a thread name's length limit, without the NUL */

/* The thread name for `st`: "coprof" + 2-digit signal + run letter (lower case in a
 * forked child) + 2 base-36 digits of seq + 4 of dumps, e.g. "coprof12R0a0003". */
PL_TS_HIDDEN void pl_toggle_state_format(const struct pl_toggle_state *st, char buf[16]);
/* The opposite; a trailing newline is allowed. 0, or -EINVAL for any other name. */
PL_TS_HIDDEN int pl_toggle_state_parse(const char *name, struct pl_toggle_state *st);

#endif
