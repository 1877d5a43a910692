/* cmd-toggle.c: `coprof toggle [--start|--stop] [--signal SIG] [--timeout S] PID...`:
 * starts or stops profiling in processes running under the preload shim, and says what
 * each one did. A target must provably run the shim with its toggle signal armed: the
 * library in /proc/PID/maps, and a control thread whose name (preload/state/state.h) gives the
 * armed signal and the state. The request goes by sigqueue; the answer is that name,
 * polled until the control thread has applied the request. Every argument and every
 * target is checked before any signal is sent. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "inject.h"
#include "state/state.h"
#include "target.h"

#define PRELOAD_NAME "libcoprof-preload.so"
#define MAX_TARGETS 256

#define target vw_target

/* Who speaks in the lines below: `coprof toggle`, or attach and detach. */
const char *vw_toggle_who = "coprof toggle";

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: coprof toggle [--start | --stop] [--signal SIG] [--timeout SEC] PID...\n"
	       "Starts or stops profiling in each PID (run under coprof record or the preload\n"
	       "library), waits until the program has done it, and says what it did; each stop\n"
	       "writes the next numbered profile.\n"
	       "  --start        only start: nothing is sent to a process already profiling\n"
	       "  --stop         only stop (and write): nothing is sent to a stopped process\n"
	       "  --signal SIG   the toggle signal the process must have armed (default: its own)\n"
	       "  --timeout SEC  how long to wait for each process to answer (default 10)\n");
}

/* A pid: a positive decimal that fits pid_t, nothing else (no sign, no spaces, no
 * 0x). -1 if not, so that no value can ever reach kill() as 0 or a negative pid. */
pid_t vw_parse_pid(const char *s)
{
	long long v = 0;
	if (!*s || strlen(s) > 10)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v <= 0 || v > INT_MAX)
		return -1;
	return (pid_t)v;
}

/* 1: the shim is mapped in pid, 0: it is not; -errno if its maps cannot be read. */
int vw_shim_mapped(pid_t pid)
{
	char path[64], line[PATH_MAX + 256];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *slash = strrchr(line, '/');
		found = slash && !strncmp(slash + 1, PRELOAD_NAME, strlen(PRELOAD_NAME));
	}
	int err = ferror(f) ? -EIO : 0;
	fclose(f);
	return err ? err : found;
}

/* The state published in thread tid's name; 0, or -errno (-EINVAL: not a control
 * thread's name, -ENOENT: the thread is gone). */
static int read_state(pid_t pid, pid_t tid, struct pl_toggle_state *st)
{
	char path[96], name[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char *got = fgets(name, sizeof(name), f);
	fclose(f);
	if (!got)
		return -EINVAL;
	return pl_toggle_state_parse(name, st);
}

/* Finds the control thread of pid. 0 with t->tid and t->st set; -ENOENT if there is
 * none (toggling is off there), or another -errno. */
int vw_find_control(struct target *t)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)t->pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int rc = -ENOENT;
	struct dirent *e;
	while (rc != 0 && (e = readdir(d)) != NULL) {
		pid_t tid = vw_parse_pid(e->d_name);
		if (tid > 0 && read_state(t->pid, tid, &t->st) == 0) {
			t->tid = tid;
			rc = 0;
		}
	}
	closedir(d);
	return rc;
}

static const char *signame(int sig, char *buf, size_t len)
{
	const char *abbrev = sig < SIGRTMIN ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "SIGRTMIN+%d", sig - SIGRTMIN);
	return buf;
}

/* Checks that pid runs the shim with a toggle signal armed (and `want`, if given).
 * 0, or says why not and returns -1. */
