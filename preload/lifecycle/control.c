/* control.c: starting, stopping and dumping the profile, and the control thread.
 *
 * The toggle signal's handler (toggle-handler.c) writes a byte to a pipe; the control
 * thread reads it and starts or stops profiling; each stop dumps a numbered file and
 * clears the profile. Exit dumps once more, and so does exec (exec.c); fork gives the
 * child a fresh profiler, pipe and control thread; Python's os.fork pauses the shim's
 * threads around the fork. One mutex serialises all of this (never taken on the hot
 * path). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lifecycle.h"

#define PL_EXIT_BYTE 'x'	 /* in the control pipe: _exit asks for the last dump */
#define PL_EXIT_WAIT_S 5	 /* how long _exit waits for the control thread to take it */
#define PL_EXIT_DUMP_WAIT_S 60	 /* and then for the dump (symbols of a large program) */
#define PL_EXIT_HANDLER_WAIT_S 2 /* for the dump, when _exit may be in a signal handler */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_fd read_fd = PL_FD_NONE;
static unsigned dumps; /* files written by this process */
static int ever_started;
static int exiting;
/* kept, not freed, in a forked child: volatile, or the compiler drops a store that
 * nothing reads, and LeakSanitizer reports the kept profiler as leaked */
static struct coprof *volatile parent_prof;
static int forked;		   /* this process is a forked child */
static unsigned requests;	   /* toggle requests applied (state.h) */
static int made_children;	   /* this process forked: a child may be the one profiled */
static int last_stop = PL_RUN_OFF; /* what the last stop did: PL_RUN_OFF/EMPTY/FAILED */
static int exec_wrote;		   /* dump dumps+1 was written for an exec under way */
static int adopted;		   /* this image took over the numbering of the one before exec */

/* The control thread, and pausing it around os.fork (pl_control_fork_pause). After
 * start-up, pause_lock guards control_up, control_th and paused. */
static struct pl_fd quit_fd = PL_FD_NONE; /* eventfd: set, the control thread returns */
static int control_wanted;		  /* a control thread should run (its pipe exists) */
static int control_up;			  /* it runs, joinable as control_th */
static pthread_t control_th;
static pid_t control_tid; /* its kernel id, set by the thread itself */
PL_EXPORT int coprof_control_pipe_fd = -1;
PL_EXPORT unsigned long long coprof_control_pipe_ino;

/* Publishes the pipe's write end for coprof, or that there is none (fd -1). */
static void publish_pipe(int fd)
{
	if (fd >= 0)
		coprof_control_pipe_ino = (unsigned long long)pl_toggle_fd.ino;
	__atomic_store_n(&coprof_control_pipe_fd, fd, __ATOMIC_RELEASE);
}
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned paused; /* pauses under way (one per forking thread) */
/* This thread paused them for the fork() it is about to make (set by the pause, reset
 * when fork() returns: os.fork's 'after' callbacks may resume in another thread). */
static __thread int fork_pauser PL_TLS;

/* Starts recording, in a new window, or (`resume`) on in the window a failed exec
 * stopped, whose start stays as it was. */
static void start_window_locked(int resume)
{
	if (pl_running || !pl_prof)
		return;
	__atomic_add_fetch(&pl_gen, 1, __ATOMIC_RELEASE);
	int rc = coprof_start(pl_prof);
	if (rc != 0) {
		pl_say("cannot start profiling: %s", coprof_strerror(rc));
		return;
	}
	ever_started = 1;
	pl_runtimes_start();
	/* The window's start is when every runtime records: Python's waited for the
	 * GIL (under load, for a good part of a short window). */
	if (!resume)
		coprof_mark_start(pl_prof);
	__atomic_store_n(&pl_running, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_tracing, pl_cfg.mode == COPROF_MODE_TRACE, __ATOMIC_RELEASE);
	pl_interval_open();
}

static void start_locked(void)
{
	start_window_locked(0);
}

/* Says why dump `path` was not written, as the OS (or coprof_dump) says it. A shell
 * leaves "~" in COPROF_OUT=~/x as it is, which the OS reads as a directory named "~". */
