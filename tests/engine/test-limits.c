/* test-limits.c: the profiler's life cycle and its limits: memory limit (sticky flag,
 * one line on stderr, no crash), stack depth cap, clear, options, resolvers merging
 * functions, unknown keys, notes and dropped counters. Fake clock. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

TestSuite(limits, .fini = fx_fini);

/* Runs `fn` with stderr going to a temporary file; returns what it wrote (malloc'd). */
static char *capture_stderr(void (*fn)(void))
{
	char path[] = "/tmp/coprof-stderr-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	int saved = dup(2);
	dup2(fd, 2);
	fn();
	dup2(saved, 2);
	close(saved);
	off_t len = lseek(fd, 0, SEEK_END);
	char *buf = calloc(1, (size_t)len + 1);
	cr_assert_eq(pread(fd, buf, (size_t)len, 0), len);
	close(fd);
	return buf;
}

static void many_functions(void)
{
	for (uintptr_t k = 1; k <= 200000; k++) {
		at(k * 10);
		coprof_enter(f.t, 1000 + k);
		at(k * 10 + 5);
		coprof_leave(f.t, 1000 + k);
	}
}

Test(limits, memory_limit_stops_recording_with_a_sticky_flag)
{
	struct coprof_options o = {
	    .clock = COPROF_CLOCK_WALL, .fake_clock = fk_clock, .memory_limit = 1 << 20};
	cr_assert_eq(coprof_create(&o, &f.p), 0);
	cr_assert_eq(coprof_thread_register(f.p, "main", &f.t), 0);
	cr_assert_eq(coprof_start(f.p), 0);
	char *err = capture_stderr(many_functions);
	cr_expect(coprof_overflowed(f.p));
	cr_expect_not(coprof_is_running(f.p), "recording stopped");
	cr_expect_not_null(strstr(err, "memory limit"), "stderr: %s", err);
	cr_expect_null(strchr(err, '\n') ? strchr(strchr(err, '\n') + 1, '\n') : NULL,
		       "said once: %s", err);
	free(err);
	cr_expect_leq(atomic_load(&f.p->mem_used), (size_t)1 << 20);
	fx_snap(&f);
	cr_expect_eq(f.prof->ex.overflow, 1);
	cr_expect_gt(f.prof->stats.nfuncs, 1000, "what was recorded before is kept");
	cr_expect_lt(f.prof->stats.nfuncs, 200000);
	/* A limit context creation hits too fails cleanly. */
	struct coprof_ctx *c;
	int rc = 0;
	for (int i = 0; i < 100000 && rc == 0; i++)
		rc = coprof_ctx_create(f.t, (uint64_t)i, "a long enough name for a task", "x", &c);
	cr_expect_eq(rc, -ENOMEM);
	/* Clearing forgets the data and the flag; recording goes on. */
	cr_assert_eq(coprof_clear(f.p), 0);
	cr_expect_not(coprof_overflowed(f.p));
	cr_expect(coprof_is_running(f.p));
}

Test(limits, calls_past_the_depth_cap_are_counted_and_leaves_stay_matched)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	enum { EXTRA = 10 };
	at(0);
	for (unsigned i = 0; i < CP_MAX_DEPTH + EXTRA; i++)
		coprof_enter(f.t, K("deep"));
	at(100);
	for (unsigned i = 0; i < CP_MAX_DEPTH + EXTRA; i++)
		coprof_leave(f.t, K("deep"));
	coprof_enter(f.t, K("after"));
	at(110), coprof_leave(f.t, K("after"));
	fx_snap(&f);
	fx_expect(&f.prof->stats, "deep", 1, CP_MAX_DEPTH, 100, 100);
	fx_expect(&f.prof->stats, "after", 1, 1, 10, 10);
	cr_expect_eq(fx_func(&f.prof->stats, "after")->ncallers, 0);
	cr_assert_eq(f.prof->ex.ndropped, 1);
	cr_expect_eq(f.prof->ex.dropped[0].n, EXTRA);
}

