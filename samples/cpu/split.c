/* split.c: a CPU-bound program with known proportions, for sample mode's tests and
 * benchmarks. heavy() does two thirds of the work and light() one third, in alternating
 * slices of the same loop, on each of N threads.
 *
 * usage: cpu-split [SECONDS [THREADS [UNIT]]]   (default: about 1 s of CPU on 1 thread)
 * UNIT fixes the iterations of a 1 ms slice, as calibrated by an earlier run (it says
 * so on stderr), so that runs compared in a benchmark do the same work: calibrating
 * under a profiler would shrink the work by the profiler's cost. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Exported (the build links with -rdynamic), so even the stripped copy names them. */
void heavy(uint64_t n);
void light(uint64_t n);

static volatile uint64_t sink;

/* The same loop in both functions, so an iteration costs the same in each. */
#define WORK(n)                                                                                    \
	do {                                                                                       \
		uint64_t x_ = sink;                                                                \
		for (uint64_t i_ = 0; i_ < (n); i_++)                                              \
			x_ = x_ * 6364136223846793005ull + i_;                                     \
		sink = x_;                                                                         \
	} while (0)

__attribute__((noinline)) void heavy(uint64_t n)
{
	WORK(n);
}

__attribute__((noinline)) void light(uint64_t n)
{
	WORK(n);
}

static uint64_t unit;	/* iterations of light() per slice: about 1 ms */
static uint64_t rounds; /* slices of heavy(2 units) + light(1 unit) per thread */

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Each round's slice length varies (0.5 to 1.5 units, heavy always twice light), so
 * the rounds never keep step with a sampling rate near a multiple of theirs: with a
 * fixed 3 ms round, a 997 Hz timer can keep landing in the same part of it. */
static void *run(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 2654435761u + 1;
	for (uint64_t r = 0; r < rounds; r++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t k = unit * (50 + (seed >> 33) % 101) / 100;
		heavy(2 * k);
		light(k);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	long long fixed = argc > 3 ? atoll(argv[3]) : 0;
	if (seconds <= 0 || threads < 1 || threads > 64 || fixed < 0) {
		fprintf(stderr, "usage: cpu-split [SECONDS [THREADS [UNIT]]]\n");
		return 2;
	}
	if (fixed) {
		unit = (uint64_t)fixed;
	} else {
		/* Calibrate on a fixed count: the only time spent outside heavy/light. The
		 * fastest of three runs, as the first may pay for a profiler's start (its
		 * first tick sets up the unwinder) and make every slice too short. */
		uint64_t n = 2000000, dt = UINT64_MAX;
		for (int k = 0; k < 3; k++) {
			uint64_t t0 = cpu_ns();
			WORK(n);
			uint64_t d = cpu_ns() - t0;
			dt = d < dt ? d : dt;
		}
		unit = dt ? n * 1000000u / dt : n;
		if (!unit)
			unit = 1;
	}
	rounds = (uint64_t)(seconds * 1000.0 / 3.0);
	pthread_t th[64];
	for (int i = 1; i < threads; i++)
		if (pthread_create(&th[i], NULL, run, (void *)(uintptr_t)i) != 0)
			return 1;
	uint64_t w0 = cpu_ns();
	run(NULL);
	uint64_t work = cpu_ns() - w0;
	for (int i = 1; i < threads; i++)
		pthread_join(th[i], NULL);
	printf("%lu\n", (unsigned long)sink);
	/* For benchmarks: the main thread's CPU in its loop, the profiler's signal handling
	 * included, its startup and dump not. */
	fprintf(stderr, "cpu-split: %.6f s CPU in the main thread's loop, unit %lu\n",
		(double)work / 1e9, (unsigned long)unit);
	return 0;
}
