/* test-threads.c: several threads hammer the engine (enter/leave, context switches and
 * finishes) with the real clocks while the main thread takes snapshots, stops, starts
 * and clears. Each snapshot must be consistent; the final counts must be exact. Run
 * under AddressSanitizer in CI. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "helpers.h"

enum { NTHREADS = 4, ITER = 100000 };

static struct coprof *prof;
static atomic_int ready, go;

/* One worker: outer calls inner twice; every 64th round runs inside a fresh coroutine. */
static void *worker(void *arg)
{
	(void)arg;
	struct coprof_thread *t;
	cr_assert_eq(coprof_thread_register(prof, "worker", &t), 0);
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		;
	for (uint64_t i = 0; i < ITER; i++) {
		struct coprof_ctx *c = NULL;
		if (i % 64 == 0) {
			cr_assert_eq(coprof_ctx_create(t, i + 1, "co", "test", &c), 0);
			coprof_ctx_switch(t, c);
		}
		coprof_enter(t, K("outer"));
		coprof_enter(t, K("inner"));
		coprof_leave(t, K("inner"));
		coprof_enter(t, K("inner"));
		coprof_leave(t, K("inner"));
		coprof_leave(t, K("outer"));
		if (c)
			coprof_ctx_finish(t, c);
	}
	coprof_thread_exit(t);
	return NULL;
}

static void start_workers(pthread_t *th, enum coprof_clock clock, int fence)
{
	struct coprof_options o = {.clock = clock};
	cr_assert_eq(coprof_create(&o, &prof), 0);
	if (fence)
		prof->fence = 1; /* as without membarrier(2): writers pay a full fence */
	K("outer"), K("inner");
	cr_assert_eq(coprof_add_resolver(prof, fx_resolve, NULL), 0);
	cr_assert_eq(coprof_start(prof), 0);
	atomic_store(&ready, 0);
	atomic_store(&go, 0);
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, worker, NULL), 0);
	while (atomic_load(&ready) < NTHREADS)
		;
	atomic_store(&go, 1);
}

static uint64_t nc_of(struct cp_profile *p, const char *name)
{
	const struct cp_func *fn = fx_func(&p->stats, name);
	return fn ? fn->s.nc : 0;
}

/* Everything a consistent snapshot must satisfy, whenever it was taken. */
static void check_consistent(struct cp_profile *p)
{
	uint64_t outer = nc_of(p, "outer"), inner = nc_of(p, "inner");
	cr_assert_leq(inner, 2 * outer);
	cr_assert_geq(inner + 2 * NTHREADS, 2 * outer, "inner %lu outer %lu", inner, outer);
	const struct cp_func *fi = fx_func(&p->stats, "inner");
	if (fi) {
		cr_assert_eq(fi->ncallers, 1);
		cr_assert_eq(fi->callers[0].s.nc, fi->s.nc, "edge and function agree");
		cr_assert_geq(fi->s.ct, fi->s.tt);
	}
	const struct cp_func *fo = fx_func(&p->stats, "outer");
	if (fo && fi)
		cr_assert_geq(fo->s.ct * (1 + 1e-9), fi->s.ct);
}

static void hammer(enum coprof_clock clock, int fence)
{
	pthread_t th[NTHREADS];
	start_workers(th, clock, fence);
	uint64_t last = 0;
	for (int round = 0; round < 25; round++) {
		struct cp_profile *p;
		cr_assert_eq(cp_snapshot(prof, &p), 0);
		check_consistent(p);
		uint64_t outer = nc_of(p, "outer");
		cr_assert_geq(outer, last, "counts never go back");
		last = outer;
		cp_profile_free(p);
		sched_yield();
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	struct cp_profile *p;
	cr_assert_eq(cp_snapshot(prof, &p), 0);
	cr_expect_eq(nc_of(p, "outer"), (uint64_t)NTHREADS * ITER);
	cr_expect_eq(nc_of(p, "inner"), (uint64_t)2 * NTHREADS * ITER);
	cr_expect_eq(p->ex.nthreads, NTHREADS);
	cr_expect_eq(p->ex.ntasks, NTHREADS * ((ITER + 63) / 64));
	uint64_t switches = 0;
	for (uint32_t i = 0; i < p->ex.nthreads; i++)
		switches += p->ex.threads[i].switches;
	cr_expect_eq(switches, 2 * p->ex.ntasks);
	cp_profile_free(p);
	coprof_destroy(prof);
}

Test(threads, dumps_are_consistent_while_threads_hammer_wall)
{
	hammer(COPROF_CLOCK_WALL, 0);
}

Test(threads, dumps_are_consistent_while_threads_hammer_cpu)
{
	hammer(COPROF_CLOCK_CPU, 0);
}

Test(threads, dumps_are_consistent_without_membarrier)
{
	hammer(COPROF_CLOCK_WALL, 1);
}

Test(threads, stop_start_and_clear_while_threads_hammer)
{
	pthread_t th[NTHREADS];
	start_workers(th, COPROF_CLOCK_WALL, 0);
	for (int round = 0; round < 30; round++) {
		cr_assert_eq(coprof_stop(prof), 0);
		struct cp_profile *p;
		cr_assert_eq(cp_snapshot(prof, &p), 0);
		uint64_t outer = nc_of(p, "outer"), inner = nc_of(p, "inner");
		cr_assert_leq(inner, 2 * outer + 2 * NTHREADS);
		cp_profile_free(p);
		cr_assert_eq(coprof_start(prof), 0);
		if (round % 5 == 4)
			cr_assert_eq(coprof_clear(prof), 0);
		sched_yield();
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(coprof_stop(prof), 0);
	struct cp_profile *p;
	cr_assert_eq(cp_snapshot(prof, &p), 0);
	/* Stopped, so no frame is open: every recorded outer has its inners (or was cut
	 * by a stop or a clear, a few per thread and round at most). */
	cr_expect_leq(nc_of(p, "inner"), 2 * nc_of(p, "outer") + 2 * NTHREADS * 30);
	cp_profile_free(p);
	coprof_destroy(prof);
}

static void *self_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++) {
		struct coprof_thread *t = coprof_thread_self();
		cr_assert_not_null(t);
		coprof_enter(t, K("outer"));
		coprof_task_switch((uint64_t)i + 1, "task");
		coprof_enter(t, K("inner"));
		coprof_leave(t, K("inner"));
		coprof_task_finish((uint64_t)i + 1);
		coprof_leave(t, K("outer"));
	}
	return NULL;
}

Test(threads, each_thread_registers_itself_through_the_default_profiler)
{
	struct coprof_options o = {.clock = COPROF_CLOCK_CPU};
	cr_assert_eq(coprof_create(&o, &prof), 0);
	K("outer"), K("inner");
	cr_assert_eq(coprof_add_resolver(prof, fx_resolve, NULL), 0);
	coprof_set_default(prof);
	cr_assert_eq(coprof_start(prof), 0);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, self_worker, NULL), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	struct cp_profile *p;
	cr_assert_eq(cp_snapshot(prof, &p), 0);
	cr_expect_eq(p->ex.nthreads, NTHREADS);
	cr_expect_eq(p->ex.ntasks, NTHREADS * 1000);
	cr_expect_eq(nc_of(p, "inner"), NTHREADS * 1000);
	const struct cp_func *fi = fx_func(&p->stats, "inner");
	cr_expect_eq(fi->ncallers, 0, "inner runs in each task: a root there");
	cp_profile_free(p);
	coprof_set_default(NULL);
	coprof_stop(prof);
	coprof_destroy(prof);
}