static int check_target(struct target *t, int want)
{
	char a[32], b[32];
	int rc = vw_shim_mapped(t->pid);
	if (rc == -ENOENT) {
		fprintf(stderr, "coprof toggle: %d: no such process\n", (int)t->pid);
		return -1;
	}
	if (rc < 0) {
		fprintf(stderr, "coprof toggle: %d: cannot read its memory map: %s\n", (int)t->pid,
			strerror(-rc));
		return -1;
	}
	if (rc == 0) {
		fprintf(stderr,
			"coprof toggle: %d does not run under coprof (no " PRELOAD_NAME
			" in it); nothing sent\n",
			(int)t->pid);
		return -1;
	}
	/* A program that has just started may not have its control thread yet: look for
	 * it for up to a second before saying toggling is off. */
	for (int tries = 0; (rc = vw_find_control(t)) < 0 && tries < 100; tries++) {
		struct timespec pause = {0, 10 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	if (rc < 0) {
		fprintf(stderr,
			"coprof toggle: %d runs coprof, but toggling is off in it "
			"(COPROF_SIGNAL=none, a bad COPROF_* setting, or it is exiting: see its "
			"stderr); nothing sent\n",
			(int)t->pid);
		return -1;
	}
	char attached[PATH_MAX];
	if (t->st.signo == 0 && want <= 0 &&
	    vw_attached_out(t->pid, attached, sizeof(attached)) == 0)
		return 0; /* attached: requests go through its control pipe */
	if (t->st.signo == 0) {
		fprintf(stderr,
			"coprof toggle: %d handles its toggle signal itself, so toggling is off in "
			"it; nothing sent\n",
			(int)t->pid);
		return -1;
	}
	if (want > 0 && t->st.signo != want) {
		fprintf(stderr, "coprof toggle: %d toggles on %s, not %s; nothing sent\n",
			(int)t->pid, signame(t->st.signo, a, sizeof(a)),
			signame(want, b, sizeof(b)));
		return -1;
	}
	return 0;
}

/* The path of the file a stop wrote, as the shim names it: the template `coprof
 * attach` gave it, else COPROF_OUT from the process's environment at its start, else
 * the default. */
static void written_path(const struct target *t, char *buf, size_t len)
{
	static char env[1 << 17];
	char path[64];
	const char *tmpl = "coprof-%p.pstat";
	static char attached[PATH_MAX];
	if (vw_attached_out(t->pid, attached, sizeof(attached)) == 0) {
		if (pl_out_path(attached, t->pid, t->st.dumps, t->st.forked, buf, len) != 0)
			snprintf(buf, len, "(a name too long to show)");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)t->pid);
	FILE *f = fopen(path, "re");
	if (f) {
		size_t n = fread(env, 1, sizeof(env) - 1, f);
		fclose(f);
		env[n] = 0;
		for (size_t i = 0; i < n; i += strlen(env + i) + 1)
			if (!strncmp(env + i, "COPROF_OUT=", 11))
				tmpl = env + i + 11;
	}
	if (pl_out_path(tmpl, t->pid, t->st.dumps, t->st.forked, buf, len) != 0)
		snprintf(buf, len, "(a name too long to show)");
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sends `req` to t and waits until its control thread has applied it (its request
 * count moved), at most `timeout` seconds. Says what the process did. 0, 1 on failure. */
int vw_send_and_wait(struct target *t, int req, double timeout)
{
	char path[PATH_MAX];
	int pid = (int)t->pid;
	struct pl_toggle_state before = t->st;
	union sigval v = {.sival_int = req};
	int by_pipe = vw_control_request(t->pid, req);
	if (by_pipe < 0 && before.signo <= 0) { /* attached, and its pipe is gone */
		fprintf(stderr, "%s: %d: cannot reach its control pipe: %s\n", vw_toggle_who, pid,
			strerror(-by_pipe));
		return 1;
	}
	if (by_pipe < 0 && sigqueue(t->pid, before.signo, v) != 0) {
		fprintf(stderr, "%s: %d: %s\n", vw_toggle_who, pid, strerror(errno));
		return 1;
	}
	double end = now() + timeout;
	struct timespec pause = {0, 1000000};
	for (;;) {
		int rc = read_state(t->pid, t->tid, &t->st);
		if (rc == -ENOENT || rc == -ESRCH) /* the control thread was restarted */
			rc = vw_find_control(t);
		if (rc == 0 && t->st.run == PL_RUN_EXITING) {
			fprintf(stderr,
				"%s: %d is exiting; its last window is written "
				"at exit\n",
				vw_toggle_who, pid);
			return 1;
		}
		if (rc == 0 && t->st.seq != before.seq)
			break;
		if (rc != 0 && kill(t->pid, 0) != 0 && errno == ESRCH) {
			fprintf(stderr, "%s: %d exited before it answered\n", vw_toggle_who, pid);
			return 1;
		}
		if (now() > end) {
			fprintf(stderr,
				"%s: %d did not answer within %g s; the request may still "
				"be applied later\n",
				vw_toggle_who, pid, timeout);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	switch (t->st.run) {
	case PL_RUN_ON:
		printf("%d: profiling on\n", pid);
		return 0;
	case PL_RUN_OFF:
		if (t->st.dumps == before.dumps && before.run != PL_RUN_ON) {
			/* asked to start, and still off: coprof_start failed there */
			printf("%d: profiling off: it could not start (see its stderr)\n", pid);
			return 1;
		}
		if (t->st.dumps == before.dumps) {
			printf("%d: profiling off\n", pid);
			return 0;
		}
		written_path(t, path, sizeof(path));
		printf("%d: profiling off; wrote %s\n", pid, path);
		return 0;
	case PL_RUN_EMPTY:
		printf("%d: profiling off; nothing was recorded in that window, so no file\n", pid);
		return 0;
	default:
		printf("%d: profiling off; the profile could not be written (see its stderr)\n",
		       pid);
		return 1;
	}
}

int vw_cmd_toggle(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"start", no_argument, NULL, 'S'},	      {"stop", no_argument, NULL, 'P'},
	    {"signal", required_argument, NULL, 's'}, {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	      {NULL, 0, NULL, 0},
	};
	int sig = -1, req = PL_REQ_TOGGLE, c, status = 0;
	double timeout = 10;
	const char *sig_arg = NULL, *timeout_arg = NULL;
	static struct target targets[MAX_TARGETS];
	int n = 0;
	/* "-1" is a bad pid, not an unknown option */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9' &&
		    strcmp(argv[i - 1], "--signal") && strcmp(argv[i - 1], "--timeout")) {
			fprintf(stderr, "coprof toggle: '%s' is not a pid\n", argv[i]);
			return 2;
		}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'S':
		case 'P':
			if (req != PL_REQ_TOGGLE &&
			    req != (c == 'S' ? PL_REQ_START : PL_REQ_STOP)) {
				fprintf(stderr,
					"coprof toggle: --start and --stop exclude each other\n");
				return 2;
			}
			req = c == 'S' ? PL_REQ_START : PL_REQ_STOP;
			break;
		case 's':
			if (sig_arg && strcmp(sig_arg, optarg)) {
				fprintf(stderr,
					"coprof toggle: --signal given twice ('%s', '%s')\n",
					sig_arg, optarg);
				return 2;
			}
			sig_arg = optarg;
			break;
		case 't':
			timeout_arg = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (optopt == 's' || optopt == 't')
				fprintf(stderr, "coprof toggle: %s needs a value\n",
					argv[optind - 1]);
			else
				fprintf(stderr, "coprof toggle: unknown option '%s'\n",
					argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (sig_arg) {
		sig = pl_parse_signal(sig_arg);
		if (sig < 0) {
			fprintf(stderr,
				"coprof toggle: '%s' is not a signal coprof may use (USR1, USR2, "
				"RTMIN+N, RTMAX-N)\n",
				sig_arg);
			return 2;
		}
		if (sig == 0) {
			fprintf(stderr, "coprof toggle: --signal none: a process without a toggle "
					"signal cannot be toggled\n");
			return 2;
		}
	}
	if (timeout_arg) {
		char *end;
		errno = 0;
		timeout = strtod(timeout_arg, &end);
		if (errno || *end || end == timeout_arg || !(timeout > 0 && timeout <= 3600)) {
			fprintf(stderr,
				"coprof toggle: --timeout '%s' is not a number of seconds (0 to "
				"3600)\n",
				timeout_arg);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		pid_t pid = vw_parse_pid(argv[i]);
		if (pid <= 0) {
			fprintf(stderr, "coprof toggle: '%s' is not a pid\n", argv[i]);
			return 2;
		}
		if (n == MAX_TARGETS) {
			fprintf(stderr, "coprof toggle: more than %d pids\n", MAX_TARGETS);
			return 2;
		}
		targets[n++] = (struct target){.pid = pid};
	}
	for (int i = 0; i < n; i++)
		if (check_target(&targets[i], sig) != 0)
			return 2;
	for (int i = 0; i < n; i++) {
		struct target *t = &targets[i];
		int on = t->st.run == PL_RUN_ON;
		if ((req == PL_REQ_START && on) || (req == PL_REQ_STOP && !on)) {
			printf("%d: profiling is already %s; nothing sent\n", (int)t->pid,
			       on ? "on" : "off");
			continue;
		}
		if (vw_send_and_wait(t, req, timeout) != 0)
			status = 1;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "coprof toggle: cannot write the report: %s\n", strerror(errno));
		return 2;
	}
	return status;
}
