/* test-dump.c: coprof_dump end to end: the file written through the file layer is
 * read back with cp_profile_read and holds the same numbers and extras. Fake clock. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "whole.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/coprof-engine-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.pstat", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	fx_teardown(&f);
}

TestSuite(dump, .init = setup, .fini = teardown);

Test(dump, nothing_recorded_writes_no_file)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	cr_expect_eq(coprof_dump(f.p, path), COPROF_ENODATA);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 1, "c", "x", &c), 0);
	coprof_ctx_switch(f.t, c);
	coprof_leave(f.t, K("never_entered")); /* no call seen: still nothing */
	coprof_ctx_switch(f.t, NULL);
	cr_expect_eq(coprof_dump(f.p, path), COPROF_ENODATA);
	struct stat st;
	cr_expect_neq(stat(path, &st), 0);
}

Test(dump, file_reads_back_with_the_same_numbers)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 0x77, "worker", "asyncio", &c), 0);
	fk_now = 0, coprof_enter(f.t, K("main"));
	fk_now = 10, coprof_ctx_switch(f.t, c), coprof_enter(f.t, K("job"));
	fk_now = 30, coprof_ctx_switch(f.t, NULL);
	fk_now = 40, coprof_enter(f.t, K("main_work"));
	fk_now = 45, coprof_leave(f.t, K("main_work"));
	fk_now = 50;
	cr_assert_eq(coprof_dump(f.p, path), 0);
	fx_snap(&f);
	struct cp_profile *r;
	char err[256] = "";
	cr_assert_eq(cp_profile_read(path, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r->stats.nfuncs, f.prof->stats.nfuncs);
	fx_expect(&r->stats, "main", 1, 1, 25, 50);
	fx_expect(&r->stats, "job", 1, 1, 40, 40);
	fx_expect_edge(&r->stats, "main", "main_work", 1, 1, 5, 5);
	cr_expect_eq(fx_func(&r->stats, "job")->key.line, K("job"));
	cr_expect_str_eq(fx_func(&r->stats, "job")->key.file, "test.c");
	cr_assert(r->ex.present);
	cr_expect_str_eq(r->ex.clock, "wall");
	cr_expect_eq(r->ex.pid, getpid());
	cr_assert_eq(r->ex.ntasks, 1);
	cr_expect_eq(r->ex.tasks[0].id, 0x77);
	cr_expect_str_eq(r->ex.tasks[0].name, "worker");
	cr_expect_str_eq(r->ex.tasks[0].state, "suspended");
	cr_expect_eq(fx_ns(r->ex.tasks[0].ttot), 40);
	fx_expect(&r->ex.tasks[0].stats, "job", 1, 1, 40, 40);
	cr_assert_eq(r->ex.nthreads, 1);
	cr_expect_eq(r->ex.threads[0].switches, 2);
	cp_profile_free(r);
	cr_expect(coprof_is_running(f.p), "a dump does not stop recording");
}

/* DESIGN's worked example, A and B coroutines of the thread's base context. */
static void worked_example(void)
{
	struct coprof_ctx *a, *b;
	cr_assert_eq(coprof_ctx_create(f.t, 1, "A", "ucontext", &a), 0);
	cr_assert_eq(coprof_ctx_create(f.t, 2, "B", "ucontext", &b), 0);
	fk_now = 0, coprof_enter(f.t, K("main"));
	fk_now = 10, coprof_ctx_switch(f.t, a), coprof_enter(f.t, K("a_root"));
	coprof_enter(f.t, K("a_work"));
	fk_now = 40, coprof_leave(f.t, K("a_work")), coprof_enter(f.t, K("a_yield"));
	coprof_ctx_switch(f.t, NULL);
	fk_now = 50, coprof_ctx_switch(f.t, b), coprof_enter(f.t, K("b_root"));
	coprof_enter(f.t, K("b_work"));
	fk_now = 70, coprof_leave(f.t, K("b_work")), coprof_leave(f.t, K("b_root"));
	coprof_ctx_finish(f.t, b);
	fk_now = 80, coprof_ctx_switch(f.t, a), coprof_leave(f.t, K("a_yield"));
	fk_now = 90, coprof_leave(f.t, K("a_root")), coprof_ctx_finish(f.t, a);
	fk_now = 100, coprof_leave(f.t, K("main"));
}

