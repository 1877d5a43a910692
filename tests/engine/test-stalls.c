/* test-stalls.c: stalls (doc/design.md rule 11), a task step at least the threshold
 * long, with the stack of its longest point. Fake clock, to the nanosecond. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define MS 1000000ull

TestSuite(stalls, .fini = fx_fini);

static struct coprof_ctx *task(uint64_t id, const char *name)
{
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, id, name, "asyncio", &c), 0);
	return c;
}

/* Stall i's frames are `names` (innermost first). */
static void expect_frames(const struct cp_stall *s, const char *const *names, uint32_t n)
{
	cr_assert_eq(s->depth, n, "stall of %s: %u frames, expected %u", s->task, s->depth, n);
	for (uint32_t i = 0; i < n; i++)
		cr_expect_str_eq(s->frames[i].name, names[i], "frame %u", i);
}

/* worker's step of 35 ms: a 30 ms decode in it is its longest point; the 5 ms step
 * of another task is no stall. */
static void decode_then_save(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *a = task(1, "worker-1"), *b = task(2, "quick");
	at(0), coprof_ctx_switch(f.t, a), enter("worker");
	at(1 * MS), enter("decode");
	at(31 * MS), leave("decode");
	at(32 * MS), enter("save");
	at(35 * MS), coprof_ctx_switch(f.t, NULL);
	at(40 * MS), coprof_ctx_switch(f.t, b), enter("ping");
	at(45 * MS), leave("ping"), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, 1);
	cr_expect_eq(x->stall_threshold, 0.020);
	const struct cp_stall *s = &x->stalls[0];
	cr_expect_eq(fx_ns(s->seconds), 35 * MS);
	cr_expect_str_eq(s->task, "worker-1");
	cr_expect_eq(s->task_id, 1);
	cr_expect_eq(s->thread, (uint64_t)gettid());
	expect_frames(s, (const char *const[]){"decode", "worker"}, 2);
}

Test(stalls, wall_step_with_its_longest_call)
{
	decode_then_save(COPROF_CLOCK_WALL);
}

Test(stalls, cpu_step_with_its_longest_call)
{
	decode_then_save(COPROF_CLOCK_CPU);
}

/* A step whose time is the open frames' own (a loop in worker, a 2 ms call): the
 * stack it stopped at. Under wall, save's call, open across the await, closes 65 ms
 * long in the next step but began before it: not that step's longest point. */
Test(stalls, own_time_and_a_call_across_an_await)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "w");
	at(0), coprof_ctx_switch(f.t, a), enter("worker");
	at(10 * MS), enter("small");
	at(12 * MS), leave("small");
	at(25 * MS), enter("save"), enter("sleep");
	at(27 * MS), coprof_ctx_switch(f.t, NULL);
	at(90 * MS), coprof_ctx_switch(f.t, a), leave("sleep"), leave("save");
	at(115 * MS), enter("wait");
	at(116 * MS), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, 2);
	cr_expect_eq(fx_ns(x->stalls[0].seconds), 27 * MS, "longest first");
	expect_frames(&x->stalls[0], (const char *const[]){"sleep", "save", "worker"}, 3);
	cr_expect_eq(fx_ns(x->stalls[1].seconds), 26 * MS);
	expect_frames(&x->stalls[1], (const char *const[]){"wait", "worker"}, 2);
}

/* A step that ends with its task: the stack it ended in; one exactly at the
 * threshold is a stall, one a nanosecond short is not. */
Test(stalls, finish_and_the_threshold)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *a = task(1, "ends"), *b = task(2, "short");
	at(0), coprof_ctx_switch(f.t, a), enter("run");
	at(20 * MS), coprof_ctx_finish(f.t, a);
	at(30 * MS), coprof_ctx_switch(f.t, b), enter("run");
	at(50 * MS - 1), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.nstalls, 1);
	cr_expect_str_eq(f.prof->ex.stalls[0].task, "ends");
	cr_expect_eq(fx_ns(f.prof->ex.stalls[0].seconds), 20 * MS);
	expect_frames(&f.prof->ex.stalls[0], (const char *const[]){"run"}, 1);
}

/* The thread's own context never stalls, nor does a step under way when recording
 * began; 70 stalls keep the 64 longest and count 6, and a clear forgets them. */
