/* bench-engine.c: the engine's hot path alone, in one process: the cost of one clock
 * read per implementation, and of one coprof_enter + coprof_leave pair per clock, for
 * a flat loop of one function and for a 10-deep nest. Rounds interleave all the
 * configurations, so a change in machine load hits them alike; each figure is the
 * median over the rounds. Prints a markdown table. Single-threaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "coprof.h"

#define MAX_ROUNDS 64
#define NEST 10

struct impl {
	const char *name; /* as cp_clock_name prints it */
	enum coprof_clock kind;
};

static const struct impl impls[] = {
    {"monotonic", COPROF_CLOCK_WALL},
    {"tsc-wall", COPROF_CLOCK_WALL},
    {"thread-cputime", COPROF_CLOCK_CPU},
    {"tsc-cpu", COPROF_CLOCK_CPU},
};
#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

enum shape { SHAPE_READ, SHAPE_FLAT, SHAPE_NEST, N_SHAPES };

static const char *const shape_names[N_SHAPES] = {
    [SHAPE_READ] = "one clock read",
    [SHAPE_FLAT] = "enter+leave, flat loop",
    [SHAPE_NEST] = "enter+leave, 10-deep nest",
};

/* Loops are timed on this thread's CPU time, so other load on a shared machine
 * (time this thread spends waiting for a CPU) does not count. */