static void say_dump_error(int rc, const char *path)
{
	if (rc == -ENOENT && path[0] == '~')
		pl_say("cannot write the profile to %s: %s (a leading ~ is not expanded; "
		       "use $HOME)",
		       path, coprof_strerror(rc));
	else
		pl_say("cannot write the profile to %s: %s", path, coprof_strerror(rc));
}

/* Stops recording: the window is closed, its data kept. */
static void stop_locked(void)
{
	pl_interval_close();
	__atomic_store_n(&pl_tracing, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_running, 0, __ATOMIC_RELEASE);
	pl_runtimes_stop();
	coprof_stop(pl_prof);
}

/* Writes the window as dump number dumps+1: 0, COPROF_ENODATA when it recorded nothing
 * (no file, no number), or an error, said. */
static int write_locked(void)
{
	char path[PATH_MAX];
	int rc = pl_publish_path(dumps + 1, forked, path);
	if (rc != 0) /* the path itself is too long to make */
		pl_say("cannot write the profile to COPROF_OUT=%s: %s", pl_cfg.out,
		       coprof_strerror(rc));
	else if ((rc = pl_publish_dump(path, dumps + 1, forked, 0)) != 0 && rc != COPROF_ENODATA)
		say_dump_error(rc, path);
	last_stop = rc == 0 ? PL_RUN_OFF : rc == COPROF_ENODATA ? PL_RUN_EMPTY : PL_RUN_FAILED;
	return rc;
}

/* Stops, writes dump number dumps+1 and clears, so the next window starts empty. A
 * window in which nothing was recorded writes no file and uses no number. */
static void stop_dump_locked(void)
{
	if (!pl_running)
		return;
	stop_locked();
	if (write_locked() == 0)
		pl_interval_keep(++dumps, forked);
	coprof_clear(pl_prof);
}

void pl_control_start(void)
{
	pthread_mutex_lock(&lock);
	start_locked();
	pthread_mutex_unlock(&lock);
}

/* The control thread's name says what it did last (state.h): `coprof toggle`
 * reads it to know that its request was applied. Called with `lock` held, on the
 * control thread (PR_SET_NAME names the calling thread, with no fd). */
static void publish_locked(void)
{
	struct pl_toggle_state st = {
	    .signo = pl_toggle_armed(),
	    .run = exiting	? PL_RUN_EXITING
		   : pl_running ? PL_RUN_ON
				: last_stop,
	    .forked = forked,
	    .seq = requests,
	    .dumps = dumps,
	};
	char name[16];
	pl_toggle_state_format(&st, name);
	prctl(PR_SET_NAME, name, 0, 0, 0);
}

/* Applies one byte of the control pipe: 't' toggles, 's' only starts, 'p' only stops,
 * 'a' changes nothing (the state is published again). */
static void apply(char req)
{
	pthread_mutex_lock(&lock);
	if (!exiting && req != 'a') {
		if (pl_running && (req == 't' || req == 'p'))
			stop_dump_locked();
		else if (!pl_running && (req == 't' || req == 's'))
			start_locked();
		requests++;
	}
	publish_locked();
	pthread_mutex_unlock(&lock);
}

static void exit_request(void);

void pl_control_republish(void)
{
	int fd = pl_fd_get(&pl_toggle_fd);
	char byte = 'a';
	if (fd >= 0) {
		ssize_t n = write(fd, &byte, 1);
		(void)n;
	}
}

/* With COPROF_INTERVAL, how long to wait for a toggle, and the window written when
 * it is due (interval.c); -1 and nothing otherwise. */
static int window_wait_ms(void)
{
	pthread_mutex_lock(&lock);
	int ms = pl_interval_wait_ms();
	pthread_mutex_unlock(&lock);
	return ms;
}

static void window_due(void)
{
	pthread_mutex_lock(&lock);
	if (!exiting && pl_running && pl_interval_write_due(dumps + 1, forked))
		pl_interval_keep(++dumps, forked);
	pthread_mutex_unlock(&lock);
}

/* Set by pl_control_init_attached: a control thread runs without a toggle signal, and
 * a forked child gets one too; it calls rebind_fn while a window is open. */