Test(stalls, driver_window_start_and_the_bound)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "t");
	at(0), enter("main");
	at(100 * MS), coprof_ctx_switch(f.t, a), enter("step");
	at(200 * MS), leave("step"), coprof_ctx_switch(f.t, NULL);
	coprof_stop(f.p);
	at(300 * MS), coprof_ctx_switch(f.t, a);
	coprof_start(f.p);
	at(400 * MS), enter("late");
	at(500 * MS), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.nstalls, 1, "the driver's 100 ms and the late step are no stalls");
	cr_expect_eq(fx_ns(f.prof->ex.stalls[0].seconds), 100 * MS);
	coprof_clear(f.p);
	uint64_t now = 600 * MS;
	for (uint64_t k = 0; k < 70; k++) {
		at(now), coprof_ctx_switch(f.t, a);
		now += (21 + k) * MS;
		at(now), coprof_ctx_switch(f.t, NULL);
	}
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, CP_STALLS_KEPT);
	cr_expect_eq(fx_ns(x->stalls[0].seconds), 90 * MS);
	cr_expect_eq(fx_ns(x->stalls[63].seconds), 27 * MS);
	int counted = 0;
	for (uint32_t i = 0; i < x->ndropped; i++)
		if (strstr(x->dropped[i].name, "stalls")) {
			cr_expect_eq(x->dropped[i].n, 6);
			counted = 1;
		}
	cr_expect(counted, "no counter of stalls let go");
	coprof_clear(f.p);
	fx_snap(&f);
	cr_expect_eq(f.prof->ex.nstalls, 0);
}

/* The threshold is the options'; the file holds the stalls and reads them back. */
Test(stalls, threshold_option_and_the_file)
{
	struct coprof_options o = {.clock = COPROF_CLOCK_WALL, .fake_clock = fk_clock,
				   .stall_ns = 5 * MS};
	memset(&f, 0, sizeof(f));
	fk_now = 0;
	cr_assert_eq(coprof_create(&o, &f.p), 0);
	cr_assert_eq(coprof_add_resolver(f.p, fx_resolve, NULL), 0);
	cr_assert_eq(coprof_thread_register(f.p, "main", &f.t), 0);
	cr_assert_eq(coprof_start(f.p), 0);
	struct coprof_ctx *a = task(7, "six");
	at(0), coprof_ctx_switch(f.t, a), enter("outer"), enter("inner");
	at(4 * MS), leave("inner");
	at(6 * MS), coprof_ctx_switch(f.t, NULL);
	char dir[] = "/tmp/coprof-stalls-XXXXXX", path[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.pstat", dir);
	cr_assert_eq(coprof_dump(f.p, path), 0);
	struct cp_profile *r;
	char err[256] = "";
	int rc = cp_profile_read(path, &r, err, sizeof(err));
	unlink(path);
	rmdir(dir);
	cr_assert_eq(rc, 0, "%s", err);
	cr_expect_eq(r->ex.stall_threshold, 0.005);
	cr_assert_eq(r->ex.nstalls, 1);
	cr_expect_eq(fx_ns(r->ex.stalls[0].seconds), 6 * MS);
	cr_expect_eq(r->ex.stalls[0].task_id, 7);
	cr_expect_str_eq(r->ex.stalls[0].task, "six");
	expect_frames(&r->ex.stalls[0], (const char *const[]){"inner", "outer"}, 2);
	cr_expect_str_eq(r->ex.stalls[0].frames[0].file, "test.c");
	cr_expect_eq(r->ex.stalls[0].frames[0].line, K("inner"));
	cp_profile_free(r);
}

/* A task whose one step is its whole life: its root's call is the step's longest,
 * but the stack kept is the innermost call that held half the step, decode, with
 * the root under it. A short first call (8 ms) is no candidate against it. */
static void one_step_task(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *a = task(1, "handler");
	at(0), coprof_ctx_switch(f.t, a), enter("handle");
	at(1 * MS), enter("parse");
	at(12 * MS), leave("parse");
	at(13 * MS), enter("decode"), enter("inflate");
	at(20 * MS), leave("inflate");
	at(90 * MS), leave("decode");
	at(95 * MS), leave("handle"), coprof_ctx_finish(f.t, a);
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.nstalls, 1);
	expect_frames(&f.prof->ex.stalls[0], (const char *const[]){"decode", "handle"}, 2);
}