static uint64_t cpu_ns(void)
{
	return cp_clock_gettime_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* One measurement's setup: a clock for SHAPE_READ, a running profiler for the pairs. */
struct rig {
	struct cp_clock clock;
	struct coprof *p;
	struct coprof_thread *t;
};

static int rig_open(struct rig *r, const struct impl *im, enum shape shape)
{
	int err = cp_clock_force(im->kind, im->name);
	if (err)
		return err;
	if (shape == SHAPE_READ) {
		cp_clock_init(&r->clock, im->kind);
		return 0;
	}
	struct coprof_options opt = {.clock = im->kind, .mode = COPROF_MODE_TRACE};
	if ((err = coprof_create(&opt, &r->p)))
		return err;
	if ((err = coprof_start(r->p)) || (err = coprof_thread_register(r->p, "bench", &r->t))) {
		coprof_destroy(r->p);
		return err;
	}
	return 0;
}

/* Ends a measurement. For pairs, dumps the profile too: coprof_dump refuses with
 * COPROF_ENODATA when nothing was recorded, which would make the figure meaningless. */
static int rig_close(struct rig *r, enum shape shape)
{
	if (shape == SHAPE_READ) {
		cp_clock_fini(&r->clock);
		return 0;
	}
	coprof_stop(r->p);
	char path[] = "/tmp/bench-engine-XXXXXX";
	int fd = mkstemp(path);
	int err = fd < 0 ? -errno : coprof_dump(r->p, path);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	coprof_destroy(r->p);
	return err;
}

/* Runs `iters` iterations of `shape`; returns the operations done (reads or pairs). */
static uint64_t run(struct rig *r, enum shape shape, uint64_t iters)
{
	switch (shape) {
	case SHAPE_READ: {
		uint64_t sum = 0;
		for (uint64_t i = 0; i < iters; i++)
			sum += cp_clock_now(&r->clock);
		__asm__ volatile("" : : "r"(sum));
		return iters;
	}
	case SHAPE_FLAT:
		for (uint64_t i = 0; i < iters; i++) {
			coprof_enter(r->t, 0x1000);
			coprof_leave(r->t, 0x1000);
		}
		return iters;
	case SHAPE_NEST:
		for (uint64_t i = 0; i < iters; i++) {
			for (uintptr_t d = 0; d < NEST; d++)
				coprof_enter(r->t, 0x1000 + d);
			for (uintptr_t d = NEST; d-- > 0;)
				coprof_leave(r->t, 0x1000 + d);
		}
		return iters * NEST;
	default:
		return 0;
	}
}

/* ns per operation of `shape` on `im`, over about `budget_ns` of work. */
static int measure(const struct impl *im, enum shape shape, uint64_t budget_ns, double *out)
{
	struct rig r;
	memset(&r, 0, sizeof(r));
	int err = rig_open(&r, im, shape);
	if (err)
		return err;
	uint64_t t0 = cpu_ns();
	uint64_t ops = run(&r, shape, 1000);
	uint64_t probe = cpu_ns() - t0;
	uint64_t iters = probe ? budget_ns * 1000 / probe : 1000000;
	if (iters < 1000)
		iters = 1000;
	t0 = cpu_ns();
	ops = run(&r, shape, iters);
	uint64_t elapsed = cpu_ns() - t0;
	*out = (double)elapsed / (double)ops;
	return rig_close(&r, shape);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The implementation that actually runs when `im` is forced (a TSC clock falls back
 * to clock_gettime when perf or the TSC is refused). */
static const char *actual_name(const struct impl *im)
{
	struct cp_clock c;
	cp_clock_force(im->kind, im->name);
	cp_clock_init(&c, im->kind);
	const char *name = cp_clock_name(&c);
	cp_clock_fini(&c);
	return name;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench-engine [-r ROUNDS (1-%d, default 7)] [-m MS per "
		"measurement (default 100)] [-c IMPLEMENTATION (only this one, e.g. to run "
		"under callgrind)]\n",
		MAX_ROUNDS);
	exit(2);
}

int main(int argc, char **argv)
{
	int rounds = 7;
	uint64_t budget_ms = 100;
	const char *only = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			budget_ms = strtoull(argv[++i], NULL, 10);
		else
			usage();
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || budget_ms < 1)
		usage();
	int selected[N_IMPLS], any = 0;
	for (size_t i = 0; i < N_IMPLS; i++)
		any |= selected[i] = !only || strcmp(only, impls[i].name) == 0;
	if (!any)
		usage();

	static double ns[N_IMPLS][N_SHAPES][MAX_ROUNDS];
	for (size_t i = 0; i < N_IMPLS; i++)
		if (selected[i] && strcmp(actual_name(&impls[i]), impls[i].name) != 0)
			fprintf(stderr, "bench-engine: %s is unavailable here, measuring %s\n",
				impls[i].name, actual_name(&impls[i]));
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < N_SHAPES; s++)
			for (size_t i = 0; i < N_IMPLS; i++) {
				if (!selected[i])
					continue;
				int err = measure(&impls[i], s, budget_ms * 1000000u, &ns[i][s][r]);
				if (err) {
					fprintf(stderr, "bench-engine: %s, %s: %s\n", impls[i].name,
						shape_names[s], strerror(-err));
					return 1;
				}
			}

	double median[N_IMPLS][N_SHAPES];
	for (int s = 0; s < N_SHAPES; s++)
		for (size_t i = 0; i < N_IMPLS; i++) {
			if (!selected[i])
				continue;
			qsort(ns[i][s], (size_t)rounds, sizeof(double), cmp_double);
			median[i][s] = ns[i][s][rounds / 2];
		}
	/* The anchors, measured in the same rounds: a read of CLOCK_MONOTONIC for the
	 * reads, one read of the same clock for the pairs. */
	printf("| what | clock | implementation | ns (median of %d) | min | max | ratio |\n",
	       rounds);
	printf("|---|---|---|---:|---:|---:|---|\n");
	for (int s = 0; s < N_SHAPES; s++)
		for (size_t i = 0; i < N_IMPLS; i++) {
			if (!selected[i])
				continue;
			const double *v = ns[i][s];
			int vs_mono = s == SHAPE_READ && selected[0];
			double anchor = median[vs_mono ? 0 : i][SHAPE_READ];
			printf("| %s | %s | %s | %.1f | %.1f | %.1f | %.2f x %s |\n",
			       shape_names[s], impls[i].kind == COPROF_CLOCK_CPU ? "cpu" : "wall",
			       impls[i].name, median[i][s], v[0], v[rounds - 1],
			       median[i][s] / anchor, vs_mono ? "monotonic read" : "one read");
		}
	return 0;
}
