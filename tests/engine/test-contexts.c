/* test-contexts.c: contexts and their virtual clocks (DESIGN rules 3, 4, 5, 8, 9), with
 * the fake clock: the worked example number for number under both clocks, coroutines
 * interleaved, the task and thread tables, the task-id API and the folding of old
 * finished contexts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

TestSuite(contexts, .fini = fx_fini);

/* DESIGN "Worked example", event for event. */
static void worked_example(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *a, *b;
	cr_assert_eq(coprof_ctx_create(f.t, 0xA, "A", "ucontext", &a), 0);
	cr_assert_eq(coprof_ctx_create(f.t, 0xB, "B", "ucontext", &b), 0);
	at(0), enter("main");
	at(10), coprof_ctx_switch(f.t, a);
	enter("a_root"), enter("a_work");
	at(40), leave("a_work"), enter("a_yield");
	coprof_ctx_switch(f.t, NULL);
	at(50), coprof_ctx_switch(f.t, b);
	enter("b_root"), enter("b_work");
	at(70), leave("b_work"), leave("b_root");
	coprof_ctx_finish(f.t, b);
	cr_assert_null(coprof_ctx_current(f.t),
		       "finishing the running context returns to the thread's own");
	at(80), coprof_ctx_switch(f.t, a);
	cr_assert_eq(coprof_ctx_current(f.t), a);
	leave("a_yield");
	at(90), leave("a_root");
	coprof_ctx_finish(f.t, a);
	at(100), leave("main");
	coprof_stop(f.p);
	fx_snap(&f);
}

Test(contexts, worked_example_under_wall)
{
	worked_example(COPROF_CLOCK_WALL);
	struct cp_stats *s = &f.prof->stats;
	cr_assert_eq(s->nfuncs, 6);
	fx_expect(s, "main", 1, 1, 40, 100);
	fx_expect(s, "a_root", 1, 1, 10, 80);
	fx_expect(s, "a_work", 1, 1, 30, 30);
	fx_expect(s, "a_yield", 1, 1, 40, 40);
	fx_expect(s, "b_root", 1, 1, 0, 20);
	fx_expect(s, "b_work", 1, 1, 20, 20);
	cr_expect_eq(fx_func(s, "a_root")->ncallers, 0, "a task's root is a root (rule 8)");
	cr_expect_eq(fx_func(s, "b_root")->ncallers, 0);
	const struct cp_task *ta = fx_task(f.prof, 0xA), *tb = fx_task(f.prof, 0xB);
	cr_assert(ta && tb);
	cr_expect_eq(fx_ns(ta->ttot), 80);
	cr_expect_eq(ta->resumes, 2);
	cr_expect_eq(fx_ns(tb->ttot), 20);
	cr_expect_eq(tb->resumes, 1);
	cr_expect_str_eq(ta->state, "finished");
	cr_expect_str_eq(ta->name, "A");
	cr_expect_str_eq(ta->runtime, "ucontext");
	cr_expect_eq(ta->thread, f.prof->ex.threads[0].tid);
	fx_expect(&ta->stats, "a_yield", 1, 1, 40, 40);
	cr_expect_null(fx_func(&ta->stats, "main"), "a task's table has only its own functions");
	fx_expect(&tb->stats, "b_work", 1, 1, 20, 20);
	cr_expect_eq(f.prof->ex.nthreads, 1);
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 100);
	cr_expect_eq(f.prof->ex.threads[0].switches, 6);
	cr_expect_str_eq(f.prof->ex.threads[0].name, "main");
}

Test(contexts, worked_example_under_cpu)
{
	worked_example(COPROF_CLOCK_CPU);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "main", 1, 1, 40, 40);
	fx_expect(s, "a_root", 1, 1, 10, 40);
	fx_expect(s, "a_work", 1, 1, 30, 30);
	fx_expect(s, "a_yield", 1, 1, 0, 0);
	fx_expect(s, "b_root", 1, 1, 0, 20);
	fx_expect(s, "b_work", 1, 1, 20, 20);
	const struct cp_task *ta = fx_task(f.prof, 0xA), *tb = fx_task(f.prof, 0xB);
	cr_expect_eq(fx_ns(ta->ttot), 40);
	cr_expect_eq(ta->resumes, 2);
	cr_expect_eq(fx_ns(tb->ttot), 20);
	cr_expect_eq(tb->resumes, 1);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < s->nfuncs; i++)
		sum += fx_ns(s->funcs[i].s.tt);
	cr_expect_eq(sum, 100, "the tt column sums to the thread's CPU time");
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 100);
	cr_expect_str_eq(f.prof->ex.clock, "cpu");
}

