/* test-ready.c: each task's run on both clocks and the time it sat ready (doc/design.md
 * rule 12), and the tasks ready behind a stall. Fake clock (it stands for both
 * clocks), to the nanosecond. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "helpers.h"

#define MS 1000000ull

TestSuite(ready, .fini = fx_fini);

static struct coprof_ctx *task(uint64_t id, const char *name)
{
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, id, name, "asyncio", &c), 0);
	return c;
}

static void expect_times(uint64_t id, uint64_t run, uint64_t ready, uint64_t ready_max,
			 uint64_t waiting)
{
	const struct cp_task *k = fx_task(f.prof, id);
	cr_assert(k && k->timed, "task %llu timed", (unsigned long long)id);
	cr_expect_eq(fx_ns(k->run_cpu), run, "task %s run_cpu %llu", k->name,
		     (unsigned long long)fx_ns(k->run_cpu));
	cr_expect_eq(fx_ns(k->run_wall), run, "task %s run_wall %llu", k->name,
		     (unsigned long long)fx_ns(k->run_wall));
	cr_expect_eq(fx_ns(k->ready), ready, "task %s ready %llu", k->name,
		     (unsigned long long)fx_ns(k->ready));
	cr_expect_eq(fx_ns(k->ready_max), ready_max, "task %s ready_max %llu", k->name,
		     (unsigned long long)fx_ns(k->ready_max));
	cr_expect_eq(fx_ns(k->waiting), waiting, "task %s waiting %llu", k->name,
		     (unsigned long long)fx_ns(k->waiting));
}

/* The seeds' signature: one task blocks the loop 51 ms; two timers fell due during
 * it (at 10 and 30 ms) and their tasks are made ready after it, as asyncio runs the
 * timers then; a third is made ready later, not behind it. */
static void blocked_loop(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *a = task(1, "decode"), *b = task(2, "req-b"), *c = task(3, "req-c"),
			  *d = task(4, "req-d");
	at(0), coprof_ctx_ready(f.t, a, 0);
	at(2 * MS), coprof_ctx_switch(f.t, a), enter("decode");
	at(53 * MS), coprof_ctx_switch(f.t, NULL);
	at(54 * MS), coprof_ctx_ready(f.t, b, 10 * MS), coprof_ctx_ready(f.t, c, 30 * MS);
	coprof_ctx_ready(f.t, d, 90 * MS); /* later than now: now */
	coprof_ctx_ready(f.t, c, 20 * MS); /* ready already: keeps 30 */
	at(55 * MS), coprof_ctx_switch(f.t, b), enter("handle");
	at(57 * MS), leave("handle"), coprof_ctx_finish(f.t, b);
	at(58 * MS), coprof_ctx_switch(f.t, c), enter("handle");
	at(59 * MS), coprof_ctx_switch(f.t, NULL);
	at(60 * MS), coprof_ctx_switch(f.t, d), coprof_ctx_switch(f.t, NULL);
	at(70 * MS), coprof_ctx_ready(f.t, c, 0); /* a second, shorter interval: 4 ms */
	at(74 * MS), coprof_ctx_switch(f.t, c);
	at(75 * MS), coprof_ctx_switch(f.t, NULL);
	at(100 * MS), fx_snap(&f);
	/* a: life 0-100 (ready from 0), run 51, ready 2. b: life 10-57, finished. */
	expect_times(1, 51 * MS, 2 * MS, 2 * MS, 47 * MS);
	expect_times(2, 2 * MS, 45 * MS, 45 * MS, 0);
	expect_times(3, 2 * MS, 32 * MS, 28 * MS, 36 * MS);
	expect_times(4, 0, 6 * MS, 6 * MS, 40 * MS);
	cr_assert_eq(f.prof->ex.nstalls, 1);
	cr_expect_eq(f.prof->ex.stalls[0].task_id, 1);
	cr_expect_eq(f.prof->ex.stalls[0].behind, 2);
}

