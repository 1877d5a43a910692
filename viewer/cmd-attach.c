/* cmd-attach.c: `coprof attach PID` loads the shim into a process started without
 * coprof (inject.c does the ptrace part) and opens a window (cmd-detach.c closes it). Every check
 * that /proc can answer is made before the process is touched, each failing with one line and the
 * process left as it was. Afterwards the process is driven as a preloaded one is, through its
 * control thread (cmd-toggle.c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "inject.h"
#include "target.h"

#define ENTRY "coprof_attach_entry"
#define THREAD_ENTRY "coprof_attach_thread"
#define SAFE_WAIT_S 2.0	  /* to find the first thread at a safe point */
#define THREAD_WAIT_S 0.5 /* each other thread, in sample mode */
#define LEAVE_WAIT_S 5.0  /* for a thread to be out of the trampoline */
#define MAX_THREADS 1024
#define PF_KTHREAD 0x00200000 /* /proc/PID/stat's flags: a kernel thread */
#define START_WAIT_S 10.0     /* for the shim's control thread to appear */
#define PY_MIN 10	      /* the Python minors with an adapter: 3.10 .. 3.13 */
#define PY_MAX 13

struct attach_opts {
	const char *mode; /* NULL: trace for Python, else sample */
	const char *clock;
	const char *out;
	const char *hz;
	double duration; /* 0: none */
	int until_signal;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: coprof attach [--mode trace|sample] [-c cpu|wall] [--hz N] [-o FILE]\n"
	    "                     [--duration SEC | --until-signal] PID\n"
	    "Loads the profiler into a running process (with ptrace) and starts profiling\n"
	    "it; `coprof toggle` and `coprof detach` then drive it as a process run under\n"
	    "coprof record with profiling off at start. Attaching again reuses what is loaded.\n"
	    "  --mode MODE     trace (Python 3.10-3.13, the default there; or a native\n"
	    "                  program built with -finstrument-functions) or sample\n"
	    "                  (native stacks, the default otherwise)\n"
	    "  -c, --clock C   cpu (default) or wall\n"
	    "  --hz N          sample mode's rate (default %d)\n"
	    "  -o, --output F  the profile's path (%%p: pid, %%n: number; default\n"
	    "                  coprof-%%p.pstat in this directory)\n"
	    "  --duration SEC  stop and write after SEC seconds\n"
	    "  --until-signal  stop and write when coprof gets SIGINT or SIGTERM\n"
	    "Without either, coprof returns at once and the process profiles on until\n"
	    "`coprof detach`, `coprof toggle`, or its exit (which writes the window).\n",
	    PL_DEFAULT_HZ);
}

static int fail(pid_t pid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line: "coprof attach: PID: ...". Returns 2 (bad input: nothing was done). */
static int fail(pid_t pid, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: %d: ", vw_toggle_who, (int)pid);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

static int not_allowed(pid_t pid, int err)
{
	char scope[16] = "";
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fgets(scope, sizeof(scope), f))
			scope[strcspn(scope, "\n")] = 0;
		fclose(f);
	}
	return fail(pid,
		    "not allowed to trace it: %s (it needs the same user and "
		    "/proc/sys/kernel/yama/ptrace_scope at 0 or 1%s%s, or CAP_SYS_PTRACE)",
		    strerror(err), scope[0] ? ": it is " : "", scope);
}

/* The value of field `key` in /proc/PID/status into buf; 0 or -errno. */
static int status_field(pid_t pid, const char *key, char *buf, size_t len)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int rc = -ENOENT;
	size_t kl = strlen(key);
	while (rc != 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			const char *v = line + kl + 1;
			v += strspn(v, " \t");
			snprintf(buf, len, "%s", v);
			buf[strcspn(buf, "\n")] = 0;
			rc = 0;
		}
	fclose(f);
	return rc;
}

static int is_kernel_thread(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	unsigned long flags = 0;
	return p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 &&
	       (flags & PF_KTHREAD);
}

/* Python's version from the process's files: libpythonX.Y (a shared build) or an
 * executable named pythonX.Y. 0 with *minor (major 3), -ENOENT if not Python. */
