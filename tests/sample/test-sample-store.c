/* test-sample-store.c: the store of sampled stacks (libprof/sample-store.c) and the pstats
 * numbers it builds. A fake resolver maps pc N to the function "fN/100", so several pcs
 * fall into one function, and pcs of 900 and up resolve to nothing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sample-store.h"

static struct cp_samples *s;
static struct cp_profile *prof;

static int fake_resolve(void *arg, uintptr_t pc, struct cp_key *out)
{
	struct cp_profile *p = arg;
	if (pc >= 900)
		return -ENOENT;
	char name[32];
	int n = snprintf(name, sizeof(name), "f%u", (unsigned)(pc / 100));
	out->file = "t.c";
	out->line = pc / 100;
	out->name = cp_arena_strdup(p->arena, name, (size_t)n);
	return 0;
}

/* Contexts are small integers cast to pointers; context k is task k-1. */
static int64_t fake_task(void *arg, const void *ctx)
{
	(void)arg;
	return ctx ? (int64_t)(uintptr_t)ctx - 1 : -1;
}

static void setup(void)
{
	cr_assert_eq(cp_samples_new(0, &s), 0);
	cr_assert_eq(cp_profile_new(&prof), 0);
}

static void teardown(void)
{
	cp_samples_free(s);
	cp_profile_free(prof);
}

static void build(void)
{
	struct cp_samples_map map = {.arg = prof, .task_index = fake_task, .resolve = fake_resolve};
	cr_assert_eq(cp_samples_build(s, &map, prof), 0);
}

static const struct cp_func *func(const struct cp_stats *st, const char *name)
{
	for (uint32_t i = 0; i < st->nfuncs; i++)
		if (strcmp(st->funcs[i].key.name, name) == 0)
			return &st->funcs[i];
	return NULL;
}

static const struct cp_edge *edge(const struct cp_stats *st, const char *callee, const char *caller)
{
	const struct cp_func *f = func(st, callee);
	if (!f)
		return NULL;
	for (uint32_t i = 0; i < f->ncallers; i++)
		if (strcmp(st->funcs[f->callers[i].caller].key.name, caller) == 0)
			return &f->callers[i];
	return NULL;
}

static void add(uint64_t tid, uintptr_t ctx, int waiting, uint64_t ns, unsigned depth, ...)
{
	uintptr_t pcs[16];
	va_list ap;
	va_start(ap, depth);
	for (unsigned i = 0; i < depth; i++)
		pcs[i] = va_arg(ap, uintptr_t);
	va_end(ap);
	cr_assert_eq(cp_samples_add(s, tid, (const void *)ctx, waiting, pcs, depth, ns, 1), 0);
}

TestSuite(sample_store, .init = setup, .fini = teardown);

Test(sample_store, counts_every_sample)
{
	add(1, 0, 0, 1000, 2, (uintptr_t)100, (uintptr_t)200);
	add(1, 0, 0, 1000, 2, (uintptr_t)100, (uintptr_t)200);
	add(1, 0, 0, 1000, 2, (uintptr_t)300, (uintptr_t)200);
	cr_assert_eq(cp_samples_count(s), 3);
	cp_samples_clear(s);
	cr_assert_eq(cp_samples_count(s), 0);
}

/* A wait charged at once for the ticks it spanned gives the numbers of as many
 * single samples: counts, weights and the stack table alike. */
Test(sample_store, count_charges_like_that_many_samples)
{
	uintptr_t pcs[2] = {100, 200};
	cr_assert_eq(cp_samples_add(s, 1, NULL, 1, pcs, 2, 1000000, 25), 0);
	cr_assert_eq(cp_samples_add(s, 1, NULL, 1, pcs, 2, 1000000, 0), 0);
	struct cp_samples *one;
	cr_assert_eq(cp_samples_new(0, &one), 0);
	for (int i = 0; i < 25; i++)
		cr_assert_eq(cp_samples_add(one, 1, NULL, 1, pcs, 2, 1000000, 1), 0);
	cr_assert_eq(cp_samples_count(s), 25);
	cr_assert_eq(cp_samples_count(one), 25);
	cp_samples_free(one);
	build();
	const struct cp_func *f1 = func(&prof->stats, "f1"), *f2 = func(&prof->stats, "f2");
	cr_assert(f1 && f2);
	cr_assert_eq(f1->s.nc, 25);
	cr_assert_float_eq(f1->s.tt, 0.025, 1e-12);
	cr_assert_float_eq(f2->s.ct, 0.025, 1e-12);
	cr_assert_float_eq(f2->s.tt, 0.0, 1e-12);
}