Test(ready, wall_blocked_loop)
{
	blocked_loop(COPROF_CLOCK_WALL);
}

Test(ready, cpu_blocked_loop)
{
	blocked_loop(COPROF_CLOCK_CPU);
}

/* Tasks ready when the stall ends count behind it; a later, shorter stall that is
 * kept takes the count of what is made ready after it. */
Test(ready, behind_at_the_end_and_after)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "a"), *b = task(2, "b"), *c = task(3, "c");
	at(0), coprof_ctx_switch(f.t, a);
	at(1 * MS), coprof_ctx_ready(f.t, b, 0), coprof_ctx_ready(f.t, c, 0);
	at(40 * MS), coprof_ctx_switch(f.t, NULL); /* 40 ms, b and c ready: 2 behind */
	at(41 * MS), coprof_ctx_switch(f.t, b);
	at(66 * MS), coprof_ctx_switch(f.t, NULL); /* 25 ms, c still ready: 1 behind */
	at(67 * MS), coprof_ctx_ready(f.t, a, 50 * MS); /* due during b's stall */
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.nstalls, 2);
	cr_expect_eq(fx_ns(f.prof->ex.stalls[0].seconds), 40 * MS);
	cr_expect_eq(f.prof->ex.stalls[0].behind, 2);
	cr_expect_eq(fx_ns(f.prof->ex.stalls[1].seconds), 25 * MS);
	cr_expect_eq(f.prof->ex.stalls[1].behind, 2);
}

/* The running task, another thread's task or a finished one is never made ready; a
 * finished task that was ready leaves the count. A task is never ready before it
 * stopped. */
Test(ready, what_cannot_be_ready)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "a"), *b = task(2, "b");
	at(0), coprof_ctx_switch(f.t, a);
	at(1 * MS), coprof_ctx_ready(f.t, a, 0);
	at(5 * MS), coprof_ctx_switch(f.t, NULL);
	at(6 * MS), coprof_ctx_ready(f.t, a, 2 * MS); /* before it stopped: from 5 ms */
	coprof_ctx_ready(f.t, b, 0);
	cr_expect_eq(f.t->nready, 2);
	at(7 * MS), coprof_ctx_finish(f.t, b);
	cr_expect_eq(f.t->nready, 1);
	coprof_ctx_ready(f.t, b, 0);
	cr_expect_eq(f.t->nready, 1);
	at(9 * MS), coprof_ctx_switch(f.t, a), coprof_ctx_switch(f.t, NULL);
	cr_expect_eq(f.t->nready, 0);
	fx_snap(&f);
	expect_times(1, 5 * MS, 4 * MS, 4 * MS, 0);
	const struct cp_task *k = fx_task(f.prof, 2);
	cr_expect_eq(fx_ns(k->ready), 0);
}

/* A window begins while a task is ready: the new window counts its ready time from
 * the thread's first event in it, and the task's life from then. */
Test(ready, across_a_window_cut)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "a");
	at(0), coprof_ctx_switch(f.t, a);
	at(2 * MS), coprof_ctx_switch(f.t, NULL);
	at(3 * MS), coprof_ctx_ready(f.t, a, 0);
	at(10 * MS);
	cr_assert_eq(coprof_clear(f.p), 0);
	at(20 * MS), enter("tick"), leave("tick");
	at(26 * MS), coprof_ctx_switch(f.t, a);
	at(27 * MS), coprof_ctx_switch(f.t, NULL);
	at(30 * MS), fx_snap(&f);
	expect_times(1, 1 * MS, 6 * MS, 6 * MS, 3 * MS);
}

/* Sample mode knows no steps: its tasks carry no times. */
Test(ready, sample_mode_untimed)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	f.p->opt.mode = COPROF_MODE_SAMPLE;
	struct coprof_ctx *a = task(1, "a");
	at(0), coprof_ctx_switch(f.t, a), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	cr_expect_eq(fx_task(f.prof, 1)->timed, 0);
}