/* Two coroutines on one thread, switching to each other directly and through the
 * driver, with work open across the switches. */
static void interleaved(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *c1, *c2;
	cr_assert_eq(coprof_ctx_create(f.t, 1, "c1", "asyncio", &c1), 0);
	cr_assert_eq(coprof_ctx_create(f.t, 2, "c2", "asyncio", &c2), 0);
	at(0), enter("sched");
	at(10), coprof_ctx_switch(f.t, c1), enter("c1"), enter("work1");
	at(30), coprof_ctx_switch(f.t, c2), enter("c2"), enter("work2");
	at(50), coprof_ctx_switch(f.t, c1);
	at(60), leave("work1"), coprof_ctx_switch(f.t, c2);
	at(70), leave("work2"), leave("c2"), coprof_ctx_finish(f.t, c2);
	at(75), coprof_ctx_switch(f.t, c1);
	at(80), leave("c1"), coprof_ctx_finish(f.t, c1);
	at(100), leave("sched");
	fx_snap(&f);
}

Test(contexts, coroutines_under_cpu_are_never_charged_for_each_other)
{
	interleaved(COPROF_CLOCK_CPU);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "work1", 1, 1, 30, 30);
	fx_expect(s, "c1", 1, 1, 5, 35);
	fx_expect(s, "work2", 1, 1, 30, 30);
	fx_expect(s, "c2", 1, 1, 0, 30);
	fx_expect(s, "sched", 1, 1, 35, 35);
	fx_expect_edge(s, "c1", "work1", 1, 1, 30, 30);
	cr_expect_eq(fx_ns(fx_task(f.prof, 1)->ttot), 35);
	cr_expect_eq(fx_task(f.prof, 1)->resumes, 3);
	cr_expect_eq(fx_ns(fx_task(f.prof, 2)->ttot), 30);
	cr_expect_eq(fx_task(f.prof, 2)->resumes, 2);
}

Test(contexts, suspended_time_under_wall_lands_in_the_innermost_frame)
{
	interleaved(COPROF_CLOCK_WALL);
	struct cp_stats *s = &f.prof->stats;
	/* c1 waits 30..50 inside work1, then 60..75 inside c1 itself. */
	fx_expect(s, "work1", 1, 1, 50, 50);
	fx_expect(s, "c1", 1, 1, 20, 70);
	fx_expect(s, "work2", 1, 1, 40, 40);
	fx_expect(s, "c2", 1, 1, 0, 40);
	/* The driver's time away (10..70, 75..80) is its frame's children (rule 9). */
	fx_expect(s, "sched", 1, 1, 35, 100);
	fx_expect_edge(s, "c2", "work2", 1, 1, 40, 40);
	cr_expect_eq(fx_ns(fx_task(f.prof, 1)->ttot), 70);
	cr_expect_eq(fx_ns(fx_task(f.prof, 2)->ttot), 40);
}

Test(contexts, resuming_is_not_a_call)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 7, "loop", "ucontext", &c), 0);
	at(0), coprof_ctx_switch(f.t, c), enter("loop");
	for (uint64_t i = 1; i <= 5; i++) {
		at(i * 10), coprof_ctx_switch(f.t, NULL);
		at(i * 10 + 5), coprof_ctx_switch(f.t, c);
	}
	at(60), leave("loop");
	fx_snap(&f);
	fx_expect(&f.prof->stats, "loop", 1, 1, 60, 60);
	cr_expect_eq(fx_task(f.prof, 7)->resumes, 6);
	cr_expect_str_eq(fx_task(f.prof, 7)->state, "running");
}

