/* engine-dump: drives the engine (libcoprof) through DESIGN.md's worked example with
 * a fake clock, and dumps it under each clock: OUTDIR/wall.pstat, OUTDIR/cpu.pstat.
 * check_engine_dump.py then loads them with pstats. One tick is 1 ms.
 * usage: engine-dump OUTDIR */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coprof.h"

#define TICK 1000000ULL /* ns */

enum { F_MAIN = 1, F_A_ROOT, F_A_WORK, F_A_YIELD, F_B_ROOT, F_B_WORK };

static const char *const names[] = {
    NULL, "main", "a_root", "a_work", "a_yield", "b_root", "b_work",
};

static uint64_t now_ns;

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return now_ns;
}

static int resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	if (key < F_MAIN || key > F_B_WORK)
		return -ENOENT;
	out->file = "example.c";
	out->line = (unsigned)key * 10;
	out->name = names[key];
	return 0;
}

static void at(uint64_t ticks)
{
	now_ns = ticks * TICK;
}

static int run(enum coprof_clock clock, const char *path)
{
	struct coprof_options opt = {
	    .clock = clock,
	    .mode = COPROF_MODE_TRACE,
	    .fake_clock = fake_clock,
	};
	struct coprof *p;
	struct coprof_thread *t;
	struct coprof_ctx *a, *b;
	int r;

	at(0);
	if ((r = coprof_create(&opt, &p)) < 0 || (r = coprof_add_resolver(p, resolve, NULL)) < 0 ||
	    (r = coprof_thread_register(p, "main", &t)) < 0 ||
	    (r = coprof_ctx_create(t, 0xa, "A", "ucontext", &a)) < 0 ||
	    (r = coprof_ctx_create(t, 0xb, "B", "ucontext", &b)) < 0 || (r = coprof_start(p)) < 0)
		return r;
	coprof_enter(t, F_MAIN);
	at(10);
	coprof_ctx_switch(t, a);
	coprof_enter(t, F_A_ROOT);
	coprof_enter(t, F_A_WORK);
	at(40);
	coprof_leave(t, F_A_WORK);
	coprof_enter(t, F_A_YIELD);
	coprof_ctx_switch(t, NULL);
	at(50);
	coprof_ctx_switch(t, b);
	coprof_enter(t, F_B_ROOT);
	coprof_enter(t, F_B_WORK);
	at(70);
	coprof_leave(t, F_B_WORK);
	coprof_leave(t, F_B_ROOT);
	coprof_ctx_finish(t, b);
	at(80);
	coprof_ctx_switch(t, a);
	coprof_leave(t, F_A_YIELD);
	at(90);
	coprof_leave(t, F_A_ROOT);
	coprof_ctx_finish(t, a);
	at(100);
	coprof_leave(t, F_MAIN);
	if ((r = coprof_stop(p)) < 0 || (r = coprof_dump(p, path)) < 0)
		return r;
	coprof_thread_exit(t);
	coprof_destroy(p);
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: engine-dump OUTDIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/wall.pstat", argv[1]);
	if ((r = run(COPROF_CLOCK_WALL, path)) < 0) {
		fprintf(stderr, "engine-dump: wall: %s\n", coprof_strerror(r));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/cpu.pstat", argv[1]);
	if ((r = run(COPROF_CLOCK_CPU, path)) < 0) {
		fprintf(stderr, "engine-dump: cpu: %s\n", coprof_strerror(r));
		return 1;
	}
	return 0;
}