Test(stalls, wall_one_step_innermost_half)
{
	one_step_task(COPROF_CLOCK_WALL);
}

Test(stalls, cpu_one_step_innermost_half)
{
	one_step_task(COPROF_CLOCK_CPU);
}

/* Who knows the tasks behind a trace-mode stall: a thread where nothing ever said a
 * task became ready (a native runtime's adapter never does) writes -1, not a 0 that
 * claims none waited; once coprof_ctx_ready has been heard there, the count. Two 30 ms
 * steps of task a while b is suspended: b made ready only before the second. */
Test(stalls, behind_unknown_until_readiness_is_heard)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "runner"), *b = task(2, "other");
	at(0), coprof_ctx_switch(f.t, b), enter("other");
	at(1 * MS), coprof_ctx_switch(f.t, a), enter("run");
	at(31 * MS), coprof_ctx_switch(f.t, NULL);
	at(32 * MS), coprof_ctx_ready(f.t, b, 0);
	at(33 * MS), coprof_ctx_switch(f.t, a);
	at(63 * MS), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, 2);
	/* longest first: both 30 ms; the first step's is the one kept first */
	int64_t first = x->stalls[0].behind, second = x->stalls[1].behind;
	if (fx_ns(x->stalls[0].seconds) == fx_ns(x->stalls[1].seconds) && first != -1) {
		int64_t t = first;
		first = second, second = t;
	}
	cr_expect_eq(first, -1, "the first step's tasks behind: %lld", (long long)first);
	cr_expect_eq(second, 1, "the second step's tasks behind: %lld", (long long)second);
}

/* The innermost call that held half the step is the one kept when it is the first
 * long one: inflate (60 ms of a 100 ms step) inside decode inside handle. */
Test(stalls, innermost_of_nested_long_calls)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *a = task(1, "handler");
	at(0), coprof_ctx_switch(f.t, a), enter("handle");
	at(5 * MS), enter("decode"), enter("inflate");
	at(65 * MS), leave("inflate");
	at(80 * MS), leave("decode");
	at(100 * MS), coprof_ctx_switch(f.t, NULL);
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.nstalls, 1);
	expect_frames(&f.prof->ex.stalls[0], (const char *const[]){"inflate", "decode", "handle"},
		      3);
}

/* A loop callback that is no task's step (rule 11) runs on the driver: a 30 ms one is
 * a stall of task 0 named by the caller, its stack the blocking call in it, with the
 * task made ready meanwhile behind it; a 5 ms one is none; and a callback within
 * which a task runs is not measured (the task's step is). */
static void callback_stalls(enum coprof_clock clock)
{
	fx_setup(&f, clock);
	struct coprof_ctx *a = task(1, "waiter"), *b = task(2, "inner");
	at(0), coprof_ctx_switch(f.t, a), enter("waiter");
	at(1 * MS), coprof_ctx_switch(f.t, NULL);
	at(2 * MS), enter("run_once"), enter("Handle._run");
	coprof_loop_step_begin(f.t);
	at(3 * MS), enter("data_received"), enter("decode");
	at(4 * MS), coprof_ctx_ready(f.t, a, 0);
	at(33 * MS), leave("decode"), leave("data_received");
	coprof_loop_step_end(f.t, 0, "Proto.data_received");
	leave("Handle._run");
	at(40 * MS), enter("Handle._run"), coprof_loop_step_begin(f.t);
	at(45 * MS), coprof_loop_step_end(f.t, 0, "short"), leave("Handle._run");
	at(50 * MS), enter("Handle._run"), coprof_loop_step_begin(f.t);
	at(51 * MS), coprof_ctx_switch(f.t, b), enter("inner");
	at(55 * MS), coprof_ctx_switch(f.t, NULL);
	at(90 * MS), coprof_loop_step_end(f.t, 0, "nested"), leave("Handle._run");
	leave("run_once");
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, 1);
	const struct cp_stall *s = &x->stalls[0];
	cr_expect_eq(fx_ns(s->seconds), 31 * MS);
	cr_expect_str_eq(s->task, "Proto.data_received");
	cr_expect_eq(s->task_id, 0);
	cr_expect_eq(s->behind, 1);
	expect_frames(s, (const char *const[]){"decode", "data_received", "Handle._run", "run_once"}, 4);
}