static int python_version(pid_t pid, const char *exe, int *major, int *minor)
{
	char path[64], line[PATH_MAX + 256];
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	if (sscanf(base, "python%d.%d", major, minor) == 2)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	int rc = -ENOENT;
	while (rc != 0 && fgets(line, sizeof(line), f)) {
		const char *lib = strstr(line, "/libpython");
		if (lib && sscanf(lib, "/libpython%d.%d", major, minor) == 2)
			rc = 0;
	}
	fclose(f);
	return rc;
}

/* 1 when the process maps a C library the shim can be loaded with (it is dynamic). */
static int has_libc(pid_t pid)
{
	char path[64], line[PATH_MAX + 256];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libc.so.6\n") != NULL;
	fclose(f);
	return found;
}

/* The checks /proc answers, in the order a user would want them said. 0 (with the
 * Python version, 0 when not Python), or 2 after one line. */
static int check_process(pid_t pid, const char *shim, int *py_minor)
{
	char buf[PATH_MAX], exe[PATH_MAX], path[PATH_MAX + 64];
	*py_minor = 0;
	if (status_field(pid, "State", buf, sizeof(buf)) != 0)
		return fail(pid, "no such process");
	char threads[32];
	/* A main thread that left by pthread_exit shows as a zombie while the others run,
	 * and /proc/PID then has no memory map or executable to read. */
	if ((buf[0] == 'Z' || buf[0] == 'X') &&
	    status_field(pid, "Threads", threads, sizeof(threads)) == 0 && atoi(threads) > 1)
		return fail(pid, "its main thread has exited (pthread_exit) while others run: "
				 "attaching needs the main thread");
	if (buf[0] == 'Z' || buf[0] == 'X')
		return fail(pid, "it is a zombie: it has exited (its parent has not reaped it)");
	if (is_kernel_thread(pid))
		return fail(pid, "it is a kernel thread; only user processes can be attached");
	/* before the stopped state: a tracer's process is in tracing stops now and then */
	char tracer[32];
	if (status_field(pid, "TracerPid", tracer, sizeof(tracer)) == 0 && atoi(tracer) != 0)
		return fail(pid,
			    "it is traced already, by process %s (a debugger or strace): a "
			    "process has one tracer at a time",
			    tracer);
	if (buf[0] == 'T' || buf[0] == 't')
		return fail(pid, "it is stopped (job control or a debugger); continue it first");
	if (status_field(pid, "Seccomp", buf, sizeof(buf)) == 0 && atoi(buf) != 0)
		return fail(pid, "it runs under a seccomp filter, which may kill it for the system "
				 "calls that loading the profiler makes");
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0 && (errno == EACCES || errno == EPERM))
		return not_allowed(pid, errno);
	if (n < 0)
		return fail(pid, "cannot read %s: %s", path, strerror(errno));
	exe[n] = 0;
	FILE *f = fopen(path, "re");
	Elf64_Ehdr eh;
	int got = f && fread(&eh, 1, sizeof(eh), f) >= EI_NIDENT + 4;
	if (f)
		fclose(f);
	if (got && eh.e_ident[EI_CLASS] == ELFCLASS32)
		return fail(pid, "it is a 32-bit program; coprof attaches 64-bit ones only");
	if (!got || memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_machine != EM_X86_64)
		return fail(pid, "%s is not an x86-64 ELF program; coprof attach needs one", exe);
	if (!has_libc(pid))
		return fail(pid, "it is statically linked (no libc.so.6 in it), so it cannot load "
				 "the profiler");
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, shim);
	if (access(path, R_OK) != 0)
		return fail(pid,
			    "%s is not there in its mount namespace (%s: %s); attach from "
			    "inside it, or make the file visible there",
			    shim, path, strerror(errno));
	int major, minor;
	if (python_version(pid, exe, &major, &minor) == 0) {
		if (major != 3 || minor < PY_MIN)
			return fail(pid, "Python %d.%d has no coprof adapter (3.%d to 3.%d have)",
				    major, minor, PY_MIN, PY_MAX);
		if (minor > PY_MAX)
			return fail(pid,
				    "Python %d.%d has no coprof adapter (3.%d to 3.%d have); from "
				    "3.14 on, sys.remote_exec (PEP 768) is the way to run code in "
				    "a live interpreter",
				    major, minor, PY_MIN, PY_MAX);
		*py_minor = minor;
	}
	return 0;
}