Test(limits, clear_forgets_data_but_keeps_threads_and_live_contexts)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	struct coprof_ctx *live, *done;
	cr_assert_eq(coprof_ctx_create(f.t, 1, "live", "x", &live), 0);
	cr_assert_eq(coprof_ctx_create(f.t, 2, "done", "x", &done), 0);
	cr_expect_eq(coprof_dump(f.p, "/nonexistent/never-written"), COPROF_ENODATA);
	at(0), coprof_enter(f.t, K("main"));
	coprof_ctx_switch(f.t, done), coprof_ctx_finish(f.t, done);
	coprof_ctx_switch(f.t, live), coprof_enter(f.t, K("w"));
	at(10), coprof_ctx_switch(f.t, NULL);
	cr_assert_eq(coprof_clear(f.p), 0);
	cr_expect_eq(coprof_dump(f.p, "/nonexistent/never-written"), COPROF_ENODATA);
	at(20), coprof_leave(f.t, K("main")); /* its frame is forgotten */
	at(30), coprof_ctx_switch(f.t, live);
	coprof_leave(f.t, K("w"));
	coprof_enter(f.t, K("x"));
	at(35), coprof_leave(f.t, K("x"));
	fx_snap(&f);
	cr_assert_eq(f.prof->stats.nfuncs, 1);
	fx_expect(&f.prof->stats, "x", 1, 1, 5, 5);
	cr_assert_eq(f.prof->ex.ntasks, 1, "finished contexts are gone");
	cr_expect_str_eq(f.prof->ex.tasks[0].name, "live");
	cr_expect_eq(f.prof->ex.tasks[0].resumes, 1);
	cr_expect_eq(f.prof->ex.nthreads, 1);
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 15, "from the first event after clear");
}

Test(limits, options_are_checked)
{
	struct coprof *p;
	struct coprof_options o = {.clock = 7};
	cr_expect_eq(coprof_create(&o, &p), -EINVAL);
	o = (struct coprof_options){.mode = 9};
	cr_expect_eq(coprof_create(&o, &p), -EINVAL);
	cr_expect_eq(coprof_create(NULL, NULL), -EINVAL);
	cr_assert_eq(coprof_create(NULL, &p), 0);
	cr_expect_eq(p->opt.memory_limit, CP_DEFAULT_MEMORY_LIMIT);
	cr_expect_not(coprof_is_running(p));
	cr_expect_eq(coprof_start(p), 0);
	cr_expect_eq(coprof_start(p), 0, "idempotent");
	cr_expect(coprof_is_running(p));
	cr_expect_eq(coprof_stop(p), 0);
	cr_expect_eq(coprof_stop(p), 0);
	coprof_destroy(p);
	f.p = NULL;
	cr_expect_str_eq(coprof_strerror(COPROF_ENODATA), "no event was recorded");
	cr_expect_str_eq(coprof_strerror(0), "success");
	/* an errno reads as the OS says it, never as one of the API's conditions */
	const int os_errors[] = {ENOSPC, ENOENT, ENODATA, EACCES, EROFS, EIO, ENOMEM, EPIPE};
	for (size_t i = 0; i < sizeof(os_errors) / sizeof(os_errors[0]); i++)
		cr_expect_str_eq(coprof_strerror(-os_errors[i]), strerror(os_errors[i]));
	cr_expect_str_eq(coprof_strerror(COPROF_ETOOMANY), "too many resolvers");
	cr_expect_str_eq(coprof_strerror(-20000), "unknown error");
	/* Events on no thread are ignored, not a crash. */
	coprof_enter(NULL, 1);
	coprof_leave(NULL, 1);
	coprof_ctx_switch(NULL, NULL);
}

static int merge_resolver(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	if (key != 100 && key != 200)
		return -ENOENT;
	/* Two keys, one function: a library unloaded and loaded again elsewhere. */
	out->file = "lib.c";
	out->line = 42;
	out->name = "same";
	return 0;
}