Test(sample_store, leaf_gets_tt_and_every_frame_ct)
{
	/* f1 <- f2 <- f3 twice, f2 <- f3 once: periods of 1 ms. */
	add(1, 0, 0, 1000000, 3, (uintptr_t)100, (uintptr_t)200, (uintptr_t)300);
	add(1, 0, 0, 1000000, 3, (uintptr_t)150, (uintptr_t)250, (uintptr_t)300);
	add(1, 0, 0, 1000000, 2, (uintptr_t)200, (uintptr_t)300);
	build();
	const struct cp_func *f1 = func(&prof->stats, "f1"), *f2 = func(&prof->stats, "f2"),
			     *f3 = func(&prof->stats, "f3");
	cr_assert(f1 && f2 && f3);
	cr_assert_eq(prof->stats.nfuncs, 3);
	cr_assert_float_eq(f1->s.tt, 0.002, 1e-12);
	cr_assert_float_eq(f1->s.ct, 0.002, 1e-12);
	cr_assert_float_eq(f2->s.tt, 0.001, 1e-12);
	cr_assert_float_eq(f2->s.ct, 0.003, 1e-12);
	cr_assert_float_eq(f3->s.tt, 0.0, 1e-12);
	cr_assert_float_eq(f3->s.ct, 0.003, 1e-12);
	cr_assert_eq(f1->s.nc, 2);
	cr_assert_eq(f2->s.nc, 3);
	cr_assert_eq(f3->s.cc, 3);
	cr_assert_eq(f3->ncallers, 0, "a root has no caller");
	const struct cp_edge *e = edge(&prof->stats, "f1", "f2");
	cr_assert(e);
	cr_assert_eq(e->s.nc, 2);
	cr_assert_float_eq(e->s.tt, 0.002, 1e-12);
	e = edge(&prof->stats, "f2", "f3");
	cr_assert(e);
	cr_assert_eq(e->s.nc, 3);
	cr_assert_float_eq(e->s.tt, 0.001, 1e-12);
	cr_assert_float_eq(e->s.ct, 0.003, 1e-12);
}

Test(sample_store, recursion_counts_ct_once_per_stack)
{
	/* f1 <- f2 <- f1 <- f2 <- f3 */
	add(1, 0, 0, 1000, 5, (uintptr_t)100, (uintptr_t)200, (uintptr_t)110, (uintptr_t)210,
	    (uintptr_t)300);
	build();
	const struct cp_func *f1 = func(&prof->stats, "f1"), *f2 = func(&prof->stats, "f2");
	cr_assert_eq(f1->s.nc, 1);
	cr_assert_float_eq(f1->s.ct, 1e-6, 1e-15);
	cr_assert_float_eq(f2->s.ct, 1e-6, 1e-15);
	cr_assert_float_eq(f1->s.tt, 1e-6, 1e-15);
	const struct cp_edge *e = edge(&prof->stats, "f2", "f1");
	cr_assert(e);
	cr_assert_eq(e->s.nc, 1, "an edge counts once per stack, too");
	cr_assert_float_eq(e->s.ct, 1e-6, 1e-15);
}

Test(sample_store, variable_periods_sum)
{
	/* Under cpu each tick weighs the CPU time used since the last one. */
	add(1, 0, 0, 300, 1, (uintptr_t)100);
	add(1, 0, 0, 700, 1, (uintptr_t)100);
	build();
	const struct cp_func *f1 = func(&prof->stats, "f1");
	cr_assert_eq(f1->s.nc, 2);
	cr_assert_float_eq(f1->s.tt, 1e-6, 1e-15);
}

Test(sample_store, stack_table_merges_pcs_of_one_function)
{
	add(7, 0, 0, 1000, 2, (uintptr_t)100, (uintptr_t)200);
	add(7, 0, 0, 1000, 2, (uintptr_t)120, (uintptr_t)220);
	add(8, 0, 0, 1000, 2, (uintptr_t)100, (uintptr_t)200);
	build();
	cr_assert_eq(prof->ex.nstacks, 2, "one row per thread for f1 <- f2");
	for (uint32_t i = 0; i < prof->ex.nstacks; i++) {
		const struct cp_stack *st = &prof->ex.stacks[i];
		cr_assert_eq(st->depth, 2);
		cr_assert_str_eq(prof->stats.funcs[st->frames[0]].key.name, "f1");
		cr_assert_str_eq(prof->stats.funcs[st->frames[1]].key.name, "f2");
		cr_assert_eq(st->task, -1);
		cr_assert_eq(st->count, st->thread == 7 ? 2u : 1u);
	}
}