static int attached_control;
static void (*rebind_fn)(void);

/* The control thread: no signal is ever delivered to it, and its guard is always set,
 * so no hook records anything it does. It returns when quit_fd is set, between two
 * toggles: bytes it has not read stay in the pipe for the next control thread. It
 * also closes periodic windows when they are due. */
static void *control_main(void *arg)
{
	(void)arg;
	pl_tls_data.guard = 1;
	pl_ntls.dead = 1;
	__atomic_store_n(&control_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	pthread_mutex_lock(&lock);
	publish_locked();
	pthread_mutex_unlock(&lock);
	for (;;) {
		struct pollfd fds[2] = {{.fd = quit_fd.fd, .events = POLLIN},
					{.fd = read_fd.fd, .events = POLLIN}};
		int ms = window_wait_ms();
		int rebind = rebind_fn && __atomic_load_n(&pl_running, __ATOMIC_ACQUIRE);
		if (rebind && (ms < 0 || ms > PL_REBIND_MS))
			ms = PL_REBIND_MS;
		int ready = poll(fds, 2, ms);
		if (rebind)
			rebind_fn();
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (fds[0].revents)
			return NULL;
		window_due();
		if (!fds[1].revents)
			continue;
		int rfd = pl_fd_get(&read_fd);
		if (rfd < 0) {
			/* the program closed it (and may have reused the number) */
			pl_say(
			    "the program closed coprof's control pipe; toggling by signal is off");
			pl_toggle_fd.fd = -1;
			publish_pipe(-1);
			return NULL;
		}
		char buf[64];
		ssize_t n = read(rfd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == PL_EXIT_BYTE)
				exit_request();
			else
				apply(buf[i]);
		}
	}
}

/* Starts the control thread on the existing pipe. 0 or -errno (and says why). */
static int start_control_thread(void)
{
	sigset_t old;
	pl_sig_block_all(&old); /* inherited: the thread takes no signal, guarded ones too */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int rc = pl_real.pthread_create(&control_th, &attr, control_main, NULL);
	pthread_attr_destroy(&attr);
	pl_sig_restore(&old);
	if (rc != 0) {
		pl_say("cannot start the control thread: %s; toggling is off", strerror(rc));
		return -rc;
	}
	control_up = 1;
	return 0;
}

/* A new pipe, and a control thread unless `defer` (at start, and in a forked child).
 * Without them the program is still profiled; only the toggle is lost. */
static int spawn_control(int defer)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		pl_say("cannot make the control pipe: %s; toggling is off", strerror(errno));
		return -errno;
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	struct pl_fd wfd;
	if (pl_fd_adopt(&read_fd, fds[0]) != 0 || pl_fd_adopt(&wfd, fds[1]) != 0) {
		pl_fd_close(&read_fd);
		pl_say("cannot keep the control pipe; toggling is off");
		return -EBADF;
	}
	/* none: never paused */
	pl_fd_adopt(&quit_fd, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	control_up = 0;
	/* The pipe is the toggle's before the thread runs: once it names its state, `coprof
	 * toggle` sends, through the pipe it reads here or by the signal, whose handler
	 * writes to pl_toggle_fd; published after the thread's start, a toggle between the
	 * two was lost (a forked child's first toggle, 1 in some 200 under load: the
	 * thread waited in poll, the request nowhere). Bytes written before the thread
	 * runs wait in the pipe. */
	pl_toggle_fd.dev = wfd.dev;
	pl_toggle_fd.ino = wfd.ino;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pl_toggle_fd.fd = wfd.fd;
	publish_pipe(wfd.fd);
	int rc = defer ? 0 : start_control_thread();
	if (rc != 0) {
		publish_pipe(-1);
		pl_toggle_fd.fd = -1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		pl_fd_close(&read_fd);
		pl_fd_close(&wfd);
		pl_fd_close(&quit_fd);
		return rc;
	}
	control_wanted = 1;
	/* tests: a toggle may come while the thread runs and spawn_control has not
	 * returned (before, while the pipe was not published yet) */
	if (!defer)
		pl_test_pause("COPROF_TEST_CONTROL_DELAY_MS");
	return 0;
}

