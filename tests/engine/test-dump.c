/* test-dump.c: coprof_dump end to end: the file written through the file layer is
 * read back with cp_profile_read and holds the same numbers and extras. Fake clock. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

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
	cr_expect_eq(coprof_dump(f.p, path), -ENODATA);
	struct coprof_ctx *c;
	cr_assert_eq(coprof_ctx_create(f.t, 1, "c", "x", &c), 0);
	coprof_ctx_switch(f.t, c);
	coprof_leave(f.t, K("never_entered")); /* no call seen: still nothing */
	coprof_ctx_switch(f.t, NULL);
	cr_expect_eq(coprof_dump(f.p, path), -ENODATA);
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
	cr_expect_eq(coprof_dump_clear(f.p, second), -ENODATA);
}