/* The synthetic node keyed ("~", 0, name) of a whole-program table, or NULL. */
static const struct cp_func *node(const struct cp_stats *w, const char *name)
{
	for (uint32_t i = 0; i < w->nfuncs; i++)
		if (!strcmp(w->funcs[i].key.file, "~") && !strcmp(w->funcs[i].key.name, name))
			return &w->funcs[i];
	return NULL;
}

static void expect_whole(enum coprof_clock clock, uint64_t main_ct, uint64_t a_ct)
{
	fx_setup(&f, clock);
	worked_example();
	cr_assert_eq(coprof_dump(f.p, path), 0);
	struct cp_profile *r;
	char err[256] = "";
	cr_assert_eq(cp_profile_read(path, &r, err, sizeof(err)), 0, "%s", err);
	/* The reader takes the root, the thread's node and both tasks' out again. */
	cr_expect_eq(r->ex.nsynthetic, 4);
	cr_expect_eq(r->stats.nfuncs, 6);
	cr_assert_eq(r->ex.nthreads, 1);
	cr_assert_eq(r->ex.threads[0].nroots, 1, "the base context has one root, main");
	cr_expect_str_eq(r->ex.threads[0].roots[0].key.name, "main");
	cr_expect_eq(fx_ns(r->ex.threads[0].roots[0].s.ct), main_ct);
	cr_expect_eq(r->ex.threads[0].roots[0].s.nc, 1);

	struct cp_arena *a = cp_arena_new();
	struct cp_stats w;
	cr_assert_eq(cp_whole_program(r, &r->stats, a, &w), 0);
	cr_assert_eq(w.nfuncs, 10);
	const struct cp_func *root = &w.funcs[6], *th = node(&w, "<thread test 1234>");
	const struct cp_func *ta = node(&w, "<task A>"), *tb = node(&w, "<task B>");
	cr_expect_str_eq(root->key.name, CP_WHOLE_ROOT);
	cr_expect_eq(root->ncallers, 0);
	cr_assert_not_null(ta);
	cr_assert_not_null(tb);
	if (!th) /* the thread's name and tid are the fixture's */
		for (uint32_t i = 7; i < 10; i++)
			if (!strncmp(w.funcs[i].key.name, "<thread ", 8))
				th = &w.funcs[i];
	cr_assert_not_null(th);
	cr_expect_eq(fx_ns(th->s.ct), main_ct);
	cr_expect_eq(fx_ns(ta->s.ct), a_ct);
	cr_expect_eq(fx_ns(tb->s.ct), 20);
	cr_expect_eq(fx_ns(root->s.ct), main_ct + a_ct + 20, "the root sums its contexts");
	cr_expect_eq(root->s.tt, 0);
	cr_expect_eq(ta->s.nc, 1);
	/* Every node hangs from the root; a_root hangs from task A's node only. */
	for (const struct cp_func *n = th; n; n = n == th ? ta : n == ta ? tb : NULL) {
		cr_assert_eq(n->ncallers, 1);
		cr_expect_eq(n->callers[0].caller, 6);
		cr_expect_eq(n->callers[0].s.ct, n->s.ct);
	}
	const struct cp_func *ar = fx_func(&w, "a_root");
	cr_assert_eq(ar->ncallers, 1);
	cr_expect_eq(&w.funcs[ar->callers[0].caller], ta);
	cr_expect_eq(fx_ns(ar->callers[0].s.ct), a_ct);
	cr_expect_eq(fx_ns(ar->callers[0].s.tt), 10);
	cp_arena_free(a);
	cp_profile_free(r);
}

/* Under wall the contexts overlap: the root's 200 ns is more than the 100 ns run. */
Test(dump, whole_program_wall_sums_overlapping_contexts)
{
	expect_whole(COPROF_CLOCK_WALL, 100, 80);
}

/* Under cpu the root's ct is the thread's CPU time, the sum of every tt: 100 ns. */
Test(dump, whole_program_cpu_root_is_the_sum_of_own_times)
{
	expect_whole(COPROF_CLOCK_CPU, 40, 40);
}

/* Tasks of one root coroutine share a node (issue 37): three "worker" tasks of 5, 10
 * and 20 ns are "<tasks: worker ×3>", one edge of 3 calls and 35 ns to worker, whose
 * callee keeps its own numbers; the task alone of its kind keeps "<task solo>". */