Test(sample_store, tasks_get_their_own_stats_and_waiting_rows)
{
	cr_assert_eq(prof->ex.ntasks, 0);
	prof->ex.tasks = cp_arena_alloc(prof->arena, 2 * sizeof(struct cp_task));
	prof->ex.ntasks = 2;
	add(1, 1, 0, 1000, 2, (uintptr_t)100, (uintptr_t)200); /* task 0 runs f1 */
	add(1, 2, 0, 1000, 2, (uintptr_t)300, (uintptr_t)400); /* task 1 runs f3 */
	add(1, 2, 1, 1000, 2, (uintptr_t)500, (uintptr_t)400); /* task 1 waits in f5 */
	add(1, 0, 0, 1000, 1, (uintptr_t)600);		       /* the thread itself */
	build();
	const struct cp_stats *t0 = &prof->ex.tasks[0].stats, *t1 = &prof->ex.tasks[1].stats;
	cr_assert_eq(t0->nfuncs, 2);
	cr_assert(func(t0, "f1") && func(t0, "f2"));
	cr_assert_eq(t1->nfuncs, 3);
	cr_assert_float_eq(func(t1, "f5")->s.tt, 1e-6, 1e-15);
	cr_assert_float_eq(func(t1, "f4")->s.ct, 2e-6, 1e-15);
	cr_assert_null(func(t0, "f6"), "the thread's samples are in no task");
	cr_assert_eq(prof->stats.nfuncs, 6);
	int waiting = 0;
	for (uint32_t i = 0; i < prof->ex.nstacks; i++)
		if (prof->ex.stacks[i].waiting) {
			waiting++;
			cr_assert_eq(prof->ex.stacks[i].task, 1);
		}
	cr_assert_eq(waiting, 1);
}

Test(sample_store, merges_into_existing_functions)
{
	struct cp_func *f = cp_arena_alloc(prof->arena, sizeof(*f));
	f->key = (struct cp_key){"t.c", 1, "f1"};
	f->s.nc = f->s.cc = 5;
	f->s.tt = f->s.ct = 1.0;
	prof->stats.funcs = f;
	prof->stats.nfuncs = 1;
	add(1, 0, 0, 1000000000, 2, (uintptr_t)100, (uintptr_t)200);
	build();
	cr_assert_eq(prof->stats.nfuncs, 2);
	const struct cp_func *f1 = func(&prof->stats, "f1");
	cr_assert_eq(f1->s.nc, 6);
	cr_assert_float_eq(f1->s.tt, 2.0, 1e-9);
	cr_assert_eq(f1->ncallers, 1);
}

Test(sample_store, unresolved_pc_is_keyed_by_address)
{
	add(1, 0, 0, 1000, 2, (uintptr_t)0x3e9, (uintptr_t)100);
	build();
	const struct cp_func *f = func(&prof->stats, "0x3e9");
	cr_assert(f);
	cr_assert_str_eq(f->key.file, "~");
	cr_assert_eq(f->key.line, 0);
}

Test(sample_store, memory_limit_refuses_new_stacks)
{
	struct cp_samples *small;
	cr_assert_eq(cp_samples_new(64 * 1024, &small), 0);
	uintptr_t pcs[64];
	int err = 0;
	unsigned added = 0;
	for (unsigned i = 0; i < 10000 && !err; i++) {
		for (unsigned j = 0; j < 64; j++)
			pcs[j] = i * 64 + j;
		err = cp_samples_add(small, 1, NULL, 0, pcs, 64, 1000, 1);
		added += err == 0;
	}
	cr_assert_eq(err, -ENOMEM);
	cr_assert_lt(added, 200);
	cr_assert_eq(cp_samples_count(small), added);
	/* A stack already known still counts. */
	for (unsigned j = 0; j < 64; j++)
		pcs[j] = j;
	cr_assert_eq(cp_samples_add(small, 1, NULL, 0, pcs, 64, 1000, 1), 0);
	cp_samples_free(small);
}

Test(sample_store, many_distinct_stacks_survive_rehash)
{
	for (uintptr_t i = 0; i < 5000; i++)
		add(1 + i % 3, 0, 0, 1000, 2, (uintptr_t)(100 + i % 800), (uintptr_t)(i % 7));
	cr_assert_eq(cp_samples_count(s), 5000);
	build();
	uint64_t total = 0;
	for (uint32_t i = 0; i < prof->ex.nstacks; i++)
		total += prof->ex.stacks[i].count;
	cr_assert_eq(total, 5000);
}

Test(sample_store, fills_ttot_the_engine_left_empty)
{
	prof->ex.tasks = cp_arena_alloc(prof->arena, 2 * sizeof(struct cp_task));
	prof->ex.ntasks = 2;
	prof->ex.tasks[1].ttot = 5.0; /* the engine's own figure stays */
	prof->ex.threads = cp_arena_alloc(prof->arena, sizeof(struct cp_thread));
	prof->ex.nthreads = 1;
	prof->ex.threads[0].tid = 1;
	add(1, 1, 0, 2000000, 1, (uintptr_t)100);
	add(1, 1, 1, 3000000, 1, (uintptr_t)200); /* task 0 waiting */
	add(1, 2, 0, 1000000, 1, (uintptr_t)300);
	add(1, 0, 0, 4000000, 1, (uintptr_t)400);
	build();
	cr_assert_float_eq(prof->ex.tasks[0].ttot, 0.005, 1e-12);
	cr_assert_float_eq(prof->ex.tasks[1].ttot, 5.0, 1e-12);
	cr_assert_float_eq(prof->ex.threads[0].ttot, 0.007, 1e-12, "waits are not the thread's");
}
