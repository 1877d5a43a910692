/* tick-cost.c: what one sample costs the sampled thread, coprof's sampler against
 * gperftools', measured in one process so that both see the same machine load.
 *
 * usage: tick-cost [HZ [BLOCKS [MS]]]   (default 997 Hz, 15 blocks of 100 ms of CPU)
 * Blocks of the same CPU-bound loop run in turn unprofiled, under coprof's sampler core
 * (its timers, tick handler and libunwind, with the test suite's stub engine: folding
 * into a real engine is not counted) and under gperftools (ProfilerStart; its rate is
 * CPUPROFILE_FREQUENCY, read when the library loads). For each, the median block's CPU
 * time; the cost per sample is the extra CPU over the samples taken. */
#define _GNU_SOURCE
#include <gperftools/profiler.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stub-shim.h"

static volatile uint64_t sink;

/* A few frames deep, like real code. */
__attribute__((noinline)) static void leaf(uint64_t n)
{
	uint64_t x = sink;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + i;
	sink = x;
}

__attribute__((noinline)) static void mid(uint64_t n, int depth)
{
	if (depth)
		mid(n, depth - 1);
	else
		leaf(n);
	sink++;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_s(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return (double)v[n / 2] / 1e9;
}

enum { OFF, COPROF, GPERF, NVARIANTS };

int main(int argc, char **argv)
{
	unsigned hz = argc > 1 ? (unsigned)atoi(argv[1]) : 997;
	int blocks = argc > 2 ? atoi(argv[2]) : 15;
	unsigned ms = argc > 3 ? (unsigned)atoi(argv[3]) : 100;
	if (blocks < 1 || blocks > 1000 || !hz || !ms) {
		fprintf(stderr, "usage: tick-cost [HZ [BLOCKS [MS]]]\n");
		return 2;
	}
	if (stub_init(0, hz) != 0)
		return 1;
	uint64_t n = 1000000, t0 = cpu_ns();
	mid(n, 16);
	uint64_t unit = n * 1000000u / (cpu_ns() - t0 + 1) * ms; /* iterations per block */

	uint64_t *cpu[NVARIANTS];
	for (int v = 0; v < NVARIANTS; v++)
		cpu[v] = calloc((size_t)blocks, sizeof(uint64_t));
	uint64_t samples[NVARIANTS] = {0};
	char path[64];
	snprintf(path, sizeof(path), "/tmp/tick-cost-%d.prof", (int)getpid());
	for (int b = 0; b < blocks; b++) {
		for (int v = 0; v < NVARIANTS; v++) {
			const struct stub_sample *s;
			size_t before = stub_samples(&s);
			if (v == COPROF)
				stub_start();
			if (v == GPERF)
				ProfilerStart(path);
			uint64_t c0 = cpu_ns();
			mid(unit, 16);
			cpu[v][b] = cpu_ns() - c0;
			if (v == GPERF) {
				struct ProfilerState st;
				ProfilerGetCurrentState(&st);
				samples[v] += (uint64_t)st.samples_gathered;
				ProfilerStop();
			}
			if (v == COPROF) {
				stub_stop();
				samples[v] += stub_samples(&s) - before;
			}
		}
	}
	remove(path);
	double base = median_s(cpu[OFF], blocks);
	static const char *names[NVARIANTS] = {"unprofiled", "coprof", "gperftools"};
	printf("| variant | samples | samples per CPU s | CPU per block | overhead | us per sample "
	       "|\n");
	printf("|---|---|---|---|---|---|\n");
	for (int v = 0; v < NVARIANTS; v++) {
		double med = median_s(cpu[v], blocks);
		double per = samples[v] ? (med - base) * blocks / (double)samples[v] * 1e6 : 0;
		printf("| %s | %lu | %.0f | %.4f s | %+.2f%% | %.2f |\n", names[v],
		       (unsigned long)samples[v], (double)samples[v] / (med * blocks), med,
		       100 * (med / base - 1), per);
	}
	printf("\nasked rate %u Hz (coprof COPROF_HZ, gperftools CPUPROFILE_FREQUENCY=%s); "
	       "%d blocks of %u ms, medians\n",
	       hz, getenv("CPUPROFILE_FREQUENCY") ? getenv("CPUPROFILE_FREQUENCY") : "100", blocks,
	       ms);
	return 0;
}