Test(contexts, open_frames_of_a_waiting_coroutine_are_closed_at_dump)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 3, "w", "asyncio", &c), 0);
	at(0), enter("main");
	at(10), coprof_ctx_switch(f.t, c), enter("w_root"), enter("w_wait");
	at(20), coprof_ctx_switch(f.t, NULL);
	at(50), fx_snap(&f);
	fx_expect(&f.prof->stats, "w_wait", 1, 1, 40, 40);
	fx_expect(&f.prof->stats, "w_root", 1, 1, 0, 40);
	fx_expect(&f.prof->stats, "main", 1, 1, 40, 50);
	cr_expect_str_eq(fx_task(f.prof, 3)->state, "suspended");
	cr_expect_eq(fx_ns(fx_task(f.prof, 3)->ttot), 40);
	fx_teardown(&f);

	fx_setup(&f, COPROF_CLOCK_CPU);
	cr_assert_eq(coprof_ctx_create(f.t, 3, "w", "asyncio", &c), 0);
	at(0), enter("main");
	at(10), coprof_ctx_switch(f.t, c), enter("w_root"), enter("w_wait");
	at(20), coprof_ctx_switch(f.t, NULL);
	at(50), fx_snap(&f);
	fx_expect(&f.prof->stats, "w_wait", 1, 1, 10, 10);
	fx_expect(&f.prof->stats, "main", 1, 1, 40, 40);
	cr_expect_eq(fx_ns(fx_task(f.prof, 3)->ttot), 10);
}

Test(contexts, finishing_a_waiting_coroutine_closes_its_frames)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 3, "w", "asyncio", &c), 0);
	at(0), coprof_ctx_switch(f.t, c), enter("w");
	at(10), coprof_ctx_switch(f.t, NULL);
	at(30), coprof_ctx_finish(f.t, c); /* cancelled while waiting */
	coprof_ctx_switch(f.t, c);	   /* a finished context never runs again */
	cr_expect_null(coprof_ctx_current(f.t));
	at(40), fx_snap(&f);
	fx_expect(&f.prof->stats, "w", 1, 1, 10, 10);
	cr_expect_str_eq(fx_task(f.prof, 3)->state, "finished");
}

Test(contexts, switch_to_another_threads_context_is_ignored)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_thread *t2;
	struct coprof_ctx *c;
	cr_assert_eq(coprof_thread_register(f.p, "other", &t2), 0);
	cr_assert_eq(coprof_ctx_create(t2, 9, "x", "ucontext", &c), 0);
	at(0), enter("main");
	coprof_ctx_switch(f.t, c);
	cr_expect_null(coprof_ctx_current(f.t));
	at(10), leave("main");
	fx_snap(&f);
	fx_expect(&f.prof->stats, "main", 1, 1, 10, 10);
	cr_assert_eq(f.prof->ex.ndropped, 1);
	cr_expect_eq(f.prof->ex.dropped[0].n, 1);
}

Test(contexts, task_ids_switch_through_the_default_profiler)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	cr_expect_eq(coprof_task_switch(5, "t5"), 0, "a no-op without a default profiler");
	coprof_set_default(f.p);
	cr_assert_eq(coprof_default(), f.p);
	struct coprof_thread *self = coprof_thread_self();
	cr_assert_not_null(self);
	cr_expect_eq(coprof_thread_self(), self, "cached");
	at(0), coprof_enter(self, K("main"));
	at(10);
	cr_assert_eq(coprof_task_switch(5, "t5"), 0);
	coprof_enter(self, K("t5_root"));
	at(20);
	cr_assert_eq(coprof_task_switch(0, NULL), 0);
	at(30);
	cr_assert_eq(coprof_task_switch(5, "ignored"), 0);
	at(35), coprof_leave(self, K("t5_root"));
	cr_assert_eq(coprof_task_finish(5), 0);
	cr_expect_eq(coprof_task_finish(5), COPROF_ENOTASK);
	at(40);
	cr_assert_eq(coprof_task_switch(5, "t5 again"), 0, "an id reused after finish");
	cr_assert_eq(coprof_task_switch(0, NULL), 0);
	at(50), coprof_leave(self, K("main"));
	fx_snap(&f);
	fx_expect(&f.prof->stats, "t5_root", 1, 1, 25, 25);
	cr_assert_eq(f.prof->ex.ntasks, 2);
	cr_expect_str_eq(f.prof->ex.tasks[0].name, "t5");
	cr_expect_str_eq(f.prof->ex.tasks[0].state, "finished");
	cr_expect_eq(f.prof->ex.tasks[0].resumes, 2);
	cr_expect_str_eq(f.prof->ex.tasks[1].name, "t5 again");
	cr_expect_str_eq(f.prof->ex.tasks[1].state, "suspended");
	cr_expect_str_eq(f.prof->ex.tasks[0].runtime, "task");
	coprof_set_default(NULL);
	cr_expect_null(coprof_thread_self());
}