Test(dump, whole_program_groups_tasks_by_root_coroutine)
{
	static const char *const names[] = {"w1", "w2", "solo", "w3"};
	static const uint64_t ran[] = {5, 10, 7, 20};
	fx_setup(&f, COPROF_CLOCK_WALL);
	fk_now = 0;
	for (int i = 0; i < 4; i++) {
		struct coprof_ctx *c;
		int solo = i == 2;
		cr_assert_eq(coprof_ctx_create(f.t, (uint64_t)i + 1, names[i], "asyncio", &c), 0);
		coprof_ctx_switch(f.t, c);
		coprof_enter(f.t, solo ? K("solo") : K("worker"));
		coprof_enter(f.t, K("decode"));
		fk_now += ran[i];
		coprof_leave(f.t, K("decode"));
		coprof_leave(f.t, solo ? K("solo") : K("worker"));
		coprof_ctx_finish(f.t, c);
		coprof_ctx_switch(f.t, NULL);
	}
	cr_assert_eq(coprof_dump(f.p, path), 0);
	struct cp_profile *r;
	char err[256] = "";
	cr_assert_eq(cp_profile_read(path, &r, err, sizeof(err)), 0, "%s", err);
	struct cp_arena *a = cp_arena_new();
	struct cp_stats w;
	cr_assert_eq(cp_whole_program(r, &r->stats, a, &w), 0);
	const struct cp_func *pool = node(&w, "<tasks: worker \u00d73>");
	const struct cp_func *solo = node(&w, "<task solo>");
	cr_assert_not_null(pool, "no node for the three workers");
	cr_assert_not_null(solo);
	cr_expect_null(node(&w, "<task w1>"), "a worker kept a node of its own");
	cr_expect_eq(fx_ns(pool->s.ct), 35);
	cr_expect_eq(fx_ns(solo->s.ct), 7);
	const struct cp_func *wk = fx_func(&w, "worker");
	cr_assert_eq(wk->ncallers, 1);
	cr_expect_eq(&w.funcs[wk->callers[0].caller], pool);
	cr_expect_eq(wk->callers[0].s.nc, 3);
	cr_expect_eq(fx_ns(wk->callers[0].s.ct), 35);
	fx_expect(&w, "decode", 4, 4, 42, 42);
	cp_arena_free(a);
	cp_profile_free(r);
}

/* coprof_dump_clear cuts a running profile into windows: each call lands in exactly
 * one window, a frame open at the cut counts up to the cut in the first and is
 * ignored when it closes in the second, and recording goes on. */
Test(dump, dump_clear_cuts_back_to_back_windows)
{
	char second[160];
	snprintf(second, sizeof(second), "%s/second.pstat", dir);
	fx_setup(&f, COPROF_CLOCK_WALL);
	fk_now = 0, coprof_enter(f.t, K("main"));
	fk_now = 10, coprof_enter(f.t, K("a")), coprof_leave(f.t, K("a"));
	fk_now = 20, coprof_enter(f.t, K("b")); /* open at the cut */
	fk_now = 30;
	cr_assert_eq(coprof_dump_clear(f.p, path), 0);
	cr_expect(coprof_is_running(f.p), "recording goes on");
	fk_now = 40, coprof_leave(f.t, K("b"));
	fk_now = 50, coprof_enter(f.t, K("a"));
	fk_now = 55, coprof_leave(f.t, K("a"));
	fk_now = 60;
	cr_assert_eq(coprof_dump_clear(f.p, second), 0);

	struct cp_profile *w1, *w2;
	char err[256] = "";
	cr_assert_eq(cp_profile_read(path, &w1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cp_profile_read(second, &w2, err, sizeof(err)), 0, "%s", err);
	fx_expect(&w1->stats, "main", 1, 1, 20, 30);
	fx_expect(&w1->stats, "a", 1, 1, 0, 0);
	fx_expect(&w1->stats, "b", 1, 1, 10, 10);
	fx_expect(&w2->stats, "a", 1, 1, 5, 5);
	cr_expect_null(fx_func(&w2->stats, "b"), "b's close in window 2 is not a call");
	cr_expect(w1->ex.stop <= w2->ex.start, "windows follow one another");
	cp_profile_free(w1);
	cp_profile_free(w2);
	unlink(second);
	/* nothing since the last cut: nothing written, nothing used */
	cr_expect_eq(coprof_dump_clear(f.p, second), COPROF_ENODATA);
}