/* The adapter for Python 3.minor next to the shim, as the shim looks for it
 * (preload/runtime/python-loader.c), seen from the process's root. */
static int adapter_there(pid_t pid, const char *shim, int minor)
{
	char dir[PATH_MAX], path[2 * PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", shim);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	static const char *const subdirs[] = {"python", "coprof"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%d/root%s/%s/coprof-python3.%d.so", (int)pid,
			 dir, subdirs[i], minor);
		if (access(path, R_OK) == 0)
			return 1;
	}
	return 0;
}

/* The write end of the shim's control pipe, opened through /proc/PID/fd and checked to
 * be the pipe the shim made (by inode); -errno when it cannot be reached. */
static int control_pipe(pid_t pid)
{
	uint64_t fd_at, ino_at;
	int fd = -1;
	unsigned long long ino = 0;
	char path[64];
	if (vw_remote_symbol(pid, "libcoprof-preload.so", "coprof_control_pipe_fd", &fd_at) != 0 ||
	    vw_remote_symbol(pid, "libcoprof-preload.so", "coprof_control_pipe_ino", &ino_at) != 0 ||
	    vw_remote_read(pid, fd_at, &fd, sizeof(fd)) != 0 ||
	    vw_remote_read(pid, ino_at, &ino, sizeof(ino)) != 0 || fd < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	int w = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (w < 0)
		return -errno;
	struct stat sb;
	if (fstat(w, &sb) != 0 || !S_ISFIFO(sb.st_mode) || (unsigned long long)sb.st_ino != ino) {
		close(w);
		return -ESTALE;
	}
	return w;
}

int vw_attached_out(pid_t pid, char *buf, size_t len)
{
	uint64_t at;
	char tmpl[PATH_MAX];
	int w = control_pipe(pid); /* only an attached shim's template is its own */
	if (w < 0)
		return w;
	close(w);
	if (vw_remote_symbol(pid, "libcoprof-preload.so", "coprof_attach_out", &at) != 0 ||
	    vw_remote_read(pid, at, tmpl, sizeof(tmpl)) != 0)
		return -ENOENT;
	tmpl[sizeof(tmpl) - 1] = 0;
	if (!tmpl[0])
		return -ENOENT;
	snprintf(buf, len, "%s", tmpl);
	return 0;
}

int vw_control_request(pid_t pid, int req)
{
	char byte = req == PL_REQ_START ? 's' : req == PL_REQ_STOP ? 'p' : 't';
	int w = control_pipe(pid);
	if (w < 0)
		return w;
	int rc = write(w, &byte, 1) == 1 ? 0 : -errno;
	close(w);
	return rc;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* After the injection: the shim's control thread appears and says the window is
 * open. 0, or 1 after a line. */
static int wait_started(struct vw_target *t)
{
	double end = now() + START_WAIT_S;
	struct timespec pause = {0, 2 * 1000 * 1000};
	uint64_t failed_at = 0;
	char why[256];
	while (now() < end) {
		if (vw_find_control(t) == 0 && t->st.run == PL_RUN_ON)
			return 0;
		/* the shim's set-up gave up, and says why */
		if ((failed_at ||
		     vw_remote_symbol(t->pid, "libcoprof-preload.so", "coprof_attach_failed",
				      &failed_at) == 0) &&
		    vw_remote_read(t->pid, failed_at, why, sizeof(why)) == 0 && why[0]) {
			why[sizeof(why) - 1] = 0;
			fprintf(stderr, "%s: %d: %s; the process runs on, not profiled\n",
				vw_toggle_who, (int)t->pid, why);
			return 1;
		}
		if (kill(t->pid, 0) != 0 && errno == ESRCH) {
			fprintf(stderr, "%s: %d exited\n", vw_toggle_who, (int)t->pid);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	/* A set-up still under way (a Python whose GIL is held all along) is told to
	 * leave the window shut. */
	uint64_t at;
	int one = 1;
	int told =
	    vw_remote_symbol(t->pid, "libcoprof-preload.so", "coprof_attach_cancel", &at) == 0 &&
	    vw_remote_write(t->pid, at, &one, sizeof(one)) == 0;
	fprintf(stderr,
		"%s: %d: the profiler did not start within %g s (its stderr may say why; a "
		"Python may hold its GIL all along)%s; the process runs on\n",
		vw_toggle_who, (int)t->pid, START_WAIT_S, told ? ", and will not start later" : "");
	return 1;
}

/* The options for the shim, as environment lines (config.c parses them). The output
 * path is made absolute here: the process's directory is not ours. 0 or 2. */
static int shim_options(const struct attach_opts *o, int python, char *buf, size_t len)
{
	char out[PATH_MAX], cwd[PATH_MAX];
	const char *tmpl = o->out ? o->out : "coprof-%p.pstat";
	if (tmpl[0] == '/')
		snprintf(out, sizeof(out), "%s", tmpl);
	else if (!getcwd(cwd, sizeof(cwd)) ||
		 snprintf(out, sizeof(out), "%s/%s", cwd, tmpl) >= (int)sizeof(out)) {
		fprintf(stderr, "%s: cannot make the output path absolute\n", vw_toggle_who);
		return 2;
	}
	const char *mode = o->mode ? o->mode : python ? "trace" : "sample";
	int n = snprintf(buf, len, "COPROF_MODE=%s\nCOPROF_CLOCK=%s\nCOPROF_OUT=%s\n%s%s%s", mode,
			 o->clock ? o->clock : "cpu", out, o->hz ? "COPROF_HZ=" : "",
			 o->hz ? o->hz : "", o->hz ? "\n" : "");
	if (n < 0 || (size_t)n >= len || strchr(out, '\n')) {
		fprintf(stderr, "%s: the output path is too long\n", vw_toggle_who);
		return 2;
	}
	return 0;
}

/* The process's threads now: 0 and up to `max` tids, or -errno. */
static int threads_of(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *e;
	while (n < max && (e = readdir(d)) != NULL) {
		pid_t tid = vw_parse_pid(e->d_name);
		if (tid > 0)
			tids[n++] = tid;
	}
	closedir(d);
	return n;
}

/* One of the shim's own threads (its control thread, set-up thread and folding thread
 * are named coprof...): no entry for those. */
static int shim_thread(pid_t pid, pid_t tid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 1; /* gone */
	int got = fgets(comm, sizeof(comm), f) != NULL;
	fclose(f);
	return got && strncmp(comm, "coprof", 6) == 0;
}

/* The threads of the process now that were not in `tids` (n of them) and are not the
 * shim's: those the program started while the shim set up, before the binding
 * (those started after register themselves, and the entry does nothing on them). */
static int started_since(pid_t pid, const pid_t *tids, int n, pid_t *out, int max)
{
	int m = threads_of(pid, out, max), k = 0;
	for (int i = 0; i < m; i++) {
		int known = 0;
		for (int j = 0; j < n && !known; j++)
			known = tids[j] == out[i];
		if (!known && !shim_thread(pid, out[i]))
			out[k++] = out[i];
	}
	return k;
}

/* Loads the shim through one thread and waits for profiling to be on; in sample mode
 * then makes each thread the program had register with the sampler, one after the
 * other (each leaves the trampoline before the next gets it), and after them those it
 * started meanwhile. Last, the padding gets its zeros back once no thread can be in
 * it. 0, or 1/2 after a line. */
static int load(struct vw_target *t, const char *shim, const char *opts, int sample)
{
	static pid_t tids[2 * MAX_THREADS];
	char err[512];
	struct vw_inject *j;
	struct vw_inject_stats st, ts;
	int n = threads_of(t->pid, tids, MAX_THREADS);
	int rc = vw_inject_open(t->pid, &j, err, sizeof(err));
	if (rc == 0 &&
	    (rc = vw_inject_run(j, 0, shim, ENTRY, opts, SAFE_WAIT_S, &st, err, sizeof(err))) != 0)
		vw_inject_close(j, 0);
	if (rc == -EPERM)
		return not_allowed(t->pid, EPERM);
	if (rc != 0)
		return fail(t->pid, "%s; nothing was changed", err);
	if (wait_started(t) != 0) {
		vw_inject_close(j, 0);
		return 1;
	}
	uint64_t calls_at = 0;
	unsigned want = 1;
	int clean = vw_remote_symbol(t->pid, "libcoprof-preload.so", "coprof_attach_calls",
				     &calls_at) == 0 &&
		    vw_inject_wait_left(j, st.tid, calls_at, want, LEAVE_WAIT_S) == 0;
	int sampled = 0, others = 0;
	double worst = st.stopped_ms;
	if (sample && clean && n >= 0)
		n += started_since(t->pid, tids, n, tids + n, MAX_THREADS);
	for (int i = 0; sample && i < n; i++) {
		/* the first thread too: the entry only starts the set-up */
		others += tids[i] != st.tid;
		if (!clean || vw_inject_run(j, tids[i], shim, THREAD_ENTRY, "", THREAD_WAIT_S, &ts,
					    err, sizeof(err)) != 0)
			continue;
		clean = vw_inject_wait_left(j, tids[i], calls_at, ++want, LEAVE_WAIT_S) == 0;
		sampled += clean;
		worst = ts.stopped_ms > worst ? ts.stopped_ms : worst;
	}
	/* the threads the shim says it armed a tick for, of those that took the entry */
	uint64_t sampled_at;
	unsigned armed;
	int entered = sampled;
	if (sample &&
	    vw_remote_symbol(t->pid, "libcoprof-preload.so", "coprof_attach_sampled", &sampled_at) == 0 &&
	    vw_remote_read(t->pid, sampled_at, &armed, sizeof(armed)) == 0 && (int)armed < sampled)
		sampled = (int)armed;
	if (vw_inject_close(j, clean) != 0)
		clean = 0;
	printf("%d: profiling on (attached through thread %d, stopped %.2f ms%s)\n", (int)t->pid,
	       (int)st.tid, worst, st.restarted ? ", its system call restarted" : "");
	if (sample && sampled < entered)
		printf("%d: sampling %d of its %d threads (%d could not arm a tick source)\n",
		       (int)t->pid, sampled, others + 1, entered - sampled);
	else if (sample)
		printf("%d: sampling %d of its %d threads%s\n", (int)t->pid, sampled, others + 1,
		       sampled <= others ? " (the others were never at a safe point)" : "");
	if (!clean)
		printf("%d: the loader's trampoline stays at 0x%llx, in padding the program never "
		       "runs\n",
		       (int)t->pid, (unsigned long long)st.tramp_at);
	return 0;
}

/* With --duration or --until-signal: waits, then stops (writing the window). */
static int window_then_stop(struct vw_target *t, const struct attach_opts *o)
{
	if (o->until_signal) {
		sigset_t set;
		int sig;
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigwait(&set, &sig);
	} else {
		double end = now() + o->duration;
		struct timespec pause = {0, 20 * 1000 * 1000};
		while (now() < end) {
			if (kill(t->pid, 0) != 0 && errno == ESRCH) {
				printf("%d: exited; its window was written at exit\n", (int)t->pid);
				return 0;
			}
			nanosleep(&pause, NULL);
		}
	}
	return vw_send_and_wait(t, PL_REQ_STOP, 30);
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line about a bad option, "coprof attach: ...": returns 2. */
static int bad(const char *fmt, ...)
{
	va_list ap;
	fputs("coprof attach: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	return 2;
}

/* The options whose value is the next argument. */
static int takes_value(const char *opt)
{
	static const char *const with[] = {"--mode", "--clock", "-c",	     "--output",
					   "-o",     "--hz",	"--duration"};
	for (size_t i = 0; i < sizeof(with) / sizeof(with[0]); i++)
		if (!strcmp(opt, with[i]))
			return 1;
	return 0;
}

static int parse_opts(int argc, char **argv, struct attach_opts *o, int *help)
{
	static const struct option opts[] = {
	    {"mode", required_argument, NULL, 'm'},	{"clock", required_argument, NULL, 'c'},
	    {"output", required_argument, NULL, 'o'},	{"hz", required_argument, NULL, 'z'},
	    {"duration", required_argument, NULL, 'd'}, {"until-signal", no_argument, NULL, 'u'},
	    {"help", no_argument, NULL, 'h'},		{NULL, 0, NULL, 0},
	};
	int c;
	unsigned hz;
	char *end;
	optind = 1;
	opterr = 0;
	*help = 0;
	while ((c = getopt_long(argc, argv, "+c:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "trace") && strcmp(optarg, "sample"))
				return bad("--mode is trace or sample, not '%s'\n", optarg);
			o->mode = optarg;
			break;
		case 'c':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "wall"))
				return bad("--clock is cpu or wall, not '%s'\n", optarg);
			o->clock = optarg;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'z':
			if (pl_parse_hz(optarg, &hz) != 0)
				return bad("--hz is a rate from %d to %d, not '%s'\n", PL_HZ_MIN,
					   PL_HZ_MAX, optarg);
			o->hz = optarg;
			break;
		case 'd':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || *end || end == optarg ||
			    !(o->duration > 0 && o->duration <= 86400))
				return bad("--duration '%s' is not a number of seconds (0 to "
					   "86400)\n",
					   optarg);
			break;
		case 'u':
			o->until_signal = 1;
			break;
		case 'h':
			*help = 1;
			return 0;
		default:
			fprintf(stderr, "coprof attach: %s '%s'\n",
				optopt && strchr("mcozd", optopt) ? "a value is missing after"
								  : "unknown option",
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (o->duration > 0 && o->until_signal)
		return bad("--duration and --until-signal exclude each other\n");
	return 0;
}

/* The shim is in the process already (attached before, or preloaded): its control
 * thread starts a window, as `coprof toggle --start` does. */
static int reuse(struct vw_target *t)
{
	if (vw_find_control(t) != 0)
		return fail(t->pid, "it has the profiler loaded but no control thread (coprof's "
				    "Python API, or COPROF_SIGNAL=none), so it cannot be driven "
				    "from outside");
	printf("%d: the profiler is loaded already; its options stay those it was loaded "
	       "with\n",
	       (int)t->pid);
	if (t->st.run == PL_RUN_ON) {
		printf("%d: profiling already\n", (int)t->pid);
		return 0;
	}
	return vw_send_and_wait(t, PL_REQ_START, 30);
}

int vw_cmd_attach(int argc, char **argv)
{
	struct attach_opts o = {0};
	int help, rc, py_minor;
	char shim[PATH_MAX], opts[PATH_MAX + 256];
	vw_toggle_who = "coprof attach";
	/* "-1" is a bad pid, not an unknown option */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9' &&
		    !takes_value(argv[i - 1])) {
			fprintf(stderr, "coprof attach: '%s' is not a pid\n", argv[i]);
			return 2;
		}
	if ((rc = parse_opts(argc, argv, &o, &help)) != 0)
		return rc; /* said */
	if (help) {
		usage(stdout);
		return 0;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	struct vw_target t = {.pid = vw_parse_pid(argv[optind])};
	if (t.pid <= 0) {
		fprintf(stderr, "coprof attach: '%s' is not a pid\n", argv[optind]);
		return 2;
	}
	if (t.pid == getpid())
		return fail(t.pid, "that is coprof itself");
	if (vw_find_preload(shim, sizeof(shim)) != 0) {
		fprintf(stderr, "coprof attach: cannot find libcoprof-preload.so (set "
				"COPROF_PRELOAD)\n");
		return 2;
	}
	if ((rc = check_process(t.pid, shim, &py_minor)) != 0)
		return rc;
	if (vw_shim_mapped(t.pid) == 1) {
		rc = reuse(&t);
		return rc != 0				  ? rc
		       : o.duration > 0 || o.until_signal ? window_then_stop(&t, &o)
							  : 0;
	}
	if (o.mode && !strcmp(o.mode, "trace") && !py_minor &&
	    !vw_remote_imports(t.pid, "__cyg_profile_func_enter"))
		return fail(t.pid, "trace mode needs a native program built with "
				   "-finstrument-functions, and none of this one's files calls "
				   "its hooks; use --mode sample");
	if (py_minor && !adapter_there(t.pid, shim, py_minor))
		return fail(t.pid, "no coprof adapter for Python 3.%d was built next to %s",
			    py_minor, shim);
	if ((rc = shim_options(&o, py_minor != 0, opts, sizeof(opts))) != 0)
		return rc;
	if (o.until_signal) { /* from now on, so that an early Ctrl-C is not lost */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	int sample = o.mode ? !strcmp(o.mode, "sample") : !py_minor;
	if ((rc = load(&t, shim, opts, sample)) != 0)
		return rc;
	fflush(stdout);
	if (o.duration > 0 || o.until_signal)
		return window_then_stop(&t, &o);
	return 0;
}