Test(contexts, names_can_change)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 1, NULL, NULL, &c), 0);
	cr_assert_eq(coprof_ctx_set_name(c, "renamed"), 0);
	cr_assert_eq(coprof_thread_set_name(f.t, "worker"), 0);
	at(0), enter("x");
	fx_snap(&f);
	cr_expect_str_eq(f.prof->ex.tasks[0].name, "renamed");
	cr_expect_str_eq(f.prof->ex.tasks[0].runtime, "");
	cr_expect_str_eq(f.prof->ex.threads[0].name, "worker");
}

/* An asyncio server makes a task per request: only the newest finished tasks keep
 * their own rows and tables; older ones are folded into the totals, which stay exact,
 * and counted, so a million tasks write a bounded task table. */
Test(contexts, old_finished_contexts_are_folded_into_the_totals)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	enum { N = CP_KEEP_FINISHED + 100 };
	at(0), enter("server");
	for (uint64_t i = 0; i < N; i++) {
		struct coprof_ctx *c;
		cr_assert_eq(coprof_ctx_create(f.t, i + 1, "req", "asyncio", &c), 0);
		coprof_ctx_switch(f.t, c);
		enter("handle");
		at(fk_now + 2), enter(i % 2 ? "get" : "set");
		at(fk_now + 3), leave(i % 2 ? "get" : "set");
		leave("handle");
		coprof_ctx_finish(f.t, c);
		at(fk_now + 1);
	}
	leave("server");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "handle", N, N, 2 * N, 5 * N);
	fx_expect(s, "get", N / 2, N / 2, 3 * (N / 2), 3 * (N / 2));
	fx_expect_edge(s, "handle", "set", N / 2, N / 2, 3 * (N / 2), 3 * (N / 2));
	fx_expect(s, "server", 1, 1, N, N);
	cr_assert_eq(f.prof->ex.ntasks, CP_KEEP_FINISHED);
	cr_expect_eq(f.prof->ex.tasks[0].id, 101, "the oldest row kept");
	fx_expect(&f.prof->ex.tasks[0].stats, "handle", 1, 1, 2, 5);
	fx_expect(&f.prof->ex.tasks[CP_KEEP_FINISHED - 1].stats, "handle", 1, 1, 2, 5);
	cr_assert_eq(f.prof->ex.ndropped, 1);
	cr_expect_str_eq(f.prof->ex.dropped[0].name, "finished tasks past each thread's newest kept");
	cr_expect_eq(f.prof->ex.dropped[0].n, 100);
	int found = 0;
	for (uint32_t i = 0; i < f.prof->ex.nnotes; i++)
		found |= strstr(f.prof->ex.notes[i], "100 finished tasks") != NULL;
	cr_expect(found, "a note says how many tasks were folded");
}

/* While stopped, a switch only changes the running context; every context's clock
 * stays frozen from the stop until it runs again in a later recording run. */
Test(contexts, switches_while_stopped_freeze_the_clocks_until_the_next_run)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *a;
	cr_assert_eq(coprof_ctx_create(f.t, 0xA, "A", "ucontext", &a), 0);
	at(0), enter("main");
	at(10), coprof_ctx_switch(f.t, a), enter("a");
	at(20), coprof_stop(f.p);
	at(30), coprof_ctx_switch(f.t, NULL);
	cr_expect_null(coprof_ctx_current(f.t));
	at(40), coprof_start(f.p);
	at(50), enter("m2");
	at(60), leave("m2");
	at(70), coprof_ctx_switch(f.t, a), enter("a2");
	at(75), leave("a2");
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "main", 1, 1, 10, 10);
	fx_expect(s, "a", 1, 1, 10, 10);
	fx_expect(s, "m2", 1, 1, 10, 10);
	fx_expect(s, "a2", 1, 1, 5, 5);
	const struct cp_task *ta = fx_task(f.prof, 0xA);
	cr_expect_eq(fx_ns(ta->ttot), 15, "A ran 10..20 and 70..75");
	cr_expect_eq(ta->resumes, 2);
	cr_expect_str_eq(ta->state, "running");
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 45, "0..20, then 50..75");
}