int pl_control_init(void)
{
	if ((pl_cfg.signo == 0 && !pl_cfg.interval_ns) || !pl_real.pthread_create)
		return 0;
	return spawn_control(0);
}

int pl_control_init_attached(void (*rebind)(void))
{
	attached_control = 1;
	rebind_fn = rebind;
	return pl_real.pthread_create ? spawn_control(0) : -ENOSYS;
}

/* The note about missing instrumentation is for the program the user launched, not
 * for every helper process it runs (a shell, pyenv's bash wrappers): `coprof record`
 * names that process in COPROF_PID; without it, every process may say it. */
static int is_launched_process(void)
{
	const char *v = getenv("COPROF_PID");
	return !v || atol(v) == (long)getpid();
}

/* The parent process has the shim mapped: this process is a descendant of a profiled
 * one (a shell that a preloaded program ran, say), whose output is its host's. */
static int parent_profiled(void)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%ld/maps", (long)getppid());
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "libcoprof-preload") != NULL;
	fclose(f);
	return found;
}

/* Launched by `coprof record` itself (not only preloaded): a COPROF_START=0 process
 * that was never toggled says so only then, since with a bare LD_PRELOAD every
 * process of a script would. */
static int is_recorded_process(void)
{
	const char *v = getenv("COPROF_PID");
	return v && atol(v) == (long)getpid();
}

/* This process made children (so a child may be the program that was profiled). */
static int had_children(void)
{
	struct rusage ru;
	/* vfork and posix_spawn (dash runs commands so) pass no atfork handler; a child
	 * that was waited for shows in RUSAGE_CHILDREN */
	return made_children || (getrusage(RUSAGE_CHILDREN, &ru) == 0 && ru.ru_maxrss > 0);
}

/* At exit, what the user would otherwise wonder about: no profile because profiling
 * never started, or because the program has no instrumented code. The latter is not
 * said by a process that forked: a child (say, an instrumented program it runs) may be
 * what was profiled, and the parent cannot know; nor by a process whose parent is
 * profiled, under a bare LD_PRELOAD: a shell that a preloaded Python program runs
 * writes to that program's stderr, which must read as it does unprofiled. */
static void exit_locked(void)
{
	exiting = 1;
	stop_dump_locked();
	if (!ever_started && !pl_cfg.start && !forked && is_recorded_process())
		pl_say("profiling never started (COPROF_START=0, or record --no-start, and no "
		       "toggle came), so no profile was written");
	if (ever_started && dumps == 0 && !pl_seen_cyg && pl_cfg.mode == COPROF_MODE_TRACE &&
	    !pl_runtimes_found() && is_launched_process() && !had_children() && !parent_profiled())
		pl_say("this program has no -finstrument-functions code, so trace mode saw no "
		       "function; rebuild it with -finstrument-functions (gcc or clang), or "
		       "use COPROF_MODE=sample");
}

void pl_control_exit(void)
{
	pthread_mutex_lock(&lock);
	exit_locked();
	pthread_mutex_unlock(&lock);
}

/* _exit's request, a futex word: 1 once the control thread has it (and its lock), 2 once
 * the dump is written. */
static int exit_served;

