/* test-awaits.c: who awaits whom (engine-await.c): await edges per thread, one per
 * (waiter, awaited, kind, names), their counts and times summed, bounded with a dropped
 * count, forgotten by a clear, and written and read back with the extras. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define MS 1000000ull

TestSuite(awaits, .fini = fx_fini);

static struct coprof_ctx *task(uint64_t id, const char *name)
{
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, id, name, "asyncio", &c), 0);
	return c;
}

static const struct cp_await *find(const struct cp_extras *x, const char *waiter,
				   const char *awaited, const char *kind)
{
	for (uint32_t i = 0; i < x->nawaits; i++) {
		const struct cp_await *aw = &x->awaits[i];
		if (!strcmp(aw->waiter ? aw->waiter : "", waiter) &&
		    !strcmp(aw->awaited ? aw->awaited : "", awaited) && !strcmp(aw->kind, kind))
			return aw;
	}
	return NULL;
}

/* One edge a (waiter, awaited, kind): waits add up; another kind, or another task at
 * a reused id (another name), is another edge; longest first. */
Test(awaits, edges_add_up_by_pair_kind_and_name)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	struct coprof_ctx *m = task(1, "main");
	at(0), coprof_ctx_switch(f.t, m), enter("main");
	coprof_await_add(f.t, m, 7, "child", COPROF_AWAIT_GATHER, 10 * MS);
	coprof_await_add(f.t, m, 7, "child", COPROF_AWAIT_GATHER, 5 * MS);
	coprof_await_add(f.t, m, 7, "child", COPROF_AWAIT_TASK, 1 * MS);
	coprof_await_add(f.t, m, 7, "later", COPROF_AWAIT_TASK, 2 * MS); /* id 7 reused */
	coprof_await_add(f.t, m, 9, NULL, COPROF_AWAIT_SHIELD, 30 * MS);
	coprof_await_add(f.t, m, 11, "waited", COPROF_AWAIT_WAIT, 3 * MS);
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nawaits, 5);
	cr_assert(find(x, "main", "waited", "wait"));
	const struct cp_await *g = find(x, "main", "child", "gather");
	cr_assert(g);
	cr_expect_eq(g->count, 2);
	cr_expect_eq(fx_ns(g->seconds), 15 * MS);
	cr_expect_eq(g->waiter_id, 1);
	cr_expect_eq(g->awaited_id, 7);
	cr_expect_eq(g->thread, (uint64_t)gettid());
	cr_assert(find(x, "main", "child", "task"));
	cr_assert(find(x, "main", "later", "task"));
	const struct cp_await *s = &x->awaits[0];
	cr_expect_eq(s->awaited, NULL, "an unknown name stays unknown");
	cr_expect_str_eq(s->kind, "shield", "longest first");
	for (uint32_t i = 1; i < x->nawaits; i++)
		cr_expect(x->awaits[i - 1].seconds >= x->awaits[i].seconds);
}

/* A full table (CP_AWAITS_KEPT edges) lets its shorter half go, counting their waits
 * as dropped, and goes on adding to the edges it keeps; a clear forgets them all. */
Test(awaits, bounded_keeping_the_longest_with_a_dropped_count)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *m = task(1, "main");
	at(0), coprof_ctx_switch(f.t, m);
	for (uint64_t i = 0; i < CP_AWAITS_KEPT + 10; i++) /* edge i waited i + 1 ns */
		coprof_await_add(f.t, m, 100 + i, NULL, COPROF_AWAIT_TASK, i + 1);
	coprof_await_add(f.t, m, 100 + CP_AWAITS_KEPT - 1, NULL, COPROF_AWAIT_TASK, 1);
	fx_snap(&f);
	const struct cp_extras *x = &f.prof->ex;
	cr_assert_eq(x->nawaits, CP_AWAITS_KEPT / 2 + 10);
	uint64_t dropped = 0;
	for (uint32_t i = 0; i < x->ndropped; i++)
		if (!strcmp(x->dropped[i].name, "await edges past each thread's table"))
			dropped = x->dropped[i].n;
	cr_expect_eq(dropped, CP_AWAITS_KEPT / 2, "the shorter half's waits");
	cr_expect_eq(x->awaits[0].awaited_id, 100 + CP_AWAITS_KEPT + 9, "the longest first");
	for (uint32_t i = 0; i < x->nawaits; i++) {
		const struct cp_await *aw = &x->awaits[i];
		cr_assert_geq(aw->awaited_id, 100 + CP_AWAITS_KEPT / 2, "edge %u: a short one kept",
			      i);
		uint64_t want = aw->awaited_id == 100 + CP_AWAITS_KEPT - 1 ? 2 : 1;
		cr_expect_eq(aw->count, want, "edge to %lu", (unsigned long)aw->awaited_id);
	}
	cr_assert_eq(coprof_clear(f.p), 0);
	at(1 * MS), enter("after");
	fx_snap(&f);
	cr_expect_eq(f.prof->ex.nawaits, 0);
}

/* The writer puts the edges in the extras ('awaits') and the reader reads them back;
 * an empty list reads as no edges (pstat-read.c reads a file without the key as
 * none too: get_list). */
Test(awaits, written_and_read_back)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *m = task(1, "main");
	at(0), coprof_ctx_switch(f.t, m), enter("main");
	coprof_await_add(f.t, m, 7, "child", COPROF_AWAIT_TASKGROUP, 3 * MS);
	fx_snap(&f);
	unsigned char *buf;
	size_t len;
	cr_assert_eq(cp_profile_encode(f.prof, &buf, &len), 0);
	struct cp_profile *back;
	char err[256];
	cr_assert_eq(cp_profile_read_mem(buf, len, &back, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(back->ex.nawaits, 1);
	const struct cp_await *aw = &back->ex.awaits[0];
	cr_expect_str_eq(aw->waiter, "main");
	cr_expect_str_eq(aw->awaited, "child");
	cr_expect_str_eq(aw->kind, "taskgroup");
	cr_expect_eq(aw->count, 1);
	cr_expect_eq(fx_ns(aw->seconds), 3 * MS);
	cr_expect_eq(aw->waiter_id, 1);
	cr_expect_eq(aw->awaited_id, 7);
	cp_profile_free(back);
	free(buf);
	f.prof->ex.awaits = NULL;
	f.prof->ex.nawaits = 0;
	cr_assert_eq(cp_profile_encode(f.prof, &buf, &len), 0);
	cr_assert_eq(cp_profile_read_mem(buf, len, &back, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(back->ex.nawaits, 0);
	cp_profile_free(back);
	free(buf);
}