/* The name `prefix` + i (i < 100), kept for the test's life: K() keeps the pointer. */
static const char *nth(const char *prefix, int i)
{
	static char names[26][100][8];
	char *n = names[(prefix[0] - 'a') % 26][i];
	if (!n[0])
		snprintf(n, 8, "%s%d", prefix, i);
	return n;
}

/* Events into the running context: 40 nested calls at ten-ns steps, back out to two
 * frames, a switch out and in at time `sw` (none when 0), 20 nested calls from the
 * second frame, all left (cp_ctx_stack_trim's shrinking and growing, on one task). */
static void deep_then_shallow(struct coprof_ctx *c, uint64_t base, uint64_t sw)
{
	for (int i = 0; i < 40; i++)
		at(base + 10 * i), enter(nth("f", i));
	for (int i = 39; i >= 2; i--)
		at(base + 1000 + 10 * (39 - i)), leave(nth("f", i));
	if (sw) {
		at(base + sw), coprof_ctx_switch(f.t, NULL);
		cr_expect_eq(c->depth, 2);
		cr_expect_eq(c->cap, 4, "the stack of a switched-out task fits its frames");
		coprof_ctx_switch(f.t, c);
	}
	for (int i = 0; i < 20; i++)
		at(base + 2000 + 10 * i), enter(nth("g", i));
	for (int i = 19; i >= 0; i--)
		at(base + 3000 + 10 * (19 - i)), leave(nth("g", i));
	at(base + 4000), leave("f1");
	at(base + 4010), leave("f0");
}

/* A task switched out two frames deep gives back the rest of its stack, and all of it
 * when it finishes; its numbers are those of the same calls with no switch. */
Test(contexts, a_switched_out_task_keeps_only_the_stack_its_frames_need)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *a, *b;
	cr_assert_eq(coprof_ctx_create(f.t, 0xA, "A", "asyncio", &a), 0);
	cr_assert_eq(coprof_ctx_create(f.t, 0xB, "B", "asyncio", &b), 0);
	at(0), coprof_ctx_switch(f.t, a);
	deep_then_shallow(a, 0, 1500);
	coprof_ctx_finish(f.t, a);
	cr_expect_null(a->frames, "a finished task holds no stack");
	cr_expect_eq(a->cap, 0);
	at(10000), coprof_ctx_switch(f.t, b);
	deep_then_shallow(b, 10000, 0);
	coprof_ctx_finish(f.t, b);
	fx_snap(&f);
	const struct cp_stats *sa = &fx_task(f.prof, 0xA)->stats,
			      *sb = &fx_task(f.prof, 0xB)->stats;
	cr_assert_eq(sa->nfuncs, 60);
	cr_assert_eq(sb->nfuncs, 60);
	for (uint32_t i = 0; i < sa->nfuncs; i++) {
		const struct cp_func *x = &sa->funcs[i], *y = fx_func(sb, x->key.name);
		cr_assert_not_null(y, "%s", x->key.name);
		cr_expect(x->s.nc == y->s.nc && x->s.cc == y->s.cc && x->s.tt == y->s.tt &&
			      x->s.ct == y->s.ct,
			  "%s as with no switch", x->key.name);
	}
	/* f1: 10 to 4000, less f2 (20 to 1370) and g0 (2000 to 3190, less g1: 2010 to 3180) */
	fx_expect(sa, "f1", 1, 1, 3990 - 1350 - 1190, 3990);
	fx_expect(sa, "g0", 1, 1, 1190 - 1170, 1190);
}

/* A snapshot closes open frames in its copy only: a recursion open at the snapshot is
 * counted once in it, and the frames' later leaves count as if no snapshot was taken. */
Test(contexts, a_snapshot_of_an_open_recursion_leaves_it_as_it_was)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	at(0), enter("r");
	at(10), enter("r");
	at(20), fx_snap(&f);
	fx_expect(&f.prof->stats, "r", 1, 2, 20, 20);
	at(30), leave("r");
	at(40), leave("r");
	fx_snap(&f);
	fx_expect(&f.prof->stats, "r", 1, 2, 40, 40);
	fx_expect_edge(&f.prof->stats, "r", "r", 1, 1, 20, 20);
}

