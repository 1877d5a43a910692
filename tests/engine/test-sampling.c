/* test-sampling.c: coprof_sample hands stacks to the sample store with the thread and
 * context they belong to, only while recording; the snapshot maps contexts onto the
 * task table and resolves pcs through the resolvers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>

#include "helpers.h"

TestSuite(sampling, .fini = fx_fini);

Test(sampling, samples_reach_the_profile_with_their_task)
{
	fx_setup_sample(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 0x5, "co", "ucontext", &c), 0);
	uintptr_t pcs[] = {K("leaf"), K("root")};
	coprof_sample(f.t, NULL, pcs, 2, 1000000, 0); /* stopped: not counted */
	cr_expect_eq(coprof_dump(f.p, "/nonexistent/x"), COPROF_ENODATA);
	cr_assert_eq(coprof_start(f.p), 0);
	for (int i = 0; i < 3; i++)
		coprof_sample(f.t, NULL, pcs, 2, 1000000, 0);
	for (int i = 0; i < 2; i++)
		coprof_sample(f.t, c, pcs, 2, 1000000, 0);
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	const struct cp_func *leaf = fx_func(s, "leaf"), *root = fx_func(s, "root");
	cr_assert(leaf && root);
	cr_expect_eq(leaf->s.nc, 5);
	cr_expect_eq(fx_ns(leaf->s.tt), 5000000);
	cr_expect_eq(fx_ns(root->s.ct), 5000000);
	cr_expect_eq(fx_ns(root->s.tt), 0);
	cr_expect_str_eq(f.prof->ex.mode, "sample");
	cr_expect_eq(f.prof->ex.hz, 1000);
	cr_assert_eq(f.prof->ex.nstacks, 2);
	int own = 0, task = 0;
	for (uint32_t i = 0; i < f.prof->ex.nstacks; i++) {
		struct cp_stack *st = &f.prof->ex.stacks[i];
		cr_expect_eq(st->thread, f.prof->ex.threads[0].tid);
		if (st->task < 0)
			own += (int)st->count;
		else
			task += st->task == 0 ? (int)st->count : 100;
	}
	cr_expect_eq(own, 3);
	cr_expect_eq(task, 2, "the context's samples are its task's");
	fx_expect(&f.prof->ex.tasks[0].stats, "leaf", 2, 2, 2000000, 2000000);
}

/* Runs on a thread other than the profiled one, as the shim's folding thread does. */
static void *make_sampled(void *arg)
{
	struct coprof_ctx **out = arg;
	cr_assert_eq(coprof_ctx_create_sampled(f.t, 0x7, "entry", "stack", out), 0);
	return NULL;
}

Test(sampling, a_context_made_from_another_thread_is_a_task_with_its_samples_time)
{
	fx_setup_sample(&f, COPROF_CLOCK_CPU);
	cr_assert_eq(coprof_start(f.p), 0);
	struct coprof_ctx *own, *c = NULL;
	cr_assert_eq(coprof_ctx_create(f.t, 0x5, "co", "ucontext", &own), 0);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, make_sampled, &c), 0);
	pthread_join(th, NULL);
	cr_assert(c);
	uintptr_t pcs[] = {K("leaf"), K("root")};
	for (int i = 0; i < 3; i++)
		coprof_sample(f.t, c, pcs, 2, 1000000, 0);
	fx_snap(&f);
	cr_assert_eq(f.prof->ex.ntasks, 2, "the one made on the thread and the sampled one");
	const struct cp_task *k = fx_task(f.prof, 0x7);
	cr_assert(k);
	cr_expect_str_eq(k->name, "entry");
	cr_expect_str_eq(k->runtime, "stack");
	cr_expect_str_eq(k->state, "suspended");
	cr_expect_eq(k->thread, f.prof->ex.threads[0].tid);
	cr_expect_eq(fx_ns(k->ttot), 3000000, "its ttot is its samples'");
	fx_expect(&k->stats, "leaf", 3, 3, 3000000, 3000000);
	coprof_ctx_finish_sampled(c);
	fx_snap(&f);
	cr_expect_str_eq(fx_task(f.prof, 0x7)->state, "finished");
	/* clear frees finished contexts and keeps the others */
	cr_assert_eq(coprof_clear(f.p), 0);
	coprof_sample(f.t, own, pcs, 2, 1000000, 0);
	fx_snap(&f);
	cr_expect_eq(f.prof->ex.ntasks, 1);
	cr_expect(fx_task(f.prof, 0x5) != NULL);
}