static void exit_progress(int stage)
{
	__atomic_store_n(&exit_served, stage, __ATOMIC_RELEASE);
	syscall(SYS_futex, &exit_served, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* On the control thread: _exit's dump, then wake the thread waiting in _exit. */
static void exit_request(void)
{
	pthread_mutex_lock(&lock);
	exit_progress(1);
	exit_locked();
	pthread_mutex_unlock(&lock);
	exit_progress(2);
}

/* async-signal-safe: waits until exit_served passes `stage`, `secs` at most. */
static void exit_wait(int stage, int secs)
{
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	int v;
	while ((v = __atomic_load_n(&exit_served, __ATOMIC_ACQUIRE)) <= stage) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		struct timespec left = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
		if (left.tv_nsec < 0)
			left.tv_sec--, left.tv_nsec += 1000000000L;
		if (left.tv_sec < 0)
			return;
		syscall(SYS_futex, &exit_served, FUTEX_WAIT_PRIVATE, v, &left, NULL, 0);
	}
}

/* async-signal-safe, but for the Python case. _exit may run inside a signal handler that
 * interrupted malloc, a lock or the shim itself, so the dump is the control thread's:
 * this thread asks through the control pipe, waits PL_EXIT_WAIT_S seconds at most for
 * the control thread to take the request, then PL_EXIT_DUMP_WAIT_S for the dump; when
 * a signal the program handles is blocked (it may be in that handler), 1 s and
 * PL_EXIT_HANDLER_WAIT_S. The control thread may need a lock the interrupted code
 * holds: then the process leaves without its last dump. Without a control thread
 * there is no dump. */
void pl_control_quick_exit(void)
{
	/* The Python adapter stops by taking the GIL, which the thread calling os._exit
	 * holds: there the exiting thread dumps itself, as it is not in a C signal
	 * handler. */
	if (pl_runtime_on("python")) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		if (pthread_mutex_timedlock(&lock, &until) != 0)
			return;
		exit_locked();
		pthread_mutex_unlock(&lock);
		return;
	}
	int fd = pl_fd_get(&pl_toggle_fd);
	char byte = PL_EXIT_BYTE;
	if (fd < 0 || !__atomic_load_n(&control_up, __ATOMIC_ACQUIRE) || write(fd, &byte, 1) != 1)
		return;
	/* In a handler the code it interrupted may hold what the dump needs (the
	 * allocator's lock): the wait is short there. */
	int in_handler = pl_sig_maybe_in_handler();
	exit_wait(0, in_handler ? 1 : PL_EXIT_WAIT_S);
	if (__atomic_load_n(&exit_served, __ATOMIC_ACQUIRE) == 1)
		exit_wait(1, in_handler ? PL_EXIT_HANDLER_WAIT_S : PL_EXIT_DUMP_WAIT_S);
}

/* Before exec: the window so far is written as dump number dumps+1, as a toggle's stop
 * writes it, but not cleared and not yet counted, and toggles wait until the exec
 * fails or the image is gone. An exec may fail (os.execvp tries each folder of PATH in
 * turn), and a failed one must leave the profile as it was: pl_control_exec_failed
 * then removes the file and the window goes on, so the next dump (exit, a later exec)
 * writes it, with the same number. COPROF_KEEP's removal of an older file is the new
 * image's (pl_control_exec_keep), as it cannot be undone. Gives up after a moment,
 * like pl_control_quick_exit, when the control thread holds the lock (it may wait for
 * the GIL this thread holds): then the window is lost, and said so. Puts in `state`
 * what the image after exec takes over (pl_control_adopt_exec), or "" when it needs
 * nothing. Returns 1 when profiling was on, 0 when off, -1 when it gave up. */
int pl_control_exec_prepare(char *state, size_t len)
{
	struct timespec until;
	state[0] = 0;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_mutex_timedlock(&lock, &until) != 0) {
		if (__atomic_load_n(&pl_running, __ATOMIC_ACQUIRE))
			pl_say("the profile of the window before exec was not written: the "
			       "control thread was busy");
		return -1;
	}
	int was_running = pl_running;
	exiting = 1;
	exec_wrote = 0;
	if (was_running) {
		stop_locked();
		exec_wrote = write_locked() == 0;
	}
	/* A pid that wrote files goes on numbering them after exec (and naming them as a
	 * forked child, if it was one), so the new image overwrites none of them. One that
	 * wrote none starts afresh, as a program a launcher (timeout, sh) forks and execs
	 * did before exec was hooked: it writes the name COPROF_OUT gives. An attached
	 * shim hands nothing over: the new image has no shim to take the variable out. */
	if (dumps + exec_wrote > 0 && !attached_control)
		snprintf(state, len, "%ld:%u:%d", (long)getpid(), dumps + exec_wrote, forked);
	pthread_mutex_unlock(&lock);
	return was_running;
}

/* The exec failed and the program goes on as if it had not tried: the file written
 * for it is removed, toggles work again, and the window it stopped goes on. */