/* A new asyncio task "t", switched in. */
static struct coprof_ctx *running_task(uint64_t id)
{
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, id, "t", "asyncio", &c), 0);
	coprof_ctx_switch(f.t, c);
	return c;
}

/* A task's tables fill to seven eighths while small, then to half: every function
 * and edge is found again across each growth. */
Test(contexts, functions_are_found_again_as_a_tasks_tables_grow)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	running_task(1);
	at(0), enter("main");
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 100; i++) {
			at(fk_now + 1), enter(nth("h", i));
			at(fk_now + 2), leave(nth("h", i));
		}
	at(fk_now + 1), leave("main");
	fx_snap(&f);
	const struct cp_stats *s = &fx_task(f.prof, 1)->stats;
	cr_expect_eq(s->nfuncs, 101);
	for (int i = 0; i < 100; i++) {
		fx_expect(s, nth("h", i), 2, 2, 4, 4);
		fx_expect_edge(s, "main", nth("h", i), 2, 2, 4, 4);
	}
	fx_expect(s, "main", 1, 1, 201, 601);
}

/* A task that calls n functions from "main", finished. Returns its context. */
static struct coprof_ctx *fan_task(uint64_t id, int n)
{
	struct coprof_ctx *c = running_task(id);
	enter("main");
	for (int i = 0; i < n; i++)
		at(fk_now + 1), enter(nth("h", i)), at(fk_now + 1), leave(nth("h", i));
	leave("main");
	return c;
}

/* A task's tables fill to seven eighths up to 32 slots, then to half: an
 * async_tree_io leaf task on 3.10 (16 functions) grows its table once, to 32 slots.
 * The numbers are the same at every size. */
Test(contexts, a_tasks_tables_fill_to_seven_eighths_up_to_32_slots)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *c = fan_task(1, 13); /* 14 functions, 13 edges */
	cr_expect_eq(c->recs.cap, 16, "16 slots hold 14");
	cr_expect_eq(c->edges.cap, 0, "each function has one caller: no edge record");
	c = fan_task(2, 27); /* 28 functions, 27 edges */
	cr_expect_eq(c->recs.cap, 32, "32 slots hold 28");
	c = fan_task(3, 28); /* 29 functions: a 64 filled to half */
	cr_expect_eq(c->recs.cap, 64);
	c = fan_task(4, 40);
	cr_expect_eq(c->recs.cap, 128, "41 is past half of 64");
	fx_snap(&f);
	fx_expect(&fx_task(f.prof, 2)->stats, "main", 1, 1, 27, 54);
	for (int i = 0; i < 40; i++)
		fx_expect_edge(&fx_task(f.prof, 4)->stats, "main", nth("h", i), 1, 1, 1, 1);
	cr_expect_eq(fx_task(f.prof, 3)->stats.nfuncs, 29);
}

/* The root of `name` among thread 0's roots, or NULL. */
static const struct cp_stat *root_of(const char *name)
{
	const struct cp_thread *th = &f.prof->ex.threads[0];
	for (uint32_t i = 0; i < th->nroots; i++)
		if (!strcmp(th->roots[i].key.name, name))
			return &th->roots[i].s;
	return NULL;
}

static void expect_root(const char *name, uint64_t nc, uint64_t tt, uint64_t ct)
{
	const struct cp_stat *r = root_of(name);
	cr_assert_not_null(r, "%s is a root of the thread's own stack", name);
	cr_expect_eq(r->nc, nc, "%s: nc %llu", name, (unsigned long long)r->nc);
	cr_expect_eq(fx_ns(r->tt), tt, "%s: tt %llu", name, (unsigned long long)fx_ns(r->tt));
	cr_expect_eq(fx_ns(r->ct), ct, "%s: ct %llu", name, (unsigned long long)fx_ns(r->ct));
}

/* The numbers of a_second_caller_turns_a_virtual_edge_into_a_record's task, with
 * `more` 1-ns calls of f elsewhere. */
