/* control.c: starting, stopping and dumping the profile, and the control thread.
 *
 * The toggle signal's handler (signal-handler.c) writes a byte to a pipe; the control
 * thread reads it and starts or stops profiling; each stop dumps a numbered file and
 * clears the profile. Exit dumps once more; fork gives the child a fresh profiler, pipe
 * and control thread. One mutex serialises all of this (never taken on the hot path). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "internal.h"
#include "symbols.h"

#define MAX_RUNTIMES 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct pl_runtime *runtimes[MAX_RUNTIMES];
static int nruntimes;
static int read_fd = -1;
static unsigned dumps; /* files written by this process */
static int ever_started;
static int exiting;
static struct coprof *parent_prof; /* kept, not freed, in a forked child */
static int forked;		   /* this process is a forked child */

void pl_runtime_add(const struct pl_runtime *rt)
{
	if (nruntimes < MAX_RUNTIMES)
		runtimes[nruntimes++] = rt;
	else
		pl_say("too many runtime adapters; '%s' is off", rt->name);
}

void pl_runtimes_thread_start(void)
{
	for (int i = 0; i < nruntimes; i++)
		if (runtimes[i]->thread_start)
			runtimes[i]->thread_start();
}

void pl_runtimes_thread_exit(void)
{
	for (int i = 0; i < nruntimes; i++)
		if (runtimes[i]->thread_exit)
			runtimes[i]->thread_exit();
}

void pl_runtimes_after_fork_child(void)
{
	for (int i = 0; i < nruntimes; i++)
		if (runtimes[i]->after_fork_child)
			runtimes[i]->after_fork_child();
}

static void start_locked(void)
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
	for (int i = 0; i < nruntimes; i++)
		if (runtimes[i]->start)
			runtimes[i]->start();
	__atomic_store_n(&pl_running, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_tracing, pl_cfg.mode == COPROF_MODE_TRACE, __ATOMIC_RELEASE);
}

/* Stops, writes dump number dumps+1 and clears, so the next window starts empty. A
 * window in which nothing was recorded writes no file and uses no number. */
static void stop_dump_locked(void)
{
	if (!pl_running)
		return;
	__atomic_store_n(&pl_tracing, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_running, 0, __ATOMIC_RELEASE);
	for (int i = nruntimes - 1; i >= 0; i--)
		if (runtimes[i]->stop)
			runtimes[i]->stop();
	coprof_stop(pl_prof);
	char path[PATH_MAX];
	int rc = pl_out_path(pl_cfg.out, (long)getpid(), dumps + 1, forked, path, sizeof(path));
	if (rc == 0)
		rc = coprof_dump(pl_prof, path);
	if (rc == 0)
		dumps++;
	else if (rc != -ENODATA)
		pl_say("cannot write the profile to %s: %s", path, coprof_strerror(rc));
	coprof_clear(pl_prof);
}

void pl_control_start(void)
{
	pthread_mutex_lock(&lock);
	start_locked();
	pthread_mutex_unlock(&lock);
}

static void toggle(void)
{
	pthread_mutex_lock(&lock);
	if (!exiting) {
		if (pl_running)
			stop_dump_locked();
		else
			start_locked();
	}
	pthread_mutex_unlock(&lock);
}

/* The control thread: no signal is ever delivered to it, and its guard is always set,
 * so no hook records anything it does. */
static void *control_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	pl_tls_data.guard = 1;
	pl_ntls.dead = 1;
	for (;;) {
		char buf[64];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		for (ssize_t i = 0; i < n; i++)
			toggle();
	}
}

/* A new pipe and control thread (at start, and in a forked child). Without them the
 * program is still profiled; only the toggle is lost. */
static int spawn_control(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		pl_say("cannot make the control pipe: %s; toggling is off", strerror(errno));
		return -errno;
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int rc = pl_real.pthread_create(&th, &attr, control_main, (void *)(intptr_t)fds[0]);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pl_say("cannot start the control thread: %s; toggling is off", strerror(rc));
		close(fds[0]);
		close(fds[1]);
		return -rc;
	}
	read_fd = fds[0];
	pl_toggle_fd = fds[1];
	return 0;
}

int pl_control_init(void)
{
	if (pl_cfg.signo == 0 || !pl_real.pthread_create)
		return 0;
	return spawn_control();
}

/* The note about missing instrumentation is for the program the user launched, not
 * for every helper process it runs (a shell, pyenv's bash wrappers): `coprof record`
 * names that process in COPROF_PID; without it, every process may say it. */
static int is_launched_process(void)
{
	const char *v = getenv("COPROF_PID");
	return !v || atol(v) == (long)getpid();
}

static void exit_locked(void)
{
	exiting = 1;
	stop_dump_locked();
	if (ever_started && dumps == 0 && !pl_seen_cyg && pl_cfg.mode == COPROF_MODE_TRACE &&
	    nruntimes == 0 && is_launched_process())
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

void pl_control_quick_exit(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_mutex_timedlock(&lock, &until) != 0)
		return;
	exit_locked();
	pthread_mutex_unlock(&lock);
}

void pl_control_fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

void pl_control_fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

/* In the child: the parent's profiler is left as it is (its pages are the parent's
 * copy; other threads' state in it may be mid-update), and a new one takes its place. */
void pl_control_fork_child(void)
{
	int was_running = pl_running;
	pthread_mutex_unlock(&lock);
	__atomic_store_n(&pl_tracing, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_running, 0, __ATOMIC_RELEASE);
	dumps = 0;
	ever_started = 0;
	forked = 1;
	if (read_fd >= 0) {
		int w = pl_toggle_fd;
		pl_toggle_fd = -1;
		close(read_fd);
		close(w);
		read_fd = -1;
	}
	if (!pl_prof)
		return;
	struct coprof_options opt = {
	    .clock = pl_cfg.clock,
	    .mode = pl_cfg.mode,
	    .hz = pl_cfg.mode == COPROF_MODE_SAMPLE ? pl_cfg.hz : 0,
	};
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
	pl_uctx_after_fork_child();
	pl_thread();
	pl_runtimes_after_fork_child();
	if (pl_cfg.signo != 0)
		spawn_control();
	if (was_running) {
		pthread_mutex_lock(&lock);
		start_locked();
		pthread_mutex_unlock(&lock);
	}
}