void pl_control_exec_failed(int was_running)
{
	if (was_running < 0) /* prepare gave up: the lock may still be held, leave all be */
		return;
	pthread_mutex_lock(&lock);
	char path[PATH_MAX];
	if (exec_wrote && pl_publish_path(dumps + 1, forked, path) == 0) {
		int rc = pl_publish_remove(path, dumps + 1, forked);
		if (rc != 0)
			pl_say("cannot remove %s, written for an exec that failed: %s", path,
			       coprof_strerror(rc));
	}
	exec_wrote = 0;
	exiting = 0;
	if (was_running > 0)
		start_window_locked(1);
	pthread_mutex_unlock(&lock);
}

/* At start, before profiling: takes over the numbering of the image this process was
 * before exec ("PID:DUMPS:FORKED" from pl_control_exec_prepare), if it is this pid's. */
void pl_control_adopt_exec(const char *state)
{
	long pid;
	unsigned n;
	int f;
	if (state && sscanf(state, "%ld:%u:%d", &pid, &n, &f) == 3 && pid == (long)getpid()) {
		dumps = n;
		forked = f != 0;
		adopted = 1;
	}
}

/* Once the configuration is read: COPROF_KEEP's removal for the last file the image
 * before exec wrote, which it left to this one (pl_control_exec_prepare). Removing a
 * number again that is already gone (that image wrote nothing at exec) is no error. */
void pl_control_exec_keep(void)
{
	if (adopted && dumps > 0)
		pl_interval_keep(dumps, forked);
}

void pl_control_fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

void pl_control_fork_parent(void)
{
	fork_pauser = 0;
	made_children = 1;
	pthread_mutex_unlock(&lock);
}

/* Called by the Python adapter in os.fork's 'before' callback, without the GIL (the
 * control thread may be waiting for it in PyGILState_Ensure, so it can finish its
 * toggle). The first pause stops the control thread and the runtimes' own threads, so
 * the parent counts none of them when Python warns about forking a multi-threaded
 * process; pl_control_fork_resume undoes it. Toggles that arrive meanwhile wait in the
 * pipe. Never holds pause_lock while waiting for the GIL. */
void pl_control_fork_pause(void)
{
	pthread_mutex_lock(&pause_lock);
	if (paused++ == 0) {
		int qfd = pl_fd_get(&quit_fd);
		if (control_up && qfd >= 0) {
			uint64_t one = 1, v;
			ssize_t w = write(qfd, &one, sizeof(one));
			(void)w;
			pthread_join(control_th, NULL);
			control_up = 0;
			w = read(qfd, &v, sizeof(v));
			(void)w;
			pl_wait_thread_gone(__atomic_load_n(&control_tid, __ATOMIC_ACQUIRE));
		}
		pl_runtimes_fork_pause();
	}
	fork_pauser = 1; /* its own thread's, so no lock needed; set for the child */
	pthread_mutex_unlock(&pause_lock);
}

/* Around a credential change (creds.c), from the thread that makes it: the shim's
 * threads stop as for a fork, but no fork follows, and start again from that thread,
 * whose per-thread credentials they inherit. */
void pl_control_threads_pause(void)
{
	pl_control_fork_pause();
	fork_pauser = 0;
}

void pl_control_threads_resume(void)
{
	pl_control_fork_resume();
}

/* After os.fork, in the parent ('after_in_parent', also when the fork failed) and in
 * the child ('after_in_child', where pl_control_fork_child left one pause for it): the
 * last resume starts the threads again. */
void pl_control_fork_resume(void)
{
	pthread_mutex_lock(&pause_lock);
	if (paused > 0 && --paused == 0) {
		pl_runtimes_fork_resume();
		if (control_wanted && !control_up)
			start_control_thread();
	}
	pthread_mutex_unlock(&pause_lock);
}

/* In the child: the parent's profiler is left as it is (its pages are the parent's
 * copy; other threads' state in it may be mid-update), and a new one takes its place.
 * When this thread came through os.fork's pause, the new control thread starts in
 * os.fork's 'after_in_child' callback, once Python has re-made its own state after the
 * fork; its pipe is made here, so no toggle is lost meanwhile. */