static void expect_mixed_task(const struct cp_stats *s, uint64_t more)
{
	fx_expect(s, "f", 2 + more, 3 + more, 6 + more, 8 + more); /* 1-3, 4-10, 6-8 */
	fx_expect_edge(s, "a", "f", 2, 2, 4, 8);
	fx_expect_edge(s, "b", "f", 1, 1, 2, 2);
	fx_expect_edge(s, "f", "b", 1, 1, 2, 4);
	fx_expect_edge(s, "a", "g", 1, 1, 1, 1);
	fx_expect(s, "a", 1, 1, 13 - 2 - 6 - 1, 13);
}

/* An edge is a record of its own only once its callee has a second caller (or a call
 * with none): until then its numbers are the callee's. When the second caller comes,
 * the first one's edge takes the callee's numbers so far, open calls included, and
 * goes on from there; folded into the thread's "(finished tasks)", each edge keeps
 * its numbers. */
Test(contexts, a_second_caller_turns_a_virtual_edge_into_a_record)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *c = running_task(1);
	at(0), enter("a");
	at(1), enter("f"), at(3), leave("f"); /* a -> f */
	at(4), enter("f"), at(5), enter("b"); /* a -> f open, f -> b */
	cr_expect_eq(c->edges.n, 0, "every function has had one caller");
	at(6), enter("f"); /* b -> f: f's second caller, while a -> f's call is open */
	cr_expect_eq(c->edges.n, 2, "a -> f and b -> f are records now");
	at(8), leave("f");
	at(9), leave("b");
	at(10), leave("f");
	at(11), enter("g"), at(12), leave("g"); /* only from a: stays virtual */
	at(13), leave("a");
	cr_expect_eq(c->edges.n, 2);
	coprof_ctx_switch(f.t, NULL);
	at(20), enter("f"), at(21), leave("f"); /* on the thread's own stack, no caller */
	fx_snap(&f);
	expect_mixed_task(&fx_task(f.prof, 1)->stats, 0);
	fx_expect(&f.prof->stats, "f", 3, 4, 7, 9);
	expect_root("f", 1, 1, 1);
	cr_expect_null(root_of("a"), "the task is not folded yet");

	coprof_ctx_finish(f.t, c);
	for (uint64_t i = 0; i < CP_KEEP_FINISHED; i++)
		coprof_ctx_finish(f.t, fan_task(10 + i, 1));
	fx_snap(&f);
	cr_expect_null(fx_task(f.prof, 1), "folded: no row of its own");
	expect_mixed_task(&f.prof->stats, 1);
	expect_root("a", 1, 13 - 2 - 6 - 1, 13);
	expect_root("f", 1, 1, 1);
	cr_expect_null(root_of("b"));
	cr_expect_null(root_of("g"));
	cr_expect_eq(f.prof->ex.threads[0].nroots, 2);
	fx_expect_edge(&f.prof->stats, "main", nth("h", 0), CP_KEEP_FINISHED, CP_KEEP_FINISHED,
		       CP_KEEP_FINISHED, CP_KEEP_FINISHED);
}

/* One task: `caller` (or no caller when NULL) calls f for 2 ns. */
static void caller_task(uint64_t id, const char *caller)
{
	struct coprof_ctx *c = running_task(id);
	if (caller)
		enter(caller);
	at(fk_now + 1), enter("f"), at(fk_now + 2), leave("f");
	if (caller)
		at(fk_now + 1), leave(caller);
	coprof_ctx_finish(f.t, c);
}

/* Folded tasks whose f each had one caller, but not the same one (or none): the
 * thread's "(finished tasks)" keeps an edge record per caller, and f's calls with no
 * caller are the thread's roots. */
Test(contexts, tasks_with_different_sole_callers_fold_into_edge_records)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	at(0);
	caller_task(1, "a");
	caller_task(2, "a");
	caller_task(3, "b");
	caller_task(4, NULL);
	caller_task(5, "a");
	for (uint64_t i = 0; i < CP_KEEP_FINISHED; i++)
		coprof_ctx_finish(f.t, fan_task(10 + i, 1));
	fx_snap(&f);
	const struct cp_stats *s = &f.prof->stats;
	fx_expect(s, "f", 5, 5, 10, 10);
	fx_expect_edge(s, "a", "f", 3, 3, 6, 6);
	fx_expect_edge(s, "b", "f", 1, 1, 2, 2);
	expect_root("f", 1, 2, 2);
	expect_root("a", 3, 6, 12);
	expect_root("b", 1, 2, 4);
}