Test(stalls, wall_loop_callback)
{
	callback_stalls(COPROF_CLOCK_WALL);
}

Test(stalls, cpu_loop_callback)
{
	callback_stalls(COPROF_CLOCK_CPU);
}

/* Sample mode's pcs: 0x1000 + n is an instruction of decode, 0x2000 + n of parse; the
 * fixture's resolver knows the other keys. */
static int pc_resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	if (key < 0x1000 || key >= 0x3000)
		return -ENOENT;
	*out = (struct coprof_func_info){"test.c", key < 0x2000 ? 100 : 200,
					 key < 0x2000 ? "decode" : "parse"};
	return 0;
}

/* Sample mode (rule 11): a step's stall has the stack of the innermost function half
 * of its ticks were in, functions told apart once resolved (each tick stopped at
 * another instruction). Of 32 ticks, 12 in decode then 20 in parse, the eight kept are
 * spread over the step (one in four): three in decode, five in parse. Behind is not
 * known in sample mode. A step of 25 ticks keeps seven. */
Test(stalls, sample_mode_ticks)
{
	fx_setup_sample(&f, COPROF_CLOCK_WALL);
	cr_assert_eq(coprof_add_resolver(f.p, pc_resolve, NULL), 0);
	cr_assert_eq(coprof_start(f.p), 0);
	struct coprof_ctx *a = task(1, "worker-1"), *b = task(2, "quick");
	at(0), coprof_ctx_switch(f.t, a);
	for (uintptr_t k = 0; k < 32; k++) {
		uintptr_t pcs[] = {k < 12 ? 0x1000 + k : 0x2000 + k, K("work"), K("worker")};
		at(k * MS), coprof_step_tick(f.t, pcs, 3);
	}
	at(32 * MS), coprof_ctx_switch(f.t, NULL);
	at(40 * MS), coprof_ctx_switch(f.t, b);
	for (uintptr_t k = 0; k < 25; k++) {
		uintptr_t mid = k < 8 ? K("load") : k < 16 ? K("save") : K("flush");
		uintptr_t pcs[] = {0x1000 + k, mid, K("quick")};
		at((40 + k) * MS), coprof_step_tick(f.t, pcs, 3);
	}
	at(65 * MS), coprof_ctx_switch(f.t, NULL);
	at(70 * MS), coprof_ctx_switch(f.t, a);
	at(75 * MS), coprof_step_tick(f.t, (uintptr_t[]){0x1000}, 1);
	at(80 * MS), coprof_ctx_switch(f.t, NULL); /* 10 ms: no stall */
	/* a loop's step of task 2 on the thread's own context (asyncio's Handle._run in
	 * sample mode): 25 ms, a stall named from the task table, with the 2 tasks the
	 * adapter counted behind it; a 5 ms one is none */
	at(90 * MS), coprof_loop_step_begin(f.t);
	at(100 * MS), coprof_step_tick(f.t, (uintptr_t[]){0x2000, K("handler")}, 2);
	at(115 * MS);
	cr_expect_eq(coprof_loop_step_end(f.t, 2, NULL), 1);
	coprof_stall_behind(f.t, 2);
	at(120 * MS), coprof_loop_step_begin(f.t);
	at(125 * MS);
	cr_expect_eq(coprof_loop_step_end(f.t, 0, "short"), 0);
	coprof_stall_behind(f.t, 7); /* no stall was kept by that step: the last one stays */
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nstalls, 3);
	const struct cp_stall *s = &x->stalls[0];
	cr_expect_eq(fx_ns(s->seconds), 32 * MS);
	cr_expect_str_eq(s->task, "worker-1");
	cr_expect_eq(s->behind, -1);
	expect_frames(s, (const char *const[]){"parse", "work", "worker"}, 3);
	/* kept: two ticks in load, two in save, three in flush, each calling decode: no
	 * function below quick held half of them */
	expect_frames(&x->stalls[1], (const char *const[]){"quick"}, 1);
	s = &x->stalls[2];
	cr_expect_eq(fx_ns(s->seconds), 25 * MS);
	cr_expect_str_eq(s->task, "quick");
	cr_expect_eq(s->task_id, 2);
	cr_expect_eq(s->behind, 2);
	expect_frames(s, (const char *const[]){"parse", "handler"}, 2);
}
