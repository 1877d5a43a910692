/* test-sampling.c: coprof_sample hands stacks to the sample store with the thread and
 * context they belong to, only while recording; the snapshot maps contexts onto the
 * task table and resolves pcs through the resolvers. */
#include <criterion/criterion.h>
#include <errno.h>

#include "helpers.h"

TestSuite(sampling, .fini = fx_fini);

Test(sampling, samples_reach_the_profile_with_their_task)
{
	struct coprof_options o = {.clock = COPROF_CLOCK_WALL,
				   .mode = COPROF_MODE_SAMPLE,
				   .hz = 1000,
				   .fake_clock = fk_clock};
	cr_assert_eq(coprof_create(&o, &f.p), 0);
	cr_assert_eq(coprof_add_resolver(f.p, fx_resolve, NULL), 0);
	cr_assert_eq(coprof_thread_register(f.p, "main", &f.t), 0);
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
