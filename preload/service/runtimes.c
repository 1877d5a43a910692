/* runtimes.c: the registry of runtimes (service.h): every runtime the shim follows
 * registers once at start (the constructor's thread, before the program runs), and the
 * layers above call all of them at once: the control thread at start and stop, a
 * thread as it starts and ends, fork, seccomp, the sigaltstack interposer. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "service.h"

#define MAX_RUNTIMES 8

static const struct pl_runtime *runtimes[MAX_RUNTIMES];
static int nruntimes;
static int refused; /* runtimes found and not followed (pl_runtime_refused) */

void pl_runtime_add(const struct pl_runtime *rt)
{
	if (nruntimes < MAX_RUNTIMES)
		runtimes[nruntimes++] = rt;
	else
		pl_say("too many runtime adapters; '%s' is off", rt->name);
}

/* Calls `fn` of every runtime that has one, in the order of registration. */
#define EACH(fn, ...)                                                                              \
	for (int i_ = 0; i_ < nruntimes; i_++)                                                     \
		if (runtimes[i_]->fn)                                                              \
			runtimes[i_]->fn(__VA_ARGS__)

void pl_runtimes_start(void)
{
	EACH(start);
}

void pl_runtimes_stop(void)
{
	for (int i = nruntimes - 1; i >= 0; i--)
		if (runtimes[i]->stop)
			runtimes[i]->stop();
}

void pl_runtimes_thread_early(void)
{
	EACH(thread_early);
}

void pl_runtimes_thread_start(void)
{
	EACH(thread_start);
}

void pl_runtimes_thread_exit(void)
{
	EACH(thread_exit);
}

void pl_runtimes_after_fork_child(void)
{
	EACH(after_fork_child);
}

void pl_runtimes_sandbox(const char *how)
{
	EACH(sandbox, how);
}

void pl_runtimes_altstack_program_set(int own)
{
	EACH(altstack_program_set, own);
}

const struct pl_runtime *pl_runtimes_altstack_owner(const stack_t *ss)
{
	for (int i = 0; i < nruntimes; i++)
		if (runtimes[i]->altstack_owns && runtimes[i]->altstack_owns(ss))
			return runtimes[i];
	return NULL;
}

/* tgkill's ESRCH comes when the thread is unhashed, under the same lock that drops it
 * from the count. */
void pl_wait_thread_gone(pid_t tid)
{
	for (int i = 0; tid > 0 && i < 2000; i++) {
		if (syscall(SYS_tgkill, (pid_t)getpid(), tid, 0) != 0 && errno == ESRCH)
			return;
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
}

/* The runtimes' own threads, stopped in the reverse order of their start. */
void pl_runtimes_fork_pause(void)
{
	for (int i = nruntimes - 1; i >= 0; i--)
		if (runtimes[i]->fork_pause)
			pl_wait_thread_gone(runtimes[i]->fork_pause());
}

void pl_runtimes_fork_resume(void)
{
	EACH(fork_resume);
}

void pl_runtime_refused(void)
{
	refused++;
}

int pl_runtimes_found(void)
{
	int n = refused;
	for (int i = 0; i < nruntimes; i++)
		n += !runtimes[i]->native;
	return n;
}

int pl_runtime_on(const char *name)
{
	for (int i = 0; i < nruntimes; i++)
		if (strcmp(runtimes[i]->name, name) == 0)
			return 1;
	return 0;
}
