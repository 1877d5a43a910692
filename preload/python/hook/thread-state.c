/* thread-state.c: each thread's state for the hook (struct pl_py_thread, hook.h): made
 * at its first event (thread-local storage under sys.monitoring and the
 * frame-evaluation function; a capsule on the thread state under the profile function,
 * backend-profile.c), brought up to date at each window's first event, freed when the
 * thread exits or the hook comes off its thread state. A greenlet switch swaps the
 * chain it runs in and out. Runs in the thread concerned, GIL held. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "hook.h"

struct coprof_ctx *(*pl_py_window_ctx)(struct coprof_thread *t);
PyTypeObject *pl_py_wrapped_type;

void pl_py_thread_free(struct pl_py_thread *pt)
{
	free(pt->drivers);
	pl_py_wait_free(pt->inner_wait); /* not held yet: plain memory */
	pl_py_map_free(&pt->agens);
	free(pt);
}

/* Forgets what the last start or fork made stale: the stacks (cleared) and, after a
 * fork, the parent's contexts. Tasks keep their contexts (struct task). */
void pl_py_thread_reset(struct pl_py_thread *pt)
{
	pl_py_wait_free(pt->inner_wait);
	pt->inner_wait = NULL;
	pl_py_map_free(&pt->agens);
	pt->root = pt->root_code = NULL;
	pt->ctx = NULL;
	pt->adopting = NULL;
	forget_last(pt);
	pt->ndrivers = 0;
	pt->lost = 0;
	pt->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_ACQUIRE);
	pt->t = pl_py_host->thread();
	if (pt->t && pl_py_window_ctx && (pt->ctx = pl_py_window_ctx(pt->t)))
		coprof_ctx_switch(pt->t, pt->ctx); /* the window starts in a greenlet */
	if (pt->t)
		pl_py_sweep_ended(pt);
}

/* --- thread-local state (the sys.monitoring and frame-evaluation backends) -------- */

static pthread_key_t tls_key; /* -> struct pl_py_thread, freed when its thread exits */
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
__thread struct pl_py_thread *pl_py_tls_pt __attribute__((tls_model("initial-exec")));

static void tls_free(void *p)
{
	pl_py_tls_pt = NULL;
	pl_py_thread_free(p);
}

static void tls_init(void)
{
	tls_ok = pthread_key_create(&tls_key, tls_free) == 0;
}

int pl_py_tls_ready(void)
{
	(void)pthread_once(&tls_once, tls_init);
	return tls_ok;
}

struct pl_py_thread *pl_py_tls_new(void)
{
	struct pl_py_thread *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	if (pthread_setspecific(tls_key, pt) != 0) {
		free(pt);
		return NULL;
	}
	pl_py_tls_pt = pt;
	pt->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED) - 1;
	return pt;
}

/* --- the chain a thread runs --------------------------------------------------------- */

void pl_py_chain_save(struct pl_py_thread *pt, struct pl_py_chain *c)
{
	c->root = pt->root;
	c->root_code = pt->root_code;
	c->ctx = pt->ctx;
	c->adopting = pt->adopting;
	c->drivers = pt->drivers;
	c->ndrivers = pt->ndrivers;
	c->cap = pt->cap;
	c->lost = pt->lost;
	c->gen = pt->gen;
	pt->drivers = NULL;
	pt->ndrivers = pt->cap = pt->lost = 0;
	pt->root = pt->root_code = pt->adopting = NULL;
	pt->ctx = NULL;
}

void pl_py_chain_load(struct pl_py_thread *pt, struct pl_py_chain *c)
{
	free(pt->drivers);
	pt->drivers = c->drivers;
	pt->cap = c->cap;
	c->drivers = NULL;
	c->cap = 0;
	if (c->gen == pt->gen) {
		pt->root = c->root;
		pt->root_code = c->root_code;
		pt->ctx = c->ctx;
		pt->adopting = c->adopting;
		pt->ndrivers = c->ndrivers;
		pt->lost = c->lost;
	} else { /* saved in an earlier window: the tasks it ran are adopted afresh */
		pt->root = pt->root_code = NULL;
		pt->ctx = c->base;
		pt->adopting = NULL;
		pt->ndrivers = 0;
		pt->lost = 0;
	}
}

void pl_py_chain_swap(struct pl_py_thread *pt, struct pl_py_chain *out, struct pl_py_chain *in)
{
	free(out->drivers); /* none: it was moved into pt when `out` last ran */
	pl_py_chain_save(pt, out);
	pt->pushed = NULL;
	pt->yielded_to = NULL;
	pt->root_fr = NULL;
	pl_py_chain_load(pt, in);
	coprof_ctx_switch(pt->t, pt->ctx);
}
