/* threads.c: the program's threads. pthread_create is interposed so each new thread
 * registers with the engine as it starts, under its name, tells the runtimes
 * (thread_early/thread_start/thread_exit), and closes its stacks when it ends, however it ends
 * (return, pthread_exit, cancellation). pthread_setname_np renames it in the profile.
 * Runs in the creating thread, then in the new one. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "service.h"

struct start {
	void *(*fn)(void *);
	void *arg;
};

/* Registered threads, so pthread_setname_np from another thread finds its target. */
#define MAX_NAMED 1024
static struct {
	pthread_t id;
	struct coprof_thread *th;
} named[MAX_NAMED];

/* The program's threads still running: the main one and those pthread_create started
 * for it, not the shim's own. glibc ends the process when its last thread exits (main
 * left by pthread_exit, then the others returned; a fork child whose only thread
 * does); the shim's threads, which block every signal, would keep it alive forever.
 * So the last program thread to exit ends the process as glibc would have: exit(0),
 * from a thread-specific destructor (after its cleanup handlers). */
static int live_threads;
static pthread_key_t live_key;
static int live_armed;

static void live_exit(void *v)
{
	(void)v;
	if (__atomic_sub_fetch(&live_threads, 1, __ATOMIC_ACQ_REL) == 0)
		exit(0);
}

/* In a fork child only the forking thread is left. */
static void live_fork_child(void)
{
	__atomic_store_n(&live_threads, 1, __ATOMIC_RELEASE);
}

/* Runs in the constructor, on the main thread. */
void pl_threads_init(void)
{
	if (live_armed || pthread_key_create(&live_key, live_exit) != 0)
		return;
	__atomic_store_n(&live_threads, 1, __ATOMIC_RELEASE);
	pthread_setspecific(live_key, (void *)1);
	pthread_atfork(NULL, NULL, live_fork_child);
	live_armed = 1;
}

static void remember(pthread_t id, struct coprof_thread *th)
{
	for (int i = 0; i < MAX_NAMED; i++) {
		struct coprof_thread *expect = NULL;
		if (__atomic_compare_exchange_n(&named[i].th, &expect, th, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			__atomic_store_n(&named[i].id, id, __ATOMIC_RELEASE);
			return;
		}
	}
}

static void forget(struct coprof_thread *th)
{
	for (int i = 0; i < MAX_NAMED; i++)
		if (__atomic_load_n(&named[i].th, __ATOMIC_ACQUIRE) == th) {
			__atomic_store_n(&named[i].id, (pthread_t)0, __ATOMIC_RELEASE);
			__atomic_store_n(&named[i].th, NULL, __ATOMIC_RELEASE);
			return;
		}
}

/* Ends the thread for the shim: the adapters first; its final name is whatever the
 * thread (or another) set with prctl or pthread_setname_np. The engine closes its
 * stacks afterwards, from coprof_thread_self's thread-exit destructor. */
static void thread_done(void *arg)
{
	struct pl_tls *t = &pl_tls_data;
	t->guard = 1;
	pl_runtimes_thread_exit();
	struct coprof_thread *th = t->thread;
	if (th) {
		char name[32];
		pl_thread_name(name, sizeof(name));
		coprof_thread_set_name(th, name);
		forget(th);
	}
	t->thread = NULL;
	pl_ntls.dead = 1; /* TLS destructors may still call hooks: ignore them */
}

static PL_START_CODE void *thread_main(void *arg)
{
	struct start s = *(struct start *)arg;
	free(arg);
	struct pl_tls *t = &pl_tls_data;
	t->guard = 1;
	if (live_armed)
		pthread_setspecific(live_key, (void *)1);
	pl_runtimes_thread_early();
	struct coprof_thread *th = pl_thread();
	if (th)
		remember(pthread_self(), th);
	pl_runtimes_thread_start();
	t->guard = 0;
	void *ret;
	pthread_cleanup_push(thread_done, NULL);
	ret = s.fn(s.arg);
	pthread_cleanup_pop(1);
	return ret;
}

PL_EXPORT int pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*fn)(void *),
			     void *arg)
{
	if (!pl_real.pthread_create)
		pl_resolve_reals();
	if (!pl_real.pthread_create)
		return EAGAIN;
	/* threads the shim itself starts (from a hook, the constructor or the control
	 * thread, all under the guard) are not the program's: they stay unregistered */
	if (!pl_active || pl_tls_data.guard)
		return pl_real.pthread_create(id, attr, fn, arg);
	struct start *s = malloc(sizeof(*s));
	if (!s)
		return pl_real.pthread_create(id, attr, fn, arg);
	s->fn = fn;
	s->arg = arg;
	if (live_armed) /* counted before it runs: main may leave at once */
		__atomic_add_fetch(&live_threads, 1, __ATOMIC_ACQ_REL);
	int rc = pl_real.pthread_create(id, attr, thread_main, s);
	if (rc != 0) {
		free(s);
		if (live_armed)
			__atomic_sub_fetch(&live_threads, 1, __ATOMIC_ACQ_REL);
	}
	return rc;
}

PL_EXPORT int pthread_setname_np(pthread_t id, const char *name)
{
	if (!pl_real.pthread_setname_np)
		pl_resolve_reals();
	if (!pl_real.pthread_setname_np)
		return ENOSYS;
	int rc = pl_real.pthread_setname_np(id, name);
	if (rc != 0 || !pl_active)
		return rc;
	struct pl_tls *t = &pl_tls_data;
	int guard = t->guard;
	t->guard = 1;
	if (pthread_equal(id, pthread_self())) {
		if (t->thread)
			coprof_thread_set_name(t->thread, name);
	} else {
		for (int i = 0; i < MAX_NAMED; i++) {
			struct coprof_thread *th = __atomic_load_n(&named[i].th, __ATOMIC_ACQUIRE);
			if (th &&
			    pthread_equal(__atomic_load_n(&named[i].id, __ATOMIC_ACQUIRE), id)) {
				coprof_thread_set_name(th, name);
				break;
			}
		}
	}
	t->guard = guard;
	return rc;
}