void pl_control_fork_child(void)
{
	int was_running = pl_running;
	pthread_mutex_unlock(&lock);
	pthread_mutex_init(&pause_lock, NULL);
	paused = fork_pauser ? 1 : 0;
	fork_pauser = 0;
	control_up = 0;
	control_wanted = 0;
	__atomic_store_n(&pl_tracing, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_running, 0, __ATOMIC_RELEASE);
	dumps = 0;
	ever_started = 0;
	forked = 1;
	last_stop = PL_RUN_OFF;
	/* Only what is provably still ours is closed: the program may have closed these
	 * numbers before the fork and opened its own files on them. */
	pl_fd_close(&read_fd);
	pl_fd_close(&pl_toggle_fd);
	publish_pipe(-1); /* the parent's: a request for the child must never reach it */
	pl_fd_close(&quit_fd);
	if (!pl_prof)
		return;
	struct coprof_options opt = pl_config_options(&pl_cfg);
	struct coprof *p;
	if (coprof_create(&opt, &p) != 0) {
		pl_prof = NULL;
		pl_active = 0;
		return;
	}
	parent_prof = pl_prof;
	pl_prof = p;
	coprof_set_default(p);
	if (pl_syms)
		coprof_add_resolver(p, pl_symbols_resolve, pl_syms);
	__atomic_add_fetch(&pl_gen, 1, __ATOMIC_RELEASE);
	pl_thread();
	pl_runtimes_after_fork_child();
	if (pl_cfg.signo != 0 || pl_cfg.interval_ns || attached_control)
		spawn_control(paused != 0);
	if (was_running) {
		pthread_mutex_lock(&lock);
		start_locked();
		pthread_mutex_unlock(&lock);
		/* the new control thread may have named its state before this start */
		pl_control_republish();
	}
}

/* --- the Python API's starts, stops and dumps (api.c) ------------------------------- */

/* Starts a window, as a toggle's start does: 1 when one was open already (nothing
 * done), 0 when this call opened it, or -errno. A preloaded process's control thread
 * names its state again (`coprof toggle` reads it). */
int pl_control_api_start(void)
{
	pthread_mutex_lock(&lock);
	int rc = 1;
	if (exiting)
		rc = -ESHUTDOWN;
	else if (!pl_running) {
		start_locked();
		rc = pl_running ? 0 : -EIO;
	}
	pthread_mutex_unlock(&lock);
	if (rc == 0 && pl_active)
		pl_control_republish();
	return rc;
}

/* Stops the open window and writes it to `snap` for the API (coprof_dump: the data
 * stays). Preloaded, the window then ends as a toggle's stop ends it: written as the
 * next numbered file and cleared, so toggles and the API share one numbering and no
 * window is lost or written twice. 1 when no window was open (nothing done), else 0
 * and *dumped, coprof_dump's return. */
int pl_control_api_stop(const char *snap, int *dumped)
{
	pthread_mutex_lock(&lock);
	if (!pl_running || exiting) {
		pthread_mutex_unlock(&lock);
		return 1;
	}
	stop_locked();
	*dumped = coprof_dump(pl_prof, snap);
	if (pl_active) {
		if (write_locked() == 0)
			pl_interval_keep(++dumps, forked);
		coprof_clear(pl_prof);
	}
	pthread_mutex_unlock(&lock);
	if (pl_active)
		pl_control_republish();
	return 0;
}

/* The profile so far, to `path`, open frames counted up to now (coprof_dump). */
int pl_control_api_dump(const char *path)
{
	pthread_mutex_lock(&lock);
	int rc = pl_prof ? coprof_dump(pl_prof, path) : -ENODEV;
	pthread_mutex_unlock(&lock);
	return rc;
}

/* Forgets what was recorded, when no window is open: 0, or -EBUSY. */
int pl_control_api_clear(void)
{
	pthread_mutex_lock(&lock);
	int rc = pl_running ? -EBUSY : pl_prof ? coprof_clear(pl_prof) : 0;
	pthread_mutex_unlock(&lock);
	return rc;
}
