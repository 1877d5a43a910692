/* test-accounting.c: DESIGN rules 1, 2, 6, 7 and 10 on one thread, to the nanosecond,
 * with the fake clock: nesting, recursion, generators, unmatched and longjmp leaves,
 * frames open at stop or dump, and caller edges with the same four numbers. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "helpers.h"

static void setup_wall(void)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
}

TestSuite(engine, .init = setup_wall, .fini = fx_fini);

Test(engine, nesting_splits_own_and_cumulative_time)
{
	at(0), enter("main");
	at(10), enter("a");
	at(15), enter("b");
	at(25), leave("b");
	at(30), enter("b");
	at(32), leave("b");
	at(40), leave("a");
	at(50), leave("main");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	cr_assert_eq(s->nfuncs, 3);
	fx_expect(s, "main", 1, 1, 20, 50);
	fx_expect(s, "a", 1, 1, 18, 30);
	fx_expect(s, "b", 2, 2, 12, 12);
	fx_expect_edge(s, "main", "a", 1, 1, 18, 30);
	fx_expect_edge(s, "a", "b", 2, 2, 12, 12);
	cr_expect_eq(fx_func(s, "main")->ncallers, 0, "a root has no caller");
}

Test(engine, recursion_counts_ct_once)
{
	at(0), enter("f");
	at(10), enter("f");
	at(20), enter("f");
	at(30), leave("f");
	at(40), leave("f");
	at(50), leave("f");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "f", 1, 3, 50, 50);
	/* The edge f->f: two calls, the first primitive; ct from its outermost activation. */
	fx_expect_edge(s, "f", "f", 1, 2, 30, 30);
}

Test(engine, mutual_recursion_counts_primitive_calls_per_function_and_edge)
{
	at(0), enter("a");
	at(10), enter("b");
	at(20), enter("a");
	at(30), enter("b");
	at(40), leave("b");
	at(50), leave("a");
	at(60), leave("b");
	at(70), leave("a");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "a", 1, 2, 40, 70);
	fx_expect(s, "b", 1, 2, 30, 50);
	fx_expect_edge(s, "a", "b", 1, 2, 30, 50);
	fx_expect_edge(s, "b", "a", 1, 1, 20, 30);
}

Test(engine, generator_counts_one_call_and_sums_its_segments)
{
	at(0), enter("main");
	at(10), enter("gen");
	at(12), leave("gen"); /* yields */
	at(20), coprof_resume(f.t, K("gen"));
	at(23), leave("gen");
	at(30), coprof_resume(f.t, K("gen"));
	at(34), leave("gen"); /* returns */
	at(40), leave("main");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "gen", 1, 1, 9, 9);
	fx_expect(s, "main", 1, 1, 31, 40);
	fx_expect_edge(s, "main", "gen", 1, 1, 9, 9);
}

Test(engine, again_events_take_the_previous_events_instant)
{
	at(0), enter("main");
	at(10), enter("outer");
	at(11), enter("inner");
	at(15), leave("inner");			     /* yields */
	at(99), coprof_leave_again(f.t, K("outer")); /* passes it up: at 15 */
	at(20), coprof_resume(f.t, K("outer"));
	at(99), coprof_resume_again(f.t, K("inner")); /* resumed by outer: at 20 */
	at(30), leave("inner");
	at(99), coprof_leave_again(f.t, K("outer")); /* at 30 */
	at(40), leave("main");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "inner", 1, 1, 14, 14);
	fx_expect(s, "outer", 1, 1, 1, 15);
	fx_expect(s, "main", 1, 1, 25, 40);
	fx_expect_edge(s, "outer", "inner", 1, 1, 14, 14);
}

Test(engine, an_again_event_that_opens_a_window_reads_the_clock)
{
	at(0), enter("main");
	at(10), enter("a");
	at(25), coprof_stop(f.p);
	at(40), coprof_start(f.p);
	at(50), coprof_resume_again(f.t, K("b")); /* the previous reading (25) is stale */
	at(65), leave("b");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "b", 0, 0, 15, 15);
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 40);
}

Test(engine, unmatched_leaves_are_ignored)
{
	at(0), leave("x"); /* profiling began mid-stack */
	at(10), enter("main");
	at(15), leave("y"); /* not on the stack */
	at(20), enter("a");
	at(30), leave("a");
	at(40), leave("main");
	at(50), leave("main"); /* nothing left */
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	cr_assert_eq(s->nfuncs, 2);
	fx_expect(s, "main", 1, 1, 20, 30);
	fx_expect(s, "a", 1, 1, 10, 10);
	cr_expect_null(fx_func(s, "x"));
	cr_expect_null(fx_func(s, "y"));
}

Test(engine, leave_of_a_deeper_key_closes_the_frames_above_it)
{
	at(0), enter("main");
	at(10), enter("a");
	at(20), enter("b");
	at(30), enter("c");
	at(40), leave("a"); /* a longjmp out of b and c */
	at(50), leave("main");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "c", 1, 1, 10, 10);
	fx_expect(s, "b", 1, 1, 10, 20);
	fx_expect(s, "a", 1, 1, 10, 30);
	fx_expect(s, "main", 1, 1, 20, 50);
	fx_expect_edge(s, "b", "c", 1, 1, 10, 10);
}