Test(limits, keys_resolving_to_one_function_are_merged)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	cr_assert_eq(coprof_add_resolver(f.p, merge_resolver, NULL), 0);
	at(0), coprof_enter(f.t, 100);
	at(10), coprof_leave(f.t, 100);
	coprof_enter(f.t, 200);
	at(15), coprof_enter(f.t, 0xdead);
	at(16), coprof_leave(f.t, 0xdead);
	at(25), coprof_leave(f.t, 200);
	fx_snap(&f);
	struct cp_stats *s = &f.prof->stats;
	cr_assert_eq(s->nfuncs, 2);
	fx_expect(s, "same", 2, 2, 24, 25);
	const struct cp_func *u = fx_func(s, "0xdead");
	cr_assert_not_null(u, "an unknown key is written as its address");
	cr_expect_str_eq(u->key.file, "~");
	cr_expect_eq(u->key.line, 0);
	fx_expect_edge(s, "same", "0xdead", 1, 1, 1, 1);
	for (int i = 2; i < CP_MAX_RESOLVERS; i++)
		cr_assert_eq(coprof_add_resolver(f.p, merge_resolver, NULL), 0);
	cr_expect_eq(coprof_add_resolver(f.p, merge_resolver, NULL), COPROF_ETOOMANY);
}

Test(limits, notes_and_dropped_counts_reach_the_extras)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	cr_assert_eq(coprof_set_note(f.p, "python 3.11"), 0);
	coprof_count_dropped(f.p, "samples", 3);
	coprof_count_dropped(f.p, "samples", 4);
	coprof_count_dropped(f.p, "events", 1);
	at(0), coprof_enter(f.t, K("x"));
	fx_snap(&f);
	struct cp_extras *ex = &f.prof->ex;
	cr_expect_eq(ex->present, 1);
	cr_expect_str_eq(ex->mode, "trace");
	cr_expect_eq(ex->pid, getpid());
	cr_expect_geq(ex->argc, 1);
	cr_expect_gt(ex->start, 1e9);
	cr_expect_eq(ex->overflow, 0);
	cr_assert_eq(ex->ndropped, 2);
	cr_expect_str_eq(ex->dropped[0].name, "samples");
	cr_expect_eq(ex->dropped[0].n, 7);
	cr_expect_eq(ex->dropped[1].n, 1);
	cr_assert_geq(ex->nnotes, 1);
	cr_expect_str_eq(ex->notes[0], "python 3.11");
}

Test(limits, a_replaced_note_keeps_its_place_and_is_added_when_missing)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	cr_assert_eq(coprof_replace_note(f.p, "hook: ", "hook: slot"), 0);
	cr_assert_eq(coprof_set_note(f.p, "other"), 0);
	cr_assert_eq(coprof_replace_note(f.p, "hook: ", "hook: profile"), 0);
	at(0), coprof_enter(f.t, K("x"));
	fx_snap(&f);
	struct cp_extras *ex = &f.prof->ex;
	cr_assert_geq(ex->nnotes, 2);
	cr_expect_str_eq(ex->notes[0], "hook: profile");
	cr_expect_str_eq(ex->notes[1], "other");
	for (uint32_t i = 2; i < ex->nnotes; i++)
		cr_expect_neq(strncmp(ex->notes[i], "hook: ", 6), 0);
}

Test(limits, thread_exit_closes_its_stacks_and_keeps_its_data)
{
	fx_setup(&f, COPROF_CLOCK_WALL);
	at(0), coprof_enter(f.t, K("run"));
	at(30), coprof_thread_exit(f.t);
	at(40), coprof_enter(f.t, K("late")); /* ignored */
	at(50), fx_snap(&f);
	fx_expect(&f.prof->stats, "run", 1, 1, 30, 30);
	cr_expect_null(fx_func(&f.prof->stats, "late"));
	cr_expect_eq(fx_ns(f.prof->ex.threads[0].ttot), 30);
}

Test(limits, mark_start_moves_the_windows_start)
{
	fx_setup(&f, COPROF_CLOCK_CPU);
	at(0), coprof_enter(f.t, K("x"));
	fx_snap(&f);
	double first = f.prof->ex.start;
	usleep(20000);
	cr_assert_eq(coprof_mark_start(f.p), 0);
	fx_snap(&f);
	cr_expect_geq(f.prof->ex.start - first, 0.015, "start moved by %.3f s",
		      f.prof->ex.start - first);
	cr_expect_eq(coprof_mark_start(NULL), -EINVAL);
}