Test(engine, frames_open_at_stop_are_closed_and_counted)
{
	at(0), enter("main");
	at(10), enter("a");
	at(25), coprof_stop(f.p);
	cr_assert_not(coprof_is_running(f.p));
	at(30), leave("a"); /* stopped: ignored */
	at(40), coprof_start(f.p);
	at(50), leave("a"); /* its frame was closed at stop: ignored */
	at(60), enter("b");
	at(65), leave("b");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "main", 1, 1, 10, 25);
	fx_expect(s, "a", 1, 1, 15, 15);
	fx_expect(s, "b", 1, 1, 5, 5);
	/* Profiled time: 0..25, then from the first event after the restart, 50..65. */
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 40);
}

Test(engine, dump_while_running_closes_open_frames_in_the_copy_only)
{
	at(0), enter("main");
	at(10), enter("f");
	at(12), enter("f");
	at(15), fx_snap(&f);
	fx_expect(&f.prof->stats, "main", 1, 1, 10, 15);
	fx_expect(&f.prof->stats, "f", 1, 2, 5, 5);
	fx_expect_edge(&f.prof->stats, "f", "f", 1, 1, 3, 3);
	cr_expect(coprof_is_running(f.p));
	at(20), leave("f");
	at(22), leave("f");
	at(30), leave("main");
	fx_snap(&f);
	fx_expect(&f.prof->stats, "main", 1, 1, 18, 30);
	fx_expect(&f.prof->stats, "f", 1, 2, 12, 12);
	fx_expect_edge(&f.prof->stats, "f", "f", 1, 1, 8, 8);
}

Test(engine, snapshot_of_a_stopped_profiler_is_stable)
{
	at(0), enter("main");
	at(10), coprof_stop(f.p);
	at(100), fx_snap(&f);
	fx_expect(&f.prof->stats, "main", 1, 1, 10, 10);
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 10);
	cr_expect_str_eq(f.prof->ex.clock, "wall");
	cr_expect_eq(f.prof->ex.version, CP_FORMAT_VERSION);
	cr_expect_gt(f.prof->ex.stop, 0);
}

/* Rule 10: under cpu the own times of all functions on a thread add up to the CPU time
 * profiled on it, minus the time spent outside any frame, whatever the workload. */
Test(engine, cpu_own_times_sum_to_thread_time)
{
	fx_teardown(&f);
	fx_setup(&f, COPROF_CLOCK_CPU);
	enum { NCTX = 4, STEPS = 20000 };
	struct coprof_ctx *ctx[NCTX] = {NULL};
	for (int i = 1; i < NCTX; i++)
		cr_assert_eq(coprof_ctx_create(f.t, (uint64_t)i, "co", "test", &ctx[i]), 0);
	const char *fn[] = {"f0", "f1", "f2", "f3", "f4", "f5"};
	int depth[NCTX] = {0}, stack[NCTX][64], cur = 0;
	uint64_t outside = 0;
	srand(7);
	at(1000);
	coprof_enter(f.t, K("f0")); /* the first event starts the thread's run */
	stack[0][depth[0]++] = 0;
	for (int i = 0; i < STEPS; i++) {
		uint64_t dt = (uint64_t)(rand() % 50);
		if (depth[cur] == 0)
			outside += dt;
		at(fk_now + dt);
		int r = rand() % 10;
		if (r < 4 && depth[cur] < 60) {
			int k = rand() % 6;
			coprof_enter(f.t, K(fn[k]));
			stack[cur][depth[cur]++] = k;
		} else if (r < 8 && depth[cur] > 0) {
			coprof_leave(f.t, K(fn[stack[cur][--depth[cur]]]));
		} else {
			cur = rand() % NCTX;
			coprof_ctx_switch(f.t, ctx[cur]);
		}
	}
	at(fk_now + 5);
	if (depth[cur] == 0)
		outside += 5;
	fx_snap(&f);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < f.prof->stats.nfuncs; i++)
		sum += fx_ns(f.prof->stats.funcs[i].s.tt);
	uint64_t profiled = fx_ns(f.prof->ex.threads[0].ttot);
	cr_expect_eq(profiled, fk_now - 1000);
	/* Each tt went through a double: allow a rounding error per function. */
	int64_t diff = (int64_t)sum - (int64_t)(profiled - outside);
	cr_expect(diff >= -(int64_t)f.prof->stats.nfuncs && diff <= (int64_t)f.prof->stats.nfuncs,
		  "sum of tt %lu, profiled %lu, outside frames %lu", sum, profiled, outside);
}

Test(engine, a_caller_alternating_between_callees_keeps_each_edge_apart)
{
	const char *callee[] = {"g0", "g1", "g2", "g3", "g4"};
	at(0), enter("main");
	for (int i = 0; i < 1000; i++) {
		enter(callee[i % 5]);
		at(fk_now + 1 + (uint64_t)(i % 5));
		leave(callee[i % 5]);
	}
	enter("g0"); /* g0 -> g1, an edge of its own */
	enter("g1");
	at(fk_now + 7), leave("g1");
	leave("g0");
	leave("main");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	for (int k = 1; k < 5; k++)
		fx_expect_edge(s, "main", callee[k], 200, 200, 200 * (uint64_t)(k + 1),
			       200 * (uint64_t)(k + 1));
	fx_expect_edge(s, "main", "g0", 201, 201, 200, 207);
	fx_expect_edge(s, "g0", "g1", 1, 1, 7, 7);
	fx_expect(s, "g1", 201, 201, 407, 407);
}
